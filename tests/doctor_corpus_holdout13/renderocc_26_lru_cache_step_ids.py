# Source: https://github.com/pmj110119/RenderOcc/issues/26
#   code: mmdet3d/models/nerf/nerf_head.py at commit 09ce2cd (create_full_step_id under
#   functools.lru_cache, sample_ray, NerfHead.render_one_scene, render_semantic, forward)
# Adapted: mmdet3d, torch_scatter and the CUDA extensions are not installed: Raw2Alpha,
#   Alphas2Weights, cumdist_thres and segment_coo are stand-ins with the same inputs and
#   outputs written with torch ops; the occupancy network is a small 3-D conv over a
#   40x40x8 grid instead of BEVStereo4D; rays are random (800-1200 with depth per image,
#   as after the gt_depth > 0 mask), one image per batch, 80 iterations; depth supervision,
#   entropy and distortion losses left out; mmcv's runner replaced by a plain loop.
import functools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@functools.lru_cache(maxsize=128)
def create_full_step_id(shape):
    ray_id = torch.arange(shape[0]).view(-1, 1).expand(shape).flatten()
    step_id = torch.arange(shape[1]).view(1, -1).expand(shape).flatten()
    return ray_id, step_id


def sample_ray(ori_rays_o, ori_rays_d, step_size, scene_center, scene_radius, bg_len, world_len, bda):
    rays_o = (ori_rays_o - scene_center) / scene_radius
    rays_d = ori_rays_d / ori_rays_d.norm(dim=-1, keepdim=True)
    N_inner = int(2 / (2 + 2 * bg_len) * world_len / step_size) + 1
    N_outer = N_inner // 15
    b_inner = torch.linspace(0, 2, N_inner + 1)
    b_outer = 2 / torch.linspace(1, 1 / 64, N_outer + 1)
    t = torch.cat([(b_inner[1:] + b_inner[:-1]) * 0.5, (b_outer[1:] + b_outer[:-1]) * 0.5]).to(rays_o)
    ray_pts = rays_o[:, None, :] + rays_d[:, None, :] * t[None, :, None]
    norm = ray_pts.norm(dim=-1, keepdim=True)
    inner_mask = (norm <= 1)
    ray_pts = torch.where(inner_mask, ray_pts, ray_pts / norm * ((1 + bg_len) - bg_len / norm))
    ray_pts = bda.matmul(ray_pts.unsqueeze(-1)).squeeze(-1)
    return ray_pts, inner_mask.squeeze(-1), t


def raw2alpha(density, shift, interval):
    return 1 - torch.exp(-F.softplus(density + shift) * interval)


def alphas2weights(alpha, ray_id, n_rays):
    log_t = torch.log((1 - alpha).clamp_min(1e-10))
    cum = torch.zeros(n_rays).index_add(0, ray_id, log_t)
    return alpha, torch.exp(cum)


def segment_coo(src, index, out):
    return out.index_add(0, index, src)


