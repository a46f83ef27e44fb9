"""``torchmem.checkpointed()``: run chosen submodules under activation checkpointing.

The plan of :func:`torchmem.plan_checkpoints` is applied with it, around the training
loop; :func:`torchmem.estimate` simulates the same wrapping (``checkpoint=``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

from torch import nn

from torchmem.errors import UsageError

__all__ = ["checkpointed", "check_names"]


def check_names(model: nn.Module, names: Iterable[str], who: str) -> list[str]:
    """``names`` without repeats, each a submodule of ``model``.

    Raises:
        UsageError: a name that is not a submodule (or not a string), naming ``who``.
    """
    if isinstance(names, str):
        raise UsageError(
            f"torchmem.{who}: expected a list of submodule names, got the string {names!r}",
            tip=f"wrap it in a list: [{names!r}]",
        )
    wanted = list(dict.fromkeys(names))
    found = dict(model.named_modules())
    missing = [n for n in wanted if not isinstance(n, str) or n not in found]
    if missing:
        raise UsageError(
            f"torchmem.{who}: no submodule named {missing[0]!r} to checkpoint; expected a "
            "name from model.named_modules()",
            tip="names look like 'encoder.layers.3'; '' is the model itself",
        )
    return wanted


@contextlib.contextmanager
def checkpointed(model: nn.Module, names: Iterable[str]) -> Iterator[None]:
    """Run the named submodules of ``model`` under activation checkpointing meanwhile.

    Each module's ``forward`` goes through ``torch.utils.checkpoint.checkpoint(...,
    use_reentrant=False)``: its activations are dropped after the forward and recomputed
    during backward. Restored on exit, on error too.

    Raises:
        UsageError: a name that is not a submodule of ``model``.
    """
    from torch.utils.checkpoint import checkpoint

    wanted = check_names(model, names, "checkpointed")
    found = dict(model.named_modules())
    saved: list[tuple[nn.Module, Any]] = []
    try:
        for name in wanted:
            module = found[name]
            own = module.__dict__.get("forward", _ABSENT)
            inner = module.forward

            def forward(*a: Any, _inner: Any = inner, **k: Any) -> Any:
                return checkpoint(_inner, *a, use_reentrant=False, **k)

            module.forward = forward  # type: ignore[method-assign]
            saved.append((module, own))
        yield
    finally:
        for module, own in reversed(saved):
            if own is _ABSENT:
                del module.forward
            else:
                module.forward = own


_ABSENT = object()
