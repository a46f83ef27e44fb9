"""The per-line arithmetic (no torch): window sums, the peak's composition, ranking, and
a CUDA snapshot's trace turned into a window (snapshots built per the documented format
of ``torch.cuda.memory._snapshot()``)."""

from __future__ import annotations

import pytest

from torchmem.analyze.cuda_history import frame_site, window_from_trace
from torchmem.analyze.line_windows import LineTotals, WindowTally, rank_rows, retaining_rows
from torchmem.model.capture import Culprit, Finding
from torchmem.model.lines import LineRecord

A = ("/project/train.py", 10, "step")
B = ("/project/train.py", 11, "step")
C = ("/project/train.py", 12, "step")


class Token:
    """A storage stand-in (tokens are compared by identity)."""


def _window(step: int = 1) -> tuple[WindowTally, dict[str, Token]]:
    """start: 1000 B of unknown origin (one storage) and 300 B made at C earlier;
    then a=400 at A, b=800 at B, a freed, the old C storage freed, the unknown one freed,
    c=50 at C."""
    w = WindowTally(step)
    t = {name: Token() for name in ("old", "oldc", "a", "b", "c")}
    w.start_live = {None: 1000, C: 300}
    w.start_tokens = {id(t["old"]): (t["old"], None, 1000), id(t["oldc"]): (t["oldc"], C, 300)}
    w.add(A, 400, t["a"])
    w.add(B, 800, t["b"])
    w.remove(A, 400, t["a"], own=True)
    w.remove(C, 300, t["oldc"], own=False)
    w.remove(None, 1000, t["old"], own=False)
    w.add(C, 50, t["c"])
    return w, t


def test_window_sums_add_up_to_the_delta():
    w, _ = _window()
    assert w.created == {A: 400, B: 800, C: 50}
    assert (w.delta(A), w.delta(B), w.delta(C)) == (0, 800, -250)
    assert (w.alive(A), w.alive(B), w.alive(C)) == (0, 800, 50)
    assert w.unattributed == -1000
    # net per line plus the unattributed part: exactly the change of the live total
    assert w.attributed_delta == (800 + 50) - (1000 + 300) == -450
    assert w.allocated == 1250


def test_peak_replay_finds_the_highest_point_and_what_made_it():
    w, t = _window()
    peak = w.peak(with_tokens=True)
    assert peak.bytes == 1000 + 300 + 400 + 800
    assert peak.index == 2  # after a and b were made
    assert peak.by_site == {None: 1000, C: 300, A: 400, B: 800}
    assert {id(tok): n for tok, n in peak.tokens.values()} == {
        id(t["old"]): 1000, id(t["oldc"]): 300, id(t["a"]): 400, id(t["b"]): 800}


def test_peak_at_the_start_when_the_window_only_frees():
    w = WindowTally(3)
    w.start_live = {A: 100}
    tok = Token()
    w.remove(A, 100, tok, own=False)
    peak = w.peak()
    assert (peak.bytes, peak.index, peak.by_site) == (100, 0, {A: 100})


def test_totals_are_means_over_steady_windows_and_deltas_over_paired_ones():
    totals = LineTotals()
    setup = WindowTally(0, steady=False)
    setup.add(A, 10_000, Token())
    totals.add(setup, setup.peak())
    for step, paired in ((1, False), (2, True), (3, True)):
        w = WindowTally(step)
        w.paired = paired
        w.add(B, 800, Token())
        w.remove(B, 800 if paired else 0, Token(), own=False)
        totals.add(w, w.peak())
    rows = {r.line: r for r in totals.rows()}
    assert rows[11].allocated_bytes == 800 and rows[11].alive_bytes == 800
    assert rows[11].delta_bytes == 0  # paired steps free the previous step's storage
    assert rows[10].allocated_bytes == 0  # setup only: not a per-step figure
    assert totals.setup == {A: 10_000}
    assert totals.peak_step == 0 and rows[10].peak_share == pytest.approx(1.0)


