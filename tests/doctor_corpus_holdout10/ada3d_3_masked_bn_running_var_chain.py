# Source: https://github.com/A-suozhang/ada3d/issues/3
#   code: openpcdet/pcdet/models/backbones_2d/masked_bn.py (MaskedBatchNorm2d) and
#   base_bev_backbone.py (BaseBEVBackbone.__init__, the block and deblock construction) at
#   commit 9512743
# Adapted: MaskedBatchNorm2d kept as it is; BaseBEVBackbone's block and deblock construction
#   kept for MASKED_BATCHNORM=True with a dict config (two levels of 2 layers, 32/64 filters,
#   upsample strides 1/2) and the plain forward over blocks and deblocks (the predictor and
#   feature probing dropped); the point-cloud pipeline -> random sparse 64-channel BEV pseudo
#   images of 96x96 (about 15% of the cells occupied, the rest exactly zero as after the
#   pillar scatter) with a 1x1 head regressing a random heatmap; SGD, 80 steps; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn


class MaskedBatchNorm2d(nn.Module):
    def __init__(self, C, eps=1e-3, momentum=0.1, affine=False):
        super().__init__()
        # self.bn = nn.BatchNorm2d(C, momentum=1., eps=eps, affine=affine)   # DEBUG_ONLY
        self.C = C
        self.momentum = momentum
        self.eps = eps
        # self.running_mean = 0.
        running_var = torch.ones([C])
        self.register_buffer('running_var',running_var)
        self.training = True
        self.affine = affine
        self.num_batches_tracked = 0.

        if self.affine:
            self.weight = torch.nn.Parameter(torch.ones(C))
            # self.affine_transform = nn.Linear(C,C,bias=False)

    def forward(self, x):
        B,C,W,H = x.shape

        # DEBUG_ONLY: the other gather funciton @qzy
        # nonzero_idx = x.abs().sum(1).view(-1,).nonzero()
        # features = x.permute(0,2,3,1).contiguous().view(-1,C)
        # nonzero_features = features[nonzero_idx].view(-1,C)   # [K,C]

        x1=x.sum(1)
        nonzero_idxs = []
        num_nonzeros = []
        for _ in range(B):
            nonzero_idx_cur_batch = x1[_].nonzero()
            num_nonzero = nonzero_idx_cur_batch.shape[0]
            nonzero_idxs.append(nonzero_idx_cur_batch)
            num_nonzeros.append(num_nonzero)
        # print('nonzero-rate', max(num_nonzeros)/(W*H))
        idx_for_gather = torch.zeros([B,max(num_nonzeros),2],device=x.device)
        for _ in range(B):
            idx_for_gather[_,:num_nonzeros[_],:] = nonzero_idxs[_]
        # since different batch has different nonzero elments
        # zero-padded, gathered then replaced with zero(since the upper left element is always empty)
        # Inputs: [B,C,W,J]
        # idxs: [B,K,2]
        # gathered: [B,C,K]
        idx_for_gather = idx_for_gather.long()
        batch_enum = torch.arange(B).unsqueeze(1)
        gathered = x[batch_enum,:,idx_for_gather[:,:,0],idx_for_gather[:,:,1]]
        gathered = gathered.permute([0,2,1]).unsqueeze(-1).contiguous()  # [B,C,K]
        # save_d = {}
        # save_d['pre-bn'] = gathered
        # gathered_bn = self.bn(gathered)

        mean_ = gathered.mean(dim=(0,2,3),keepdim=True)
        if not self.training:
            var_ = self.running_var.reshape([1,-1,1,1])
        else:
            var_ = ((gathered - mean_)**2).mean(dim=(0,2,3), keepdim=True)
            self.running_var = (1.-self.momentum)*self.running_var + self.momentum*var_.view(-1)

        # DEBUG: when substracting mean, it wont work
        gathered_bn = (gathered) / torch.sqrt(var_ + self.eps)  # DEBUG_ONLY!
        # gathered_bn = self.bn(gathered)
        if self.affine:
            gathered_bn = gathered_bn*self.weight.reshape([1,-1,1,1])

        # print((mean_.reshape([C]) - self.bn.running_mean).abs().max())
        # print((var_.reshape([C]) - self.bn.running_var).abs().max())
        # print((gathered_bn_ - gathered_bn).abs().max())

        # save_d['post-bn'] = gathered_bn

        # torch.save(save_d, './visual_utils/probe-bn-temp.pth')
        x[batch_enum,:,idx_for_gather[:,:,0],idx_for_gather[:,:,1]] = gathered_bn.squeeze(-1).permute([0,2,1]).contiguous()
        # x[:,:,0,0] = x[:,:,0,0]*0.   # mask the upper left

        return x

