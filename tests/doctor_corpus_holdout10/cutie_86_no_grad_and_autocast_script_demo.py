# Source: https://github.com/hkchengrex/Cutie/issues/86
#   code: the reporter's script-mode loop posted in the issue, and InferenceCore.step,
#   _segment and _add_memory of cutie/inference/inference_core.py at commit d24ab45
# Adapted: the reporter's loop kept as posted, including its context line, with .to(device)
#   on cpu, the video capture -> 120 random 64x64x3 frames and the loop completed (the posted
#   excerpt stops at `if not ok:`) by stepping the processor on each frame; InferenceCore kept
#   for one object without flip augmentation, resizing, the image feature store and the object
#   manager; the memory manager (working memory of at most 5 memory frames plus the first,
#   permanent one, sensory memory per object) and the Cutie network (pixel encoder, key
#   projection, mask encoder, sensory update, decoder) -> small stand-ins with the same calls;
#   get_default_model() -> that network with mem_every 5; cpu, seeded.
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
device = torch.device('cpu')


class CUTIE(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = {'mem_every': 5, 'max_mem_frames': 5, 'stagger_updates': 5}
        self.pixel_encoder = nn.Sequential(nn.Conv2d(3, 32, 4, 4), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1))
        self.key_proj = nn.Conv2d(32, 16, 1)
        self.mask_encoder = nn.Conv2d(32 + 1 + 16, 32, 3, padding=1)
        self.sensory_update = nn.Conv2d(32 + 16, 16, 3, padding=1)
        self.decoder = nn.Conv2d(32 + 32 + 16, 2, 3, padding=1)

    def encode_image(self, image):
        pix_feat = self.pixel_encoder(image)
        return pix_feat, self.key_proj(pix_feat)

    def encode_mask(self, image, pix_feat, sensory, prob):
        mask = F.avg_pool2d(prob, 4)
        msk_value = torch.relu(self.mask_encoder(torch.cat([pix_feat, mask, sensory], 1)))
        sensory = torch.tanh(self.sensory_update(torch.cat([msk_value, sensory], 1)))
        return msk_value, sensory

    def segment(self, pix_feat, memory_readout, sensory, update_sensory=True):
        logits = self.decoder(torch.cat([pix_feat, memory_readout, sensory], 1))
        if update_sensory:
            sensory = torch.tanh(self.sensory_update(torch.cat([memory_readout, sensory], 1)))
        logits = F.interpolate(logits, scale_factor=4, mode='bilinear', align_corners=False)
        return sensory, logits, torch.softmax(logits, dim=1)


class MemoryManager:
    def __init__(self, cfg):
        self.max_mem_frames = cfg['max_mem_frames']
        self.keys, self.values, self.sensory = [], [], {}

    @property
    def engaged(self):
        return len(self.keys) > 0

    def initialize_sensory_if_needed(self, key, all_obj_ids):
        for obj in all_obj_ids:
            if obj not in self.sensory:
                self.sensory[obj] = torch.zeros(1, 16, *key.shape[-2:])

    def get_sensory(self, all_obj_ids):
        return self.sensory[all_obj_ids[0]]

    def update_sensory(self, sensory, all_obj_ids):
        self.sensory[all_obj_ids[0]] = sensory

    def add_memory(self, key, msk_value, all_obj_ids):
        self.keys.append(key.flatten(2))
        self.values.append(msk_value.flatten(2))
        if len(self.keys) > self.max_mem_frames + 1:  # the first memory frame is permanent
            del self.keys[1], self.values[1]

    def read(self, pix_feat, key, last_mask, network):
        mem_k, mem_v = torch.cat(self.keys, 2), torch.cat(self.values, 2)
        affinity = torch.softmax(torch.einsum('bck,bcq->bkq', mem_k, key.flatten(2)), dim=1)
        return torch.einsum('bck,bkq->bcq', mem_v, affinity).view_as(pix_feat)


class InferenceCore:
    def __init__(self, network, cfg):
        self.network = network
        self.mem_every = cfg['mem_every']
        self.stagger_ti = set(range(1, self.mem_every + 1))
        self.memory = MemoryManager(cfg=cfg)
        self.all_obj_ids = [1]
        self.curr_ti = -1
        self.last_mem_ti = 0
        self.last_mask = None
        self.max_internal_size = -1

    def _add_memory(self, image, pix_feat, prob, key):
        self.memory.initialize_sensory_if_needed(key, self.all_obj_ids)
        msk_value, sensory = self.network.encode_mask(image, pix_feat, self.memory.get_sensory(self.all_obj_ids), prob)
        self.memory.add_memory(key, msk_value, self.all_obj_ids)
        self.last_mem_ti = self.curr_ti
        self.memory.update_sensory(sensory, self.all_obj_ids)

    def _segment(self, key, pix_feat, update_sensory=True):
        memory_readout = self.memory.read(pix_feat, key, self.last_mask, self.network)
        sensory, _, pred_prob_with_bg = self.network.segment(pix_feat, memory_readout,
                                                             self.memory.get_sensory(self.all_obj_ids),
                                                             update_sensory=update_sensory)
        pred_prob_with_bg = pred_prob_with_bg[0]
        if update_sensory:
            self.memory.update_sensory(sensory, self.all_obj_ids)
        return pred_prob_with_bg

    def step(self, image, mask=None, objects=None):
        self.curr_ti += 1
        image = image.unsqueeze(0)  # add the batch dimension
        is_mem_frame = (self.curr_ti - self.last_mem_ti >= self.mem_every) or (mask is not None)
        need_segment = mask is None
        update_sensory = (self.curr_ti - self.last_mem_ti) in self.stagger_ti

        pix_feat, key = self.network.encode_image(image)
        if need_segment:
            pred_prob_with_bg = self._segment(key, pix_feat, update_sensory=update_sensory)
        if mask is not None:
            mask = (mask == objects[0]).float().unsqueeze(0)
            pred_prob_with_bg = torch.softmax(torch.cat([1 - mask, mask], 0) * 10, dim=0)

        self.last_mask = pred_prob_with_bg[1:].unsqueeze(0)
        if is_mem_frame:
            self._add_memory(image, pix_feat, self.last_mask, key)
        return pred_prob_with_bg

    def output_prob_to_mask(self, output_prob):
        return torch.argmax(output_prob, dim=0)


def get_default_model():
    torch.manual_seed(0)
    return CUTIE().eval()


rng = np.random.RandomState(0)
frames = [rng.randint(0, 255, (64, 64, 3), dtype=np.uint8) for _ in range(120)]
img = frames[0]
masks = torch.zeros(64, 64)
masks[16:48, 16:48] = 1
frame_iter = iter(frames[1:])

# add to ref frame
with torch.no_grad() and torch.cuda.amp.autocast():
    cutie = get_default_model()
    processor = InferenceCore(cutie, cfg=cutie.cfg)
    # the processor matches the shorter edge of the input to this size
    processor.max_internal_size = 120

    image = torch.from_numpy(img)
    image = image.permute(2, 0, 1) / 255
    image = image.to(device)

    masks = masks.long()
    masks = masks.to(device)

    output_prob = processor.step(image, masks, objects=[1])
    mask = processor.output_prob_to_mask(output_prob)
    mask = mask == 1

    frame = 1
    while True:
        img = next(frame_iter, None)
        ok = img is not None
        if not ok:
            break
        image = torch.from_numpy(img).permute(2, 0, 1) / 255
        image = image.to(device)
        output_prob = processor.step(image)
        mask = processor.output_prob_to_mask(output_prob)
        mask = mask == 1
        frame += 1
print(frame, 'frames')
