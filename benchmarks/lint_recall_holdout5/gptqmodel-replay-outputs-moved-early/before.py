# Source: https://github.com/ModelCloud/GPTQModel/blob/ebce4ae27a8b01ca55da331b4e9b622da15c6547/gptqmodel/looper/forward_executor.py
# Adapted excerpt, before the fix https://github.com/ModelCloud/GPTQModel/commit/a0cbbade33e3eeb2de8e278e09e55a86d2ece8f8
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-7 omitted)
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

import torch

from .. import DEVICE_THREAD_POOL
from ..nn_modules.hooked_linear import StopForward
from ..utils.attn_mask import normalize_seq_mask
from ..utils.logger import setup_logger
from ..utils.looper_helpers import (
    clone_module_for_devices,
    forward_batch_worker,
    rehome_module_to_device,
    select_forward_devices,
)
from ..utils.model import move_to, nested_move_to
from ..utils.torch import torch_sync

if TYPE_CHECKING:  # pragma: no cover - imports for typing only
    from logbar.progress import ProgressBar

    from .loop_processor import LoopProcessor
    from .module_looper import ModuleLooper


class ForwardExecutor:
    ...  # (lines 36-311 omitted)
    def run_parallel(
        self,
        *,
        module: torch.nn.Module,
        processor: "LoopProcessor",
        layer_inputs: List[List[torch.Tensor]],
        layer_input_kwargs: List[Dict[str, torch.Tensor]],
        position_ids: List[torch.Tensor],
        attention_masks: List[torch.Tensor],
        cur_layer_device: torch.device,
        is_lm_head_module: bool,
        shared_kv_cache_dict: Dict[int, torch.Tensor],
        layer_index: int,
        need_outputs: bool,
        reuse_kv: bool,
        devices: List[torch.device],
        progress_pb: "ProgressBar" | None = None,
        progress_title: Optional[str] = None,
        progress_stage: Optional[str] = None,
        progress_rows_per_batch: Optional[List[int]] = None,
        progress_total_rows: Optional[int] = None,
        clone_module_for_devices_fn=clone_module_for_devices,
        forward_batch_worker_fn=forward_batch_worker,
        device_thread_pool=DEVICE_THREAD_POOL,
    ) -> List[List[torch.Tensor]]:
        """Fan batches across device replicas and preserve result ordering."""
        ...  # (lines 338-399 omitted)
        moe_contexts = []
        try:
            for _device, replica in module_replicas.items():
                ...  # (lines 403-412 omitted)
            prev_kv = shared_kv_cache_dict.get(layer_index - 1) if reuse_kv else None
            results: Dict[int, torch.Tensor | tuple | None] = {}
            processed_rows = 0
            ...  # (lines 416-467 omitted)
            max_segment_length = 0
            for indices in device_segments.values():
                if len(indices) > max_segment_length:
                    max_segment_length = len(indices)

            for position in range(max_segment_length):
                futures = []
                for device in forward_devices:
                    segment_indices = device_segments.get(device, [])
                    if position >= len(segment_indices):
                        continue
                    batch_idx = segment_indices[position]
                    replica = module_replicas[device]
                    submitter = (
                        device_thread_pool.submit_serial
                        if device.type in ("cuda", "xpu", "mps")
                        else device_thread_pool.submit
                    )

                    futures.append(
                        submitter(
                            device,
                            forward_batch_worker_fn,
                            replica,
                            processor,
                            batch_idx,
                            layer_inputs[batch_idx],
                            layer_input_kwargs[batch_idx],
                            attention_masks[batch_idx],
                            position_ids[batch_idx] if position_ids else None,
                            gptq_model=self.looper.gptq_model,
                            support_batch_quantize=self.looper.support_batch_quantize,
                            is_lm_head_module=is_lm_head_module,
                            need_output=need_outputs,
                            reuse_kv=reuse_kv,
                            prev_kv=prev_kv,
                        )
                    )

                for fut in futures:
                    batch_idx, module_output, kv_next = fut.result()
                    if need_outputs and module_output is not None:
                        results[batch_idx] = module_output
                    if reuse_kv and kv_next is not None and shared_kv_cache_dict.get(layer_index) is None:
                        shared_kv_cache_dict[layer_index] = nested_move_to(kv_next, device=cur_layer_device)

                    rows_for_batch = batch_row_counts[batch_idx] if batch_idx < len(batch_row_counts) else 0
                    if rows_for_batch <= 0:
                        rows_for_batch = self.looper._batch_row_count(layer_inputs[batch_idx]) if layer_inputs and batch_idx < len(layer_inputs) else 1
                        rows_for_batch = max(rows_for_batch, 1)

                    processed_rows = min(processed_rows + rows_for_batch, total_rows)
                    if progress_pb is not None:
                        if progress_title:
                            progress_pb.title(progress_title)
                        progress_pb.current_iter_step = processed_rows
                        progress_pb.subtitle(f"{stage_label} rows {processed_rows}/{total_rows}").draw()
        finally:
            for ctx in moe_contexts:
                try:
                    ctx.__exit__(None, None, None)
                except Exception:
                    pass
            moe_contexts.clear()

        for dev in list(module_replicas.keys()):
            del module_replicas[dev]

        if not need_outputs:
            return []

        ordered_outputs: List[List[torch.Tensor]] = []
        for idx in range(total_batches):
            module_output = results.get(idx)
            if module_output is None:
                raise RuntimeError("Forward batch returned no output; data-parallel execution produced empty result.")
            primary = module_output[0] if isinstance(module_output, tuple) else module_output
            # Move output back to the same device where input was stored
            # This preserves calibration data placement when calibration_data_device is set
            calib_device_cfg = self.looper.gptq_model.quantize_config.calibration_data_device
            input_device = layer_inputs[idx][0].device if layer_inputs[idx] else cur_layer_device
            target_device = input_device if calib_device_cfg is not None else cur_layer_device
            primary = move_to(primary, device=target_device)
            ordered_outputs.append([primary])

        return ordered_outputs
