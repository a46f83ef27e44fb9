"""Which end of a list new items went to, and the statement that adds there."""

from __future__ import annotations

from torchmem.doctor.list_ends import at_end, growing_end
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.source import Statement


def _snap(step: int, items: int, ends: tuple[int, int] | None) -> Snapshot:
    stats = PathStats(path="hooks", kind="local", type="list", depth=0, root="hooks",
                      items=items, ends=ends)
    return Snapshot(step=step, paths={"hooks": stats})


def test_the_end_that_changed_while_the_list_grew():
    assert growing_end([_snap(2, 3, (1, 3)), _snap(4, 5, (1, 5))], "hooks") == "tail"
    assert growing_end([_snap(2, 3, (1, 3)), _snap(4, 5, (5, 3))], "hooks") == "head"
    # both ends new (a list rebuilt), or no growth, or one snapshot: unknown
    assert growing_end([_snap(2, 3, (1, 3)), _snap(4, 5, (7, 9))], "hooks") is None
    assert growing_end([_snap(2, 3, (1, 3)), _snap(4, 3, (1, 5))], "hooks") is None
    assert growing_end([_snap(4, 5, (1, 5))], "hooks") is None


def test_statements_that_add_at_the_other_end_are_left_out():
    insert = Statement("m.py", 79, "self.hooks.insert(0, handle)", "add", "add", True,
                       value="handle", target="self.hooks", method="insert")
    append = Statement("m.py", 81, "self.hooks.append(handle)", "add", "add", True,
                       value="handle", target="self.hooks", method="append")
    middle = Statement("m.py", 83, "self.hooks.insert(i, handle)", "add", "add", True,
                       value="handle", target="self.hooks", method="insert")
    assert at_end([insert, append], "tail") == [append]
    assert at_end([insert, append], "head") == [insert]
    assert at_end([insert, append], None) == [insert, append]
    assert at_end([insert], "tail") == [insert]  # none would be left: all kept
    assert at_end([middle, append], "tail") == [middle, append]  # insert(i) may be either
