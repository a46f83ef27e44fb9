import torch
from torch import nn


def encode(state, frame):
    feats = encoder(frame)
    state["last"] = feats
    return feats


def decode(memory, index, feats):
    out = decoder(feats)
    memory[index] = {"feats": feats, "mask": out.sigmoid()}  # every frame, for the whole video
    return out


def track(state, frames):
    memory = state["memory"]
    for index, frame in enumerate(frames):
        feats = encode(state, frame)
        yield decode(memory, index, feats)


torch.manual_seed(0)
encoder = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU())
decoder = nn.Conv2d(16, 1, 1)
state = {"memory": {}, "last": None}
video = [torch.rand(1, 3, 64, 64) for _ in range(300)]
with torch.inference_mode():
    areas = [float((mask > 0).float().mean()) for mask in track(state, video)]
print(len(areas), round(sum(areas) / len(areas), 4))
