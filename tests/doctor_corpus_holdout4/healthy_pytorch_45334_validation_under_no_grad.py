# Source: https://github.com/pytorch/pytorch/issues/45334
# Adapted: the training and validation loops kept as posted; the stored issue stops inside
#   the validation loop, completed as its text describes it (the outputs and the
#   CrossEntropyLoss of each chunk of 7, test_loss and test_times summed as numbers); the
#   segmentation network replaced by a small fully convolutional one with 2 classes, the
#   loaders by lists of 4 training and 3 validation batches of 14 random 3x32x32 images and
#   masks in the posted dict layout, 3 epochs instead of 10, SGD, cpu, seeded.
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                    nn.ReLU(), nn.Conv2d(16, 2, 1))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)


def make_loader(n_batches):
    return [{'images': torch.randn(14, 3, 32, 32), 'masks': torch.randint(0, 2, (14, 32, 32))}
            for _ in range(n_batches)]


trainloader = make_loader(4)
testloader = make_loader(3)

for epoch in range(3):
    net.train()
    # Good training.
    for data in trainloader:
        inputs, labels = data['images'], data['masks']

        for idx in range(0, len(inputs), 7):
            optimizer.zero_grad()

            outputs = net(inputs[idx:idx + 7])
            loss = criterion(outputs, labels[idx:idx + 7])
            loss.backward()
            optimizer.step()

    net.eval()
    test_loss = 0.0
    test_times = 0
    for data in testloader:
        with torch.no_grad():
            inputs, labels = data['images'], data['masks']

            for idx in range(0, len(inputs), 7):
                outputs = net(inputs[idx:idx + 7])
                loss = criterion(outputs, labels[idx:idx + 7])
                test_loss += loss.item()
                test_times += 1
    print(epoch, test_loss / test_times)
