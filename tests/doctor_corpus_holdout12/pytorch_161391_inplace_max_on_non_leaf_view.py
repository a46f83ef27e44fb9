# Source: https://github.com/pytorch/pytorch/issues/161391
#   code: the reproduction (mem_mb_print and the test body: a leaf tensor, a non-leaf
#   copy updated in place through a shifted window with torch.max, memory printed per step)
# Adapted: the unittest class and its CUDA skip dropped, the test body run on the cpu as a plain
#   function; the window is 24 wide as in the issue, the batch 64 instead of 8, 400 steps
#   instead of 100, memory printed every 50 steps; seeded.
import gc

import psutil
import torch


def mem_mb_print(step):
    gc.collect()
    process = psutil.Process().memory_info().rss
    print(f"step {step}: process: {process // 1024**1} KB, "
          f"PyTorch tensors: {sum(1 for o in gc.get_objects() if torch.is_tensor(o))}")


def test_cross_grad_max_cpu():
    device = torch.device("cpu")

    leaf = torch.randn(64, 1, 24, device=device, requires_grad=True)
    no_leaf = leaf * 1.0

    for step in range(400):
        window_left = no_leaf[:, :, :-1]
        no_leaf[:, :, 1:] = torch.max(
            no_leaf[:, :, 1:],
            window_left)
        if step % 50 == 0:
            mem_mb_print(step)
    return no_leaf


torch.manual_seed(0)
out = test_cross_grad_max_cpu()
print(out.shape, out.grad_fn is not None)
