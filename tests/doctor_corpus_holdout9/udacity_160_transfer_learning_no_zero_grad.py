# Source: https://github.com/udacity/deep-learning-v2-pytorch/pull/160
#   code: the training cell of the Transfer Learning notebook (intro-to-pytorch, Part 8) as the
#   pull request found it: a frozen feature extractor, a new classifier trained with Adam, and
#   no optimizer.zero_grad() before loss.backward()
# Adapted: the pretrained DenseNet-121 replaced by a small frozen convolutional feature
#   extractor with the same interface (model.classifier replaced, 1024 features); the cat/dog
#   ImageFolder loaders by lists of 20 training and 4 test batches of 8 random 3x64x64 images
#   with 2 classes; print_every 5; cpu, seeded.
import torch
from torch import nn, optim


class DenseNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 64, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(64, 1024, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(1024, 1000)

    def forward(self, x):
        return self.classifier(self.features(x))


torch.manual_seed(0)
device = torch.device("cpu")
trainloader = [(torch.randn(8, 3, 64, 64), torch.randint(0, 2, (8,))) for _ in range(20)]
testloader = [(torch.randn(8, 3, 64, 64), torch.randint(0, 2, (8,))) for _ in range(4)]

model = DenseNetLike()

# Freeze parameters so we don't backprop through them
for param in model.parameters():
    param.requires_grad = False

model.classifier = nn.Sequential(nn.Linear(1024, 256),
                                 nn.ReLU(),
                                 nn.Dropout(0.2),
                                 nn.Linear(256, 2),
                                 nn.LogSoftmax(dim=1))

criterion = nn.NLLLoss()

# Only train the classifier parameters, feature parameters are frozen
optimizer = optim.Adam(model.classifier.parameters(), lr=0.003)

model.to(device)

epochs = 1
steps = 0
running_loss = 0
print_every = 5
for epoch in range(epochs):
    for inputs, labels in trainloader:
        steps += 1
        # Move input and label tensors to the default device
        inputs, labels = inputs.to(device), labels.to(device)

        logps = model.forward(inputs)
        loss = criterion(logps, labels)
        loss.backward()
        optimizer.step()

        running_loss += loss.item()

        if steps % print_every == 0:
            test_loss = 0
            accuracy = 0
            model.eval()
            with torch.no_grad():
                for inputs, labels in testloader:
                    inputs, labels = inputs.to(device), labels.to(device)
                    logps = model.forward(inputs)
                    batch_loss = criterion(logps, labels)

                    test_loss += batch_loss.item()

                    # Calculate accuracy
                    ps = torch.exp(logps)
                    top_p, top_class = ps.topk(1, dim=1)
                    equals = top_class == labels.view(*top_class.shape)
                    accuracy += torch.mean(equals.type(torch.FloatTensor)).item()

            print(f"Epoch {epoch+1}/{epochs}.. "
                  f"Train loss: {running_loss/print_every:.3f}.. "
                  f"Test loss: {test_loss/len(testloader):.3f}.. "
                  f"Test accuracy: {accuracy/len(testloader):.3f}")
            running_loss = 0
            model.train()
