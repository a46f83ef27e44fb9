# Source: https://github.com/JaidedAI/EasyOCR/commit/e992112ae95c775d8b2f7009c32a6d65c945548c
#   code: easyocr/detection.py (test_net, get_textbox), easyocr/imgproc.py and craft_utils.py at the parent of e992112
# Adapted: the CRAFT network (VGG16-BN backbone, pretrained weights) is replaced by a small convolutional
# stand-in returning (y, feature) with the same shapes' layout; cv2.resize is replaced by torch's
# interpolate; getDetBoxes (cv2 connected components and minAreaRect) by a numpy stand-in that returns the
# bounding boxes of the rows of text found in the score map; 40 random page images of one size are
# detected on CPU (no training); the recogniser is left out.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CRAFT(nn.Module):
    def __init__(self):
        super().__init__()
        self.basenet = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Conv2d(32, 64, 3, padding=1), nn.ReLU())
        self.conv_cls = nn.Sequential(nn.Conv2d(64, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 2, 1))

    def forward(self, x):
        feature = self.basenet(x)
        y = self.conv_cls(feature)
        return y.permute(0, 2, 3, 1), feature


def normalizeMeanVariance(in_img, mean=(0.485, 0.456, 0.406), variance=(0.229, 0.224, 0.225)):
    img = in_img.copy().astype(np.float32)
    img -= np.array([mean[0] * 255.0, mean[1] * 255.0, mean[2] * 255.0], dtype=np.float32)
    img /= np.array([variance[0] * 255.0, variance[1] * 255.0, variance[2] * 255.0], dtype=np.float32)
    return img


def resize_aspect_ratio(img, square_size, interpolation=None, mag_ratio=1):
    height, width, channel = img.shape
    target_size = mag_ratio * max(height, width)
    if target_size > square_size:
        target_size = square_size
    ratio = target_size / max(height, width)
    target_h, target_w = int(height * ratio), int(width * ratio)
    proc = F.interpolate(torch.from_numpy(img).permute(2, 0, 1)[None].float(), size=(target_h, target_w),
                         mode="bilinear", align_corners=False)[0].permute(1, 2, 0).numpy()
    target_h32, target_w32 = target_h, target_w
    if target_h % 32 != 0:
        target_h32 = target_h + (32 - target_h % 32)
    if target_w % 32 != 0:
        target_w32 = target_w + (32 - target_w % 32)
    resized = np.zeros((target_h32, target_w32, channel), dtype=np.float32)
    resized[0:target_h, 0:target_w, :] = proc
    size_heatmap = (int(target_w32 / 2), int(target_h32 / 2))
    return resized, ratio, size_heatmap


def getDetBoxes(textmap, linkmap, text_threshold, link_threshold, low_text, poly=False, estimate_num_chars=False):
    rows = np.where((textmap > low_text).mean(axis=1) > 0.5)[0]
    boxes = []
    if len(rows):
        breaks = np.where(np.diff(rows) > 1)[0]
        for band in np.split(rows, breaks + 1):
            cols = np.where((textmap[band] > text_threshold).any(axis=0))[0]
            if len(cols):
                l, r, t, b = cols[0], cols[-1], band[0], band[-1]
                boxes.append(np.array([[l, t], [r, t], [r, b], [l, b]], dtype=np.float32))
    return boxes, [None] * len(boxes), None


def adjustResultCoordinates(polys, ratio_w, ratio_h, ratio_net=2):
    if len(polys) > 0:
        polys = np.array(polys)
        for k in range(len(polys)):
            if polys[k] is not None:
                polys[k] *= (ratio_w * ratio_net, ratio_h * ratio_net)
    return polys


def test_net(canvas_size, mag_ratio, net, image, text_threshold, link_threshold, low_text, poly, device, estimate_num_chars=False):
    if isinstance(image, np.ndarray) and len(image.shape) == 4:
        image_arrs = image
    else:
        image_arrs = [image]
    img_resized_list = []
    for img in image_arrs:
        img_resized, target_ratio, size_heatmap = resize_aspect_ratio(img, canvas_size, mag_ratio=mag_ratio)
        img_resized_list.append(img_resized)
    ratio_h = ratio_w = 1 / target_ratio
    x = [np.transpose(normalizeMeanVariance(n_img), (2, 0, 1)) for n_img in img_resized_list]
    x = torch.from_numpy(np.array(x))
    x = x.to(device)

    with torch.no_grad():
        y, feature = net(x)

    boxes_list, polys_list = [], []
    for out in y:
        score_text = out[:, :, 0].cpu().data.numpy()
        score_link = out[:, :, 1].cpu().data.numpy()
        boxes, polys, mapper = getDetBoxes(score_text, score_link, text_threshold, link_threshold, low_text, poly, estimate_num_chars)
        boxes = adjustResultCoordinates(boxes, ratio_w, ratio_h)
        polys = adjustResultCoordinates(polys, ratio_w, ratio_h)
        for k in range(len(polys)):
            if polys[k] is None:
                polys[k] = boxes[k]
        boxes_list.append(boxes)
        polys_list.append(polys)
    return boxes_list, polys_list


def get_textbox(detector, image, canvas_size, mag_ratio, text_threshold, link_threshold, low_text, poly, device, optimal_num_chars=None, **kwargs):
    result = []
    estimate_num_chars = optimal_num_chars is not None
    bboxes_list, polys_list = test_net(canvas_size, mag_ratio, detector, image, text_threshold, link_threshold,
                                       low_text, poly, device, estimate_num_chars)
    for polys in polys_list:
        single_img_result = []
        for i, box in enumerate(polys):
            poly = np.array(box).astype(np.int32).reshape((-1))
            single_img_result.append(poly)
        result.append(single_img_result)
    return result


detector = CRAFT().eval()
pages = [(np.random.rand(360, 480, 3) * 255).astype(np.uint8) for _ in range(40)]
all_results = []
for page in pages:
    result = get_textbox(detector, page, canvas_size=480, mag_ratio=1.0, text_threshold=0.0, link_threshold=0.4,
                         low_text=-0.2, poly=False, device="cpu")
    all_results.append(result)
print(len(all_results), sum(len(r[0]) for r in all_results))
