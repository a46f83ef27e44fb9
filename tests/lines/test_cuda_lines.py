"""``torchmem lines`` on a CUDA script: per-line bytes from the allocator's own history
(``torch.cuda.memory._record_memory_history``), exact block sizes, sums that add up to
the measured change of ``memory_allocated``. The same arithmetic is covered on the CPU
by ``test_windows.py`` with snapshots built per the documented format."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import torch
    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    for step in range(6):
        x = torch.randn(256, 1024, device="cuda")
        buf = torch.empty(1 << 20, device="cuda")
        kept.append(torch.empty(1 << 18, device="cuda"))
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
""").lstrip()


def _line(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.splitlines(), 1) if line.strip() == text)


@pytest.mark.cuda
def test_cuda_lines_exact_blocks_and_sums(tmp_path):
    script = tmp_path / "cuda_train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchmem", "lines", "--all-steps", "--json",
                           "out.json", str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    rows = {(r["line"], r["device"]): r for r in data["lines"]}
    buf = rows[(_line('buf = torch.empty(1 << 20, device="cuda")'), "cuda:0")]
    assert buf["allocated_bytes"] == 4 << 20 and buf["delta_bytes"] == 0
    kept = rows[(_line('kept.append(torch.empty(1 << 18, device="cuda"))'), "cuda:0")]
    assert (kept["allocated_bytes"], kept["alive_bytes"], kept["delta_bytes"]) == (1 << 20,) * 3
    cuda = [w for w in data["line_profile"]["profiled"]
            if w["device"] == "cuda:0" and w["kind"] == "step"]
    assert len(cuda) >= 4
    assert all(w["delta_bytes"] == 1 << 20 for w in cuda)
    # the first CUDA window frees blocks made before recording began: it is not paired,
    # and the per-line net changes (and their unattributed rest) come from paired ones
    assert not cuda[0]["paired"] and all(w["paired"] for w in cuda[1:])
    paired = cuda[1:]
    deltas = sum(r["delta_bytes"] for r in data["lines"] if r["device"] == "cuda:0")
    unattributed = sum(w["unattributed_bytes"] for w in paired) / len(paired)
    assert abs(deltas + unattributed - (1 << 20)) <= len(data["lines"])
    # the backward's allocations (autograd thread, torch frames only) are charged to the
    # line that called backward(), as on the CPU; no torch file is a line of the table
    assert all(r["file"].endswith("cuda_train.py") for r in data["lines"]), data["lines"]
    backward = rows[(_line("loss.backward()"), "cuda:0")]
    assert backward["allocated_bytes"] >= 2 * (4 << 20)
    peak = [s for s in data["line_profile"]["sites"] if s["when"] == "peak"
            and s["device"] == "cuda:0"]
    assert peak and any(f["file"].endswith("cuda_train.py") for f in peak[0]["stack"])
