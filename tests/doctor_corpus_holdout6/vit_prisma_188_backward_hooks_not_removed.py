# Source: https://github.com/Prisma-Multimodal/ViT-Prisma/issues/188
# Adapted: HookPoint, LensHandle and the hook methods of HookedRootModule as in
#   src/vit_prisma/prisma_tools/ at the last commit before the issue (aa5ff6a), trimmed to
#   what runs here; the report uses them from the EAP-IG attribution loop, which is written
#   here in that shape (per batch: an activation_difference buffer, forward hooks that add
#   the corrupted and subtract the clean activations into it, backward hooks that score the
#   gradients against it, both run inside model.hooks()); the HookedViT is a small stack of
#   residual MLP blocks with the same hook-point names, 40 random batches of 8 x 17 x 64
#   patch embeddings, cpu, seeded.
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.utils.hooks as hooks

torch.manual_seed(0)


@dataclass
class LensHandle:
    """Dataclass that holds information about a PyTorch hook."""

    hook: hooks.RemovableHandle
    is_permanent: bool = False
    context_level: Optional[int] = None


class HookPoint(nn.Module):
    def __init__(self):
        super().__init__()
        self.fwd_hooks: List[LensHandle] = []
        self.bwd_hooks: List[LensHandle] = []

        self.ctx = {}

        self.name = None

    def add_hook(
            self, hook, dir="fwd", is_permanent=False, level=None, prepend=False
    ) -> None:
        """
        If prepend is True, add this hook before all other hooks.
        """

        if dir == "fwd":

            def full_hook(module, module_input, module_output):
                return hook(module_output, hook=self)

            full_hook.__name__ = (
                hook.__repr__()
            )

            handle = self.register_forward_hook(full_hook)
            handle = LensHandle(handle, is_permanent, level)

            if prepend:
                self._forward_hooks.move_to_end(handle.hook.id, last=False)
                self.fwd_hooks.insert(0, handle)
            else:
                self.fwd_hooks.append(handle)

        elif dir == "bwd":

            def full_hook(module, module_input, module_output):
                return hook(module_output[0], hook=self)

            full_hook.__name__ = (
                hook.__repr__()
            )

            handle = self.register_backward_hook(full_hook)
            handle = LensHandle(handle, is_permanent, level)

            if prepend:
                self._backward_hooks.move_to_end(handle.hook.id, last=False)
                self.bwd_hooks.insert(0, handle)
            else:
                self.bwd_hooks.append(handle)

        else :
            raise ValueError(f"Invalid dir {dir}. dir must be 'fwd' or 'bwd'")

    def remove_hooks(self, dir="fwd", including_permanent=False, level=None) -> None:
        def _remove_hooks(handles: List[LensHandle]) -> List[LensHandle]:
            output_handles = []
            for handle in handles:
                if including_permanent:
                    handle.hook.remove()
                elif (not handle.is_permanent) and (level is None or handle.context_level == level):
                    handle.hook.remove()
                else:
                    output_handles.append(handle)
            return output_handles

        if dir == "fwd" or dir == "both":
            self.fwd_hooks = _remove_hooks(self.fwd_hooks)
        elif dir == "bwd" or dir == "both":
            self.bwd_hooks = _remove_hooks(self.bwd_hooks)
        else:
            raise ValueError(f"Invalid direction {dir}. dir must be 'fwd', 'bwd', or 'both'")

    def clear_context(self):
        del self.ctx
        self.ctx = {}

    def forward(self, x):
        return x


