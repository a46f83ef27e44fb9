"""The data flow the statement finder follows (doctor/source_flow.py): names computed
from the culprit in one function, parameters a call hands the culprit to; and where deep
snapshots are taken when steps end in several places (doctor/snapshot_sites.py)."""

from __future__ import annotations

import ast
import sys
import textwrap

from torchmem.doctor.snapshot_sites import MAX_DELAY, MIN_COUNTED, SnapshotSites
from torchmem.doctor.source import _matches, find_statements
from torchmem.doctor.source_flow import handed_parameters

HANDED = textwrap.dedent("""
    def fill(bank, i, x):
        bank[i] = x
        bank = {}            # rebinding the parameter changes nothing of the caller's

    class Store:
        def put(self, bank, x):
            fill(bank, len(bank), x)

    def run(state, store, xs):
        memory = state["memory"]
        for i, x in enumerate(xs):
            store.put(memory, x)
            state["last"] = x

    def unrelated(bank):
        bank.append(1)
""")


def test_parameters_handed_the_culprit_are_followed_through_calls(tmp_path):
    path = tmp_path / "handed.py"
    path.write_text(HANDED)
    tree = ast.parse(HANDED)
    handed = handed_parameters({str(path): tree}, lambda n: _matches(n, ["state"]))[str(path)]
    # run -> Store.put (self skipped) -> fill; `unrelated` is never handed it
    assert handed == {7: {"bank"}, 2: {"bank"}}
    found = find_statements("state['memory']", [str(path)])
    assert [(s.line, s.kind) for s in found if s.kind != "rebind"] == [(3, "setitem"), (14, "setitem")]
    # the key written tells `state['last']` from the culprit `state['memory']`
    assert [s.key for s in found if s.line in (3, 14)] == ["i", "'last'"]


def _frame_at(_: list[int]):
    return sys._getframe()


def test_snapshots_move_to_the_usual_site_within_a_bound():
    sites = SnapshotSites()
    a, b = _frame_at([]), sys._getframe()
    # steps end alternately in two places; `a` is met first and as often: the usual one
    decided = []
    for step in range(1, 40):
        frame = a if step % 2 else b
        decided.append(sites.due(step, frame, scheduled=step in (4, 6, 12, 16, 24, 32)))
    taken = [step for step, d in enumerate(decided, start=1) if d]
    # before MIN_COUNTED boundaries nothing is moved (4, 6); later ones go to the next odd step
    assert MIN_COUNTED == 8 and taken == [4, 6, 13, 17, 25, 33]


def test_one_site_is_never_moved_and_a_delay_runs_out():
    sites = SnapshotSites()
    frame = sys._getframe()
    assert [s for s in range(1, 20) if sites.due(s, frame, s in (2, 3, 4, 6, 8, 12, 16))] \
        == [2, 3, 4, 6, 8, 12, 16]
    other = _frame_at([])
    late = SnapshotSites()
    for step in range(1, 20):  # the usual site is `frame`
        late.due(step, frame, False)
    assert not late.due(20, other, True)
    assert [s for s in range(21, 40) if late.due(s, other, False)] == [20 + MAX_DELAY]


def test_optimizer_steps_are_never_moved():
    # two optimizers stepping at two places: each kind of step is checked in turn
    sites = SnapshotSites()
    a, b = _frame_at([]), sys._getframe()
    taken = [s for s in range(1, 40)
             if sites.due(s, a if s % 2 else b, s in (4, 6, 12, 16, 24, 32), movable=False)]
    assert taken == [4, 6, 12, 16, 24, 32]
