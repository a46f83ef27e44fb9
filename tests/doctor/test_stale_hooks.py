"""Hooks left registered that keep appending are named at the list they append to."""

from __future__ import annotations

import gc
from pathlib import Path

from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.probe import DoctorProbe
from torchmem.doctor.runner import Target, run_script
from torchmem.doctor.stale_hooks import stale_hook_list

SCRIPTS = Path(__file__).parent / "scripts_unit"
STALE = str(SCRIPTS / "stale_extractor_hooks.py")
HOOKS = "model.fc3._forward_hooks"


def _snap(step: int, hooks: int, held: int, entries: dict[str, int]) -> Snapshot:
    snap = Snapshot(step)
    snap.paths[HOOKS] = PathStats(path=HOOKS, kind="hook", type="OrderedDict", depth=2,
                                  root="model", items=hooks, hooks=hooks, storage_bytes=held)
    for key, n in entries.items():
        path = f"{HOOKS}[{key}]"
        snap.paths[path] = PathStats(path=path, kind="container", type="Keep", depth=3,
                                     root="model", storage_bytes=100 * n,
                                     item_attrs=(("outputs", n),))
    return snap


def test_a_stale_hook_whose_list_grows_is_named_at_its_append():
    snaps = [_snap(16, 1, 1000, {1: 10}), _snap(24, 2, 2000, {1: 18, 2: 2}),
             _snap(32, 2, 3000, {1: 26, 2: 6})]
    found = stale_hook_list([HOOKS], snaps, [STALE])
    assert found is not None
    name, stmt, gained = found
    assert name == f"{HOOKS}[1].outputs" and gained == 8  # the older hook: more storage
    assert (stmt.line, stmt.code) == (14, "self.outputs.append(output)")


def test_hooks_registered_at_every_interval_are_left_to_the_hook_dict():
    snaps = [_snap(16, 1, 1000, {1: 10}), _snap(24, 2, 2000, {1: 18, 2: 2}),
             _snap(32, 3, 3000, {1: 26, 2: 10, 3: 2})]
    assert stale_hook_list([HOOKS], snaps, [STALE]) is None


def test_a_hook_registered_since_the_last_snapshot_is_not_stale():
    snaps = [_snap(16, 1, 1000, {}), _snap(24, 1, 2000, {}), _snap(32, 2, 3000, {5: 9})]
    assert stale_hook_list([HOOKS], snaps, [STALE]) is None


def test_doctor_names_the_list_and_keeps_the_registration_in_the_advice():
    gc.collect()
    probe = DoctorProbe(census_at_end=False)
    result = run_script(Target(path=STALE, args=[]), [probe], monitor_interval=None)
    assert result.exit_code == 0, result.error
    top = probe.findings[0]
    assert top.cause == "growing_container"
    assert top.culprit.name.startswith(HOOKS + "[") and top.culprit.name.endswith("].outputs")
    assert top.culprit.line == 14
    assert "line 25" in top.fix and "remove()" in top.fix
    assert top.title == "hooks left registered keep appending"
