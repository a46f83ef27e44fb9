"""torchmem: find, explain and fix PyTorch memory problems.

``import torchmem`` is light: it imports neither torch nor rich, jinja2 or libcst. Each
public name is loaded from its module on first use, so ``torchmem.lint`` works on a
machine without torch, and ``torchmem.read()`` pays for torch only when called.

Example:
    >>> import torchmem
    >>> with torchmem.track() as t:            # doctest: +SKIP
    ...     y = model(x)
    >>> print(t.peak_delta)                      # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> module that defines it
_LAZY: dict[str, str] = {
    # errors and units (no torch)
    "TorchmemError": "torchmem.errors",
    "ReleasedTensorError": "torchmem.errors",
    "format_bytes": "torchmem.units",
    "parse_bytes": "torchmem.units",
    # measure
    "read": "torchmem.collect.readings",
    "Reading": "torchmem.model.readings",
    "track": "torchmem.collect.tracker",
    "Tracker": "torchmem.collect.tracker",
    "Monitor": "torchmem.collect.monitor",
    "Timeline": "torchmem.model.timeline",
    "census": "torchmem.collect.census",
    "Census": "torchmem.model.census",
    "shares_storage": "torchmem.collect.storage",
    "storage_info": "torchmem.collect.storage",
    "compare_modes": "torchmem.collect.modes",
    "profile_lines": "torchmem.doctor.lines_api",
    "LinesReport": "torchmem.doctor.lines_api",
    "fragmentation": "torchmem.collect.fragmentation",
    # manage
    "scope": "torchmem.scope.core",
    "scoped": "torchmem.scope.core",
    "ScopeReport": "torchmem.scope.core",
    "release": "torchmem.scope.release",
    "cleanup": "torchmem.scope.cleanup",
    "every": "torchmem.scope.cleanup",
    "offload": "torchmem.scope.offload",
    "onload": "torchmem.scope.offload",
    "snapshot": "torchmem.scope.snapshot",
    "snapshot_state": "torchmem.scope.snapshot",
    "restore_state": "torchmem.scope.snapshot",
    "explain_inplace": "torchmem.scope.inplace",
    "no_input_mutation": "torchmem.scope.inplace",
    "check_devices": "torchmem.scope.devices",
    # throughput and headroom
    "BufferPool": "torchmem.optimize.pool",
    "prefetch": "torchmem.optimize.prefetch",
    "chunked": "torchmem.optimize.chunked",
    "find_batch_size": "torchmem.optimize.batch_size",
    "LazyDataset": "torchmem.optimize.data",
    "check_dataloader": "torchmem.optimize.data",
    # plan
    "estimate": "torchmem.plan.estimate",
    "Estimate": "torchmem.model.estimate",
    "checkpointed": "torchmem.plan.wrap",
    "plan_checkpoints": "torchmem.plan.checkpoint",
    "CheckpointPlan": "torchmem.model.estimate",
    # diagnose inside a running program
    "DoctorSession": "torchmem.doctor.session",
    "leak_check": "torchmem.doctor.session",
    "holders": "torchmem.doctor.holders_api",
    "Holder": "torchmem.doctor.holders_api",
    # scale
    "compare_ranks": "torchmem.dist.ranks",
    "RankReport": "torchmem.model.ranks",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'torchmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext torchmem`` in IPython/Jupyter: the ``%%torchmem`` and
    ``%torchmem_doctor`` magics (:mod:`torchmem.integrations.notebook`; IPython is
    imported only here)."""
    from torchmem.integrations.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext torchmem``: remove the magics."""
    from torchmem.integrations.notebook import unload_ipython_extension as unload

    unload(ipython)
