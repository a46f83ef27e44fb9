"""Bring every rank's capture to rank 0 at the end of ``torchrun ... -m torchmem doctor``.

Each rank of a ``torchrun`` job runs its own doctor and records its own capture; rank 0
then merges them into one report (:func:`torchmem.analyze.ranks.merge_ranks`). Two ways
bring the captures over, tried in this order:

* **torchrun's key-value store.** ``torchrun`` hosts a ``TCPStore`` in its agent process
  at ``MASTER_ADDR:MASTER_PORT`` (``TORCHELASTIC_USE_AGENT_STORE=True``) for the whole
  job, whether or not the script still has a process group. Every rank ``set``\\s its
  capture's JSON under a key of this run (run id and restart count) and goes on to
  exit (rank 0 sets nothing); rank 0 polls for the others' keys, reads and deletes them.
* **the files next to rank 0's own** (``--json run.json``: ``run.rank1.json``...), when
  there is no agent store (a job launched without ``torchrun``): rank 0 waits for each
  rank's file, written since its own run started.

Not a collective on purpose: an ``all_gather`` at exit hangs when a rank never reaches
it (it crashed, was stopped by ``--steps`` elsewhere, or its script destroyed the process
group while another's did not); a store key or a file that does not come is only a
missing rank once ``timeout`` has passed. Rank 0 never waits longer than ``timeout``;
the other ranks never wait (one ``set``, bounded by a connect timeout). Nothing here
raises: a failure is a note in the result. Cost: one JSON encoding of the capture and one
store round trip per rank (a capture is tens of KB to a few MB); rank 0 polls every
0.1 s.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from torchmem.model.capture import Capture

__all__ = ["Gathered", "gather_captures", "distributed_rank", "KEY_PREFIX", "POLL_S"]

#: prefix of the store keys torchmem writes (one per rank, deleted once read)
KEY_PREFIX = "torchmem/capture"
#: how often rank 0 looks for the captures still missing
POLL_S = 0.1
#: longest a rank waits to connect to the agent store
CONNECT_S = 10.0


@dataclass
class Gathered:
    """What :func:`gather_captures` brought to rank 0 (or, on another rank, how sharing went).

    Attributes:
        captures: ``(source, capture)`` pairs, rank 0's own first (empty on other ranks).
        world_size: ``WORLD_SIZE`` of the run.
        notes: sentences about what could not be brought (a missing rank, a bad file).
        via: ``"store"``, ``"files"`` or ``""`` (nothing could be tried).
    """

    captures: list[tuple[str, Capture]] = field(default_factory=list)
    world_size: int = 1
    notes: list[str] = field(default_factory=list)
    via: str = ""


def distributed_rank(env: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """``(rank, world_size)`` of a process of a job of more than one rank, else None."""
    env = os.environ if env is None else env
    try:
        rank, world = int(env.get("RANK", "")), int(env.get("WORLD_SIZE", ""))
    except ValueError:
        return None
    return (rank, world) if world > 1 and 0 <= rank < world else None


def _agent_store(env: Mapping[str, str], timeout: float) -> Any:
    """A client of torchrun's agent store, or None outside torchrun."""
    if env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        return None
    import torch.distributed as dist

    return dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                         timeout=_dt.timedelta(seconds=timeout), wait_for_workers=False)


def _key(env: Mapping[str, str], rank: int) -> str:
    run = env.get("TORCHELASTIC_RUN_ID", "none")
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"{KEY_PREFIX}/{run}/{restart}/{rank}"


