# Source: https://github.com/facebookresearch/sam2/issues/196
#   code: sam2/sam2_video_predictor.py (init_state, propagate_in_video,
#   _add_output_per_object, _run_single_frame_inference, _get_maskmem_pos_enc) and
#   sam2/modeling/sam2_base.py (_prepare_memory_conditioned_features) at commit 0db838b
# Adapted: the predictor's inference-state bookkeeping and the propagation loop kept as they
#   are (one object, a box on frame 0, no clicks added later); the Hiera image encoder, the
#   memory attention, the mask decoder and the memory encoder -> small convolutions with the
#   same output dictionary (bfloat16 maskmem_features, pred_masks, obj_ptr, a shared
#   maskmem_pos_enc), attending to the last num_maskmem=7 frames' memories and the last 16
#   frames' object pointers as SAM 2 does; the video -> 400 random 128x128 frames loaded up
#   front as init_state does; offload_state_to_cpu as in the reports; inference_mode as in the
#   demo; cpu, seeded.
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinySAM2VideoPredictor(nn.Module):
    num_maskmem = 7
    max_obj_ptrs_in_encoder = 16
    image_size = 128

    def __init__(self, hidden_dim=32, mem_dim=64):
        super().__init__()
        self.hidden_dim, self.mem_dim = hidden_dim, mem_dim
        self.image_encoder = nn.Sequential(
            nn.Conv2d(3, hidden_dim, 4, stride=4), nn.GELU(),
            nn.Conv2d(hidden_dim, hidden_dim, 3, padding=1))
        self.memory_attention = nn.Conv2d(hidden_dim + mem_dim, hidden_dim, 3, padding=1)
        self.ptr_proj = nn.Linear(hidden_dim, hidden_dim)
        self.mask_decoder = nn.Conv2d(hidden_dim, 1, 1)
        self.memory_encoder = nn.Conv2d(hidden_dim + 1, mem_dim, 3, padding=1)
        self.maskmem_tpos_enc = nn.Parameter(torch.zeros(self.num_maskmem, 1, mem_dim, 1, 1))
        self.device = torch.device("cpu")

    def init_state(self, video_frames, offload_state_to_cpu=True):
        inference_state = {}
        inference_state["images"] = video_frames
        inference_state["num_frames"] = len(video_frames)
        inference_state["device"] = self.device
        inference_state["storage_device"] = torch.device("cpu")
        inference_state["point_inputs_per_obj"] = {}
        inference_state["mask_inputs_per_obj"] = {}
        inference_state["cached_features"] = {}
        inference_state["constants"] = {}
        inference_state["obj_id_to_idx"] = OrderedDict()
        inference_state["obj_idx_to_id"] = OrderedDict()
        inference_state["obj_ids"] = []
        inference_state["output_dict"] = {
            "cond_frame_outputs": {},  # dict containing {frame_idx: <out>}
            "non_cond_frame_outputs": {},  # dict containing {frame_idx: <out>}
        }
        inference_state["output_dict_per_obj"] = {}
        inference_state["consolidated_frame_inds"] = {
            "cond_frame_outputs": set(),
            "non_cond_frame_outputs": set(),
        }
        inference_state["frames_already_tracked"] = {}
        self._get_image_feature(inference_state, frame_idx=0, batch_size=1)
        return inference_state

    def add_new_box(self, inference_state, frame_idx, obj_id, box):
        obj_idx = len(inference_state["obj_ids"])
        inference_state["obj_id_to_idx"][obj_id] = obj_idx
        inference_state["obj_idx_to_id"][obj_idx] = obj_id
        inference_state["obj_ids"].append(obj_id)
        inference_state["output_dict_per_obj"][obj_idx] = {
            "cond_frame_outputs": {}, "non_cond_frame_outputs": {}}
        mask = torch.zeros(1, 1, self.image_size, self.image_size)
        x0, y0, x1, y1 = box
        mask[..., y0:y1, x0:x1] = 1.0
        current_out, _ = self._run_single_frame_inference(
            inference_state, inference_state["output_dict"], frame_idx, 1,
            is_init_cond_frame=True, mask_inputs=mask)
        inference_state["output_dict"]["cond_frame_outputs"][frame_idx] = current_out
        inference_state["consolidated_frame_inds"]["cond_frame_outputs"].add(frame_idx)
        self._add_output_per_object(inference_state, frame_idx, current_out, "cond_frame_outputs")

    def _get_image_feature(self, inference_state, frame_idx, batch_size):
        image, backbone_out = inference_state["cached_features"].get(frame_idx, (None, None))
        if backbone_out is None:
            image = inference_state["images"][frame_idx].float().unsqueeze(0)
            backbone_out = self.image_encoder(image)
            inference_state["cached_features"] = {frame_idx: (image, backbone_out)}
        return image.expand(batch_size, -1, -1, -1), backbone_out.expand(batch_size, -1, -1, -1)

    def _prepare_memory_conditioned_features(self, frame_idx, is_init_cond_frame, pix_feat,
                                             output_dict, num_frames):
        if is_init_cond_frame:
            return pix_feat, None
        t_pos_and_prevs = [(0, out) for out in output_dict["cond_frame_outputs"].values()]
        for t_pos in range(1, self.num_maskmem):
            prev_frame_idx = frame_idx - (self.num_maskmem - t_pos)
            t_pos_and_prevs.append((t_pos, output_dict["non_cond_frame_outputs"].get(prev_frame_idx)))
        memory = 0
        for t_pos, prev in t_pos_and_prevs:
            if prev is None:
                continue
            feats = prev["maskmem_features"].to(pix_feat.device).float()
            memory = memory + feats + prev["maskmem_pos_enc"][-1] + self.maskmem_tpos_enc[self.num_maskmem - t_pos - 1]
        ptrs = [out["obj_ptr"] for out in output_dict["cond_frame_outputs"].values()]
        for t_diff in range(1, min(num_frames, self.max_obj_ptrs_in_encoder)):
            out = output_dict["non_cond_frame_outputs"].get(frame_idx - t_diff)
            if out is not None:
                ptrs.append(out["obj_ptr"])
        obj_ptrs = torch.stack(ptrs, dim=0).mean(0)
        fused = self.memory_attention(torch.cat([pix_feat, memory.expand(pix_feat.shape[0], -1, -1, -1)], 1))
        return fused + obj_ptrs[:, :, None, None], obj_ptrs

    def track_step(self, frame_idx, is_init_cond_frame, pix_feat, mask_inputs, output_dict, num_frames):
        fused, _ = self._prepare_memory_conditioned_features(
            frame_idx, is_init_cond_frame, pix_feat, output_dict, num_frames)
        if mask_inputs is not None:
            low_res_masks = F.interpolate(mask_inputs, size=fused.shape[-2:]) * 20 - 10
        else:
            low_res_masks = self.mask_decoder(fused)
        high_res_masks = F.interpolate(low_res_masks, size=(self.image_size, self.image_size),
                                       mode="bilinear", align_corners=False)
        obj_ptr = self.ptr_proj(fused.mean((-2, -1)))
        maskmem_features = self.memory_encoder(torch.cat([pix_feat, torch.sigmoid(low_res_masks)], 1))
        pos = torch.linspace(-1, 1, maskmem_features.shape[-1])
        maskmem_pos_enc = [(pos[None, :] + pos[:, None]).expand(
            maskmem_features.shape[0], self.mem_dim, -1, -1)]
        return {"pred_masks": low_res_masks, "pred_masks_high_res": high_res_masks,
                "obj_ptr": obj_ptr, "maskmem_features": maskmem_features,
                "maskmem_pos_enc": maskmem_pos_enc}

    def _run_single_frame_inference(self, inference_state, output_dict, frame_idx, batch_size,
                                    is_init_cond_frame, mask_inputs=None):
        _, pix_feat = self._get_image_feature(inference_state, frame_idx, batch_size)
        current_out = self.track_step(frame_idx, is_init_cond_frame, pix_feat, mask_inputs,
                                      output_dict, inference_state["num_frames"])

        # optionally offload the output to CPU memory to save GPU space
        storage_device = inference_state["storage_device"]
        maskmem_features = current_out["maskmem_features"]
        if maskmem_features is not None:
            maskmem_features = maskmem_features.to(torch.bfloat16)
            maskmem_features = maskmem_features.to(storage_device, non_blocking=True)
        pred_masks_gpu = current_out["pred_masks"]
        pred_masks = pred_masks_gpu.to(storage_device, non_blocking=True)
        # "maskmem_pos_enc" is the same across frames, so we only need to store one copy of it
        maskmem_pos_enc = self._get_maskmem_pos_enc(inference_state, current_out)
        # object pointer is a small tensor, so we always keep it on GPU memory for fast access
        obj_ptr = current_out["obj_ptr"]
        # make a compact version of this frame's output to reduce the state size
        compact_current_out = {
            "maskmem_features": maskmem_features,
            "maskmem_pos_enc": maskmem_pos_enc,
            "pred_masks": pred_masks,
            "obj_ptr": obj_ptr,
        }
        return compact_current_out, pred_masks_gpu

    def _get_maskmem_pos_enc(self, inference_state, current_out):
        model_constants = inference_state["constants"]
        out_maskmem_pos_enc = current_out["maskmem_pos_enc"]
        if out_maskmem_pos_enc is not None:
            if "maskmem_pos_enc" not in model_constants:
                maskmem_pos_enc = [x[0:1].clone() for x in out_maskmem_pos_enc]
                model_constants["maskmem_pos_enc"] = maskmem_pos_enc
            else:
                maskmem_pos_enc = model_constants["maskmem_pos_enc"]
            batch_size = out_maskmem_pos_enc[0].size(0)
            expanded_maskmem_pos_enc = [
                x.expand(batch_size, -1, -1, -1) for x in maskmem_pos_enc
            ]
        else:
            expanded_maskmem_pos_enc = None
        return expanded_maskmem_pos_enc

    def _add_output_per_object(self, inference_state, frame_idx, current_out, storage_key):
        maskmem_features = current_out["maskmem_features"]
        maskmem_pos_enc = current_out["maskmem_pos_enc"]
        output_dict_per_obj = inference_state["output_dict_per_obj"]
        for obj_idx, obj_output_dict in output_dict_per_obj.items():
            obj_slice = slice(obj_idx, obj_idx + 1)
            obj_out = {
                "maskmem_features": None,
                "maskmem_pos_enc": None,
                "pred_masks": current_out["pred_masks"][obj_slice],
                "obj_ptr": current_out["obj_ptr"][obj_slice],
            }
            if maskmem_features is not None:
                obj_out["maskmem_features"] = maskmem_features[obj_slice]
            if maskmem_pos_enc is not None:
                obj_out["maskmem_pos_enc"] = [x[obj_slice] for x in maskmem_pos_enc]
            obj_output_dict[storage_key][frame_idx] = obj_out

    def propagate_in_video(self, inference_state):
        output_dict = inference_state["output_dict"]
        consolidated_frame_inds = inference_state["consolidated_frame_inds"]
        obj_ids = inference_state["obj_ids"]
        num_frames = inference_state["num_frames"]
        batch_size = len(obj_ids)
        start_frame_idx = min(output_dict["cond_frame_outputs"])
        processing_order = range(start_frame_idx, num_frames)
        for frame_idx in processing_order:
            if frame_idx in consolidated_frame_inds["cond_frame_outputs"]:
                storage_key = "cond_frame_outputs"
                current_out = output_dict[storage_key][frame_idx]
                pred_masks = current_out["pred_masks"]
            else:
                storage_key = "non_cond_frame_outputs"
                current_out, pred_masks = self._run_single_frame_inference(
                    inference_state=inference_state,
                    output_dict=output_dict,
                    frame_idx=frame_idx,
                    batch_size=batch_size,
                    is_init_cond_frame=False,
                )
                output_dict[storage_key][frame_idx] = current_out
            # Create slices of per-object outputs for subsequent interaction with each
            # individual object after tracking.
            self._add_output_per_object(
                inference_state, frame_idx, current_out, storage_key
            )
            inference_state["frames_already_tracked"][frame_idx] = {"reverse": False}
            video_res_masks = F.interpolate(pred_masks, size=(self.image_size, self.image_size),
                                            mode="bilinear", align_corners=False)
            yield frame_idx, obj_ids, video_res_masks


torch.manual_seed(0)
predictor = TinySAM2VideoPredictor().eval()
frames = [torch.rand(3, 128, 128) for _ in range(400)]

with torch.inference_mode():
    state = predictor.init_state(frames, offload_state_to_cpu=True)
    predictor.add_new_box(state, frame_idx=0, obj_id=1, box=(40, 40, 90, 90))
    areas = []
    for frame_idx, object_ids, masks in predictor.propagate_in_video(state):
        mask = (masks[0][0] > 0.0).cpu().numpy()
        areas.append(int(mask.sum()))
        if frame_idx % 100 == 0:
            print(f"frame {frame_idx}: mask area {areas[-1]}")
