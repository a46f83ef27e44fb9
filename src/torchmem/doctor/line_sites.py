"""Allocation sites of the largest storages: where each was made, and who keeps it.

Two moments are described:

* **census** (or **oom**): the census the doctor takes at the step where memory reached
  its highest (or at an out-of-memory error) lists the largest live storages with their
  role and owner name. Each is joined with the stack the line recorder tagged it with
  when it was created (if it was created in a profiled step; on CUDA, the stack the
  caching allocator kept on the storage's block, matched by address) and, for storages no
  module or optimizer owns, with the path from the script's variables that reaches it
  (:func:`torchmem.doctor.holders.holder_paths`).
* **peak**: the largest storages alive at the highest peak of the profiled steps, from
  the recorder's replay of that step; the holder is known when the storage was still
  alive at the census (same storage, matched by its engine reference).

Cost: one holder walk per census (the doctor's walk, bounded), nothing per step.
"""

from __future__ import annotations

from types import FrameType
from typing import Any, Callable, Mapping

from torchmem.collect.lines import Birth, LineRecorder
from torchmem.doctor.holders import holder_paths
from torchmem.model.lines import AllocationSite, StackFrame

__all__ = ["census_sites", "census_roles", "entry_births", "peak_sites", "birth_site", "TOP"]

#: how many of the largest storages are described at each moment, and how many of the
#: largest that no module or optimizer owns (where leaks show) on top of those
TOP = 10
TOP_UNOWNED = 5

_NAMED_ROLES = ("parameter", "buffer", "gradient", "optimizer_state")


def _stack(birth: Birth | None) -> tuple[StackFrame, ...]:
    if birth is None:
        return ()
    site, _, extra = birth
    if extra is not None and extra[0]:
        frames = [StackFrame(file=f[0], line=max(f[1], 0), function=f[2], user=f[3])
                  for f in extra[0]]
        return tuple(f for f in frames if f.user) + tuple(f for f in frames if not f.user)
    return (StackFrame(file=site[0], line=max(site[1], 0), function=site[2], user=True),)


def birth_site(recorder: LineRecorder, key: int) -> tuple[str | None, tuple[StackFrame, ...]]:
    """(the window, the allocating stack) of the live storage ``key``; (None, ()) when
    it was made in a step that was not profiled."""
    birth = recorder.birth_of(key)
    return recorder.made_in(birth), _stack(birth)


def _shape_dtype(birth: Birth | None) -> tuple[tuple[int, ...] | None, str | None]:
    if birth is None or birth[2] is None:
        return None, None
    return birth[2][1], birth[2][2]


DeviceStacks = Mapping[int, tuple[tuple[str, int, str, bool], ...]]


def _device_site(entry: Any, device_stacks: DeviceStacks | None
                 ) -> tuple[str | None, tuple[StackFrame, ...]]:
    """(window, stack) of a device storage from the allocator block at its address:
    blocks only carry a stack when made in a profiled step, which one is not known."""
    frames = device_stacks.get(entry.address) if device_stacks and \
        entry.address is not None else None
    if not frames:
        return None, ()
    out = [StackFrame(file=f[0], line=max(f[1], 0), function=f[2], user=f[3]) for f in frames]
    return "a profiled step", tuple(f for f in out if f.user) + tuple(
        f for f in out if not f.user)


def entry_births(entries: list[Any], recorder: LineRecorder,
                 device_stacks: Callable[[], DeviceStacks] | None
                 ) -> dict[int, tuple[str | None, tuple[StackFrame, ...]]]:
    """``key -> (window, allocating stack)`` of census entries: CPU storages from the line
    recorder's tags, device storages from the allocator's blocks (``device_stacks`` is
    called once, only when a device storage is among ``entries``)."""
    stacks = device_stacks() if device_stacks is not None and any(
        e.device != "cpu" for e in entries) else None
    return {e.key: birth_site(recorder, e.key) if e.device == "cpu"
            else _device_site(e, stacks) for e in entries}


def census_sites(census: Any, when: str, step: int, recorder: LineRecorder,
                 frame: FrameType | None, main_globals: dict[str, Any] | None,
                 is_user: Callable[[str], bool],
                 device_stacks: DeviceStacks | None = None) -> list[AllocationSite]:
    """Allocation sites of the census's largest storages, and of the largest that no
    module or optimizer owns (``when``: census or oom). ``device_stacks``: the
    allocating stacks of CUDA blocks by address (made in profiled steps), joined with
    the census's CUDA storages by their address."""
    births = {e.key: recorder.birth_of(e.key) if e.device == "cpu" else None
              for e in census.storages}
    never = float("inf")

    def order(e: Any) -> tuple[Any, ...]:  # ties of size: the earliest made first
        birth = births[e.key]
        return (-e.nbytes, birth[1] if birth is not None else never, e.name or "", e.device)

    ranked = sorted(census.storages, key=order)
    entries = ranked[:TOP]
    seen = {e.key for e in entries}
    unowned = [e for e in ranked if e.role not in _NAMED_ROLES and e.key not in seen]
    entries.extend(unowned[:TOP_UNOWNED])
    unnamed = {e.key for e in entries if e.role not in _NAMED_ROLES}
    holders = holder_paths(unnamed, frame, main_globals, is_user) if unnamed else {}
    out = []
    for e in entries:
        birth = births[e.key]
        shape, dtype = _shape_dtype(birth)
        holder = holders.get(e.key)
        if e.name:
            holder = f"{holder} ({e.name})" if holder else e.name
        made_in, stack = recorder.made_in(birth), _stack(birth)
        if e.device != "cpu":
            made_in, stack = _device_site(e, device_stacks)
        out.append(AllocationSite(
            when=when, step=max(int(step), 0), nbytes=int(e.nbytes), device=e.device,
            dtype=e.dtype or dtype, shape=tuple(e.shapes[0]) if e.shapes else shape,
            role=e.role, holder=holder, made_in=made_in, stack=stack))
    return out


def census_roles(census: Any, recorder: LineRecorder, serial: int) -> None:
    """Fill in role and name of the recorder's peak storages that ``census`` listed.

    ``serial``: :attr:`LineRecorder.serial` when the census was taken. A storage counts
    as the one the census saw when it was made in a window before the census and is
    still alive (alive all along, so its key was not reused).
    """
    from torchmem.collect._engine import engine

    by_key = {e.key: e for e in census.storages}
    for entry in recorder.peak_storages:
        ref = entry[1]
        birth = getattr(ref, "site", None)
        found = by_key.get(ref.key)
        if (found is None or birth is None or birth[1] >= serial or ref() is None
                or engine._refs.get(ref.key) is not ref):
            continue
        entry[2], entry[3] = found.role, found.name


def peak_sites(recorder: LineRecorder, peak_step: int | None) -> list[AllocationSite]:
    """Allocation sites of the largest storages alive at the highest profiled peak."""
    if peak_step is None:
        return []
    out = []
    for n, ref, role, name in recorder.peak_storages:
        birth = getattr(ref, "site", None)
        shape, dtype = _shape_dtype(birth)
        out.append(AllocationSite(
            when="peak", step=max(int(peak_step), 0), nbytes=int(n), device="cpu",
            dtype=dtype, shape=shape, role=role, holder=name,
            made_in=recorder.made_in(birth), stack=_stack(birth)))
    return out
