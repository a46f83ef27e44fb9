"""Fixtures for the scope tests: the cyclic garbage collector is paused so that
reference cycles stay alive unless torchmem frees them (the test is then exact)."""

from __future__ import annotations

import gc
from typing import Iterator

import pytest


@pytest.fixture
def no_gc() -> Iterator[None]:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        gc.collect()


@pytest.fixture(autouse=True, params=["calls", "dispatch"])
def scope_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every scope test runs with each engine as the default of ``torchmem.scope`` and
    ``torchmem.scoped`` (subprocess programs take it as ``ENGINE``)."""
    import functools

    import torchmem
    from torchmem.scope import core

    engine = str(request.param)
    monkeypatch.setattr(torchmem, "scope", functools.partial(core.scope, engine=engine))
    monkeypatch.setattr(torchmem, "scoped", functools.partial(core.scoped, engine=engine))
    return engine
