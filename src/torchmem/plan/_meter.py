"""Private: live and peak bytes of fake storages, by phase and by module, for
:func:`torchmem.plan.estimate.estimate` (the shared engine counts ``meta`` storages)."""

from __future__ import annotations

from typing import Any

from torch import nn

from torchmem.collect._engine import engine
from torchmem.model.estimate import ModuleEstimate, PhaseEstimate

__all__ = ["Counter", "Phases", "ModuleMeter"]


class Phases:
    """Live and peak bytes of the fake storages, phase by phase."""

    def __init__(self, counter: Any, static: int) -> None:
        self.counter = counter
        self.static = static
        self.rows: list[PhaseEstimate] = []

    def live(self) -> int:
        return self.static + int(self.counter.current())

    def start(self) -> None:
        self.counter.reset_peak()

    def end(self, step: int, phase: str) -> int:
        end = self.live()
        self.rows.append(PhaseEstimate(step, phase, self.static + int(self.counter.peak()), end))
        return end


class ModuleMeter:
    """Forward hooks that record, per module, the live bytes its forward left behind."""

    def __init__(self, model: nn.Module, phases: Phases) -> None:
        self.phases = phases
        self.names = {id(m): (name, type(m).__name__) for name, m in model.named_modules()}
        self.stack: list[tuple[int, int, int]] = []  # (module id, live at entry, peak before)
        self.rows: dict[int, list[int]] = {}  # id -> [retained, peak, calls]
        self.active = True
        self.handles = []
        for _, m in model.named_modules():
            self.handles.append(m.register_forward_pre_hook(self._pre))
            self.handles.append(m.register_forward_hook(self._post))

    def _pre(self, module: nn.Module, args: Any) -> None:
        if self.active:
            counter = self.phases.counter
            self.stack.append((id(module), self.phases.live(), int(counter.peak())))
            counter.reset_peak()

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        if not self.active or not self.stack or self.stack[-1][0] != id(module):
            return
        key, entry, outer_peak = self.stack.pop()
        counter = self.phases.counter
        inner_peak = self.phases.static + int(counter.peak())
        row = self.rows.setdefault(key, [0, 0, 0])
        row[0] += self.phases.live() - entry
        row[1] = max(row[1], inner_peak)
        row[2] += 1
        # the enclosing module's peak must still see this one's
        counter.peak_floor(max(outer_peak, int(counter.peak())))

    def remove(self) -> list[ModuleEstimate]:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        out = [
            ModuleEstimate(self.names[k][0], self.names[k][1], r[0], r[1], r[2])
            for k, r in self.rows.items()
        ]
        out.sort(key=lambda m: (-m.retained_bytes, m.name))
        return out


class Counter:
    """The engine's ``meta`` counter with a settable peak (for nested module scopes)."""

    def __init__(self) -> None:
        self._inner = engine.acquire("meta")
        self._floor = 0

    def current(self) -> int:
        return int(self._inner.current())

    def peak(self) -> int:
        return max(int(self._inner.peak()), self._floor)

    def reset_peak(self) -> None:
        self._inner.reset_peak()
        self._floor = 0

    def peak_floor(self, value: int) -> None:
        self._inner.reset_peak()
        self._floor = value

    def release(self) -> None:
        engine.release("meta")
