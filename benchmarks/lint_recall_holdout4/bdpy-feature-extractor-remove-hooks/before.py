# Source: https://github.com/KamitaniLab/bdpy/blob/a9ec4dd5a23b384e6a37678b3ccb74205a9855b6/bdpy/dl/torch/torch.py
# Adapted excerpt, before the fix https://github.com/KamitaniLab/bdpy/commit/6075f53d34b881b73769afb7409b0a43368fb291
# (trimmed to the code the fix touches; omitted lines are marked).
'''PyTorch module.'''

from typing import Iterable, List, Dict, Union, Tuple, Any, Callable, Optional

import os

import numpy as np
from PIL import Image
import torch
import torch.nn as nn

from . import models

_tensor_t = Union[np.ndarray, torch.Tensor]


class FeatureExtractor(object):
    def __init__(
            self, encoder: nn.Module, layers: Iterable[str],
            layer_mapping: Optional[Dict[str, str]] = None,
            device: str = 'cpu', detach: bool = True
    ):
        '''Feature extractor.

        Parameters
        ----------
        encoder : torch.nn.Module
            Network model we want to extract features from.
        layers : Iterable[str]
            List of layer names we want to extract features from.
        layer_mapping : Dict[str, str], optional
            Mapping from (human-readable) layer names to layer names in the model.
            If None, layers will be directly used as layer names in the model.
        device : str, optional
            Device name (default: 'cpu').
        detach : bool, optional
            If True, detach the feature activations from the computation graph
        '''

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
            layer_object = models._parse_layer_name(self._encoder, layer)
            layer_object.register_forward_hook(self._extractor)

    def __call__(self, x: _tensor_t) -> Dict[str, _tensor_t]:
        return self.run(x)

    def run(self, x: _tensor_t) -> Dict[str, _tensor_t]:
        '''Extract feature activations from the specified layers.

        Parameters
        ----------
        x : numpy.ndarray or torch.Tensor
            Input image (numpy.ndarray or torch.Tensor).

        Returns
        -------
        features : Dict[str, Union[numpy.ndarray, torch.Tensor]]
            Feature activations from the specified layers.
            Each key is the layer name and each value is the feature activation.
        '''

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

# ... (lines 127-258 omitted)
