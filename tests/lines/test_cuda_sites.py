"""Allocation stacks of CUDA storages in the doctor's census: the caching allocator keeps
the stack of each block allocated while its history recorded (a profiled step), and the
census's CUDA storages are matched with those blocks by address. The join is checked on
the CPU with snapshots built per the documented format of
``torch.cuda.memory._snapshot()`` (``segments[].blocks[]``: ``address``, ``size``,
``state``, ``frames``), and on a GPU through the real CLI (``cuda`` marker)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from torchmem.analyze.cuda_history import stacks_by_address
from torchmem.collect.lines import LineRecorder
from torchmem.collect.sites import SiteFinder
from torchmem.doctor.line_sites import census_sites, entry_births
from torchmem.model.census import Census, StorageEntry
from torchmem.report.holders import made_text


def is_user(filename: str) -> bool:
    return filename.startswith("/project/")


def frames(*lines: int) -> list[dict[str, object]]:
    """Innermost first, as the allocator stores them: a C++ frame, torch, the script."""
    return ([{"filename": "??", "line": 0, "name": "c10::cuda::alloc"},
             {"filename": "/env/lib/python3.11/site-packages/torch/nn/modules/linear.py",
              "line": 125, "name": "forward"}]
            + [{"filename": "/project/train.py", "line": n, "name": "main"} for n in lines])


SEGMENTS = [
    {"device": 0, "address": 1 << 20, "total_size": 6 << 20, "blocks": [
        {"address": 1 << 20, "size": 2 << 20, "state": "active_allocated",
         "frames": frames(30, 40)},
        {"address": 3 << 20, "size": 1 << 20, "state": "inactive", "frames": frames(31)},
        {"address": 4 << 20, "size": 2 << 20, "state": "active_allocated", "frames": []},
    ]},
    # an older format: no block addresses (they follow each other from the segment's),
    # the stack in the block's history
    {"device": 0, "address": 64 << 20, "total_size": 3 << 20, "blocks": [
        {"size": 1 << 20, "state": "active_pending_free", "frames": frames(32)},
        {"size": 2 << 20, "state": "active_allocated",
         "history": [{"real_size": 2 << 20, "frames": frames(33)}]},
    ]},
    "not a segment",
    {"device": 0, "address": 96 << 20, "blocks": [None, {"size": "x", "state": 7}]},
]


def test_stacks_by_address_reads_blocks_in_use_that_have_frames():
    found = stacks_by_address(SEGMENTS, is_user)
    assert set(found) == {1 << 20, (64 << 20) + (1 << 20)}
    first = found[1 << 20]
    assert [(f[0], f[1], f[3]) for f in first if f[3]] == [
        ("/project/train.py", 30, True), ("/project/train.py", 40, True)]
    assert [f[1] for f in found[(64 << 20) + (1 << 20)] if f[3]] == [33]
    assert stacks_by_address([], is_user) == {}


def _entry(key: int, nbytes: int, device: str, address: int | None) -> StorageEntry:
    return StorageEntry(key=key, nbytes=nbytes, device=device, dtype="float32",
                        shapes=((nbytes // 4,),), role="other", address=address)


def test_census_sites_join_cuda_storages_by_address():
    census = Census(storages=(
        _entry(1, 2 << 20, "cuda:0", 1 << 20),        # its block has a stack
        _entry(2, 2 << 20, "cuda:0", 4 << 20),        # its block has none
        _entry(3, 1 << 20, "cuda:1", 9 << 20),        # no block at that address
        _entry(4, 1 << 10, "cpu", None),
    ))
    stacks = stacks_by_address(SEGMENTS, is_user)
    sites = census_sites(census, "census", 5, LineRecorder(SiteFinder(is_user)), None, None,
                         is_user, stacks)
    by_key = {s.nbytes: s for s in sites if s.device == "cuda:0" and s.stack}
    joined = by_key[2 << 20]
    assert joined.made_in == "a profiled step"
    assert [(f.file, f.line) for f in joined.stack if f.user] == [
        ("/project/train.py", 30), ("/project/train.py", 40)]
    assert joined.stack[0].user  # the script's frames first
    others = [s for s in sites if s.device != "cpu" and not s.stack]
    assert len(others) == 2 and all(s.made_in is None for s in others)
    # without stacks (no GPU, or the program records its own history) nothing is joined
    plain = census_sites(census, "census", 5, LineRecorder(SiteFinder(is_user)), None, None,
                         is_user)
    assert not any(s.stack for s in plain if s.device != "cpu")


def test_the_holders_section_gets_cuda_stacks_read_once_per_census():
    """The doctor's holders section asks for the stacks of the entries it shows, once per
    census: CPU storages from the line recorder, CUDA ones from the allocator's blocks."""
    entries = [_entry(1, 2 << 20, "cuda:0", 1 << 20), _entry(2, 2 << 20, "cuda:0", 4 << 20),
               _entry(4, 1 << 10, "cpu", None)]
    reads = []

    def stacks():
        reads.append(1)
        return stacks_by_address(SEGMENTS, is_user)

    made = entry_births(entries, LineRecorder(SiteFinder(is_user)), stacks)
    assert len(reads) == 1
    window, stack = made[1]
    assert window == "a profiled step" and (stack[0].file, stack[0].line) == (
        "/project/train.py", 30)
    assert made[2] == (None, ()) and made[4] == (None, ())  # no frames; not profiled
    entry_births(entries[2:], LineRecorder(SiteFinder(is_user)), stacks)
    assert len(reads) == 1  # no device storage shown: the allocator is not read


