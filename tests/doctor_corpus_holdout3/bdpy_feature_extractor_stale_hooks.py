# Source: https://github.com/KamitaniLab/bdpy/issues/72
#   code: bdpy/dl/torch/torch.py (FeatureExtractor, FeatureExtractorHandle) and the
#   pixel-optimisation path of bdpy/recon/torch/icnn.py (reconstruct) before
#   https://github.com/KamitaniLab/bdpy/pull/91
# Adapted: the CLIP/VGG encoder replaced by a small named conv net, models._parse_layer_name
#   reduced to attribute lookup, reconstruct() reduced to its pixel-optimisation loop (no
#   generator, no jitter/blur/masks, fixed lr and momentum), target features computed from
#   random images, 4 reconstructions of 20 iterations with the same encoder (the issue's
#   "same encoder instance used for reconstruct multiple times"), cpu, seeded.
from typing import Any, Dict, Iterable, List, Optional, Union

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

_tensor_t = Union[np.ndarray, torch.Tensor]


def _parse_layer_name(model: nn.Module, layer_name: str) -> nn.Module:
    return getattr(model, layer_name)


class FeatureExtractor(object):
    def __init__(
            self, encoder: nn.Module, layers: Iterable[str],
            layer_mapping: Optional[Dict[str, str]] = None,
            device: str = 'cpu', detach: bool = True
    ):
        self._encoder = encoder
        self.__layers = layers
        self.__layer_map = layer_mapping
        self.__detach = detach
        self.__device = device

        if detach:
            self._extractor = FeatureExtractorHandleDetach()
        else:
            self._extractor = FeatureExtractorHandle()

        self._encoder.to(self.__device)

        for layer in self.__layers:
            if self.__layer_map is not None:
                layer = self.__layer_map[layer]
            layer_object = _parse_layer_name(self._encoder, layer)
            layer_object.register_forward_hook(self._extractor)

    def __call__(self, x: _tensor_t) -> Dict[str, _tensor_t]:
        return self.run(x)

    def run(self, x: _tensor_t) -> Dict[str, _tensor_t]:
        self._extractor.clear()
        if not isinstance(x, torch.Tensor):
            xt = torch.tensor(x[np.newaxis], device=self.__device)
        else:
            xt = x

        self._encoder.forward(xt)

        features: Dict[str, _tensor_t] = {
            layer: self._extractor.outputs[i]
            for i, layer in enumerate(self.__layers)
        }
        if self.__detach:
            features = {
                k: v.cpu().detach().numpy()
                for k, v in features.items()
            }

        return features


class FeatureExtractorHandle(object):
    def __init__(self):
        self.outputs: List[torch.Tensor] = []

    def __call__(
            self,
            module: nn.Module, module_in: Any,
            module_out: torch.Tensor
    ) -> None:
        self.outputs.append(module_out)

    def clear(self):
        self.outputs = []


class FeatureExtractorHandleDetach(object):
    def __init__(self):
        self.outputs: List[torch.Tensor] = []

    def __call__(
            self,
            module: nn.Module, module_in: Any,
            module_out: torch.Tensor
    ) -> None:
        self.outputs.append(module_out.detach().clone())

    def clear(self):
        self.outputs = []


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(64, 64, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv3(self.relu2(self.conv2(self.relu1(self.conv1(x)))))


def reconstruct(features, encoder, layer_mapping, initial_image, n_iter=20,
                loss_func=torch.nn.MSELoss(reduction='sum'), optimizer=optim.SGD,
                lr=(2., 1e-10), momentum=(0.9, 0.9), device='cpu'):
    layers = list(features.keys())
    layer_weights = {lay: 1. / len(layers) for lay in layers}
    x = initial_image.copy().astype(np.float32)
    loss_history = np.zeros(n_iter, dtype=np.float32)

    feature_extractor = FeatureExtractor(encoder, layers, layer_mapping,
                                         device=device, detach=False)

    encoder.zero_grad()
    xt = torch.tensor(x[np.newaxis], device=device, requires_grad=True)
    op = optimizer([xt], lr=lr[0])

    for it in range(n_iter):
        op.zero_grad()
        lr_it = lr[0] + it * (lr[1] - lr[0]) / n_iter
        momentum_it = momentum[0] + it * (momentum[1] - momentum[0]) / n_iter
        for g in op.param_groups:
            if 'lr' in g:
                g['lr'] = lr_it
            if 'momentum' in g:
                g['momentum'] = momentum_it

        xt.data = torch.tensor(x[np.newaxis], device=device)

        activations = feature_extractor.run(xt)

        loss = 0.
        for j, lay in enumerate(reversed(layers)):
            act_j = activations[lay].clone().to(device)
            feat_j = torch.tensor(features[lay], device=device).clone()
            loss_j = loss_func(act_j, feat_j) * layer_weights[lay]
            loss += loss_j

        loss.backward()

        grad_mean = torch.abs(xt.grad).mean().cpu().detach()
        if grad_mean > 0:
            xt.grad /= grad_mean

        op.step()
        x = xt.cpu().detach().numpy()[0]
        loss_history[it] = loss.cpu().detach().numpy()

    return x, loss_history


if __name__ == '__main__':
    torch.manual_seed(0)
    np.random.seed(0)
    encoder = Encoder()
    layer_mapping = {'conv1': 'conv1', 'conv2': 'conv2', 'conv3': 'conv3'}
    target_extractor = FeatureExtractor(encoder, list(layer_mapping), layer_mapping)
    for n in range(4):
        image = np.random.rand(3, 32, 32).astype(np.float32)
        features = target_extractor(image)
        initial_image = np.random.rand(3, 32, 32).astype(np.float32)
        recon, loss_history = reconstruct(features, encoder, layer_mapping, initial_image)
        print(f"image {n}: loss {loss_history[0]:.1f} -> {loss_history[-1]:.1f}")