class HookedRootModule(nn.Module):

    def __init__(self, *args):
        super().__init__()

        self.is_caching = False
        self.context_level = 0

    def setup(self):
        self.mod_dict = {}
        self.hook_dict: Dict[str, HookPoint] = {}
        for name, module in self.named_modules():
            if name == "":
                continue
            module.name = name
            self.mod_dict[name] = module
            if isinstance(module, HookPoint):
                self.hook_dict[name] = module

    def hook_points(self):
        return self.hook_dict.values()

    def remove_all_hook_fns(self, dir="both", including_permanent=False, level=None):
        for hp in self.hook_points():
            hp.remove_hooks(dir, including_permanent, level)

    def clear_context(self):
        for hp in self.hook_points():
            hp.clear_context()

    def reset_hooks(
        self,
        clear_contexts=True,
        direction="both",
        including_permanent=False,
        level=None,
    ) -> None:
        if clear_contexts:
            self.clear_context()
        self.remove_all_hook_fns(direction, including_permanent, level)
        self.is_caching = False

    @contextmanager
    def hooks(
        self,
        fwd_hooks: List[Tuple[Union[str, Callable], Callable]] = [],
        bwd_hooks: List[Tuple[Union[str, Callable], Callable]] = [],
        reset_hooks_end: bool = True,
        clear_contexts: bool = True,
    ):
        try:
            self.context_level += 1

            for name, hook in fwd_hooks:
                self.mod_dict[name].add_hook(hook, dir="fwd", level=self.context_level)

            for name, hook in bwd_hooks:
                self.mod_dict[name].add_hook(hook, dir="bwd", level=self.context_level)
            yield self
        finally:
            if reset_hooks_end:
                self.reset_hooks(
                    clear_contexts=clear_contexts,
                    including_permanent=False,
                    level=self.context_level,
                )
            self.context_level -= 1


class Block(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.hook_resid_pre = HookPoint()
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.hook_mlp_out = HookPoint()

    def forward(self, x):
        x = self.hook_resid_pre(x)
        return x + self.hook_mlp_out(self.mlp(x))


class HookedViT(HookedRootModule):
    def __init__(self, n_layers=4, d_model=64, n_classes=10):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d_model) for _ in range(n_layers)])
        self.head = nn.Linear(d_model, n_classes)
        self.setup()

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x[:, 0])


def make_hooks_and_matrices(model, batch_size, n_pos, d_model, scores):
    n_forward = len(model.blocks)
    activation_difference = torch.zeros((batch_size, n_pos, n_forward, d_model))

    def activation_hook(index, activations, hook, add=True):
        acts = activations.detach()
        if add:
            activation_difference[:, :, index] += acts
        else:
            activation_difference[:, :, index] -= acts

    def gradient_hook(index, gradients, hook):
        grads = gradients.detach()
        scores[:index + 1] += torch.einsum('bpnd,bpd->n', activation_difference[:, :, :index + 1], grads)

    fwd_hooks_corrupted = [(f'blocks.{i}.hook_mlp_out', lambda a, hook, i=i: activation_hook(i, a, hook))
                           for i in range(n_forward)]
    fwd_hooks_clean = [(f'blocks.{i}.hook_mlp_out', lambda a, hook, i=i: activation_hook(i, a, hook, add=False))
                       for i in range(n_forward)]
    bwd_hooks = [(f'blocks.{i}.hook_resid_pre', lambda g, hook, i=i: gradient_hook(i, g, hook))
                 for i in range(n_forward)]
    return (fwd_hooks_corrupted, fwd_hooks_clean, bwd_hooks), activation_difference


if __name__ == '__main__':
    model = HookedViT()
    scores = torch.zeros(len(model.blocks))
    batch_size, n_pos, d_model = 8, 17, 64
    for batch in range(40):
        clean = torch.randn(batch_size, n_pos, d_model, requires_grad=True)
        corrupted = torch.randn(batch_size, n_pos, d_model)
        label = torch.randint(0, 10, (batch_size,))
        (fwd_hooks_corrupted, fwd_hooks_clean, bwd_hooks), activation_difference = \
            make_hooks_and_matrices(model, batch_size, n_pos, d_model, scores)
        with torch.no_grad():
            with model.hooks(fwd_hooks=fwd_hooks_corrupted):
                corrupted_logits = model(corrupted)
        with model.hooks(fwd_hooks=fwd_hooks_clean, bwd_hooks=bwd_hooks):
            logits = model(clean)
            metric_value = nn.functional.cross_entropy(logits, label)
            metric_value.backward()
    print(scores)
