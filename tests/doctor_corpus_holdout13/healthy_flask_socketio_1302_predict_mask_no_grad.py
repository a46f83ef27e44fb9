# Source: https://github.com/miguelgrinberg/Flask-SocketIO/issues/1302
#   code: the predict method (transforms, unsqueeze, forward under torch.no_grad(),
#   sigmoid of the logit moved to the CPU and thresholded into a numpy mask) called from a
#   Socket.IO event handler
# Adapted: Flask-SocketIO and torchvision are not installed: the event handler is called
#   from a loop of 600 events instead of a server, the image transforms are a stand-in with
#   the same role (to tensor, resize, normalise) on random 3x128x128 uint8 frames, and the
#   segmentation network is a small encoder-decoder instead of the reporter's; the masks are
#   kept in a bounded list of the last 20 results sent back to clients.
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Segmenter:
    def __init__(self, net, device="cpu"):
        self.device = device
        self.net = net.to(device).eval()

    def test_image_transforms(self, img):
        x = torch.from_numpy(img).permute(2, 0, 1).float() / 255.0
        x = F.interpolate(x.unsqueeze(0), size=(96, 96), mode="bilinear", align_corners=False).squeeze(0)
        return (x - 0.5) / 0.25

    def predict(self, img):
        with torch.no_grad():
            data = self.test_image_transforms(img)
            data = torch.unsqueeze(data, dim=0)
            data = data.to(self.device)
            logit = self.net(data)
            pred = torch.sigmoid(logit.cpu())[0][0].data.numpy()
            mask = pred >= 0.5
        return mask


net = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                    nn.ReLU(), nn.ConvTranspose2d(32, 16, 2, stride=2), nn.ReLU(), nn.ConvTranspose2d(16, 1, 2, stride=2))
segmenter = Segmenter(net)
sent = deque(maxlen=20)


def on_frame(message):
    mask = segmenter.predict(message["frame"])
    sent.append({"id": message["id"], "mask": np.packbits(mask)})
    return float(mask.mean())


torch.manual_seed(0)
rng = np.random.default_rng(0)
for event_id in range(600):
    coverage = on_frame({"id": event_id, "frame": rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)})
print("last coverage", coverage, "masks kept", len(sent))
