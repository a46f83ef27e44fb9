"""What a census found, as plain data: storages, their roles, views that pin them.

A :class:`Census` lists live tensor *storages* (views of one storage count once), each
with its bytes, device, dtype, the shapes of the tensors viewing it and its **role**:

=================  ============================================================
role               meaning
=================  ============================================================
parameter          an ``nn.Parameter`` of a module (name: ``encoder.fc1.weight``)
buffer             a registered module buffer (name: ``bn.running_mean``)
gradient           a ``.grad`` (name: ``grad of encoder.fc1.weight``)
optimizer_state    a tensor in ``optimizer.state`` (name: ``exp_avg of fc1.weight``)
activation         saved for backward by a pending autograd graph
other              anything else (inputs, user variables, caches...)
=================  ============================================================

When a storage has several roles (tied or saved weights), the first in that table wins.

This module never imports torch: a census read back from JSON renders anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchmem.model._serde import Record
from torchmem.units import format_bytes

__all__ = [
    "ROLES",
    "CENSUS_SCHEMA_VERSION",
    "StorageEntry",
    "module_of",
    "MODULE_ROLES",
    "StorageGroup",
    "PinningView",
    "StorageInfo",
    "Census",
]

#: Roles in precedence order (a storage with two roles gets the first).
ROLES: tuple[str, ...] = (
    "parameter",
    "buffer",
    "gradient",
    "optimizer_state",
    "activation",
    "other",
)

#: Version of :meth:`Census.to_dict` output.
CENSUS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class StorageEntry(Record):
    """One live storage.

    Attributes:
        key: storage identity (``torchmem.collect.graph.storage_key``), valid only
            while that storage lives; use it to match entries of one census.
        nbytes: bytes of the whole storage.
        device: ``"cpu"``, ``"cuda:0"``...
        dtype: ``"float32"``... (dtype of the largest live tensor viewing it).
        shapes: distinct shapes of the live tensors viewing this storage, largest first.
        role: one of :data:`ROLES`.
        name: who owns it, e.g. ``"encoder.fc1.weight"``, ``"grad of fc.bias"``,
            ``"exp_avg of fc.weight"``, ``"saved by AddmmBackward0"``; None if unknown.
        n_tensors: live tensors seen viewing this storage.
        address: where the storage's memory starts on its device, for CUDA storages only
            (``None`` on the CPU): joins the caching allocator's blocks
            (``torch.cuda.memory._snapshot()``), whose allocation stacks it reads.
    """

    key: int
    nbytes: int
    device: str
    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    role: str
    name: str | None = None
    n_tensors: int = 1
    address: int | None = None


@dataclass(frozen=True)
class StorageGroup(Record):
    """All storages of one (role, device): exact totals, even when not listed."""

    role: str
    device: str
    storages: int
    nbytes: int


@dataclass(frozen=True)
class PinningView(Record):
    """A storage kept alive by views that use only a small part of it.

    ``y = x[0, :]; del x`` keeps all of ``x``'s storage: ``storage_bytes`` is what stays
    allocated, ``used_bytes`` what the largest live view actually addresses, so
    ``y.clone()`` (and dropping ``y``) would free ``storage_bytes - used_bytes``.
    """

    key: int
    storage_bytes: int
    used_bytes: int
    shape: tuple[int, ...]
    dtype: str
    device: str
    role: str = "other"
    name: str | None = None

    @property
    def wasted_bytes(self) -> int:
        """Bytes held but not addressed by any live view."""
        return self.storage_bytes - self.used_bytes


@dataclass(frozen=True)
class StorageInfo(Record):
    """How one tensor sits on its storage (see ``torchmem.storage_info``).

    Attributes:
        key: storage identity, equal for every view of one storage.
        device, dtype, shape, stride: of the tensor (stride in elements).
        storage_offset: first element of the tensor within the storage (elements).
        element_size: bytes per element.
        is_contiguous: ``t.is_contiguous()``.
        is_view: the tensor is a view of another tensor (``t._base is not None``).
        base_shape: shape of that base tensor, when it is alive.
        used_bytes: bytes of distinct elements this tensor addresses.
        span_bytes: bytes from its first to its last addressed element.
        storage_bytes: bytes of the whole storage (what stays allocated).
    """

    key: int
    device: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    element_size: int
    is_contiguous: bool
    is_view: bool
    base_shape: tuple[int, ...] | None
    used_bytes: int
    span_bytes: int
    storage_bytes: int

    @property
    def pinned_bytes(self) -> int:
        """Bytes of the storage this tensor keeps alive without addressing them."""
        return max(self.storage_bytes - self.used_bytes, 0)


#: ``grad of X``, ``exp_avg of X``: the storage belongs to the parameter ``X``
_OWNER = re.compile(r"^(?:grad|[A-Za-z_][A-Za-z0-9_]*) of (.+)$")

#: roles whose storages belong to a module
MODULE_ROLES = ("parameter", "buffer", "gradient", "optimizer_state")


def module_of(name: str | None, role: str) -> str | None:
    """The module that owns a listed storage, from its census name; None if not a module's.

    ``blocks.0.fc1.weight`` -> ``blocks.0.fc1``; ``grad of head.bias`` and ``exp_avg of
    head.bias`` -> ``head``; a parameter of the model itself (``weight``) -> ``(model)``.
    Activations (``saved by ...``) and other tensors belong to no module.
    """
    if not name or role not in MODULE_ROLES:
        return None
    match = _OWNER.match(name)
    path = match.group(1) if match else name
    if " " in path:
        return None
    module, _, _ = path.rpartition(".")
    return module or "(model)"


@dataclass(frozen=True)
class Census(Record):
    """Live tensor storages at one moment.

    Attributes:
        storages: listed storages, largest first: every storage with an owner role
            (parameter, buffer, gradient, optimizer state, activation) plus the
            largest ``other`` ones (``census(max_other=...)``).
        groups: exact totals for *all* storages by (role, device).
        pinning_views: storages pinned by views that address a small part of them.
        n_storages: number of live storages (listed or not).
        omitted_storages: ``other`` storages not listed in ``storages``.
        omitted_bytes: their bytes (counted in ``groups`` and every total).
        tensors_seen: tensors examined (views and graph-saved tensors included).
        graph_nodes: autograd nodes walked to find saved tensors.
        elapsed_s: wall time the census took.
        schema_version: :data:`CENSUS_SCHEMA_VERSION`.
    """

    storages: tuple[StorageEntry, ...] = ()
    pinning_views: tuple[PinningView, ...] = ()
    groups: tuple[StorageGroup, ...] = ()
    n_storages: int = 0
    omitted_storages: int = 0
    omitted_bytes: int = 0
    tensors_seen: int = 0
    graph_nodes: int = 0
    elapsed_s: float = 0.0
    schema_version: int = CENSUS_SCHEMA_VERSION

    def _rows(self) -> tuple[tuple[str, str, int], ...]:
        if self.groups:
            return tuple((g.role, g.device, g.nbytes) for g in self.groups)
        return tuple((e.role, e.device, e.nbytes) for e in self.storages)

    def bytes_by_role(self) -> dict[str, int]:
        """``{role: bytes}`` for every role of :data:`ROLES` (0 when absent)."""
        out = dict.fromkeys(ROLES, 0)
        for role, _, nbytes in self._rows():
            out[role] = out.get(role, 0) + nbytes
        return out

    def bytes_by_module(self) -> dict[str, int]:
        """``{module path: bytes}`` of the parameters, buffers, gradients and optimizer
        state each module owns (complete: every storage of those roles is listed), largest
        first; storages of the model itself count under ``(model)``."""
        out: dict[str, int] = {}
        for e in self.storages:
            module = module_of(e.name, e.role)
            if module is not None:
                out[module] = out.get(module, 0) + e.nbytes
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def bytes_by_device(self) -> dict[str, int]:
        """``{device: bytes}`` for every device with live storages."""
        out: dict[str, int] = {}
        for _, device, nbytes in self._rows():
            out[device] = out.get(device, 0) + nbytes
        return out

    @property
    def total_bytes(self) -> int:
        """Bytes of all live storages, each counted once."""
        return sum(n for _, _, n in self._rows())

    def top(self, n: int = 10, role: str | None = None) -> tuple[StorageEntry, ...]:
        """The ``n`` largest listed storages, optionally of one role."""
        rows = self.storages if role is None else tuple(e for e in self.storages if e.role == role)
        return rows[:n]

    def find(self, name: str) -> StorageEntry | None:
        """The listed storage with this exact name (e.g. ``"grad of fc.weight"``)."""
        for entry in self.storages:
            if entry.name == name:
                return entry
        return None

    def __repr__(self) -> str:
        roles = ", ".join(
            f"{role} {format_bytes(n)}" for role, n in self.bytes_by_role().items() if n
        )
        return (
            f"Census({format_bytes(self.total_bytes)} in {self.n_storages} storages"
            f"{': ' + roles if roles else ''}; {len(self.pinning_views)} pinning views)"
        )

