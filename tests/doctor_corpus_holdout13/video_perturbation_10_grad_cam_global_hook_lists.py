# Source: https://github.com/shinkyo0513/Towards-Visually-Explaining-Video-Understanding-Networks-With-Perturbation/issues/10
#   code: visual_meth/grad_cam.py (module-level observ_actv_/observ_grad_ lists, forward and
#   backward hooks registered inside grad_cam) and the visualisation loop of main.py
#   (grad_cam called for every test sample) at commit 8a60e32
# Adapted: the R(2+1)D / TSM video models and the EPIC-Kitchens loader are replaced by a small
#   3-D conv network over random 3x8x32x32 clips with 10 classes and a list of 60 samples;
#   layer_name points at its last conv block; the result masks are only averaged instead of
#   being written as videos.
import torch
import torch.nn as nn
import torch.nn.functional as F
import numpy as np

# Backward hook
observ_grad_ = []
def backward_hook(m, i_grad, o_grad):
    global observ_grad_
    observ_grad_.insert(0, o_grad[0].detach())

# Forward hook
observ_actv_ = []
def forward_hook(m, i, o):
    global observ_actv_
    observ_actv_.append(o.detach())

def grad_cam(inputs, labels, model, device, layer_name, norm_vis=True):
    model.eval()   # Set model to evaluate mode

    bs, ch, nt, h, w = inputs.shape
    assert ch == 3
    assert labels.shape[0] == bs

    observ_layer = model
    for name in layer_name:
        observ_layer = dict(observ_layer.named_children())[name]

    observ_layer.register_backward_hook(backward_hook)
    observ_layer.register_forward_hook(forward_hook)

    inputs = inputs.to(device)
    labels = labels.to(dtype=torch.long)

    # Forward pass
    outputs = model(inputs)
    _, preds = torch.max(outputs, 1)

    observ_actv = observ_actv_[0]
    observ_actv = torch.repeat_interleave(observ_actv, int(nt/observ_actv.shape[2]), dim=2)

    # backward pass
    backward_signals = torch.zeros_like(outputs, device=device)
    for bidx in range(bs):
        backward_signals[bidx, labels[bidx].cpu().item()] = 1.0
    outputs.backward(backward_signals)

    observ_grad = observ_grad_[0]
    observ_grad = torch.repeat_interleave(observ_grad, int(nt/observ_grad.shape[2]), dim=2)

    observ_grad_w = observ_grad.mean(dim=4, keepdim=True).mean(dim=3, keepdim=True)
    out_masks = F.relu( (observ_grad_w*observ_actv).sum(dim=1, keepdim=True) )

    if norm_vis:
        out_masks = (out_masks - out_masks.min()) / (out_masks.max() - out_masks.min())

    return out_masks


class VideoNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(3, 16, 3, stride=(1, 2, 2), padding=1), nn.ReLU())
        self.layer4 = nn.Sequential(nn.Conv3d(16, 32, 3, stride=(2, 2, 2), padding=1), nn.ReLU())
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.layer4(self.stem(x))
        return self.fc(x.mean(dim=(2, 3, 4)))


torch.manual_seed(0)
device = torch.device("cpu")
model_ft = VideoNet().to(device)
test_dataloader = [(torch.randn(1, 3, 8, 32, 32), torch.randint(0, 10, (1,))) for _ in range(60)]
layer_name = ["layer4"]
mask_means = []
for sample in test_dataloader:
    inp, label = sample
    res = grad_cam(inp, label, model_ft, device, layer_name=layer_name, norm_vis=True)
    mask_means.append(res.mean().item())
print("mean mask", np.mean(mask_means))
