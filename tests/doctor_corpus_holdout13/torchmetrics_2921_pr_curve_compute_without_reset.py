# Source: https://github.com/Lightning-AI/torchmetrics/issues/2921
#   code: torchmetrics BinaryPrecisionRecallCurve (thresholds=None: list states preds and
#   target appended by update and concatenated by compute), Metric.forward/update/compute as
#   anomalib's image threshold uses them (update and compute after every batch, no reset),
#   from the linked https://github.com/openvinotoolkit/anomalib/issues/2531
# Adapted: torchmetrics and anomalib are not installed: Metric and BinaryPrecisionRecallCurve
#   are stand-ins with the same state handling (add_state with a list default, update
#   appending, compute concatenating, reset clearing) and _binary_clf_curve written with
#   torch ops; the anomaly model is a small conv autoencoder scoring random 1x16x16
#   images; F1AdaptiveThreshold as in anomalib (max F1 over the curve) for the image and the
#   pixel thresholds; 150 batches of 16.
import torch
import torch.nn as nn


class Metric(nn.Module):
    def __init__(self):
        super().__init__()
        self._defaults = {}

    def add_state(self, name, default):
        self._defaults[name] = default
        setattr(self, name, list(default) if isinstance(default, list) else default.clone())

    def reset(self):
        for name, default in self._defaults.items():
            setattr(self, name, list(default) if isinstance(default, list) else default.clone())


def _binary_clf_curve(preds, target):
    desc = torch.argsort(preds, descending=True)
    preds, target = preds[desc], target[desc]
    distinct = torch.nonzero(preds[1:] - preds[:-1], as_tuple=True)[0]
    idx = torch.cat([distinct, torch.tensor([target.numel() - 1])])
    tps = torch.cumsum(target, 0)[idx]
    fps = 1 + idx - tps
    return fps, tps, preds[idx]


class BinaryPrecisionRecallCurve(Metric):
    def __init__(self, thresholds=None):
        super().__init__()
        self.thresholds = thresholds
        self.add_state("preds", default=[])
        self.add_state("target", default=[])

    def update(self, preds, target):
        self.preds.append(preds)
        self.target.append(target)

    def compute(self):
        state = (torch.cat(self.preds), torch.cat(self.target))
        fps, tps, thresholds = _binary_clf_curve(*state)
        precision = tps / (tps + fps)
        recall = tps / tps[-1].clamp_min(1)
        return precision, recall, thresholds


class F1AdaptiveThreshold(BinaryPrecisionRecallCurve):
    def __init__(self, default_value=0.5):
        super().__init__()
        self.value = torch.tensor(default_value)

    def compute(self):
        precision, recall, thresholds = super().compute()
        f1_score = (2 * precision * recall) / (precision + recall + 1e-10)
        self.value = thresholds[torch.argmax(f1_score)]
        return self.value


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(), nn.ConvTranspose2d(8, 1, 2, stride=2)).eval()
image_threshold = F1AdaptiveThreshold()
pixel_threshold = F1AdaptiveThreshold()
for batch_idx in range(150):
    images = torch.rand(16, 1, 16, 16)
    labels = (torch.rand(16) < 0.3).long()
    masks = (torch.rand(16, 1, 16, 16) < 0.05).long() * labels.view(-1, 1, 1, 1)
    with torch.no_grad():
        anomaly_maps = (model(images) - images).pow(2)
        pred_scores = anomaly_maps.flatten(1).amax(1) + labels * 0.05
    image_threshold.update(pred_scores, labels)
    threshold = image_threshold.compute()
    pixel_threshold.update(anomaly_maps.flatten(), masks.flatten())
    pixel_value = pixel_threshold.compute()
    if batch_idx % 50 == 0:
        print(batch_idx, float(threshold), float(pixel_value))
