"""A bad device is refused by the function the user called, named in the message."""

from __future__ import annotations

import pytest
import torch

import torchmem
from torchmem._calls import renamed
from torchmem.errors import DeviceError, UsageError


def _missing_accelerator() -> str:
    if not torch.cuda.is_available():
        return "cuda"
    return f"cuda:{torch.cuda.device_count()}"  # one index past the last GPU


def test_prefetch_to_a_missing_device_names_prefetch() -> None:
    with pytest.raises(DeviceError) as info:
        torchmem.prefetch(iter([torch.ones(1)]), device=_missing_accelerator())
    message = str(info.value)
    assert message.startswith("torchmem.prefetch: ") and "torchmem.read" not in message
    assert "expected" in message and "got" in message
    assert info.value.tip and "prefetch()" in info.value.tip
    with pytest.raises(DeviceError, match=r"^torchmem\.prefetch: unknown device string"):
        torchmem.prefetch([1], device="bogus")


def test_check_dataloader_names_itself() -> None:
    loader = torch.utils.data.DataLoader([torch.ones(1)])
    with pytest.raises(DeviceError, match=r"^torchmem\.check_dataloader: "):
        torchmem.check_dataloader(loader, "bogus")


def test_renamed_keeps_class_message_and_tip() -> None:
    inner = UsageError("torchmem.estimate: bad; expected X, got Y", tip="t")
    err = renamed(inner, "plan_checkpoints")
    assert type(err) is UsageError and err.tip == "t"
    assert str(err) == "torchmem.plan_checkpoints: bad; expected X, got Y"
    assert str(renamed(UsageError("torchmem: no submodule"), "estimate")) == (
        "torchmem.estimate: no submodule")
