# Source: https://github.com/pytorch/pytorch/issues/4050
# Adapted: the posted loop kept as it is (a test batch every 100 steps, run without backward
#   and outside torch.no_grad(), else a training step), with .cuda() dropped, loss.data[0] ->
#   loss.item() (0-dim losses) and the test interval 100 -> 10; P3D199 (a pseudo-3D ResNet) ->
#   a small 3D convolutional network of the same call (N, 3, T, H, W) -> (N, num_classes);
#   read_batch over the video files -> random 4x3x4x32x32 clips with labels of 101 classes;
#   step = 201; cpu, seeded.
import torch
import torch.nn as nn


class P3D199(nn.Module):
    def __init__(self, num_classes=101):
        super(P3D199, self).__init__()
        self.features = nn.Sequential(
            nn.Conv3d(3, 16, (1, 3, 3), padding=(0, 1, 1)), nn.BatchNorm3d(16), nn.ReLU(),
            nn.Conv3d(16, 16, (3, 1, 1), padding=(1, 0, 0)), nn.BatchNorm3d(16), nn.ReLU(),
            nn.MaxPool3d((1, 2, 2)),
            nn.Conv3d(16, 32, (1, 3, 3), padding=(0, 1, 1)), nn.BatchNorm3d(32), nn.ReLU(),
            nn.Conv3d(32, 32, (3, 1, 1), padding=(1, 0, 0)), nn.BatchNorm3d(32), nn.ReLU(),
            nn.AdaptiveAvgPool3d(1))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def read_batch(files, labels):
    return torch.randn(4, 3, 4, 32, 32), torch.randint(0, 101, (4,))


torch.manual_seed(0)
files, labels = None, None
test_files, test_labels = None, None
step = 201

model = P3D199(num_classes=101)
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

i = 1
while i < step:
    if i % 10 == 0:
        test_data, test_label = read_batch(test_files, test_labels)
        out = model(torch.autograd.Variable(test_data.float()))
        _, predict_label = torch.max(out, dim=1)
        eq = torch.eq(predict_label, torch.autograd.Variable(test_label))
        print(eq)
    else:
        data, data_label = read_batch(files, labels)
        out = model(torch.autograd.Variable(data.float()))
        loss = criterion(out, torch.autograd.Variable(data_label, requires_grad=False))
        print(i, loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    i = i + 1
