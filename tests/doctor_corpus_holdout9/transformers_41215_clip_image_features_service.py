# Source: https://github.com/huggingface/transformers/pull/41215
#   code: CLIPModel.get_image_features and the CLIP vision tower (embeddings with class token,
#   pre-layernorm, encoder layers, post-layernorm on the class token, BaseModelOutputWithPooling)
#   of models/clip/modeling_clip.py as the pull request found them; the pull request reports
#   600-800 MB more memory after every batch of repeated get_image_features calls in a batch
#   processing service and deletes the intermediate vision_outputs
# Adapted: the pull request does not include the caller, so the service is completed as it is
#   described: batches of images embedded with model.get_image_features, normalised and kept for
#   the index, with the model in eval mode as loaded by from_pretrained; a small randomly
#   initialised vision tower (64x64 images, 16x16 patches, width 128, 4 layers) instead of a
#   pretrained checkpoint; 25 batches of 16 images; the processor replaced by random pixel
#   values; cpu, seeded.
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn as nn


@dataclass
class BaseModelOutputWithPooling:
    last_hidden_state: torch.Tensor = None
    pooler_output: torch.Tensor = None
    hidden_states: Optional[Tuple[torch.Tensor]] = None


class CLIPVisionEmbeddings(nn.Module):
    def __init__(self, hidden_size, image_size, patch_size):
        super().__init__()
        self.class_embedding = nn.Parameter(torch.randn(hidden_size))
        self.patch_embedding = nn.Conv2d(3, hidden_size, kernel_size=patch_size, stride=patch_size, bias=False)
        self.num_positions = (image_size // patch_size) ** 2 + 1
        self.position_embedding = nn.Embedding(self.num_positions, hidden_size)
        self.register_buffer("position_ids", torch.arange(self.num_positions).expand((1, -1)), persistent=False)

    def forward(self, pixel_values):
        batch_size = pixel_values.shape[0]
        patch_embeds = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        class_embeds = self.class_embedding.expand(batch_size, 1, -1)
        embeddings = torch.cat([class_embeds, patch_embeds], dim=1)
        return embeddings + self.position_embedding(self.position_ids)


class CLIPEncoderLayer(nn.Module):
    def __init__(self, hidden_size, heads):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(hidden_size, heads, batch_first=True)
        self.layer_norm1 = nn.LayerNorm(hidden_size)
        self.mlp = nn.Sequential(nn.Linear(hidden_size, 4 * hidden_size), nn.GELU(), nn.Linear(4 * hidden_size, hidden_size))
        self.layer_norm2 = nn.LayerNorm(hidden_size)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.layer_norm1(hidden_states)
        hidden_states = residual + self.self_attn(hidden_states, hidden_states, hidden_states, need_weights=False)[0]
        residual = hidden_states
        hidden_states = residual + self.mlp(self.layer_norm2(hidden_states))
        return hidden_states


class CLIPVisionTransformer(nn.Module):
    def __init__(self, hidden_size=128, image_size=64, patch_size=16, layers=4, heads=4):
        super().__init__()
        self.embeddings = CLIPVisionEmbeddings(hidden_size, image_size, patch_size)
        self.pre_layrnorm = nn.LayerNorm(hidden_size)
        self.layers = nn.ModuleList([CLIPEncoderLayer(hidden_size, heads) for _ in range(layers)])
        self.post_layernorm = nn.LayerNorm(hidden_size)

    def forward(self, pixel_values=None, output_hidden_states=False):
        hidden_states = self.pre_layrnorm(self.embeddings(pixel_values))
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        for layer in self.layers:
            hidden_states = layer(hidden_states)
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
        pooled_output = self.post_layernorm(hidden_states[:, 0, :])
        return BaseModelOutputWithPooling(last_hidden_state=hidden_states, pooler_output=pooled_output,
                                          hidden_states=all_hidden_states)


class CLIPModel(nn.Module):
    def __init__(self, projection_dim=64, hidden_size=128):
        super().__init__()
        self.vision_model = CLIPVisionTransformer(hidden_size)
        self.visual_projection = nn.Linear(hidden_size, projection_dim, bias=False)

    def get_image_features(self, pixel_values=None, output_hidden_states=None):
        vision_outputs = self.vision_model(pixel_values=pixel_values, output_hidden_states=output_hidden_states)
        pooled_output = vision_outputs.pooler_output
        image_features = self.visual_projection(pooled_output)
        return image_features


torch.manual_seed(0)
model = CLIPModel()
model.eval()

index = []
for batch_id in range(25):
    pixel_values = torch.randn(16, 3, 64, 64)
    image_features = model.get_image_features(pixel_values=pixel_values)
    image_features = image_features / image_features.norm(dim=-1, keepdim=True)
    index.append(image_features)
    if batch_id % 5 == 0:
        print("batch", batch_id, "indexed", sum(len(f) for f in index))

queries = torch.cat(index[:2])
print("self-similarity of the first query:", (queries[:1] @ torch.cat(index).T).max().item())
