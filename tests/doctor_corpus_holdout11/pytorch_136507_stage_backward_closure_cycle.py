# Source: https://github.com/pytorch/pytorch/pull/136507
#   code: torch/distributed/pipelining/_backward.py (stage_backward) before the pull request,
#   as its description quotes it: the nested extract_tensors_with_grads calls itself through the
#   enclosing scope
# Adapted: stage_backward kept as it was before the pull request (the deprecated
#   outputs_with_grads_idxs path and the debug message of the exception dropped); the pipeline
#   schedule that calls it is reduced to one stage run by hand: a small MLP stage, 4 steps of 8
#   microbatches of 256x512 random activations each, the output gradient of a next stage
#   replaced by random gradients, SGD after each step; cpu, seeded.
from typing import List, Optional

import torch
import torch.nn as nn


def stage_backward(
    stage_output,
    output_grads,
    input_values,
):
    try:
        stage_output_tensors: List[torch.Tensor] = []
        output_grad_tensors: List[Optional[torch.Tensor]] = []

        def extract_tensors_with_grads(output_val, grad_val):
            if isinstance(output_val, torch.Tensor):
                if not output_val.requires_grad and output_val.grad_fn is None:
                    return
                assert isinstance(
                    grad_val, (torch.Tensor, type(None))
                ), f"Expected Tensor or None gradient but got {type(grad_val)}"
                stage_output_tensors.append(output_val)
                output_grad_tensors.append(grad_val)
            elif isinstance(output_val, (tuple, list)):
                if grad_val is None:
                    return
                assert isinstance(
                    grad_val, (tuple, list)
                ), f"grad_value expected to have type {type(output_val)} but got {type(grad_val)}"
                assert len(output_val) == len(grad_val)
                for ov, gv in zip(output_val, grad_val):
                    extract_tensors_with_grads(ov, gv)
            elif isinstance(output_val, dict):
                if grad_val is None:
                    return
                assert isinstance(grad_val, dict)
                assert set(output_val.keys()) == set(grad_val.keys())
                for k in output_val.keys():
                    extract_tensors_with_grads(output_val[k], grad_val[k])
            else:
                pass

        extract_tensors_with_grads(stage_output, output_grads)

        torch.autograd.backward(
            stage_output_tensors, grad_tensors=output_grad_tensors
        )

        grad_inputs = []
        for val in input_values:
            if isinstance(val, torch.Tensor):
                grad_inputs.append(val.grad)
            else:
                grad_inputs.append(None)

    except Exception as e:
        raise RuntimeError("Failed to run stage backward") from e

    return grad_inputs


torch.manual_seed(0)
stage_module = nn.Sequential(nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 512))
optimizer = torch.optim.SGD(stage_module.parameters(), lr=0.01)
n_microbatches = 8

for step in range(4):
    optimizer.zero_grad()
    for mb in range(n_microbatches):
        stage_input = torch.randn(256, 512).requires_grad_()
        stage_output = (stage_module(stage_input), stage_module(stage_input).sigmoid())
        output_grads = (torch.randn(256, 512), torch.randn(256, 512))
        grad_inputs = stage_backward(stage_output, output_grads, [stage_input])
        del stage_output, output_grads
    optimizer.step()
    print(step, grad_inputs[0].norm().item())
