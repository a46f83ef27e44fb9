"""Heap growth kept by containers of Python objects (numpy arrays, floats), not tensors."""

from __future__ import annotations

import collections
import sys

import numpy as np

from torchmem.doctor.culprit import Snapshot, take_snapshot
from torchmem.doctor.item_sizes import estimated_bytes
from torchmem.doctor.object_growth import TITLE, container_findings
from torchmem.model.capture import Growth

HERE = __file__
ARRAY = 16 * 1024  # bytes of data per array added each step


def user(filename: str) -> bool:
    return filename == HERE


def snap(step: int) -> Snapshot:
    return take_snapshot(step, sys._getframe(1), None, user)


def heap(per_step: float, r2: float = 1.0) -> Growth:
    return Growth(device="cpu", verdict="growing", bytes_per_step=per_step, r2=r2,
                  first_step=5, last_step=40, total_growth=int(per_step * 35))


def test_estimate_counts_numpy_data_and_float_objects():
    arrays = [np.zeros(ARRAY // 8) for _ in range(10)]
    assert 10 * ARRAY <= estimated_bytes(arrays) <= 10 * (ARRAY + 256) + 256
    floats = [float(i) for i in range(1000)]
    assert estimated_bytes(floats) >= 1000 * (8 + sys.getsizeof(1.5))
    pairs = [(i, float(i)) for i in range(100)]  # one level down: the numbers count
    assert estimated_bytes(pairs) >= 100 * (sys.getsizeof((1, 2.0)) + 2 * 24)
    assert estimated_bytes(np.zeros(3)) is None


def test_a_dict_entry_that_gets_an_array_each_step_is_named():
    logs = {"loss": [], "recon": []}
    snaps = []
    for step in range(1, 33):
        logs["loss"].append(float(step))
        logs["recon"].append(np.full(ARRAY // 8, float(step)))
        if step in (2, 4, 8, 16, 32):
            snaps.append(snap(step))
    found = container_findings(snaps, heap(ARRAY + 200), 40, explained=False)
    assert len(found) == 1
    f = found[0]
    assert f.cause == "growing_container" and f.title == TITLE
    assert f.culprit.name == "logs['recon']"
    assert f.culprit.code == 'logs["recon"].append(np.full(ARRAY // 8, float(step)))'
    assert ARRAY <= f.bytes_per_step <= ARRAY + 256  # the estimate, per step
    assert f.data["items_per_step"] == 1.0 and f.data["item_type"] == "ndarray"
    assert any("estimate" in e for e in f.evidence)
    del logs


def _grown(kind: str) -> list[Snapshot]:
    """Snapshots of a container filled one array per step, in a healthy pattern."""
    bounded = collections.deque(maxlen=6)
    window: list = []
    cache: dict = {}
    snaps = []
    for step in range(1, 33):
        value = np.zeros(ARRAY // 8)
        if kind == "bounded":
            bounded.append(value)
        elif kind == "sawtooth":
            window.append(value)
            if len(window) == 5:
                window.clear()
        elif kind == "cache":
            cache.setdefault(step % 12, value)
        if step in (2, 4, 8, 16, 32):
            snaps.append(snap(step))
    return snaps


def test_healthy_containers_stay_quiet_even_when_the_heap_grows():
    for kind in ("bounded", "sawtooth", "cache"):
        assert container_findings(_grown(kind), heap(ARRAY), 40, explained=False) == [], kind


def test_quiet_when_the_heap_does_not_grow_or_the_container_explains_little():
    logs = []
    snaps = []
    for step in range(1, 33):
        logs.append(np.zeros(ARRAY // 8))
        if step in (2, 4, 8, 16, 32):
            snaps.append(snap(step))
    assert container_findings(snaps, heap(ARRAY), 40, explained=False)
    assert container_findings(snaps, heap(ARRAY), 40, explained=True) == []
    assert container_findings(snaps, heap(ARRAY, r2=0.5), 40, explained=False) == []
    flat = Growth(device="cpu", verdict="flat", bytes_per_step=0.0)
    assert container_findings(snaps, flat, 40, explained=False) == []
    # the heap grows 40x faster than the list: something else is growing
    assert container_findings(snaps, heap(40 * ARRAY), 40, explained=False) == []
    # a run that only infers collects its outputs on purpose
    assert container_findings(snaps, heap(ARRAY), 40, explained=False, trains=False) == []
    del logs


class _Graph:
    def __init__(self, n: int):
        self.rows = [[float(i) / 7.0 for i in range(100)] for _ in range(n)]


def test_estimate_opens_objects_and_counts_a_shared_object_once():
    graphs = [_Graph(4) for _ in range(8)]
    # 8 objects of 4 rows of 100 distinct floats: at least their floats and row lists
    floats = 8 * 4 * 100 * sys.getsizeof(1.5)
    assert estimated_bytes(graphs) >= floats
    shared = [[0.0] * 100 for _ in range(32)]  # one float object in every row
    assert estimated_bytes(shared) < 32 * 100 * sys.getsizeof(0.0)


def test_a_cache_keyed_by_input_is_a_memo_store_and_a_list_of_outputs_is_not(tmp_path):
    from torchmem.doctor.object_growth import memo_store
    from torchmem.doctor.source import find_statements

    script = tmp_path / "memo.py"
    script.write_text("CACHE = {}\n"
                      "out = []\n"
                      "def featurize(k):\n"
                      "    if k in CACHE:\n"
                      "        return CACHE[k]\n"
                      "    CACHE[k] = [k]\n"
                      "    return CACHE[k]\n"
                      "def collect(y):\n"
                      "    out.append(y)\n", encoding="utf-8")
    (store,) = [s for s in find_statements("CACHE", [str(script)]) if s.kind == "setitem"]
    assert memo_store(store)
    (append,) = [s for s in find_statements("out", [str(script)]) if s.kind == "add"]
    assert not memo_store(append) and not memo_store(None)


def test_an_inference_script_whose_cache_grows_with_its_inputs_is_named(doctor):
    # a script that only runs a model: outputs it collects are by design, a cache keyed by
    # input that never sees the same input twice is not (a fresh process: heap verdict)
    from pathlib import Path

    data, _ = doctor.run_file(Path(__file__).parent / "scripts_unit" / "memo_cache_inference.py")
    (top, *_) = data["findings"]
    assert (top["cause"], top["culprit"]["name"], top["culprit"]["line"]) == \
        ("growing_container", "CACHE", 17)
