"""The script's classes are roots of the walks: class attributes and ``lru_cache`` caches."""

from __future__ import annotations

import functools
import gc
import sys
from pathlib import Path

import torch

from torchmem.doctor.culprit import Snapshot, take_snapshot
from torchmem.doctor.holders import holder_paths
from torchmem.doctor.lru_caches import cache_origin
from torchmem.doctor.probe import DoctorProbe
from torchmem.doctor.runner import Target, run_script
from torchmem.collect.graph import storage_key

HERE = __file__
SCRIPTS = Path(__file__).parent / "scripts_unit"


def user(filename: str) -> bool:
    return filename == HERE


def snap(step: int = 1) -> Snapshot:
    return take_snapshot(step, sys._getframe(1), None, user)


def _registry():
    class Registry:
        kept: list = []
        limit = 4  # a number: nothing to walk

        def add(self, t):
            Registry.kept.append(t)

    return Registry


def test_a_class_attribute_is_a_path_named_by_the_class():
    reg = _registry()()
    for _ in range(3):
        reg.add(torch.zeros(64))
    s = snap()
    # reached as the class of `reg` (no namespace binds it): named by its __name__
    stats = s.paths["Registry.kept"]
    assert stats.kind == "attribute" and stats.items == 3 and stats.tensors == 3
    assert stats.owner_class == "Registry" and stats.owner_file == HERE
    assert "Registry.limit" not in s.paths
    del reg


def test_a_class_bound_to_a_name_is_named_as_bound():
    alias = _registry()
    alias.kept.append(torch.zeros(10))
    s = snap()
    assert s.paths["alias.kept"].tensors == 1
    assert "Registry.kept" not in s.paths
    del alias


def test_an_lru_cache_on_a_method_keeps_instances_and_results():
    class Embedding:
        @functools.lru_cache(maxsize=8)
        def table(self, n):
            return torch.zeros(n, 16)

    for n in (3, 5, 7):
        Embedding().table(n)  # the instance is dropped: only the cache keeps it
    s = snap()
    stats = s.paths["Embedding.table"]
    assert stats.tensors == 3 and stats.storage_bytes == (3 + 5 + 7) * 16 * 4
    name, file, line, maxsize, entries = stats.cache
    assert name.endswith("Embedding.table") and (file, maxsize, entries) == (HERE, 8, 3)
    assert line == Embedding.table.__wrapped__.__code__.co_firstlineno  # the decorator
    Embedding.table.cache_clear()


def test_cache_origin_is_only_for_lru_cache_wrappers():
    assert cache_origin([1, 2]) is None and cache_origin(len) is None
    assert cache_origin(functools.lru_cache(None)(len)) is None  # wraps no Python code


def test_the_holder_walk_names_a_class_attribute():
    cls = _registry()
    t = torch.zeros(128)
    cls.kept.append(t)
    key = storage_key(t)
    del t
    found = holder_paths([key], sys._getframe(), None, user)
    assert found[key] == "cls.kept", found
    del cls


def _doctor(script: Path) -> DoctorProbe:
    gc.collect()
    probe = DoctorProbe(census_at_end=False)
    result = run_script(Target(path=str(script), args=[]), [probe], monitor_interval=None)
    assert result.exit_code == 0, result.error
    assert not result.notes, result.notes
    return probe


def test_doctor_names_a_class_attribute_list_at_its_append():
    probe = _doctor(SCRIPTS / "class_attr_outputs.py")
    top = probe.findings[0]
    assert top.cause == "retained_graph"
    assert top.culprit.name == "Block.saved" and top.culprit.line == 14


def test_doctor_names_an_lru_cache_on_a_method_at_its_decorator():
    probe = _doctor(SCRIPTS / "method_lru_cache.py")
    top = probe.findings[0]
    assert top.cause == "growing_container"
    assert top.culprit.name == "Positions.forward" and top.culprit.line == 12
    assert top.fix_kind == "advice" and top.edit is None
    assert "Positions.forward.cache_clear()" in top.fix
    assert any("`self` included" in e for e in top.evidence)