def _ranks_text(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def gather_captures(capture: Capture, *, source: str, json_path: str | None = None,
                    timeout: float = 60.0, env: Mapping[str, str] | None = None,
                    file_of: Callable[[int], str] | None = None) -> Gathered | None:
    """Share this rank's capture; on rank 0, gather every rank's.

    Args:
        capture: this rank's capture.
        source: how the report names rank 0's capture (its file, or ``"rank 0"``).
        json_path: the ``--json`` path every rank was given (before ``rank_path``), for
            the files fallback.
        timeout: seconds rank 0 waits for the other ranks, in all.
        env: the environment (default ``os.environ``).
        file_of: the file rank ``r`` writes (default: from ``json_path`` as
            :func:`torchmem.cli._script_args.rank_path` names it).

    Returns:
        None outside a job of several ranks; else what was gathered: on rank 0, every
        capture it has (its own first); on the other ranks, no capture (and a note
        if theirs could not be shared). Never raises.
    """
    env = os.environ if env is None else env
    known = distributed_rank(env)
    if known is None:
        return None
    rank, world = known
    result = Gathered(world_size=world)
    try:
        store = _agent_store(env, min(CONNECT_S, max(timeout, 1.0)))
    except Exception as err:  # noqa: BLE001 - the agent may be gone: no exchange
        store = None
        result.notes.append(f"torchrun's store cannot be reached ({err})")
    if rank != 0:
        if store is not None:
            try:
                store.set(_key(env, rank), capture_text(capture))
                result.via = "store"
            except Exception as err:  # noqa: BLE001
                result.notes.append(f"rank {rank} could not share its capture: {err}")
        return result
    result.captures.append((source, capture))
    others = list(range(1, world))
    if store is not None:
        result.via = "store"
        _poll(others, lambda r: _from_store(store, env, r), timeout, result)
    elif json_path and file_of is not None:
        result.via = "files"
        started = _started(capture)
        _poll(others, lambda r: _from_file(file_of(r), started), timeout, result)
    else:
        result.notes.append("the other ranks' captures cannot reach rank 0: no torchrun "
                            "agent store, and no --json files to read")
    return result


def capture_text(capture: Capture) -> bytes:
    """The capture's JSON, as :meth:`Capture.save` writes it, encoded."""
    return json.dumps(capture.to_dict(), allow_nan=False).encode("utf-8")


def _started(capture: Capture) -> float:
    try:
        return _dt.datetime.fromisoformat(capture.started_at).timestamp()
    except (TypeError, ValueError, OverflowError, OSError):
        return 0.0


def _from_store(store: Any, env: Mapping[str, str], rank: int) -> tuple[str, Capture] | None:
    key = _key(env, rank)
    if not store.check([key]):
        return None
    raw = store.get(key)
    try:
        store.delete_key(key)
    except Exception:  # noqa: BLE001 - an old store without delete: the key just stays
        pass
    source = f"rank {rank} (via torchrun's store)"
    return source, Capture.loads(bytes(raw), source=source)


def _from_file(path: str, started: float) -> tuple[str, Capture] | None:
    try:
        if os.stat(path).st_mtime < started - 1:
            return None  # a capture of an earlier run: wait for this run's
    except OSError:
        return None
    return path, Capture.load(path)


def _poll(ranks: list[int], fetch: Callable[[int], tuple[str, Capture] | None],
          timeout: float, result: Gathered) -> None:
    """Call ``fetch`` for each rank still missing every :data:`POLL_S` until all came
    or ``timeout`` passed; a capture that cannot be read is a note, not a retry."""
    deadline = time.monotonic() + timeout
    waiting = list(ranks)
    try:
        while waiting:
            for rank in list(waiting):
                try:
                    got = fetch(rank)
                except Exception as err:  # noqa: BLE001 - a bad capture: name it, go on
                    result.notes.append(f"the capture of rank {rank} could not be read: "
                                        f"{getattr(err, 'message', None) or err}")
                    waiting.remove(rank)
                    continue
                if got is not None:
                    result.captures.append(got)
                    waiting.remove(rank)
            if not waiting or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        result.notes.append("interrupted while waiting for the other ranks")
        return
    if waiting:
        result.notes.append(f"no capture from {_ranks_text(waiting)} within {timeout:g} s "
                            "(still running, crashed or killed)")
