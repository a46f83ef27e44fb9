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
