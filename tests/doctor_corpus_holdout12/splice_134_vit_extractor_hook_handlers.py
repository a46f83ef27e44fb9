# Source: https://github.com/omerbt/Splice/issues/134
#   code: models/extractor.py (VitExtractor), util/losses.py (LossG) and train.py (train_model) at
#   d709bac^, the parent of the commit "Fix #134: Empty hook_handlers list in the Extractor"
# Adapted: VitExtractor and LossG's global-cls / global-ssim losses kept as they were; the DINO
#   ViT-S/8 from torch.hub replaced by a small stand-in with the same structure the hooks use
#   (model.blocks[i], .attn, .attn.qkv, .attn.attn_drop; 12 blocks, 384-d, 6 heads, patch 8);
#   torchvision's Resize/Normalize transform by a normalisation function; the generator by a
#   small conv net; the SingleImageDataset by one random 3x16x16 A/B pair; yaml config and tqdm
#   by a dict and print; the scheduler and image saving dropped; 120 epochs (steps); cpu, seeded.
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device('cpu')


def attn_cosine_sim(x, y, eps=1e-08):
    x = x[0]
    y = y[0]
    norm1 = x.norm(dim=2, keepdim=True)
    norm2 = y.norm(dim=2, keepdim=True)
    factor = torch.clamp(norm1 @ norm2.permute(0, 2, 1), min=eps)
    sim_matrix = (x @ y.permute(0, 2, 1)) / factor
    return sim_matrix


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * (C // self.num_heads) ** -0.5
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x), attn


class Block(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, x):
        y, attn = self.attn(self.norm1(x))
        x = x + y
        return x + self.mlp(self.norm2(x))


class DinoViT(nn.Module):
    def __init__(self, dim=384, depth=12, num_heads=6, patch=8):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.blocks = nn.ModuleList([Block(dim, num_heads) for _ in range(depth)])

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        for blk in self.blocks:
            x = blk(x)
        return x


