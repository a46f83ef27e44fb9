"""``torchmem.compare_ranks()``: every rank's memory, gathered and compared on every rank.

Call it on every rank of an initialised process group (``torchrun``, or
``torch.distributed.init_process_group``), at the same point of the program: each rank
reads its own device (:func:`torchmem.read`) and, with ``census=True``, takes a census
of its live tensors by role; one ``all_gather_object`` shares the figures, and every
rank gets the same :class:`~torchmem.model.ranks.RankReport`.

Cost: one reading (microseconds; ``exact=True`` or ``census=True`` add a census, tens of
ms) and one ``all_gather_object`` of about a kilobyte per rank. It is a collective: a
rank that does not call it makes the others wait, as any collective does.

Known limitations:
    * Each rank compares the device it names (default: its current device, so
      ``cuda:<local rank>`` under the usual ``torchrun`` set-up).
    * Objects go through pickle over the process group's backend: with NCCL, torch puts
      them on the current CUDA device first (a few KB).
"""

from __future__ import annotations

import socket
from dataclasses import replace
from typing import Any

from torchmem.errors import UsageError
from torchmem.model.ranks import RankReport, RankRow

__all__ = ["compare_ranks"]


def compare_ranks(
    device: Any = None,
    *,
    exact: bool = False,
    census: bool = False,
    tolerance: float = 0.1,
    group: Any = None,
) -> RankReport:
    """Gather every rank's memory and compare them (a collective: call it on every rank).

    Args:
        device: the device each rank reads (default: its current device).
        exact: read ``tensor_bytes`` too (the exact live tensor bytes; on the CPU it is
            then the figure compared).
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
        imbalanced: rank 0 uses 1.5 GiB more than rank 1 on cuda:0 (...); most of it is other
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
    name = resolve_device(device)
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
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, mine, group=group)
    rows = tuple(sorted((RankRow.from_dict(r) for r in gathered), key=lambda r: r.rank))
    return RankReport(rows, tolerance)

