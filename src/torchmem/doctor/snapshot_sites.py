"""Deep snapshots taken where the steps usually end, so that they compare like with like.

A step boundary is where the step source fires: an optimizer step, a ``backward()``, a
call of the top-level module. When a script calls its top-level modules from several
places in one iteration (a video predictor's image encoder, memory attention and mask
decoder, each called once per frame from its own function), the boundaries of successive
steps fall in different functions, and a snapshot taken at a scheduled step
(:func:`torchmem.doctor.probe.analysis_steps`) sees other frames on the stack than the one
before it: the same growing dict is named ``inference_state['output_dict']`` at one
snapshot and ``output_dict`` (a local of another function) at the next, and no path is
seen to grow. :class:`SnapshotSites` counts where the boundaries fall (file, function,
line of the innermost user frame) and moves a scheduled snapshot to the next boundary at
the most frequent site, within a bound; a script whose steps all end at one place is
never moved, nor are steps that are optimizer steps or ``backward()`` calls (only calls
of the top-level modules and the script's own loops are).
"""

from __future__ import annotations

from collections import Counter
from types import FrameType

__all__ = ["SnapshotSites"]

#: boundaries counted before a snapshot may be moved
MIN_COUNTED = 8
#: a moved snapshot is taken at the latest this many steps late (or a quarter of its step)
MAX_DELAY = 8

Site = tuple[str, str, int]


def _site(frame: FrameType | None) -> Site | None:
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno


class SnapshotSites:
    """Where step boundaries fall, and whether a deep snapshot is due at this one."""

    def __init__(self) -> None:
        self.counts: Counter[Site | None] = Counter()
        self.waiting: int | None = None  # the scheduled step whose snapshot was moved
        self.moved = 0

    def due(self, step: int, frame: FrameType | None, scheduled: bool,
            movable: bool = True) -> bool:
        """Count this boundary's site; whether the deep analysis runs now: at a
        scheduled step when it ends at the usual site (or too few boundaries were seen to
        know it), else at the next boundary that does, or once the delay runs out.
        ``movable=False`` (steps that are optimizer steps or ``backward()`` calls: two
        optimizers stepping at two places are two kinds of step, each checked in turn by
        the gradient watch): at the scheduled steps only."""
        site = _site(frame)
        self.counts[site] += 1
        if not movable:
            return scheduled
        if not scheduled and self.waiting is None:
            return False
        usual = len(self.counts) == 1 or sum(self.counts.values()) < MIN_COUNTED \
            or site == self.counts.most_common(1)[0][0]
        if scheduled and self.waiting is None:
            if usual:
                return True
            self.waiting = step
            return False
        assert self.waiting is not None
        if usual or step - self.waiting >= max(MAX_DELAY, self.waiting // 4):
            self.waiting = None
            self.moved += 1
            return True
        return False