SCRIPT = textwrap.dedent("""
    import torch
    model = torch.nn.Linear(512, 512).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    for step in range(8):
        x = torch.randn(128, 512, device="cuda")
        kept.append(model(x))
        loss = kept[-1].square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward(retain_graph=True)
        opt.step()
    torch.cuda.synchronize()
""").lstrip()


@pytest.mark.cuda
def test_doctor_lines_names_where_a_kept_cuda_storage_was_made(tmp_path):
    script = tmp_path / "cuda_keep.py"
    script.write_text(SCRIPT, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--lines", "--no-verify",
                           "--json", "out.json", str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    line = next(n for n, text in enumerate(SCRIPT.splitlines(), 1)
                if text.strip() == "kept.append(model(x))")
    census = [s for s in data["line_profile"]["sites"]
              if s["when"] == "census" and s["device"] == "cuda:0"]
    assert census, data["line_profile"]["sites"]
    made = [s for s in census if s["stack"]]
    assert made, census
    assert any(f["file"].endswith("cuda_keep.py") and f["line"] == line
               for s in made for f in s["stack"]), made
    assert all(s["made_in"] == "a profiled step" for s in made)
    # the holders section (who keeps it, where it was made) shows the same stacks
    held = [s for m in data["holders"] for s in m["storages"]
            if s["device"] == "cuda:0" and s["stack"]]
    assert any(f["file"].endswith("cuda_keep.py") and f["line"] == line
               for s in held for f in s["stack"]), data["holders"]


def test_made_text_says_where_a_cuda_storage_was_made_or_why_not():
    from torchmem.model.holders import HeldStorage, HoldersMoment
    from torchmem.model.lines import StackFrame

    moment = HoldersMoment(when="peak", step=5, lines=True)
    made = HeldStorage(nbytes=2 << 20, device="cuda:0", made_in="a profiled step", stack=(
        StackFrame(file="/project/train.py", line=30, function="main", user=True),))
    assert made_text(made, moment) == "made in a profiled step at train.py:30 in main"
    unknown = HeldStorage(nbytes=2 << 20, device="cuda:0")
    assert made_text(unknown, moment) == (
        "made on cuda:0 outside the profiled steps (no allocator stack)")
    assert made_text(unknown, HoldersMoment(when="peak", step=5)) is None
