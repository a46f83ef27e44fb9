"""Shared helpers of the linter's tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` (scripts beside each other, not a package) under a
    private module name, so that the tests can call its functions."""
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"torchmem_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_benchmark():
    """:func:`_load`, as a fixture (the tests run with ``--import-mode=importlib``, where a
    test module cannot import this one)."""
    return _load
