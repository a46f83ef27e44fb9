"""Every rule family; importing this package registers all rules in the registry.

Families (the hundreds digit of the code):

- ``TMM1xx`` :mod:`~torchmem.lint.rules.graph`: autograd graphs kept alive across iterations
  (TMM102 in :mod:`~torchmem.lint.rules.recurrent`, TMM103 in
  :mod:`~torchmem.lint.rules.evaluation`, TMM104 in :mod:`~torchmem.lint.rules.retain`, TMM105 in
  :mod:`~torchmem.lint.rules.lightning`, TMM106 in
  :mod:`~torchmem.lint.rules.devices`, TMM107 in :mod:`~torchmem.lint.rules.function_ctx`, TMM108 in
  :mod:`~torchmem.lint.rules.hook_records`, TMM109 in
  :mod:`~torchmem.lint.rules.loaded_checkpoint`, TMM110 and TMM111 in
  :mod:`~torchmem.lint.rules.memoizers`, TMM112 in :mod:`~torchmem.lint.rules.hook_repeats`, TMM113 in
  :mod:`~torchmem.lint.rules.self_cycles`, TMM114 in :mod:`~torchmem.lint.rules.jit_repeats`, TMM115 in
  :mod:`~torchmem.lint.rules.known_leaks`, TMM116 and TMM117 in
  :mod:`~torchmem.lint.rules.grad_mode_noops`).
- ``TMM2xx`` :mod:`~torchmem.lint.rules.loops`: per-step work that belongs outside the loop.
- ``TMM3xx`` :mod:`~torchmem.lint.rules.views`: views that keep a larger storage alive.
- ``TMM4xx`` :mod:`~torchmem.lint.rules.autograd`: unsafe, deprecated or failing autograd APIs.
- ``TMM5xx`` :mod:`~torchmem.lint.rules.training`: training-loop correctness.
- ``TMM6xx`` :mod:`~torchmem.lint.rules.amp`: mixed-precision misuse (``GradScaler``,
  ``autocast``).
- ``TMM9xx`` :mod:`~torchmem.lint.rules.opinionated`: opinionated performance rules (off by default;
  TMM904 and TMM905 in :mod:`~torchmem.lint.rules.intermediates`).
"""

from __future__ import annotations

from torchmem.lint.rules import (  # noqa: F401 (importing registers the rules)
    amp,
    autograd,
    devices,
    evaluation,
    function_ctx,
    grad_mode_noops,
    graph,
    hook_records,
    hook_repeats,
    intermediates,
    jit_repeats,
    known_leaks,
    lightning,
    loaded_checkpoint,
    loops,
    memoizers,
    opinionated,
    recurrent,
    retain,
    self_cycles,
    training,
    views,
)

#: family prefix -> (module, title), in docs order
FAMILIES = {
    "TMM1": (graph, "Autograd graphs kept alive"),
    "TMM2": (loops, "Per-step work in loops"),
    "TMM3": (views, "Views that keep storage alive"),
    "TMM4": (autograd, "Autograd and storage APIs"),
    "TMM5": (training, "Training-loop correctness"),
    "TMM6": (amp, "Mixed precision"),
    "TMM9": (opinionated, "Opinionated performance rules (off by default)"),
}

__all__ = ["FAMILIES"]
