# Source: https://github.com/pytorch/pytorch/issues/1217
# Adapted: the reporter's cifar10_tutorial.py model (conv 128 channels), criterion, optimizer
#   and training loop kept; CIFAR-10 replaced by random 32x32 images in batches of 4 (30 batches
#   per epoch, 2 epochs instead of 5), `.cuda()` -> cpu, Variable dropped, loss.data[0] ->
#   loss.item(), the running-loss print every 10 batches, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 128, 5)
        self.pool  = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(128, 128, 5)
        self.fc1   = nn.Linear(128 * 5 * 5, 120)
        self.fc2   = nn.Linear(120, 84)
        self.fc3   = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 128 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def make_trainloader(n_batches, generator):
    for _ in range(n_batches):
        yield torch.randn(4, 3, 32, 32, generator=generator), torch.randint(0, 10, (4,), generator=generator)


torch.manual_seed(0)
net = Net()

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

generator = torch.Generator().manual_seed(0)
for epoch in range(2):  # loop over the dataset multiple times

    running_loss = 0.0
    for i, data in enumerate(make_trainloader(30, generator), 0):
        # get the inputs
        inputs, labels = data

        # zero the parameter gradients
        optimizer.zero_grad()

        # forward + backward + optimize
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()

        # print statistics
        running_loss += loss.item()
        if i % 10 == 9:
            print('[%d, %5d] loss: %.3f' % (epoch + 1, i + 1, running_loss / 10))
            running_loss = 0.0

print('Finished Training')
