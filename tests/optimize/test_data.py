"""LazyDataset and check_dataloader against real DataLoader behaviour."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import torchmem
from torchmem.errors import InputError, UsageError
from torchmem.optimize.data import LazyDataset, check_dataloader


def _files(tmp_path: Path, n: int = 6) -> list[Path]:
    paths = []
    for i in range(n):
        p = tmp_path / f"sample_{i:03d}.pt"
        torch.save({"x": torch.full((4,), float(i)), "y": torch.tensor(i)}, p)
        paths.append(p)
    return paths


def test_lazy_dataset_loads_on_access_only(tmp_path: Path) -> None:
    paths = _files(tmp_path)
    loads: list[str] = []

    def loader(path: str) -> object:
        loads.append(path)
        return torch.load(path, weights_only=True)

    ds = LazyDataset(paths, loader=loader)
    assert len(ds) == 6 and loads == []
    assert torch.equal(ds[3]["x"], torch.full((4,), 3.0))
    assert loads == [str(paths[3])]


def test_lazy_dataset_pickles_small_and_works_with_workers(tmp_path: Path) -> None:
    _files(tmp_path)
    ds = LazyDataset.from_folder(tmp_path)
    assert len(pickle.dumps(ds)) < 2000  # paths only, not tensors
    batches = list(DataLoader(ds, batch_size=3, num_workers=2))
    assert torch.equal(torch.cat([b["y"] for b in batches]), torch.arange(6))


def test_lazy_dataset_transform_and_errors(tmp_path: Path) -> None:
    paths = _files(tmp_path, 2)
    ds = LazyDataset(paths, transform=lambda s: s["x"] * 2)
    assert torch.equal(ds[1], torch.full((4,), 2.0))
    paths[0].unlink()
    with pytest.raises(InputError, match="sample 0 is missing"):
        ds[0]
    with pytest.raises(UsageError):
        LazyDataset("one_file.pt")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        LazyDataset.from_folder(tmp_path / "nope")


def _loader(**kwargs: object) -> DataLoader:  # type: ignore[type-arg]
    ds = TensorDataset(torch.randn(16, 8), torch.arange(16))
    return DataLoader(ds, batch_size=4, **kwargs)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_check_matches_what_dataloader_really_does() -> None:
    loader = _loader(pin_memory=True)
    check = check_dataloader(loader, "cpu", draw=True)
    # DataLoader pins only when an accelerator is present; the draw is the oracle.
    assert check.will_pin == torch.cuda.is_available()
    assert check.observed_pinned == check.will_pin
    assert check.batch_bytes == 4 * 8 * 4 + 4 * 8  # float32 x and int64 y
    codes = {f.code for f in check.findings}
    assert "no-workers" in codes
    assert ("pin-without-accelerator" in codes) == (not torch.cuda.is_available())


def test_check_workers_and_prefetch() -> None:
    check = check_dataloader(_loader(num_workers=2, prefetch_factor=3), "cpu")
    assert check.overlaps_loading and check.batches_ahead == 6 and check.prefetch_factor == 3
    assert {f.code for f in check.findings} == {"workers-restart"}
    persistent = check_dataloader(
        _loader(num_workers=2, persistent_workers=True), "cpu"
    )
    assert persistent.findings == () and persistent.batches_ahead == 4


def test_check_serialises() -> None:
    check = check_dataloader(_loader(), "cpu")
    assert type(check).from_dict(check.to_dict()) == check
    assert not check.overlaps_transfer and check.observed_pinned is None


def test_check_rejects_non_loaders() -> None:
    with pytest.raises(UsageError, match="DataLoader"):
        check_dataloader(iter(_loader()), "cpu")  # type: ignore[arg-type]


def test_public_names() -> None:
    assert torchmem.LazyDataset is LazyDataset
    assert torchmem.check_dataloader is check_dataloader


@pytest.mark.cuda
def test_check_cuda_target() -> None:
    unpinned = check_dataloader(_loader(), "cuda")
    assert "not-pinned" in {f.code for f in unpinned.findings}
    pinned = check_dataloader(_loader(pin_memory=True), "cuda", draw=True)
    assert pinned.will_pin and pinned.observed_pinned and pinned.overlaps_transfer
