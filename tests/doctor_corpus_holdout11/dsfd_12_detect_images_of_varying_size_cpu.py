# Source: https://github.com/hukkelas/DSFD-Pytorch-Inference/issues/12
#   code: the reporter's loop (build_detector("DSFDDetector", ...) then detector.detect on one
#   image after another) and face_detection/base.py (Detector.detect, batched_detect,
#   _pre_process, resize, filter_boxes) and face_detection/dsfd/detect.py at commit 382de8f
# Adapted: Detector kept as it is (validate_detections dropped, torchvision's nms replaced by a
#   small greedy NMS with the same call); the pretrained ResNet-152 SSD of DSFDDetector replaced by
#   a small untrained SSD-like network with the same call (x, confidence_threshold,
#   nms_iou_threshold) returning [N, B, 5] boxes; cv2.imread of the WIDER FACE photos by 60 random
#   uint8 RGB images whose height and width vary between 120 and 360 pixels, as photos do;
#   max_resolution=None as in the issue; cpu, seeded.
import typing
from abc import ABC, abstractmethod

import numpy as np
import torch
import torch.nn as nn


def nms(boxes, scores, iou_threshold):
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i)
        if order.numel() == 1:
            break
        xx1 = torch.maximum(boxes[i, 0], boxes[order[1:], 0])
        yy1 = torch.maximum(boxes[i, 1], boxes[order[1:], 1])
        xx2 = torch.minimum(boxes[i, 2], boxes[order[1:], 2])
        yy2 = torch.minimum(boxes[i, 3], boxes[order[1:], 3])
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        iou = inter / (area[i] + area[order[1:]] - inter)
        order = order[1:][iou <= iou_threshold]
    return torch.stack(keep) if keep else torch.empty(0, dtype=torch.long)


def scale_boxes(imshape, boxes):
    height, width = imshape
    boxes[:, [0, 2]] *= width
    boxes[:, [1, 3]] *= height
    return boxes


class Detector(ABC):
    def __init__(self, confidence_threshold, nms_iou_threshold, device, max_resolution,
                 fp16_inference, clip_boxes):
        self.confidence_threshold = confidence_threshold
        self.nms_iou_threshold = nms_iou_threshold
        self.device = device
        self.max_resolution = max_resolution
        self.fp16_inference = fp16_inference
        self.clip_boxes = clip_boxes
        self.mean = np.array([123, 117, 104], dtype=np.float32).reshape(1, 1, 1, 3)

    def detect(self, image: np.ndarray, shrink=1.0) -> np.ndarray:
        image = image[None]
        boxes = self.batched_detect(image, shrink)
        return boxes[0]

    @abstractmethod
    def _detect(self, image: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def filter_boxes(self, boxes: torch.Tensor) -> typing.List[np.ndarray]:
        final_output = []
        for i in range(len(boxes)):
            scores = boxes[i, :, 4]
            keep_idx = scores >= self.confidence_threshold
            boxes_ = boxes[i, keep_idx, :-1]
            scores = scores[keep_idx]
            if scores.dim() == 0:
                final_output.append(torch.empty(0, 5))
                continue
            keep_idx = nms(boxes_, scores, self.nms_iou_threshold)
            scores = scores[keep_idx].view(-1, 1)
            boxes_ = boxes_[keep_idx].view(-1, 4)
            output = torch.cat((boxes_, scores), dim=-1)
            final_output.append(output)
        return final_output

    @torch.no_grad()
    def resize(self, image, shrink: float):
        if self.max_resolution is None and shrink == 1:
            return image
        height, width = image.shape[2:4]
        shrink_factor = self.max_resolution / max((height, width))
        if shrink_factor <= shrink:
            shrink = shrink_factor
        size = (int(height*shrink), int(width*shrink))
        image = torch.nn.functional.interpolate(image, size=size)
        return image

    def _pre_process(self, image: np.ndarray, shrink: float) -> torch.Tensor:
        assert image.dtype == np.uint8
        image = image.astype(np.float32) - self.mean
        image = np.moveaxis(image, -1, 1)
        image = torch.from_numpy(image)
        image = self.resize(image, shrink)
        image = image.to(self.device)
        return image

    def _batched_detect(self, image: np.ndarray) -> typing.List[np.ndarray]:
        boxes = self._detect(image)
        boxes = self.filter_boxes(boxes)
        if self.clip_boxes:
            boxes = [box.clamp(0, 1) for box in boxes]
        return boxes

    @torch.no_grad()
    def batched_detect(self, image: np.ndarray, shrink=1.0) -> typing.List[np.ndarray]:
        height, width = image.shape[1:3]
        image = self._pre_process(image, shrink)
        boxes = self._batched_detect(image)
        boxes = [scale_boxes((height, width), box).cpu().numpy() for box in boxes]
        return boxes


class SSD(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(64, 64, 3, padding=1), nn.ReLU())
        self.loc = nn.Conv2d(64, 4, 3, padding=1)
        self.conf = nn.Conv2d(64, 1, 3, padding=1)

    def forward(self, x, confidence_threshold, nms_iou_threshold):
        f = self.features(x)
        loc = torch.sigmoid(self.loc(f)).flatten(2).transpose(1, 2)
        conf = torch.sigmoid(self.conf(f)).flatten(2).transpose(1, 2)
        x1y1 = loc[..., :2] * 0.5
        x2y2 = x1y1 + loc[..., 2:] * 0.5
        return torch.cat([x1y1, x2y2, conf], dim=-1)


class DSFDDetector(Detector):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.net = SSD()
        self.net.eval()
        self.net = self.net.to(self.device)

    @torch.no_grad()
    def _detect(self, x: torch.Tensor) -> typing.List[np.ndarray]:
        x = x[:, [2, 1, 0], :, :]
        with torch.autocast("cpu", enabled=self.fp16_inference):
            boxes = self.net(x, self.confidence_threshold, self.nms_iou_threshold)
        return boxes


def build_detector(name, confidence_threshold=.5, nms_iou_threshold=.3, device=torch.device("cpu"),
                   max_resolution=None, fp16_inference=False, clip_boxes=False):
    assert name == "DSFDDetector"
    return DSFDDetector(confidence_threshold=confidence_threshold, nms_iou_threshold=nms_iou_threshold,
                        device=device, max_resolution=max_resolution, fp16_inference=fp16_inference,
                        clip_boxes=clip_boxes)


torch.manual_seed(0)
rng = np.random.RandomState(0)


def read_image(img_path):
    h, w = img_path
    return rng.randint(0, 256, (h, w, 3)).astype(np.uint8)


detector = build_detector("DSFDDetector", confidence_threshold=.5, nms_iou_threshold=.3)
image_paths = [(int(rng.randint(120, 361)), int(rng.randint(120, 361))) for _ in range(60)]
for img_path in image_paths:
    predictions = detector.detect(read_image(img_path))
print(len(image_paths), predictions.shape)