def _finding(line: int, per_step: float = 2048.0, cause: str = "retained_graph") -> Finding:
    return Finding(cause=cause, title="t", bytes_per_step=per_step, bytes=10 * int(per_step),
                   culprit=Culprit(name="losses", file="/project/train.py", line=line,
                                   code="losses.append(loss)", function="step"))


def test_retaining_lines_rank_first_then_growth_then_peak():
    rows = [LineRecord("/project/train.py", 10, allocated_bytes=10, peak_bytes=900),
            LineRecord("/project/train.py", 11, allocated_bytes=99, delta_bytes=500),
            LineRecord("/project/train.py", 12, allocated_bytes=5000)]
    marked = retaining_rows(rows, [_finding(20)], code_of=lambda f, n: f"code {n}")
    ranked = rank_rows(marked)
    assert [r.line for r in ranked] == [20, 11, 10, 12]
    assert ranked[0].retains == "losses (retained_graph)" and ranked[0].retained_bytes == 2048
    assert ranked[0].code == "losses.append(loss)"
    # a finding on a line that allocates marks that line instead of adding one
    again = rank_rows(retaining_rows(rows, [_finding(12, 0.0, "grad_not_cleared")]))
    assert [r.line for r in again] == [12, 11, 10]
    assert again[0].allocated_bytes == 5000 and again[0].retains == "losses (grad_not_cleared)"


def _frame(file: str, line: int, name: str = "f") -> dict[str, object]:
    return {"filename": file, "line": line, "name": name}


USER = "/project/train.py"
LIB = "/usr/lib/python3/site-packages/torch/nn/functional.py"


def _is_user(name: str) -> bool:
    return name.startswith("/project/")


def _trace() -> list[dict[str, object]]:
    cpp = {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}
    return [
        {"action": "segment_alloc", "addr": 0x7000, "size": 2 << 20, "stream": 0, "frames": []},
        {"action": "alloc", "addr": 0x7000, "size": 1 << 20, "stream": 0,
         "frames": [cpp, _frame(LIB, 5, "linear"), _frame(USER, 30, "forward"),
                    _frame(USER, 50, "<module>")]},
        {"action": "alloc", "addr": 0x9000, "size": 512, "stream": 0,
         "frames": [_frame(USER, 31, "forward")]},
        {"action": "free_requested", "addr": 0x7000, "size": 1 << 20, "stream": 0, "frames": []},
        {"action": "free_completed", "addr": 0x7000, "size": 1 << 20, "stream": 0, "frames": []},
        {"action": "free_completed", "addr": 0x5000, "size": 4096, "stream": 0, "frames": []},
        {"action": "alloc", "addr": 0x7000, "size": 2048, "stream": 0,
         "frames": [_frame(LIB, 9), _frame(USER, 32, "forward")]},
        {"action": "oom", "size": 1 << 40, "device_free": 0, "frames": []},
    ]


def test_cuda_trace_becomes_a_window_that_adds_up():
    start = 10_000
    measured = (512 + 2048) - 4096  # the two live blocks minus the older one freed
    tw = window_from_trace(_trace(), step=4, device="cuda:0", start_allocated=start,
                           is_user=_is_user, measured_delta=measured)
    w = tw.tally
    site30, site31, site32 = (USER, 30, "forward"), (USER, 31, "forward"), (USER, 32, "forward")
    assert w.created == {site30: 1 << 20, site31: 512, site32: 2048}
    assert (w.alive(site30), w.delta(site30)) == (0, 0)
    assert w.unattributed == -4096
    assert w.attributed_delta == measured and not tw.wrapped
    peak = w.peak(with_tokens=True)
    assert peak.bytes == start + (1 << 20) + 512
    assert peak.by_site[site30] == 1 << 20
    alive = sorted((b[1], b[2]) for b in tw.alive)
    assert alive == [(512, site31), (2048, site32)]
    big = max((tok for tok, _ in peak.tokens.values()), key=lambda b: b[1])
    assert [f[:2] for f in big[3] if f[3]] == [(USER, 30), (USER, 50)]


