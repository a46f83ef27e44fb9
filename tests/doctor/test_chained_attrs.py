"""An object holding a chain of graphs is named at the attribute its method rebinds."""

from __future__ import annotations

import gc
from pathlib import Path

from torchmem.doctor.chained_attrs import chained_attribute
from torchmem.doctor.pathstats import PathStats
from torchmem.doctor.probe import DoctorProbe
from torchmem.doctor.runner import Target, run_script

SCRIPTS = Path(__file__).parent / "scripts_unit"
METER = str(SCRIPTS / "meter_attr_chain.py")


def _meter(graph_attrs: tuple[str, ...], items: int | None = None) -> PathStats:
    return PathStats(path="self.stats['train']['loss']", kind="container", type="RunningMean",
                     depth=3, root="self", items=items, graph_attrs=graph_attrs)


def test_the_attribute_rebound_from_its_own_value_is_chosen():
    # `mean` holds the same chain (`self.mean = self.total / self.count`) but does not
    # make it: `self.total += value * n` does
    found = chained_attribute("self.stats['train']['loss']", _meter(("mean", "total")), [METER])
    assert found is not None
    name, stmt = found
    assert name == "self.stats['train']['loss'].total"
    assert (stmt.line, stmt.kind, stmt.function) == (12, "augassign", "update")


def test_nothing_changes_without_a_graph_attribute_or_for_a_container():
    path = "self.stats['train']['loss']"
    assert chained_attribute(path, _meter(()), [METER]) is None
    assert chained_attribute(path, _meter(("mean",)), [METER]) is None  # only rebound plainly
    assert chained_attribute(path, _meter(("total",), items=3), [METER]) is None


def test_doctor_names_the_chained_attribute_of_a_deep_object():
    gc.collect()
    probe = DoctorProbe(census_at_end=False)
    result = run_script(Target(path=METER, args=[]), [probe], monitor_interval=None)
    assert result.exit_code == 0, result.error
    top = probe.findings[0]
    assert top.cause == "retained_graph"
    assert top.culprit.name == "self.stats['train']['loss'].total"
    # the call that hands each loss over (the helper's statement is in the evidence)
    assert top.culprit.line == 27
    assert any("rebinds `total` from its own value" in e for e in top.evidence)
    assert top.edit is None
