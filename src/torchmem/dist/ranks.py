"""``torchmem.compare_ranks()``: every rank's memory, gathered and compared on every rank.

Call it on every rank of an initialised process group (``torchrun``, or
``torch.distributed.init_process_group``), at the same point of the program: each rank
reads its own device (:func:`torchmem.read`) and, with ``census=True``, takes a census
of its live tensors by role; two ``all_gather`` calls share the figures (the lengths,
then the rows as JSON bytes in a ``uint8`` tensor: no pickle, no numpy), and every rank
gets the same :class:`~torchmem.model.ranks.RankReport`.

What is compared: on an accelerator, the allocator's ``allocated`` bytes; on the CPU,
the exact live tensor bytes (a census) unless ``exact=False`` asks for the C heap,
which also counts every non-tensor allocation. The verdict names the figure.

Cost: one reading (microseconds; on the CPU by default, and with ``exact=True`` or
``census=True``, a census: tens of ms) and two small ``all_gather`` collectives of
about a kilobyte per rank. It is a collective: a rank that does not call it makes the
others wait, as any collective does.

Known limitations:
    * Each rank compares the device it names (default: its current device, so
      ``cuda:<local rank>`` under the usual ``torchrun`` set-up).
    * The rows travel as tensors on the device the process group's backend needs: the
      current CUDA device for NCCL (a few KB), the CPU for gloo.
"""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from typing import Any

from torchmem.errors import DeviceError, UsageError
from torchmem.model.ranks import RankReport, RankRow

__all__ = ["compare_ranks"]


def compare_ranks(
    device: Any = None,
    *,
    exact: bool | None = None,
    census: bool = False,
    tolerance: float = 0.1,
    group: Any = None,
) -> RankReport:
    """Gather every rank's memory and compare them (a collective: call it on every rank).

    Args:
        device: the device each rank reads (default: its current device).
        exact: read ``tensor_bytes`` too (the exact live tensor bytes; on the CPU it is
            then the figure compared). Default (``None``): yes on the CPU, where the
            alternative, the C heap, counts far more than tensors; no on accelerators,
            where the allocator's ``allocated`` is exact already. ``exact=False`` on
            the CPU compares the C heap (and the verdict says so).
        census: also gather each rank's live tensor bytes by role, so an imbalance says
            which role holds the difference (implies ``exact``: one census gives both).
        tolerance: spread, as a fraction of the heaviest rank, above which the report
            calls the ranks imbalanced.
        group: the process group (default: the world).

    Returns:
        The same :class:`~torchmem.model.ranks.RankReport` on every rank.

    Raises:
        UsageError: no initialised process group, or a tolerance outside [0, 1].

    Example:
        >>> report = torchmem.compare_ranks(census=True)      # doctest: +SKIP
        >>> if dist.get_rank() == 0:                            # doctest: +SKIP
        ...     print(report.explain())
        imbalanced: rank 0 holds 1.5 GiB more allocated memory than rank 1 on cuda:0 (...)
    """
    import torch.distributed as dist

    from torchmem.collect.readings import read, reading_device, resolve_device

    if not 0 <= tolerance <= 1:
        raise UsageError(f"torchmem.compare_ranks: tolerance must be in [0, 1]; got {tolerance}")
    if not (dist.is_available() and dist.is_initialized()):
        raise UsageError(
            "torchmem.compare_ranks: no process group is initialised; expected "
            "torch.distributed.init_process_group() first",
            tip="run under torchrun, or call init_process_group() before comparing ranks",
        )
    try:
        name = resolve_device(device)
    except DeviceError as err:
        raise DeviceError(err.message.replace("torchmem.read:", "torchmem.compare_ranks:", 1),
                          tip=err.tip) from None
    if exact is None:
        exact = name == "cpu"
    roles: dict[str, int] | None = None
    if census:
        from torchmem.collect.census import census as take_census

        roles = {}
        for g in take_census(max_other=0).groups:
            if reading_device(g.device) == name:
                roles[g.role] = roles.get(g.role, 0) + g.nbytes
        # the census already counted every live storage: its total is tensor_bytes
        reading = replace(read(name), tensor_bytes=sum(roles.values()))
    else:
        reading = read(name, exact=exact)
    mine = RankRow(dist.get_rank(group), socket.gethostname(), reading, roles).to_dict()
    gathered = _all_gather_json(mine, group)
    rows = tuple(sorted((RankRow.from_dict(r) for r in gathered), key=lambda r: r.rank))
    return RankReport(rows, tolerance)


def _collective_device(group: Any) -> Any:
    """The device the group's backend moves tensors through (CUDA for NCCL)."""
    import torch
    import torch.distributed as dist

    try:  # what all_gather_object itself uses (private: guarded)
        from torch.distributed.distributed_c10d import _get_object_coll_device

        return torch.device(_get_object_coll_device(group))
    except Exception:  # noqa: BLE001 - older/newer torch: decide from the backend name
        backend = str(dist.get_backend(group)).lower()
        if "nccl" in backend and "gloo" not in backend:
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")


def _all_gather_json(value: Any, group: Any) -> list[Any]:
    """Every rank's ``value`` (JSON-ready), gathered on every rank.

    ``all_gather_object`` would pickle, and unpickle through ``tensor.numpy()``, which
    fails without numpy; here the JSON bytes travel in a ``uint8`` tensor: one
    ``all_gather`` of the lengths, one of the padded bytes.
    """
    import torch
    import torch.distributed as dist

    device = _collective_device(group)
    payload = json.dumps(value, separators=(",", ":")).encode("utf-8")
    world = dist.get_world_size(group)
    length = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    lengths = [torch.zeros_like(length) for _ in range(world)]
    dist.all_gather(lengths, length, group=group)
    sizes = [int(n.item()) for n in lengths]
    padded = torch.zeros(max(sizes), dtype=torch.uint8)
    padded[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    padded = padded.to(device)
    buffers = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(buffers, padded, group=group)
    return [json.loads(bytes(buf[:n].cpu().tolist()).decode("utf-8"))
            for buf, n in zip(buffers, sizes)]