class NerfHead(nn.Module):
    def __init__(self, point_cloud_range, radius=39, step_size=0.5, alpha_init=1e-6, num_classes=17):
        super().__init__()
        xyz_min, xyz_max = torch.Tensor(point_cloud_range[:3]), torch.Tensor(point_cloud_range[3:])
        xyz_range = (xyz_max - xyz_min).float()
        self.bg_len = float((xyz_range[0] // 2 - radius) / radius)
        self.register_buffer('scene_center', ((xyz_min + xyz_max) * 0.5))
        self.register_buffer('scene_radius', torch.Tensor([radius, radius, radius]))
        self.step_size = step_size
        z_ = xyz_range[2] / xyz_range[0]
        self.register_buffer('xyz_min', torch.Tensor([-1 - self.bg_len, -1 - self.bg_len, -z_]))
        self.register_buffer('xyz_max', torch.Tensor([1 + self.bg_len, 1 + self.bg_len, z_]))
        self.register_buffer('act_shift', torch.FloatTensor([np.log(1 / (1 - alpha_init) - 1)]))
        self.world_len = 40
        self.class_weights = torch.ones(num_classes) / num_classes

    def render_one_scene(self, rays_o_tr, rays_d_tr, bda, density, semantic, mask=None):
        rays_o, rays_d = rays_o_tr[mask], rays_d_tr[mask]
        ray_pts, inner_mask, t = sample_ray(rays_o, rays_d, self.step_size, self.scene_center, self.scene_radius,
                                            self.bg_len, self.world_len, bda)
        ray_id, step_id = create_full_step_id(ray_pts.shape[:2])
        mask = inner_mask.clone()
        dist_thres = (2 + 2 * self.bg_len) / self.world_len * self.step_size * 0.95
        dist = (ray_pts[:, 1:] - ray_pts[:, :-1]).norm(dim=-1)
        mask[:, 1:] |= torch.cumsum(dist, 1) > dist_thres
        ray_pts = ray_pts[mask]
        N_ray = len(rays_o)
        t = t[None].repeat(N_ray, 1)[mask]
        ray_id = ray_id[mask.flatten()]
        shape = ray_pts.shape[:-1]
        xyz = ray_pts.reshape(1, 1, 1, -1, 3)
        ind_norm = ((xyz - self.xyz_min) / (self.xyz_max - self.xyz_min)).flip((-1,)) * 2 - 1
        density = F.grid_sample(density.unsqueeze(0).unsqueeze(1), ind_norm, mode='bilinear', align_corners=True)
        density = density.reshape(1, -1).T.reshape(*shape)
        semantic = semantic.permute(3, 0, 1, 2).unsqueeze(0)
        num_classes = semantic.shape[1]
        semantic = F.grid_sample(semantic, ind_norm, mode='bilinear', align_corners=True)
        semantic = semantic.reshape(num_classes, -1).T.reshape(*shape, num_classes)
        alpha = raw2alpha(density, self.act_shift, 0.5)
        weights, alphainv_last = alphas2weights(alpha, ray_id, N_ray)
        return {'weights': weights, 'ray_id': ray_id, 'N_ray': N_ray, 'num_classes': num_classes, 'semantic': semantic}

    def render_semantic(self, results):
        return segment_coo(src=(results['weights'].unsqueeze(-1) * results['semantic']), index=results['ray_id'],
                           out=torch.zeros([results['N_ray'], results['num_classes']]))

    def forward(self, density, semantic, rays, bda):
        gt_semantics, ray_o, ray_d, gt_depths = rays[..., 3], rays[..., 4:7], rays[..., 7:10], rays[..., 2]
        losses = {}
        for batch_id in range(rays.shape[0]):
            mask = gt_depths[batch_id] > 0
            results = {'target_semantic': gt_semantics[batch_id][mask]}
            results.update(self.render_one_scene(ray_o[batch_id], ray_d[batch_id], bda[batch_id], density[batch_id],
                                                 semantic[batch_id], mask=mask))
            results['render_semantic'] = self.render_semantic(results)
            criterion = nn.CrossEntropyLoss(weight=self.class_weights)
            losses['loss_render_semantic'] = criterion(results['render_semantic'], results['target_semantic'].long())
        return losses


torch.manual_seed(0)
occ_net = nn.Sequential(nn.Conv3d(4, 16, 3, padding=1), nn.ReLU(), nn.Conv3d(16, 18, 3, padding=1))
head = NerfHead(point_cloud_range=[-40, -40, -1, 40, 40, 5.4])
optimizer = torch.optim.AdamW(occ_net.parameters(), lr=1e-3)
for it in range(80):
    feats = occ_net(torch.randn(1, 4, 40, 40, 8)).permute(0, 2, 3, 4, 1)
    density, semantic = feats[..., 0], feats[..., 1:]
    n = 1500
    rays = torch.zeros(1, n, 10)
    rays[..., 2] = (torch.rand(1, n) < torch.empty(1).uniform_(0.55, 0.8)).float() * 20
    rays[..., 3] = torch.randint(0, 17, (1, n)).float()
    rays[..., 7:10] = torch.randn(1, n, 3)
    losses = head(density, semantic, rays, torch.eye(3).unsqueeze(0))
    loss = sum(losses.values())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if it % 20 == 0:
        print(it, round(loss.item(), 4))
