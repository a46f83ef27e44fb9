# Source: https://github.com/ViCCo-Group/thingsvision/pull/150
#   code: thingsvision/core/extraction/torch.py (PyTorchExtractor) and base.py
#   (BaseExtractor.extract_features) at 68ab922^ (the parent of the fix)
# Adapted: the two classes merged into one and trimmed to the extraction path (no tqdm,
#   torchtyping, torchvision transforms, output_dir saving or model zoo); a small ViT-like
#   model (patch embedding, cls token, transformer layer, `norm`) with random weights;
#   40 batches of 16 random 64x64 images.
from typing import Any, Callable, Dict, Iterator, Optional

import torch
import torch.nn as nn


class PyTorchExtractor:
    def __init__(
        self,
        model_name: str,
        pretrained: bool,
        device: str,
        model_parameters: Dict = None,
        model: Any = None,
        preprocess: Optional[Callable] = None,
    ) -> None:
        self.device = device
        self.model_name = model_name
        self.pretrained = pretrained
        self.model_parameters = model_parameters
        self.model = model
        self.activations = {}
        self.hook_handle = None

        if isinstance(self.model_parameters, dict):
            if "extract_cls_token" in self.model_parameters:
                self.extract_cls_token = self.model_parameters["extract_cls_token"]

        self.model.eval()

    def extract_features(
        self,
        batches: Iterator,
        module_name: str,
        flatten_acts: bool,
        output_type: str = "ndarray",
    ):
        self.model = self.model.to(self.device)
        self.activations = {}
        self.register_hook(module_name=module_name)
        features = []
        image_ct = 0
        for i, batch in enumerate(batches, start=1):
            features.append(
                self._extract_batch(
                    batch=batch, module_name=module_name, flatten_acts=flatten_acts
                )
            )

            image_ct += len(batch)
            del batch
        print(
            f"...Features successfully extracted for all {image_ct} images in the database."
        )
        features = torch.cat(features)
        if output_type == "ndarray":
            features = features.numpy()
        if self.hook_handle:
            self._unregister_hook()
        return features

    def get_activation(self, name: str) -> Callable:
        """Store copy of activations for a specific layer of the model."""

        def hook(model, input, output) -> None:
            # store copy of tensor rather than tensor itself
            if isinstance(output, tuple):
                act = output[0]
            else:
                act = output
            try:
                self.activations[name] = act.clone().detach()
            except AttributeError:
                self.activations[name] = act.clone()

        return hook

    def register_hook(self, module_name: str) -> None:
        """Register a forward hook to store activations."""
        for n, m in self.model.named_modules():
            if n == module_name:
                self.hook_handle = m.register_forward_hook(self.get_activation(n))
                break

    def _unregister_hook(self) -> None:
        self.hook_handle.remove()

    @torch.no_grad()
    def _extract_batch(self, batch, module_name: str, flatten_acts: bool):
        # move current batch to torch device
        batch = batch.to(self.device)
        _ = self.forward(batch)
        act = self.activations[module_name]
        if hasattr(self, "extract_cls_token"):
            # we are only interested in the representations of the first token, i.e., [cls] token
            act = act[:, 0, :]
        if flatten_acts:
            act = self.flatten_acts(act)
        if act.is_cuda or act.get_device() >= 0:
            torch.cuda.empty_cache()
            act = act.cpu()
        return act

    def forward(self, batch):
        """Default forward pass."""
        return self.model(batch)

    @staticmethod
    def flatten_acts(act):
        """Default flattening of activations."""
        return act.view(act.size(0), -1)


class TinyViT(nn.Module):
    def __init__(self, dim=192, patch=8):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.blocks = nn.TransformerEncoderLayer(dim, 4, dim * 2, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 1000)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


if __name__ == "__main__":
    torch.manual_seed(0)
    extractor = PyTorchExtractor(model_name="dino-vit-base-p8", pretrained=False, device="cpu",
                                 model_parameters={"extract_cls_token": True}, model=TinyViT())
    batches = [torch.rand(16, 3, 64, 64) for _ in range(40)]
    features = extractor.extract_features(batches=batches, module_name="norm", flatten_acts=False)
    print(features.shape)
