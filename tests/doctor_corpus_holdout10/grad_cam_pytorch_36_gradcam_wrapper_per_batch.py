# Source: https://github.com/kazuto1011/grad-cam-pytorch/issues/36
#   code: grad_cam.py (_BaseWrapper, BackPropagation, GuidedBackPropagation, GradCAM) and the
#   "Grad-CAM/Guided Backpropagation" part of demo1 in main.py at commit fd10ff7, the version
#   the issue was filed against
# Adapted: the wrappers kept as they are (Deconvnet and occlusion_sensitivity dropped,
#   `from collections import Sequence` removed); demo1's Grad-CAM part kept as a function run
#   on one batch after another, as the reporter ran it over a large image set, with the
#   printing, the class table and the image saving (cv2) dropped; the pretrained torchvision
#   model -> a small CNN with named stages (target layer "layer3"); the image files -> 30
#   batches of 4 random 3x64x64 images; topk 3; cpu, seeded.
import torch
import torch.nn as nn
from torch.nn import functional as F


class _BaseWrapper(object):
    def __init__(self, model):
        super(_BaseWrapper, self).__init__()
        self.device = next(model.parameters()).device
        self.model = model
        self.handlers = []  # a set of hook function handlers

    def _encode_one_hot(self, ids):
        one_hot = torch.zeros_like(self.logits).to(self.device)
        one_hot.scatter_(1, ids, 1.0)
        return one_hot

    def forward(self, image):
        self.image_shape = image.shape[2:]
        self.logits = self.model(image)
        self.probs = F.softmax(self.logits, dim=1)
        return self.probs.sort(dim=1, descending=True)  # ordered results

    def backward(self, ids):
        """
        Class-specific backpropagation
        """
        one_hot = self._encode_one_hot(ids)
        self.model.zero_grad()
        self.logits.backward(gradient=one_hot, retain_graph=True)

    def generate(self):
        raise NotImplementedError

    def remove_hook(self):
        """
        Remove all the forward/backward hook functions
        """
        for handle in self.handlers:
            handle.remove()


class BackPropagation(_BaseWrapper):
    def forward(self, image):
        self.image = image.requires_grad_()
        return super(BackPropagation, self).forward(self.image)

    def generate(self):
        gradient = self.image.grad.clone()
        self.image.grad.zero_()
        return gradient


class GuidedBackPropagation(BackPropagation):
    def __init__(self, model):
        super(GuidedBackPropagation, self).__init__(model)

        def backward_hook(module, grad_in, grad_out):
            # Cut off negative gradients
            if isinstance(module, nn.ReLU):
                return (F.relu(grad_in[0]),)

        for module in self.model.named_modules():
            self.handlers.append(module[1].register_backward_hook(backward_hook))


class GradCAM(_BaseWrapper):
    def __init__(self, model, candidate_layers=None):
        super(GradCAM, self).__init__(model)
        self.fmap_pool = {}
        self.grad_pool = {}
        self.candidate_layers = candidate_layers  # list

        def save_fmaps(key):
            def forward_hook(module, input, output):
                self.fmap_pool[key] = output.detach()

            return forward_hook

        def save_grads(key):
            def backward_hook(module, grad_in, grad_out):
                self.grad_pool[key] = grad_out[0].detach()

            return backward_hook

        # If any candidates are not specified, the hook is registered to all the layers.
        for name, module in self.model.named_modules():
            if self.candidate_layers is None or name in self.candidate_layers:
                self.handlers.append(module.register_forward_hook(save_fmaps(name)))
                self.handlers.append(module.register_backward_hook(save_grads(name)))

    def _find(self, pool, target_layer):
        if target_layer in pool.keys():
            return pool[target_layer]
        else:
            raise ValueError("Invalid layer name: {}".format(target_layer))

    def generate(self, target_layer):
        fmaps = self._find(self.fmap_pool, target_layer)
        grads = self._find(self.grad_pool, target_layer)
        weights = F.adaptive_avg_pool2d(grads, 1)

        gcam = torch.mul(fmaps, weights).sum(dim=1, keepdim=True)
        gcam = F.relu(gcam)
        gcam = F.interpolate(
            gcam, self.image_shape, mode="bilinear", align_corners=False
        )

        B, C, H, W = gcam.shape
        gcam = gcam.view(B, -1)
        gcam -= gcam.min(dim=1, keepdim=True)[0]
        gcam /= gcam.max(dim=1, keepdim=True)[0]
        gcam = gcam.view(B, C, H, W)

        return gcam


def demo1_gradcam(model, images, target_layer, topk):
    bp = BackPropagation(model=model)
    probs, ids = bp.forward(images)  # sorted
    bp.remove_hook()

    gcam = GradCAM(model=model)
    _ = gcam.forward(images)

    gbp = GuidedBackPropagation(model=model)
    _ = gbp.forward(images)

    results = []
    for i in range(topk):
        # Guided Backpropagation
        gbp.backward(ids=ids[:, [i]])
        gradients = gbp.generate()

        # Grad-CAM
        gcam.backward(ids=ids[:, [i]])
        regions = gcam.generate(target_layer=target_layer)

        for j in range(len(images)):
            # Guided Grad-CAM
            results.append((torch.mul(regions, gradients)[j].cpu().numpy().max(), probs[j, i].item()))
    return results


torch.manual_seed(0)
model = nn.Sequential()
model.add_module("layer1", nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU()))
model.add_module("layer2", nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU()))
model.add_module("layer3", nn.Sequential(nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU()))
model.add_module("pool", nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()))
model.add_module("fc", nn.Linear(64, 10))
model.eval()

for batch in range(30):
    images = torch.rand(4, 3, 64, 64)
    results = demo1_gradcam(model, images, target_layer="layer3", topk=3)
    print(batch, len(results))