class VitExtractor:
    BLOCK_KEY = 'block'
    ATTN_KEY = 'attn'
    PATCH_IMD_KEY = 'patch_imd'
    QKV_KEY = 'qkv'
    KEY_LIST = [BLOCK_KEY, ATTN_KEY, PATCH_IMD_KEY, QKV_KEY]

    def __init__(self, model_name, device):
        self.model = DinoViT().to(device)
        self.model.eval()
        self.model_name = model_name
        self.hook_handlers = []
        self.layers_dict = {}
        self.outputs_dict = {}
        for key in VitExtractor.KEY_LIST:
            self.layers_dict[key] = []
            self.outputs_dict[key] = []
        self._init_hooks_data()

    def _init_hooks_data(self):
        self.layers_dict[VitExtractor.BLOCK_KEY] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        self.layers_dict[VitExtractor.ATTN_KEY] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        self.layers_dict[VitExtractor.QKV_KEY] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        self.layers_dict[VitExtractor.PATCH_IMD_KEY] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        for key in VitExtractor.KEY_LIST:
            self.outputs_dict[key] = []

    def _register_hooks(self, **kwargs):
        for block_idx, block in enumerate(self.model.blocks):
            if block_idx in self.layers_dict[VitExtractor.BLOCK_KEY]:
                self.hook_handlers.append(block.register_forward_hook(self._get_block_hook()))
            if block_idx in self.layers_dict[VitExtractor.ATTN_KEY]:
                self.hook_handlers.append(block.attn.attn_drop.register_forward_hook(self._get_attn_hook()))
            if block_idx in self.layers_dict[VitExtractor.QKV_KEY]:
                self.hook_handlers.append(block.attn.qkv.register_forward_hook(self._get_qkv_hook()))
            if block_idx in self.layers_dict[VitExtractor.PATCH_IMD_KEY]:
                self.hook_handlers.append(block.attn.register_forward_hook(self._get_patch_imd_hook()))

    def _clear_hooks(self):
        for handler in self.hook_handlers:
            handler.remove()

    def _get_block_hook(self):
        def _get_block_output(model, input, output):
            self.outputs_dict[VitExtractor.BLOCK_KEY].append(output)

        return _get_block_output

    def _get_attn_hook(self):
        def _get_attn_output(model, inp, output):
            self.outputs_dict[VitExtractor.ATTN_KEY].append(output)

        return _get_attn_output

    def _get_qkv_hook(self):
        def _get_qkv_output(model, inp, output):
            self.outputs_dict[VitExtractor.QKV_KEY].append(output)

        return _get_qkv_output

    def _get_patch_imd_hook(self):
        def _get_attn_output(model, inp, output):
            self.outputs_dict[VitExtractor.PATCH_IMD_KEY].append(output[0])

        return _get_attn_output

    def get_feature_from_input(self, input_img):
        self._register_hooks()
        self.model(input_img)
        feature = self.outputs_dict[VitExtractor.BLOCK_KEY]
        self._clear_hooks()
        self._init_hooks_data()
        return feature

    def get_qkv_feature_from_input(self, input_img):
        self._register_hooks()
        self.model(input_img)
        feature = self.outputs_dict[VitExtractor.QKV_KEY]
        self._clear_hooks()
        self._init_hooks_data()
        return feature

    def get_patch_num(self, input_img_shape):
        b, c, h, w = input_img_shape
        return 1 + (h // 8) * (w // 8)

    def get_keys_from_input(self, input_img, layer_num):
        qkv = self.get_qkv_feature_from_input(input_img)[layer_num]
        k = qkv.reshape(self.get_patch_num(input_img.shape), 3, 6, 384 // 6).permute(1, 2, 0, 3)[1]
        return k

    def get_keys_self_sim_from_input(self, input_img, layer_num):
        keys = self.get_keys_from_input(input_img, layer_num=layer_num)
        h, t, d = keys.shape
        concatenated_keys = keys.transpose(0, 1).reshape(t, h * d)
        ssim_map = attn_cosine_sim(concatenated_keys[None, None, ...], concatenated_keys[None, None, ...])
        return ssim_map


def global_transform(x):
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    return (x - mean) / std


class LossG(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.extractor = VitExtractor(model_name=cfg['dino_model_name'], device=device)

    def forward(self, outputs, inputs):
        losses = {}
        losses['loss_global_ssim'] = self.calculate_global_ssim_loss(outputs['x_global'], inputs['A_global'])
        losses['loss_global_cls'] = self.calculate_crop_cls_loss(outputs['x_global'], inputs['B_global'])
        losses['loss'] = losses['loss_global_ssim'] * self.cfg['lambda_global_ssim'] + \
            losses['loss_global_cls'] * self.cfg['lambda_global_cls']
        return losses

    def calculate_global_ssim_loss(self, outputs, inputs):
        loss = 0.0
        for a, b in zip(inputs, outputs):
            a = global_transform(a)
            b = global_transform(b)
            with torch.no_grad():
                target_keys_self_sim = self.extractor.get_keys_self_sim_from_input(a.unsqueeze(0), layer_num=11)
            keys_ssim = self.extractor.get_keys_self_sim_from_input(b.unsqueeze(0), layer_num=11)
            loss += F.mse_loss(keys_ssim, target_keys_self_sim)
        return loss

    def calculate_crop_cls_loss(self, outputs, inputs):
        loss = 0.0
        for a, b in zip(outputs, inputs):
            a = global_transform(a).unsqueeze(0).to(device)
            b = global_transform(b).unsqueeze(0).to(device)
            cls_token = self.extractor.get_feature_from_input(a)[-1][0, 0, :]
            with torch.no_grad():
                target_cls_token = self.extractor.get_feature_from_input(b)[-1][0, 0, :]
            loss += F.mse_loss(cls_token, target_cls_token)
        return loss


cfg = {'dino_model_name': 'dino_vits8', 'lambda_global_cls': 10.0, 'lambda_global_ssim': 1.0,
       'n_epochs': 120, 'lr': 0.002}
torch.manual_seed(0)
netG = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1), nn.Sigmoid())
criterion = LossG(cfg)
optimizer = torch.optim.Adam(netG.parameters(), lr=cfg['lr'])
inputs = {'A_global': torch.rand(1, 3, 16, 16), 'B_global': torch.rand(1, 3, 16, 16)}

start = time.time()
for epoch in range(1, cfg['n_epochs'] + 1):
    optimizer.zero_grad()
    outputs = {'x_global': netG(inputs['A_global'])}
    losses = criterion(outputs, inputs)
    loss_G = losses['loss']
    loss_G.backward()
    optimizer.step()
    if epoch % 20 == 0:
        print(f"Epoch {epoch} loss={losses['loss'].item():.4f} "
              f"{time.time() - start:.2f}s {len(criterion.extractor.hook_handlers)} handlers")