class Cfg(dict):
    __getattr__ = dict.__getitem__


class BaseBEVBackbone(nn.Module):
    def __init__(self, model_cfg, input_channels):
        super().__init__()
        self.model_cfg = model_cfg
        layer_nums = self.model_cfg.LAYER_NUMS
        layer_strides = self.model_cfg.LAYER_STRIDES
        num_filters = self.model_cfg.NUM_FILTERS
        num_upsample_filters = self.model_cfg.NUM_UPSAMPLE_FILTERS
        upsample_strides = self.model_cfg.UPSAMPLE_STRIDES
        self.masked_batchnorm = True
        bn_type = MaskedBatchNorm2d
        self.bn_affine = True

        num_levels = len(layer_nums)
        c_in_list = [input_channels, *num_filters[:-1]]
        self.blocks = nn.ModuleList()
        self.deblocks = nn.ModuleList()
        for idx in range(num_levels):
            cur_layers = [
                nn.ZeroPad2d(1),
                nn.Conv2d(
                    c_in_list[idx], num_filters[idx], kernel_size=3,
                    stride=layer_strides[idx], padding=0, bias=False
                ),
                bn_type(num_filters[idx], eps=1e-3, momentum=0.01, affine=self.bn_affine),  # DEBUG_ONLY: affine=false
                nn.ReLU()
            ]
            for k in range(layer_nums[idx]):
                cur_layers.extend([
                    nn.Conv2d(num_filters[idx], num_filters[idx], kernel_size=3, padding=1, bias=False),
                    bn_type(num_filters[idx], eps=1e-3, momentum=0.01),
                    nn.ReLU()
                ])
            self.blocks.append(nn.Sequential(*cur_layers))
            stride = upsample_strides[idx]
            self.deblocks.append(nn.Sequential(
                nn.ConvTranspose2d(
                    num_filters[idx], num_upsample_filters[idx],
                    upsample_strides[idx],
                    stride=upsample_strides[idx], bias=False
                ),
                bn_type(num_upsample_filters[idx], eps=1e-3, momentum=0.01, affine=self.bn_affine),
                nn.ReLU()
            ))
        self.num_bev_features = sum(num_upsample_filters)

    def forward(self, spatial_features):
        ups = []
        x = spatial_features
        for i in range(len(self.blocks)):
            x = self.blocks[i](x)
            ups.append(self.deblocks[i](x))
        return torch.cat(ups, dim=1)


torch.manual_seed(0)
np.random.seed(0)
cfg = Cfg(LAYER_NUMS=[2, 2], LAYER_STRIDES=[1, 2], NUM_FILTERS=[32, 64],
          UPSAMPLE_STRIDES=[1, 2], NUM_UPSAMPLE_FILTERS=[32, 32])
backbone = BaseBEVBackbone(cfg, input_channels=64)
head = nn.Conv2d(backbone.num_bev_features, 1, 1)
optimizer = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.01, momentum=0.9)

for step in range(80):
    occupied = (torch.rand(2, 1, 96, 96) < 0.15).float()
    spatial_features = torch.randn(2, 64, 96, 96) * occupied
    target = torch.rand(2, 1, 96, 96)
    spatial_features_2d = backbone(spatial_features)
    loss = ((torch.sigmoid(head(spatial_features_2d)) - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
