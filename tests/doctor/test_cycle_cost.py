"""Cyclic garbage weighed against the memory the steps use (doctor/cycle_cost.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from torchmem.doctor.cycle_cost import MIN_SHARE, costly_cycles
from torchmem.model.capture import Finding

SCRIPTS = Path(__file__).parent / "scripts_unit"
MiB = 1 << 20


def _cycle(held: int) -> Finding:
    return Finding(cause="reference_cycle", title="tensors held by reference cycles", device="cpu",
                   bytes=held, bytes_per_step=held / 8, fix="break the cycle",
                   data={"garbage_objects": 10, "garbage_tensor_bytes": held, "freed_heap": held})


def _steps(*heaps: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(used={"cpu": h}) for h in heaps]


def test_a_cycle_small_against_the_steps_memory_is_a_note():
    steps = _steps(100 * MiB, 101 * MiB, 100 * MiB)
    small, large = _cycle(int(0.9 * MIN_SHARE * 40 * MiB)), _cycle(int(1.1 * MIN_SHARE * 40 * MiB))
    kept, notes = costly_cycles([small], steps, {"cpu": 140 * MiB})
    assert kept == [] and len(notes) == 1
    assert "of the 40.0 MiB the steps use" in notes[0] and "4.5%" in notes[0]
    kept, notes = costly_cycles([large], steps, {"cpu": 140 * MiB})
    assert kept == [large] and notes == []


def test_other_findings_and_cuda_runs_are_left_alone():
    steps = _steps(100 * MiB, 100 * MiB)
    other = Finding(cause="growing_container", title="t", device="cpu", bytes=1, bytes_per_step=1.0)
    small = _cycle(64 * 1024)
    assert costly_cycles([other, small], steps, {"cpu": 200 * MiB})[0] == [other]
    # CUDA tensors are weighed against device memory, which is not read here
    assert costly_cycles([small], steps, {"cpu": 200 * MiB, "cuda:0": 1})[0] == [small]
    # no step readings, or a peak at the lowest reading: nothing to weigh against
    assert costly_cycles([small], [], {"cpu": 200 * MiB})[0] == [small]
    assert costly_cycles([small], steps, {"cpu": 100 * MiB})[0] == [small]


def test_a_small_per_step_cycle_is_reported_as_a_note(doctor):
    # fresh process: the collections the doctor inspects are the script's own
    data, _ = doctor.run_file(SCRIPTS / "healthy_small_cycle.py")
    assert not [f for f in data["findings"] if f["cause"] == "reference_cycle"]
    assert any(n.startswith("reference cycles held ") for n in data["notes"]), data["notes"]
