# Source: https://github.com/timesler/facenet-pytorch/issues/57
#   code: the embedding loop in the thread (model = InceptionResnetV1(pretrained='vggface2').eval(); embeddings.append(...))
# Adapted: InceptionResnetV1 with its vggface2 weights is replaced by a small convolutional stand-in with the
# same interface (eval mode, 512-d L2-normalised embeddings), the face crops by 40 random batches of
# 8 aligned 3x80x80 crops; after the loop the embeddings are stacked and compared as in the thread's use
# (pairwise distances), on CPU; no training.
import torch
import torch.nn as nn
import torch.nn.functional as F


class InceptionResnetV1(nn.Module):
    def __init__(self, pretrained=None, classify=False, num_classes=None):
        super().__init__()
        self.conv2d_1a = nn.Conv2d(3, 32, 3, stride=2)
        self.conv2d_2a = nn.Conv2d(32, 64, 3)
        self.repeat_1 = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))
        self.mixed_6a = nn.Conv2d(64, 128, 3, stride=2)
        self.avgpool_1a = nn.AdaptiveAvgPool2d(1)
        self.last_linear = nn.Linear(128, 512, bias=False)
        self.last_bn = nn.BatchNorm1d(512)

    def forward(self, x):
        x = F.relu(self.conv2d_1a(x))
        x = F.relu(self.conv2d_2a(x))
        x = F.relu(x + self.repeat_1(x))
        x = F.relu(self.mixed_6a(x))
        x = self.avgpool_1a(x).flatten(1)
        x = self.last_bn(self.last_linear(x))
        return F.normalize(x, p=2, dim=1)


model = InceptionResnetV1(pretrained='vggface2').eval()
data = [torch.rand(8, 3, 80, 80) for _ in range(40)]

embeddings = []
for batch in data:
    embedding = model(batch)
    embeddings.append(embedding)
embeddings = torch.stack(embeddings)

flat = embeddings.reshape(-1, 512)
dists = torch.cdist(flat, flat)
print(embeddings.shape, float(dists.mean()))
