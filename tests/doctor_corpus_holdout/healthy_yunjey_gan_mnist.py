# Source: https://github.com/yunjey/pytorch-tutorial/issues/56
#   code: tutorials/02-intermediate/generative_adversarial_network/main.py at commit c548e2a
# Adapted: MNIST replaced by random images in a TensorDataset (torchvision is not available),
#   labels of shape (batch, 1) (BCELoss no longer broadcasts (batch,) against (batch, 1)),
#   .data[0] -> .item(), 2 epochs of 12 batches printing every 6 steps, image saving dropped,
#   parameters saved to a temp dir, seeded.
import os
import tempfile
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

torch.manual_seed(0)


def to_var(x):
    if torch.cuda.is_available():
        x = x.cuda()
    return Variable(x)

def denorm(x):
    out = (x + 1) / 2
    return out.clamp(0, 1)

# MNIST-sized random images
mnist = torch.utils.data.TensorDataset(torch.rand(1200, 1, 28, 28) * 2 - 1,
                                       torch.zeros(1200, dtype=torch.long))
# Data loader
data_loader = torch.utils.data.DataLoader(dataset=mnist,
                                          batch_size=100,
                                          shuffle=True)
# Discriminator
D = nn.Sequential(
    nn.Linear(784, 256),
    nn.LeakyReLU(0.2),
    nn.Linear(256, 256),
    nn.LeakyReLU(0.2),
    nn.Linear(256, 1),
    nn.Sigmoid())

# Generator
G = nn.Sequential(
    nn.Linear(64, 256),
    nn.LeakyReLU(0.2),
    nn.Linear(256, 256),
    nn.LeakyReLU(0.2),
    nn.Linear(256, 784),
    nn.Tanh())

if torch.cuda.is_available():
    D.cuda()
    G.cuda()

# Binary cross entropy loss and optimizer
criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(D.parameters(), lr=0.0003)
g_optimizer = torch.optim.Adam(G.parameters(), lr=0.0003)

# Start training
for epoch in range(2):
    for i, (images, _) in enumerate(data_loader):
        # Build mini-batch dataset
        batch_size = images.size(0)
        images = to_var(images.view(batch_size, -1))
        real_labels = to_var(torch.ones(batch_size, 1))
        fake_labels = to_var(torch.zeros(batch_size, 1))

        #============= Train the discriminator =============#
        # Compute loss with real images
        outputs = D(images)
        d_loss_real = criterion(outputs, real_labels)
        real_score = outputs

        # Compute loss with fake images
        z = to_var(torch.randn(batch_size, 64))
        fake_images = G(z)
        outputs = D(fake_images)
        d_loss_fake = criterion(outputs, fake_labels)
        fake_score = outputs

        # Backprop + Optimize
        d_loss = d_loss_real + d_loss_fake
        D.zero_grad()
        d_loss.backward()
        d_optimizer.step()

        #=============== Train the generator ===============#
        # Compute loss with fake images
        z = to_var(torch.randn(batch_size, 64))
        fake_images = G(z)
        outputs = D(fake_images)
        g_loss = criterion(outputs, real_labels)

        # Backprop + Optimize
        D.zero_grad()
        G.zero_grad()
        g_loss.backward()
        g_optimizer.step()

        if (i+1) % 6 == 0:
            print('Epoch [%d/%d], Step[%d/%d], d_loss: %.4f, '
                  'g_loss: %.4f, D(x): %.2f, D(G(z)): %.2f'
                  %(epoch, 2, i+1, 12, d_loss.item(), g_loss.item(),
                    real_score.data.mean(), fake_score.data.mean()))

# Save the trained parameters
out_dir = tempfile.mkdtemp()
torch.save(G.state_dict(), os.path.join(out_dir, 'generator.pkl'))
torch.save(D.state_dict(), os.path.join(out_dir, 'discriminator.pkl'))
