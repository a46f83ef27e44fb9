# Source: https://github.com/huggingface/transformers/issues/45412
#   code: compile_compatible_method_lru_cache (src/transformers/pytorch_utils.py) and
#   RTDetrSinePositionEmbedding (models/rt_detr/modeling_rt_detr.py), as quoted in the pull
#   requests that point at the issue (#45708, #45780, #45819)
# Adapted: the decorator kept as it is (is_torchdynamo_compiling read from torch.compiler);
#   RTDetrSinePositionEmbedding.forward kept, its return statement completed (the stored
#   excerpt stops inside it) with the four sin/cos blocks it builds; the RT-DETR checkpoint
#   loaded with from_pretrained in the pull request's reproduction replaced by a small model
#   built from scratch (a convolutional backbone, the position embedding, an encoder layer and
#   a box head); the reproduction (load, run, `del m`, gc.collect()) run for 12 checkpoints
#   in turn instead of one, cpu instead of cuda, seeded.
import gc
from functools import lru_cache, wraps

import torch
from torch import nn


def is_torchdynamo_compiling():
    return torch.compiler.is_compiling()


def torch_int(x):
    return int(x)


@wraps(lru_cache)
def compile_compatible_method_lru_cache(*lru_args, **lru_kwargs):
    """
    LRU cache decorator from standard functools library, but with a workaround to disable
    caching when torchdynamo is compiling. Expected to work with class methods.
    """

    def decorator(func):
        func_with_cache = lru_cache(*lru_args, **lru_kwargs)(func)

        @wraps(func)
        def wrapper(*args, **kwargs):
            if is_torchdynamo_compiling():
                return func(*args, **kwargs)
            else:
                return func_with_cache(*args, **kwargs)

        return wrapper

    return decorator


class RTDetrSinePositionEmbedding(nn.Module):
    """
    2D sinusoidal position embedding used in RT-DETR hybrid encoder.
    """

    def __init__(self, embed_dim: int = 256, temperature: int = 10000):
        super().__init__()
        self.embed_dim = embed_dim
        self.temperature = temperature

    @compile_compatible_method_lru_cache(maxsize=32)
    def forward(
        self,
        width: int,
        height: int,
        device,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        """
        Generate 2D sinusoidal position embeddings.

        Returns:
            Position embeddings of shape (1, height*width, embed_dim)
        """
        grid_w = torch.arange(torch_int(width), device=device).to(dtype)
        grid_h = torch.arange(torch_int(height), device=device).to(dtype)
        grid_w, grid_h = torch.meshgrid(grid_w, grid_h, indexing="xy")
        if self.embed_dim % 4 != 0:
            raise ValueError("Embed dimension must be divisible by 4 for 2D sin-cos position embedding")
        pos_dim = self.embed_dim // 4
        omega = torch.arange(pos_dim, device=device).to(dtype) / pos_dim
        omega = 1.0 / (self.temperature**omega)

        out_w = grid_w.flatten()[..., None] @ omega[None]
        out_h = grid_h.flatten()[..., None] @ omega[None]

        return torch.concat([out_h.sin(), out_h.cos(), out_w.sin(), out_w.cos()], dim=1)[None, :, :]


class SmallDetector(nn.Module):
    def __init__(self, d_model=256, num_queries=100):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2, 1), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(128, d_model, 3, 2, 1), nn.ReLU())
        self.position_embedding = RTDetrSinePositionEmbedding(d_model)
        self.encoder = nn.TransformerEncoderLayer(d_model, 8, 1024, batch_first=True)
        self.class_head = nn.Linear(d_model, 80)
        self.box_head = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, 4))

    def forward(self, pixel_values):
        features = self.backbone(pixel_values)
        height, width = features.shape[-2:]
        src = features.flatten(2).transpose(1, 2)
        pos = self.position_embedding(width, height, src.device, src.dtype)
        memory = self.encoder(src + pos)
        return self.class_head(memory), self.box_head(memory).sigmoid()


torch.manual_seed(0)
images = torch.rand(2, 3, 256, 256)
for checkpoint in range(12):
    m = SmallDetector().eval()
    with torch.no_grad():
        logits, boxes = m(images)
    print(checkpoint, tuple(logits.shape), round(boxes.mean().item(), 4))
    del m
    gc.collect()
