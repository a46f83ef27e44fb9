"""shares_storage / storage_info against real torch metadata."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchmem
from torchmem.collect.storage import span_bytes, used_bytes
from torchmem.errors import UsageError
from torchmem.model.census import StorageInfo


def test_shares_storage_views_and_copies() -> None:
    x = torch.zeros(4, 6)
    assert torchmem.shares_storage(x, x[1:, ::2])
    assert torchmem.shares_storage(x[2], x[3])  # different offsets, one storage
    assert not torchmem.shares_storage(x, x.clone())
    assert not torchmem.shares_storage(x, torch.zeros(4, 6))


def test_empty_tensors_do_not_share_storage() -> None:
    a, b = torch.empty(0), torch.empty(0)
    # the data_ptr comparison of the seed guide says they share: both pointers are null
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert a.storage().data_ptr() == b.storage().data_ptr() == 0
    assert not torchmem.shares_storage(a, b)
    assert torchmem.shares_storage(a, a.view(0, 3))


def test_shares_storage_rejects_non_tensors() -> None:
    with pytest.raises(UsageError, match="expected torch.Tensor, got list"):
        torchmem.shares_storage([1, 2], torch.zeros(2))  # type: ignore[arg-type]
    assert not torchmem.shares_storage(torch.zeros(3).to_sparse(), torch.zeros(3))


def test_storage_info_of_row_slice() -> None:
    x = torch.zeros(100, 1000)
    info = torchmem.storage_info(x[3, 10:20])
    assert isinstance(info, StorageInfo)
    assert info.shape == (10,) and info.stride == (1,)
    assert info.storage_offset == 3 * 1000 + 10
    assert info.element_size == 4 and info.dtype == "float32" and info.device == "cpu"
    assert info.is_view and info.base_shape == (100, 1000) and info.is_contiguous
    assert (info.used_bytes, info.span_bytes, info.storage_bytes) == (40, 40, 400_000)
    assert info.pinned_bytes == 399_960


def test_storage_info_of_column_and_transpose() -> None:
    x = torch.zeros(100, 1000, dtype=torch.float64)
    col = torchmem.storage_info(x[:, 0])
    assert col.stride == (1000,) and not col.is_contiguous
    assert col.used_bytes == 100 * 8
    assert col.span_bytes == (99 * 1000 + 1) * 8  # first to last element addressed
    t = torchmem.storage_info(x.t())
    assert t.stride == (1, 1000) and not t.is_contiguous and t.pinned_bytes == 0


def test_expand_has_stride_zero_and_uses_few_bytes() -> None:
    row = torch.zeros(3)
    wide = row.expand(1000, 3)
    info = torchmem.storage_info(wide)
    assert info.stride == (0, 1)
    assert wide.numel() * 4 == 12_000  # what numel says
    assert info.used_bytes == 12 and info.storage_bytes == 12  # what memory holds
    assert used_bytes(wide) == span_bytes(wide) == 12


def test_storage_info_of_plain_tensor_and_errors() -> None:
    info = torchmem.storage_info(torch.ones(5, dtype=torch.int16))
    assert not info.is_view and info.base_shape is None
    assert (info.used_bytes, info.storage_bytes, info.pinned_bytes) == (10, 10, 0)
    assert torchmem.storage_info(torch.empty(0)).used_bytes == 0
    with pytest.raises(UsageError, match="no plain storage"):
        torchmem.storage_info(torch.zeros(3).to_sparse())
    with pytest.raises(UsageError):
        torchmem.storage_info("x")  # type: ignore[arg-type]
    assert StorageInfo.from_dict(info.to_dict()) == info


@pytest.mark.cuda
def test_storage_info_cuda() -> None:
    x = torch.zeros(256, 256, device="cuda")
    info = torchmem.storage_info(x[0])
    assert info.device == "cuda:0" and info.storage_bytes == 256 * 256 * 4
    assert not torchmem.shares_storage(x, x.cpu())
