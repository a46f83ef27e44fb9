"""check_devices: placements and mismatches as data."""

from __future__ import annotations

import torch

import torchmem
from torchmem.model.scope import DeviceReport


def test_consistent_model_and_inputs() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    r = torchmem.check_devices(model, torch.ones(2, 3), {"labels": torch.zeros(2, dtype=torch.long)})
    assert r.ok and r.problems == ()
    roles = [(p.role, p.name) for p in r.placements]
    assert ("parameter", "0.weight") in roles and ("buffer", "1.running_mean") in roles
    assert ("input", "input[1]['labels']") in roles
    total = (12 + 4 + 4 + 4) * 4 + (4 + 4) * 4 + 8 + 2 * 3 * 4 + 2 * 8
    assert r.devices == {"cpu": total}
    assert DeviceReport.from_dict(r.to_dict()) == r


def test_dtype_mismatch_of_floating_inputs_only() -> None:
    model = torch.nn.Linear(3, 1)
    r = torchmem.check_devices(model, torch.ones(2, 3, dtype=torch.float64), torch.ones(2, dtype=torch.long))
    assert r.problems == ("input[0] is float64; the parameters are float32",)
    # and torch agrees that this forward fails
    try:
        model(torch.ones(2, 3, dtype=torch.float64))
    except RuntimeError as e:
        assert "dtype" in str(e) or "scalar type" in str(e)
    else:  # pragma: no cover
        raise AssertionError("torch accepted mixed dtypes")


def test_parameters_spread_over_devices_and_inputs_elsewhere() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    model[1].to("meta")  # stands in for a second device on a CPU-only machine
    r = torchmem.check_devices(model, torch.ones(1, 3))
    assert not r.ok
    assert r.problems[0].startswith("parameters are spread over devices: ")
    assert "buffer 2.running_mean is on cpu; the parameters are on meta" not in r.problems
    assert r.devices["meta"] == (9 + 3) * 4


def test_inputs_only_and_mixed_parameter_dtypes() -> None:
    r = torchmem.check_devices(None, torch.ones(1), torch.ones(1, device="meta"))
    assert r.problems == ("inputs are spread over devices: cpu (1, 4 B), meta (1, 4 B)",)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).half())
    assert "parameters mix floating dtypes: float16, float32" in torchmem.check_devices(model).problems
