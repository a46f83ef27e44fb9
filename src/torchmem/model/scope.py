"""Records of tensor-lifetime management (no torch).

* :class:`ScopeReport` -- what a :func:`torchmem.scope` created, kept, protected and
  released.
* :class:`CleanupReport` -- what one :func:`torchmem.cleanup` freed and what it cost.
* :class:`InplaceVerdict` -- whether an in-place op on a tensor is safe now, and why
  (:func:`torchmem.explain_inplace`).
* :class:`Placement` / :class:`DeviceReport` -- where a model's parameters, buffers and
  the inputs live, and the mismatches among them (:func:`torchmem.check_devices`).

All are frozen and round-trip through JSON with ``to_dict()``/``from_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchmem.model._serde import Record
from torchmem.units import format_bytes

__all__ = [
    "ScopeReport",
    "CleanupReport",
    "InplaceVerdict",
    "Placement",
    "DeviceReport",
    "PROTECT_REASONS",
    "INPLACE_OUTCOMES",
]

#: why a scope left a storage alive although nobody kept it (keys of
#: :attr:`ScopeReport.protected`)
PROTECT_REASONS: tuple[str, ...] = (
    "kept",  # passed to keep() (counted in ScopeReport.kept, not in protected)
    "saved_for_backward",  # saved by the autograd graph of a kept tensor
    "autograd",  # made by a backward pass: gradients and their helpers
    "optimizer_state",  # made by optimizer.step(): exp_avg, momentum buffers...
    "module",  # registered as a parameter or buffer of an nn.Module
    "leaf_requires_grad",  # a leaf tensor with requires_grad=True (a parameter-to-be)
    "unseen_holder",  # held by something torchmem cannot see (``.data =``, C++ ...)
    "not_resizable",  # memory torch cannot free in place (shared memory, from_blob)
    "outer_keep",  # kept by an enclosing scope
)


@dataclass(frozen=True)
class ScopeReport(Record):
    """What one :func:`torchmem.scope` did.

    Storages are counted, not tensor objects: a tensor and its views are one storage.

    Attributes:
        location: ``file:line`` where the scope was entered.
        created: storages created by ops inside the scope (nested scopes included).
        created_bytes: their bytes when created.
        freed_inside: storages that died before the exit (refcount did its job).
        kept: storages passed on by :meth:`Scope.keep` (to the caller, or the parent scope).
        kept_bytes: their bytes.
        released: storages the exit freed although something still referenced them.
        released_bytes: their bytes.
        released_tensors: tensor objects turned into released tensors (using one raises
            :class:`~torchmem.errors.ReleasedTensorError`).
        protected: reason -> number of storages left alive by the ownership rules.
        protected_bytes: bytes of those storages.
        peak_bytes: highest bytes of scope-created storages alive at once.
        error: name of the exception that ended the scope, or ``None``.
    """

    location: str
    created: int = 0
    created_bytes: int = 0
    freed_inside: int = 0
    kept: int = 0
    kept_bytes: int = 0
    released: int = 0
    released_bytes: int = 0
    released_tensors: int = 0
    protected: dict[str, int] = field(default_factory=dict)
    protected_bytes: int = 0
    peak_bytes: int = 0
    error: str | None = None

    def __repr__(self) -> str:
        parts = [f"created {self.created} ({format_bytes(self.created_bytes)})"]
        if self.freed_inside:
            parts.append(f"freed inside {self.freed_inside}")
        if self.kept:
            parts.append(f"kept {self.kept} ({format_bytes(self.kept_bytes)})")
        if self.released:
            n = self.released_tensors
            tensors = f", {n} tensor{'s' if n != 1 else ''}" if n else ""
            parts.append(f"released {self.released} ({format_bytes(self.released_bytes)}{tensors})")
        reasons = {r: n for r, n in self.protected.items() if n}
        if reasons:
            why = ", ".join(f"{r} {n}" for r, n in reasons.items())
            parts.append(f"protected {sum(reasons.values())} "
                         f"({format_bytes(self.protected_bytes)}: {why})")
        if self.peak_bytes:
            parts.append(f"peak {format_bytes(self.peak_bytes)}")
        if self.error:
            parts.append(f"ended by {self.error}")
        return f"ScopeReport({self.location}: storages {', '.join(parts)})"


@dataclass(frozen=True)
class CleanupReport(Record):
    """What one :func:`torchmem.cleanup` freed and what it cost.

    Attributes:
        collected: objects the Python garbage collector found unreachable.
        seconds: wall time of the whole cleanup.
        gc_seconds: of which ``gc.collect()``.
        heap_freed: bytes the C heap shrank by (CPU tensors freed by the collection,
            minus anything other threads allocated meanwhile); ``None`` off glibc.
        device: the accelerator that was emptied (``"cuda:0"``...), or ``None``.
        device_freed: bytes of tensor memory the collection freed on that device.
        cache_released: bytes the caching allocator returned to the driver
            (``empty_cache``).
    """

    collected: int
    seconds: float
    gc_seconds: float
    heap_freed: int | None = None
    device: str | None = None
    device_freed: int | None = None
    cache_released: int | None = None


#: values of :attr:`InplaceVerdict.outcome`
INPLACE_OUTCOMES: tuple[str, ...] = (
    "safe",  # the in-place op works and backward stays correct
    "error_now",  # the in-place op itself raises
    "error_at_backward",  # the op works, backward through the named nodes raises
    "already_modified",  # a saved version was already overwritten: backward will raise
    "unknown",  # no searched graph reaches the tensor: no evidence either way
)


@dataclass(frozen=True)
class InplaceVerdict(Record):
    """Whether an in-place operation on a tensor is safe now, and why.

    Attributes:
        safe: True when both the in-place op and a later backward work, as far as a
            searched graph shows (never True without that evidence).
        outcome: one of :data:`INPLACE_OUTCOMES`.
        reason: one sentence in autograd's terms.
        nodes: graph nodes that saved this tensor's storage (``"SigmoidBackward0"``...).
        fix: what to do instead, or ``""`` when safe.
        checked_roots: number of graph roots searched for consumers; ``0`` means only
            the tensor's own ``grad_fn`` was checked.
    """

    safe: bool
    outcome: str
    reason: str
    nodes: tuple[str, ...] = ()
    fix: str = ""
    checked_roots: int = 0


@dataclass(frozen=True)
class Placement(Record):
    """One tensor's place: which role, name, device and dtype.

    Attributes:
        role: ``"parameter"``, ``"buffer"`` or ``"input"``.
        name: parameter/buffer name, or ``input[0]``, ``input[1]['mask']``...
        device: ``"cpu"``, ``"cuda:0"``...
        dtype: ``"float32"``...
        nbytes: bytes the tensor's elements occupy.
    """

    role: str
    name: str
    device: str
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class DeviceReport(Record):
    """Where a model and its inputs live, and what does not match.

    Attributes:
        placements: every parameter, buffer and input tensor.
        devices: device -> bytes on it (parameters, buffers and inputs together).
        problems: human-readable mismatches, empty when consistent.
    """

    placements: tuple[Placement, ...] = ()
    devices: dict[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing mismatches."""
        return not self.problems