def test_cuda_trace_that_misses_actions_is_reported_as_wrapped():
    tw = window_from_trace(_trace()[2:], step=1, device="cuda:0", start_allocated=0,
                           is_user=_is_user, measured_delta=512 + 2048 - 4096)
    assert tw.wrapped  # the 1 MiB block's alloc fell out of the ring buffer


def test_frame_site_prefers_user_frames_and_library_ones_with_all_files():
    frames = [{"filename": "??", "line": 0, "name": "malloc"}, _frame(LIB, 5, "linear"),
              _frame(USER, 30, "forward")]
    assert frame_site(frames, _is_user)[0] == (USER, 30, "forward")
    assert frame_site(frames, _is_user, all_files=True)[0] == (LIB, 5, "linear")
    assert frame_site([_frame(LIB, 5, "linear")], _is_user)[0] == (LIB, 5, "linear")
    assert frame_site([], _is_user)[0] is None
    assert frame_site([{"line": "x"}], _is_user) == (None, ())


def test_cuda_blocks_left_by_the_previous_window_keep_their_line():
    first = window_from_trace(_trace()[:3], step=1, device="cuda:0", start_allocated=0,
                              is_user=_is_user, measured_delta=(1 << 20) + 512)
    assert not first.wrapped
    known = {b[0]: b for b in first.alive}
    trace = [{"action": "free_completed", "addr": 0x7000, "size": 1 << 20, "frames": []},
             {"action": "alloc", "addr": 0xA000, "size": 1 << 20,
              "frames": [_frame(USER, 30, "forward")]}]
    second = window_from_trace(trace, step=2, device="cuda:0", start_allocated=(1 << 20) + 512,
                               is_user=_is_user, measured_delta=0, known=known)
    w = second.tally
    site30 = (USER, 30, "forward")
    assert w.delta(site30) == 0 and w.unattributed == 0 and w.attributed_delta == 0
    assert w.start_live == {site30: 1 << 20, (USER, 31, "forward"): 512, None: 0}


def test_cuda_allocations_with_no_user_frame_go_to_the_user_line_that_ran_last():
    """The autograd thread's allocations during ``backward()`` carry torch's frames only;
    the CPU engine charges them to the line that called ``backward()``, and so does the
    CUDA trace: to the user line of the allocation before them."""
    backward = (USER, 40, "<module>")
    trace = [
        {"action": "alloc", "addr": 0x100, "size": 512, "frames": [_frame(USER, 40, "<module>")]},
        {"action": "alloc", "addr": 0x200, "size": 4 << 20,
         "frames": [_frame("/usr/lib/python3/site-packages/torch/_ops.py", 865, "__call__")]},
        {"action": "alloc", "addr": 0x300, "size": 1024, "frames": []},
    ]
    w = window_from_trace(trace, step=3, device="cuda:0", start_allocated=0, is_user=_is_user,
                          measured_delta=512 + (4 << 20) + 1024).tally
    assert w.created == {backward: 512 + (4 << 20) + 1024} and w.unattributed == 0
    # nothing of the user's ran before: unknown, not a library line
    alone = window_from_trace(trace[1:], step=3, device="cuda:0", start_allocated=0,
                              is_user=_is_user).tally
    assert alone.created == {} and alone.unattributed == (4 << 20) + 1024
    # asked for library lines too: the library line (and the frameless block after it)
    every = window_from_trace(trace, step=3, device="cuda:0", start_allocated=0,
                              is_user=_is_user, all_files=True).tally
    ops = ("/usr/lib/python3/site-packages/torch/_ops.py", 865, "__call__")
    assert every.created == {backward: 512, ops: (4 << 20) + 1024}
