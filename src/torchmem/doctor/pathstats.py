"""What the doctor's walk measures per named path: :class:`PathStats` and :class:`Snapshot`.

Plain data only (strings and integers): no tensor and no object of the script.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PathStats", "Snapshot", "Unreached"]


# slots: the probe keeps a dozen snapshots of these while the script runs, inside the
# heap it measures; a plain instance with more than 30 attributes loses CPython's
# shared-key __dict__ and takes several times the memory
@dataclass(slots=True)
class PathStats:
    """What one named path holds at a step boundary (plain data).

    Attributes:
        path: the expression as the user writes it (``self.history``).
        kind: ``local``, ``global``, ``attribute``, ``container``, ``closure``, ``hook``,
            ``grad`` (the ``.grad`` of a parameter that carries a ``grad_fn``) or
            ``internal`` (referenced inside an object implemented in C: see
            :mod:`torchmem.doctor.internals`).
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
        optimizer_bytes: of ``storage_bytes``, the state of optimizers reached here (and
            their parameters' gradients) that no top-level name owns.
        array_bytes: of ``storage_bytes``, tensors reached as the memory numpy arrays
            share (``t.numpy()``).
        graph_nodes: autograd nodes reached here.
        live_nodes: nodes whose saved tensors are still there (graph never backpropagated).
        freed_nodes: nodes whose saved tensors were freed by a backward pass.
        max_chain: the most graph nodes reached from one single tensor.
        chain_numel: ``numel`` of that tensor.
        hooks: hook functions held (for module hook dicts).
        hook_names: for a module hook dict, the names of the functions its last entries
            hold; hook_methods: the ``register_*`` methods that can have filled it (see
            :mod:`torchmem.doctor.hook_sites`).
        example: shape and dtype of the largest tensor reached, e.g. ``(64, 512) float32``.
        passes: the most graph edges into one leaf (``AccumulateGrad``) among the graphs
            walked here: how many forward passes through the same parameter they hold
            (1 for one step's graph, k for graphs chained over k steps).
        holds: what the object is made of, for the fix's validity (see
            :func:`torchmem.doctor.value_kinds.value_kinds`): the kinds of a container's
            last values, or a tensor's own kind.
        survived: of the tensors sampled at this path at the previous snapshot, the share
            still alive now (None: nothing was sampled). 0 means everything it held then
            was released: it was emptied or rebound, not kept.
        survived_next: the same share one step later (at the next step boundary): 0 means
            what it held lived for one step at most (a per-step buffer).
        orphaned: of the tensors sampled at this path at the previous snapshot, how many
            are still alive now although no walked path and no owned memory reaches them:
            something outside Python (autograd's C++) keeps what the path held.
        capacity: the most items the container can hold (a ``deque``'s ``maxlen``), or
            None when it is unbounded.
        item_bytes: for a container, the heap it takes with its items, estimated from
            ``sys.getsizeof`` (see :mod:`torchmem.doctor.item_sizes`); None otherwise.
        item_type: for a list, tuple, deque or dict, the type name of its last item
            (value), e.g. ``ndarray``; None otherwise.
        cache: for an ``lru_cache`` wrapper, (qualified name of the function it wraps,
            its file, the line of its first decorator, maxsize or None, entries now):
            see :mod:`torchmem.doctor.lru_caches`; None otherwise.
        graph_attrs: for an object (not a container), its attributes that hold a
            tensor with a ``grad_fn``, in ``__dict__`` order.
        item_attrs: for an object (not a container), (attribute, length) of its
            attributes that hold a list, dict or deque.
        ends: for a non-empty list or deque, ``id()`` of its first and last items (which
            end new items went to: :mod:`torchmem.doctor.list_ends`); None otherwise.
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
    optimizer_bytes: int = 0
    array_bytes: int = 0
    graph_nodes: int = 0
    live_nodes: int = 0
    freed_nodes: int = 0
    max_chain: int = 0
    chain_numel: int = 0
    hooks: int = 0
    hook_names: tuple[str, ...] = ()
    hook_methods: tuple[str, ...] = ()
    example: str | None = None
    holds: tuple[str, ...] = ()
    passes: int = 0
    survived: float | None = None
    survived_next: float | None = None
    capacity: int | None = None
    item_bytes: int | None = None
    item_type: str | None = None
    orphaned: int = 0
    cache: tuple[str, str, int, int | None, int] | None = None
    graph_attrs: tuple[str, ...] = ()
    item_attrs: tuple[tuple[str, int], ...] = ()
    ends: tuple[int, int] | None = None
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
        unreached: live tensors that no walked path and no owned memory reaches (see
            :class:`Unreached`); None when not measured.
        site: ``(file, line)`` the innermost user frame was at when the snapshot was
            taken (the call that ended the step); None when no user frame was on the stack.
    """

    step: int
    paths: dict[str, PathStats] = field(default_factory=dict)
    owned_bytes: int = 0
    objects: int = 0
    nodes: int = 0
    truncated: bool = False
    elapsed_s: float = 0.0
    unreached: Unreached | None = None
    site: tuple[str, int] | None = None


@dataclass
class Unreached:
    """Live tensors no variable of the script reaches, at one step boundary (plain data).

    Attributes:
        tensor_bytes: bytes of every live tensor storage the gc scan sees (plus
            gradients), reached or not: the script's tensor memory.
        tensors, bytes: storages that no walked path and no owned memory reaches.
        grad_cycles: of those, leaf tensors whose ``.grad`` carries a ``grad_fn``: the
            cycle ``tensor -> .grad -> grad_fn -> ... -> tensor`` that
            ``backward(create_graph=True)`` makes inside autograd, which neither
            reference counting nor ``gc`` frees.
        grad_cycle_bytes: bytes of those leaves and their gradients.
        grad_cycle_names: the names those leaves had where ``backward()`` ran -> count.
        param_grads: parameter path -> (bytes of its gradient, layout), for the
            script's top-level modules.
        gc_objects: objects the garbage collector tracks.
        graph_tensors: of the unreached tensors, those with a ``grad_fn``: graphs that
            only autograd's C++ keeps alive.
        self_held: of those, tensors that their own ``grad_fn`` holds through a
            ``saved_tensors_hooks`` pack hook that returned them
            (:func:`torchmem.collect.graph.held_by_own_graph`).
    """

    tensor_bytes: int = 0
    tensors: int = 0
    bytes: int = 0
    grad_cycles: int = 0
    grad_cycle_bytes: int = 0
    grad_cycle_names: dict[str, int] = field(default_factory=dict)
    param_grads: dict[str, tuple[int, str]] = field(default_factory=dict)
    gc_objects: int = 0
    graph_tensors: int = 0
    self_held: int = 0
