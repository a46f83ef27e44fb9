# Source: https://github.com/wkcn/TinyCLIP/issues/7
# Adapted: the maintainer's test loop from the thread as posted; open_clip's TinyCLIP model and
#   its preprocess are stubbed with the same interface (create_model_and_transforms returning a
#   model with encode_image, and a preprocess) around a small patch-embedding transformer
#   encoder; the figure image -> a random 3x64x64 image tiled 16 times (128 in the thread),
#   cuda and torch.cuda.amp.autocast -> cpu without autocast, torch.cuda.synchronize and
#   memory_allocated dropped, the endless loop -> 200 iterations, seeded.
import torch
from torch import nn

torch.manual_seed(0)


class VisualTransformer(nn.Module):
    def __init__(self, width=64, patch=16, layers=2, out=32):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, patch, stride=patch)
        layer = nn.TransformerEncoderLayer(width, 4, width * 2, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, layers)
        self.proj = nn.Linear(width, out)

    def forward(self, x):
        x = self.conv1(x).flatten(2).transpose(1, 2)
        return self.proj(self.transformer(x).mean(1))


class CLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = VisualTransformer()

    def encode_image(self, image):
        return self.visual(image)


class open_clip:
    @staticmethod
    def create_model_and_transforms(arch, pretrained=None):
        return CLIP(), None, lambda img: img


arch = 'TinyCLIP-auto-ViT-63M-32-Text-31M'
model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained='LAION400M')
model.eval()

image = preprocess(torch.rand(3, 64, 64)).unsqueeze(0)
image = image.tile(16, 1, 1, 1)


cnt = 0
while cnt < 200:
    with torch.no_grad():
        im = image.clone()
        image_features = model.encode_image(im)
        image_features.cpu().numpy()
    cnt += 1
    if cnt % 50 == 0:
        print(cnt, image_features.shape)
