"""What the doctor's walk measures per named path: :class:`PathStats` and :class:`Snapshot`.

Plain data only (strings and integers): no tensor and no object of the script.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PathStats", "Snapshot"]


@dataclass
class PathStats:
    """What one named path holds at a step boundary (plain data).

    Attributes:
        path: the expression as the user writes it (``self.history``).
        kind: ``local``, ``global``, ``attribute``, ``container``, ``closure`` or ``hook``.
        type: type name of the object at the path.
        depth: 0 for a variable, +1 per attribute/key/closure hop.
        root: the variable the path starts from.
        function: the function whose frame holds the root (``<module>`` for globals).
        file: that function's file (or the module file for globals).
        owner_class: for attribute paths, the class that owns the attribute.
        owner_file: the file defining ``owner_class`` (or the closure's function).
        items: ``len()`` of the object when it is a container, else None.
        tensors: tensors (by storage) first reached through this path.
        grad_tensors: of those, tensors that have a ``grad_fn``.
        storage_bytes: bytes of those tensors' storages.
        used_bytes: bytes those tensors actually use (``numel * itemsize``).
        saved_bytes: bytes of tensors saved for backward by graphs reached here.
        graph_nodes: autograd nodes reached here.
        live_nodes: nodes whose saved tensors are still there (graph never backpropagated).
        freed_nodes: nodes whose saved tensors were freed by a backward pass.
        max_chain: the most graph nodes reached from one single tensor.
        chain_numel: ``numel`` of that tensor.
        hooks: hook functions held (for module hook dicts).
        example: shape and dtype of the largest tensor reached, e.g. ``(64, 512) float32``.
    """

    path: str
    kind: str
    type: str
    depth: int
    root: str
    function: str | None = None
    file: str | None = None
    owner_class: str | None = None
    owner_file: str | None = None
    items: int | None = None
    tensors: int = 0
    grad_tensors: int = 0
    storage_bytes: int = 0
    used_bytes: int = 0
    saved_bytes: int = 0
    graph_nodes: int = 0
    live_nodes: int = 0
    freed_nodes: int = 0
    max_chain: int = 0
    chain_numel: int = 0
    hooks: int = 0
    example: str | None = None
    _example_bytes: int = 0

    @property
    def retained_bytes(self) -> int:
        """Storage bytes plus saved-for-backward bytes reached through this path."""
        return self.storage_bytes + self.saved_bytes

    @property
    def pinned_bytes(self) -> int:
        """Storage bytes the tensors here keep alive but do not use (views of bigger storages)."""
        return max(0, self.storage_bytes - self.used_bytes)


@dataclass
class Snapshot:
    """The per-path measurement of one step boundary.

    Attributes:
        step: the step number.
        paths: path -> stats, for every named path (variables, attributes, keys).
        owned_bytes: bytes of parameters, gradients, optimizer state and buffers.
        objects: objects walked; ``nodes``: graph nodes walked.
        truncated: the walk stopped at its budget.
        elapsed_s: time the walk took.
    """

    step: int
    paths: dict[str, PathStats] = field(default_factory=dict)
    owned_bytes: int = 0
    objects: int = 0
    nodes: int = 0
    truncated: bool = False
    elapsed_s: float = 0.0
