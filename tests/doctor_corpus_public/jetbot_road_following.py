# Source: https://github.com/NVIDIA-AI-IOT/jetbot/pull/117
#   code: notebooks/road_following/train_model.ipynb at commit f4d99fc (before cc1112a)
# Adapted: the notebook's code cells as a script; no torchvision: random 64x64 images and
#   targets instead of the collected dataset_xy images, resnet18 -> a small CNN with the same
#   `fc` head, cuda -> cpu, DataLoader workers 0, 3 epochs instead of 70, model saved in a temp dir.
import os
import tempfile

import torch
import torch.nn as nn
import torch.optim as optim
import torch.nn.functional as F

torch.manual_seed(0)

dataset = torch.utils.data.TensorDataset(torch.randn(128, 3, 64, 64), torch.rand(128, 2) * 2 - 1)

test_percent = 0.25
num_test = int(test_percent * len(dataset))
train_dataset, test_dataset = torch.utils.data.random_split(dataset, [len(dataset) - num_test, num_test])

train_loader = torch.utils.data.DataLoader(
    train_dataset,
    batch_size=16,
    shuffle=True,
    num_workers=0
)

test_loader = torch.utils.data.DataLoader(
    test_dataset,
    batch_size=16,
    shuffle=True,
    num_workers=0
)


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 512, 3, stride=2, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        return self.fc(self.features(x))


model = SmallResNet()

model.fc = torch.nn.Linear(512, 2)
device = torch.device('cpu')
model = model.to(device)

NUM_EPOCHS = 3
BEST_MODEL_PATH = os.path.join(tempfile.mkdtemp(), 'best_steering_model_xy.pth')
best_loss = 1e9

optimizer = optim.Adam(model.parameters())

for epoch in range(NUM_EPOCHS):
    
    model.train()
    train_loss = 0.0
    for images, labels in iter(train_loader):
        images = images.to(device)
        labels = labels.to(device)
        optimizer.zero_grad()
        outputs = model(images)
        loss = F.mse_loss(outputs, labels)
        train_loss += loss
        loss.backward()
        optimizer.step()
    train_loss /= len(train_loader)
    
    model.eval()
    test_loss = 0.0
    for images, labels in iter(test_loader):
        images = images.to(device)
        labels = labels.to(device)
        outputs = model(images)
        loss = F.mse_loss(outputs, labels)
        test_loss += loss
    test_loss /= len(test_loader)
    
    print('%f, %f' % (train_loss, test_loss))
    if test_loss < best_loss:
        torch.save(model.state_dict(), BEST_MODEL_PATH)
        best_loss = test_loss
