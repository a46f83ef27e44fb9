"""The evidence sentences of a finding about a growing path (split from
:mod:`torchmem.doctor.causes`): what the path holds and reaches, its graph, the fact that
chose the cause, and where it was measured. Never imports torch."""

from __future__ import annotations

from torchmem.doctor.culprit import PathStats
from torchmem.doctor.internals import describe, internal_owner
from torchmem.units import format_bytes

__all__ = ["evidence_lines"]


def evidence_lines(cause: str, stats: PathStats, sig: dict[str, float], first_step: int,
                   last_step: int, owner_type: str | None = None,
                   peak: int | None = None) -> list[str]:
    """The evidence sentences of a growing path's finding: what it holds and reaches, its
    graph, why the cause was chosen, resets, and the steps it was measured at. ``peak``:
    for a path emptied now and then, the step its stats are from."""
    lines = []
    what = f"`{stats.path}` ({stats.type})"
    if internal_owner(stats.path) is not None:
        lines.append(describe(stats.path, owner_type, stats.type))
    if stats.items is not None:
        lines.append(f"{what} holds {stats.items} items ({sig['items']:+.2f} per step)")
    if stats.tensors:
        ex = f"; largest {stats.example}" if stats.example else ""
        lines.append(f"reaches {stats.tensors} tensors ({stats.grad_tensors} with grad_fn) "
                     f"of {format_bytes(stats.storage_bytes)}{ex}")
    if stats.graph_nodes:
        lines.append(f"keeps {stats.graph_nodes} autograd nodes alive ({sig['nodes']:+.1f} per step) "
                     f"and {format_bytes(stats.saved_bytes)} of saved activations")
    if cause == "eval_graph":
        lines.append(f"{stats.live_nodes} of those nodes still hold their saved tensors: no "
                     "backward() ever ran through them")
    if cause == "hidden_state_chain":
        lines.append(f"one tensor reaches {stats.max_chain} graph nodes: each step's graph "
                     "links to the previous step's")
    if cause == "view_pins_storage":
        lines.append(f"the tensors use {format_bytes(stats.used_bytes)} but pin "
                     f"{format_bytes(stats.storage_bytes)} of storage")
    if stats.hooks:
        lines.append(f"{stats.hooks} hooks registered ({sig['hooks']:+.1f} per step)")
    if sig.get("resets"):
        lines.append("it is emptied now and then (e.g. each epoch) but grows again after each "
                     "reset: the peak grows with the epoch length")
    if peak is not None and peak != last_step:
        lines.append(f"measured at analysed steps up to {last_step}: it was largest at step "
                     f"{peak}, with {format_bytes(stats.retained_bytes)} of tensor storage "
                     f"(tensors and saved activations) reachable")
        return lines
    lines.append(f"measured at steps {first_step} and {last_step}: "
                 f"{format_bytes(stats.retained_bytes)} of tensor storage (tensors and saved "
                 f"activations) reachable at step {last_step}")
    return lines
