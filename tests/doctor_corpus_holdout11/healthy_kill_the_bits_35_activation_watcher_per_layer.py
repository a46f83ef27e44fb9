# Source: https://github.com/facebookresearch/kill-the-bits/issues/35
#   code: src/utils/watcher.py (ActivationWatcher), src/utils/training.py (evaluate,
#   AverageMeter, accuracy) and the layer loop of src/quantize.py (Step 1) at commit 9ea70f1
# Adapted: ActivationWatcher kept as it is (save and the BN/bias layer helpers dropped), evaluate
#   without ProgressMeter; the pretrained ResNet replaced by a small CNN, the ImageNet loaders by
#   lists of 8 batches of 16 random 3x32x32 images with 10 classes, PQ by a stand-in with the same
#   encode/decode calls that runs a few k-means steps over the weight's column blocks;
#   n_activations=64 (4 batches per layer), the convolutions quantized and the final linear layer
#   left as it is, the distillation finetuning of the centroids dropped; cpu, seeded.
import math
from operator import attrgetter

import torch
import torch.nn as nn


class ActivationWatcher:
    def __init__(self, model, layer=''):
        self.model = model
        all_layers = self._get_layers()
        if len(layer) == 0:
            self.layers = all_layers
        else:
            assert layer in all_layers
            self.layers = [layer]
        self.modules_to_layers = {attrgetter(layer)(self.model): layer for layer in self.layers}
        self._register_hooks()
        self._watch = False

    def _get_layers(self):
        keys = self.model.state_dict().keys()
        layers = [k[:k.rfind(".")] for k in keys if 'bias' not in k]
        layers = [layer for layer in layers if not isinstance(attrgetter(layer)(self.model), nn.BatchNorm2d)]
        return layers

    def _register_hooks(self):
        def fwd_hook(module, input, output):
            layer = self.modules_to_layers[module]
            if self._watch:
                activations = input[0].data.cpu()
                self.activations[layer].append(activations)

        self.handles = []
        for layer in self.layers:
            handle = attrgetter(layer)(self.model).register_forward_hook(fwd_hook)
            self.handles.append(handle)

    def watch(self, loader, criterion, n_iter):
        self._watch = True
        self.activations = {layer: [] for layer in self.layers}
        evaluate(loader, self.model, criterion, n_iter=n_iter)
        self._watch = False
        self.activations = {k: torch.cat(v, dim=0) for (k, v) in self.activations.items()}
        for handle in self.handles:
            handle.remove()
        return self.activations


class AverageMeter(object):
    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def evaluate(test_loader, model, criterion, n_iter=-1, verbose=False, device='cpu'):
    n_iter = len(test_loader) if n_iter == -1 else n_iter
    losses = AverageMeter('Loss', ':.4e')
    top1 = AverageMeter('Acc@1', ':6.2f')
    top5 = AverageMeter('Acc@5', ':6.2f')
    model.eval()
    with torch.no_grad():
        for i, (input, target) in enumerate(test_loader):
            if i >= n_iter: break
            output = model(input)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), input.size(0))
            top1.update(acc1[0], input.size(0))
            top5.update(acc5[0], input.size(0))
    return top1.avg


class PQ:
    def __init__(self, in_activations, M, n_centroids=16, block_size=9, n_iter=5):
        self.in_activations, self.M = in_activations, M
        self.n_centroids, self.block_size, self.n_iter = n_centroids, block_size, n_iter

    def encode(self):
        W = self.M.reshape(-1, self.block_size)
        self.centroids = W[torch.randperm(W.size(0))[:self.n_centroids]].clone()
        for _ in range(self.n_iter):
            self.assignments = torch.cdist(W, self.centroids).argmin(1)
            for c in range(self.centroids.size(0)):
                members = W[self.assignments == c]
                if len(members):
                    self.centroids[c] = members.mean(0)

    def decode(self):
        return self.centroids[self.assignments].reshape(self.M.shape)


torch.manual_seed(0)
student = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
student.eval()
criterion = nn.CrossEntropyLoss()
train_loader = [(torch.rand(16, 3, 32, 32), torch.randint(0, 10, (16,))) for _ in range(8)]
test_loader = [(torch.rand(16, 3, 32, 32), torch.randint(0, 10, (16,))) for _ in range(4)]

watcher = ActivationWatcher(student)
block = ''
layers = [layer for layer in watcher.layers[1:] if block in layer]
n_activations, batch_size = 64, 16
for layer in layers[:-1]:
    n_iter_activations = math.ceil(n_activations / batch_size)
    watcher = ActivationWatcher(student, layer=layer)
    in_activations_current = watcher.watch(train_loader, criterion, n_iter_activations)
    in_activations_current = in_activations_current[layer]
    M = attrgetter(layer + '.weight.data')(student).detach()
    quantizer = PQ(in_activations_current, M)
    quantizer.encode()
    M_hat = quantizer.decode()
    attrgetter(layer + '.weight')(student).data = M_hat
    top_1 = evaluate(test_loader, student, criterion).item()
    print('Layer {}, activations {}, top1 {:.2f}'.format(layer, tuple(in_activations_current.shape), top_1))
