"""One doctor report says one thing: the census sees the live run, one growth rate, labelled sizes.

* The census (largest storages, bytes by role) is taken while the script's objects are
  alive, not after ``main()`` returned and everything died.
* The device table's growth per step and the verdict line are the same number.
* A finding whose size is the heap's growth says so next to the tensor bytes it reaches.
"""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path

from torchmem.doctor.probe import DoctorProbe
from torchmem.doctor.runner import Target, run_script

SCRIPT = '''
import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for step in range(40):
        loss = model(torch.randn(32, 256)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)


if __name__ == "__main__":
    main()
'''


def _run(tmp_path: Path, census: bool = True):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    probe = DoctorProbe(census_at_end=census)
    result = run_script(Target(path=str(path)), [probe], monitor_interval=None)
    assert result.exit_code == 0, result.error
    capture = result.to_capture("torchmem doctor", findings=probe.findings,
                                growth=probe.growth, notes=probe.notes)
    return probe, result, capture


def test_census_is_taken_while_the_scripts_objects_live(tmp_path, capsys):
    probe, result, _ = _run(tmp_path)
    assert probe.census is not None
    roles = dict(probe.census.bytes_by_role())
    params = (256 * 256 + 256 + 256 * 8 + 8) * 4
    # at least the script's parameters (an in-process census also sees what other code
    # in this process keeps alive), and its largest weight among the top storages
    assert roles.get("parameter", 0) >= params
    assert any(e.nbytes == 256 * 256 * 4 for e in probe.census.top(50, role="parameter"))
    assert roles.get("optimizer_state", 0) >= 2 * params
    assert probe.census.top(10)
    # an analysis boundary of the run (where the heap reached a new high: which one
    # depends on the state of the process's heap), not the end after main() returned
    assert probe.census_step is not None and 1 <= probe.census_step <= 40
    assert any(f"census at step {probe.census_step} of 40" in n for n in probe.notes)


def _cell(text: str, pattern: str) -> str:
    found = re.search(pattern, text)
    assert found, text
    return found.group(1)


def test_growth_per_step_is_one_number_in_the_whole_report(tmp_path, capsys):
    from rich.console import Console

    from torchmem.report.findings import findings_text
    from torchmem.report.terminal import _device_table

    # the verdict reads the whole process's heap: in a fresh process, as `torchmem doctor`
    # runs (in the test session, what earlier tests left makes the heap noisy)
    import json
    import subprocess
    import sys

    from torchmem.model.capture import Capture

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--quiet", "--no-verify",
                           "--json", str(tmp_path / "c.json"), str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    capture = Capture.from_json_dict(json.loads((tmp_path / "c.json").read_text()))
    cpu = next(g for g in capture.growth if g.device == "cpu")
    assert cpu.verdict == "growing"
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(_device_table(capture))
    table = _cell(out.getvalue(), r"cpu \(C heap in use\).*?\+([\d.]+ \w?i?B)\s*$")
    verdict = _cell("\n".join(findings_text(capture)), r"memory grows by ([\d.]+ \w?i?B) per step")
    assert table == verdict


def test_heap_sized_finding_is_labelled_beside_the_tensor_bytes(tmp_path, capsys):
    probe, _, _ = _run(tmp_path, census=False)
    top = probe.findings[0]
    assert top.culprit.name == "losses"
    assert any("of tensor storage (tensors and saved activations) reachable" in e
               for e in top.evidence)
    if top.data.get("bytes_measure") == "heap":
        assert any("C heap grew by" in e and "is the heap's growth" in e for e in top.evidence)
        assert top.bytes_per_step == top.data["heap_bytes_per_step"]
    else:
        assert top.data["bytes_measure"] == "tensor_storage"


def test_table_and_verdict_agree_on_a_noisy_series():
    # a few late spikes (collector sawtooth): a least-squares slope (5.1 KiB) and the
    # verdict's robust slope (4.0 KiB) differ here; the report must show only the verdict's
    from rich.console import Console

    from torchmem.analyze.growth import growth_by_device
    from torchmem.model.capture import Capture, StepRecord
    from torchmem.report.findings import findings_text
    from torchmem.report.terminal import _device_table

    steps = tuple(StepRecord(step=i, time=float(i),
                             used={"cpu": 50_000_000 + 4096 * i
                                   + (60_000 if i in (33, 36, 39, 40) else 0)})
                  for i in range(1, 41))
    growth = tuple(growth_by_device(steps))
    assert growth[0].verdict == "growing"
    capture = Capture(tool="torchmem doctor", version="0", argv=("t.py",), started_at="",
                      duration_s=1.0, exit_code=0, outcome="ok", devices=("cpu",), steps=steps,
                      growth=growth, peak={"cpu": max(s.used["cpu"] for s in steps)})
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(_device_table(capture))
    table = _cell(out.getvalue(), r"cpu \(C heap in use\).*?\+([\d.]+ \w?i?B)\s*$")
    verdict = _cell("\n".join(findings_text(capture)), r"memory grows by ([\d.]+ \w?i?B) per step")
    assert table == verdict == "4.0 KiB"
