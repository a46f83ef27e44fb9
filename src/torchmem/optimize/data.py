"""Data loading helpers: a lazy file-backed dataset and a ``DataLoader`` checker.

:class:`LazyDataset` keeps only file paths in memory and loads one sample per
``__getitem__``: a dataset of 100 GB of tensors costs a list of paths, in the main
process and in every worker (workers receive the dataset by pickling; a dataset holding
the tensors themselves would be copied into each of them).

:func:`check_dataloader` says, as data, whether a loader's batches will be pinned and
whether loading and host-to-device copies overlap the training step, with fixes.

Example:
    >>> ds = torchmem.LazyDataset(sorted(Path("shards").glob("*.pt")))
    >>> loader = DataLoader(ds, batch_size=32, num_workers=2, pin_memory=True)
    >>> torchmem.check_dataloader(loader, "cuda").findings
    ()
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from torchmem._calls import target_device
from torchmem.collect.readings import DeviceLike
from torchmem.errors import InputError, UsageError
from torchmem.model.optimize import DataLoaderCheck, LoaderFinding
from torchmem.optimize._tree import iter_tensors

__all__ = ["LazyDataset", "check_dataloader", "load_tensor_file"]


def load_tensor_file(path: str | os.PathLike[str]) -> Any:
    """Default loader of :class:`LazyDataset`: ``torch.load`` on the CPU, tensors and
    plain containers only (``weights_only=True``, no arbitrary code from the file)."""
    return torch.load(path, map_location="cpu", weights_only=True)


class LazyDataset(Dataset):  # type: ignore[type-arg]
    """A map-style dataset that loads sample ``i`` from ``paths[i]`` when asked.

    Args:
        paths: one file per sample (or per pre-batched shard).
        loader: ``loader(path) -> sample``; default :func:`load_tensor_file`. Must be
            picklable (a module-level function) to work with ``num_workers > 0``.
        transform: applied to each loaded sample.

    Raises:
        UsageError: ``paths`` is a string or not a sequence.
        InputError: (on access) a file is missing.

    Example:
        >>> ds = torchmem.LazyDataset(["a.pt", "b.pt"])
        >>> len(ds), ds[0].shape
        (2, torch.Size([3, 224, 224]))

    Known limitations:
        Every access reads the file again; wrap ``loader`` in ``functools.lru_cache``
        to trade memory for I/O.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        loader: Callable[[str], Any] | None = None,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        if isinstance(paths, (str, bytes, os.PathLike)) or not hasattr(paths, "__len__"):
            raise UsageError(
                f"torchmem.LazyDataset: expected a sequence of file paths, got "
                f"{type(paths).__name__}",
                tip="pass sorted(Path(folder).glob('*.pt'))",
            )
        self.paths = [os.fspath(p) for p in paths]
        self.loader = loader or load_tensor_file
        self.transform = transform

    @classmethod
    def from_folder(
        cls, folder: str | os.PathLike[str], pattern: str = "*.pt", **kwargs: Any
    ) -> LazyDataset:
        """Every file of ``folder`` matching ``pattern``, in sorted order."""
        root = Path(folder)
        if not root.is_dir():
            raise InputError(
                f"torchmem.LazyDataset: folder not found; expected a directory, got {str(root)!r}",
                tip="check the path",
            )
        return cls(sorted(root.glob(pattern)), **kwargs)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Any:
        path = self.paths[index]
        if not os.path.exists(path):
            raise InputError(
                f"torchmem.LazyDataset: sample {index} is missing; expected a file at "
                f"{path!r}, got none",
                tip="the file list was built before files were moved or deleted",
            )
        sample = self.loader(path)
        return self.transform(sample) if self.transform is not None else sample

    def __repr__(self) -> str:
        return f"LazyDataset({len(self.paths)} files)"


def _accelerator_available() -> bool:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return bool(torch.cuda.is_available())


def check_dataloader(
    loader: DataLoader,  # type: ignore[type-arg]
    device: DeviceLike = None,
    *,
    draw: bool = False,
) -> DataLoaderCheck:
    """Say whether ``loader`` pins memory and overlaps loading and transfers.

    Args:
        loader: a ``torch.utils.data.DataLoader``.
        device: where the batches go (default: the current accelerator, else CPU).
        draw: also draw one batch and look at it (is it pinned? how many bytes?).
            Costs one batch of loading and, with workers, starting them.

    Returns:
        A :class:`~torchmem.model.optimize.DataLoaderCheck`.

    Raises:
        UsageError: ``loader`` is not a ``DataLoader``.
    """
    if not isinstance(loader, DataLoader):
        raise UsageError(
            f"torchmem.check_dataloader: expected a torch.utils.data.DataLoader, got "
            f"{type(loader).__name__}",
            tip="pass the DataLoader itself, not an iterator over it",
        )
    target = target_device(device, "check_dataloader")
    to_accelerator = not target.startswith("cpu")
    workers = int(loader.num_workers)
    pin = bool(loader.pin_memory)
    will_pin = pin and _accelerator_available() and not target.startswith("mps")
    factor = loader.prefetch_factor if workers > 0 else None
    ahead = workers * (factor or 0)
    findings: list[LoaderFinding] = []
    if to_accelerator and not pin:
        findings.append(LoaderFinding(
            "not-pinned", "warning",
            f"batches for {target} are in pageable memory: every host-to-device copy is "
            "staged through a pinned bounce buffer and blocks the host, even with "
            "non_blocking=True",
            "DataLoader(..., pin_memory=True), then .to(device, non_blocking=True) "
            "(or torchmem.prefetch(loader, device))",
        ))
    if pin and not _accelerator_available():
        findings.append(LoaderFinding(
            "pin-without-accelerator", "info",
            "pin_memory=True has no effect: no accelerator is available, so DataLoader "
            "does not pin",
            "drop pin_memory=True on this machine, or keep it for GPU runs",
        ))
    if workers == 0:
        findings.append(LoaderFinding(
            "no-workers", "warning" if not isinstance(loader.dataset, IterableDataset) else "info",
            "num_workers=0: batches are loaded in the training loop, one after the other, "
            "so loading never overlaps the step",
            "DataLoader(..., num_workers=2 or more), or torchmem.prefetch(loader) when "
            "loading is I/O-bound",
        ))
    elif not loader.persistent_workers:
        findings.append(LoaderFinding(
            "workers-restart", "info",
            f"{workers} workers are started again at every epoch (and each receives a "
            "copy of the dataset by pickling)",
            "DataLoader(..., persistent_workers=True)",
        ))
    if to_accelerator and will_pin:
        findings.append(LoaderFinding(
            "needs-non-blocking", "info",
            "batches are pinned; the copy overlaps compute only when issued with "
            ".to(device, non_blocking=True)",
            "use non_blocking=True, or torchmem.prefetch(loader, device)",
        ))
    observed: bool | None = None
    nbytes: int | None = None
    if draw:
        observed, nbytes = _draw(loader)
    return DataLoaderCheck(
        target=target,
        pin_memory=pin,
        will_pin=will_pin,
        num_workers=workers,
        prefetch_factor=factor,
        batches_ahead=ahead,
        persistent_workers=bool(loader.persistent_workers),
        overlaps_loading=workers > 0,
        overlaps_transfer=to_accelerator and will_pin,
        observed_pinned=observed,
        batch_bytes=nbytes,
        findings=tuple(findings),
    )


def _draw(loader: DataLoader) -> tuple[bool | None, int]:  # type: ignore[type-arg]
    iterator = iter(loader)
    try:
        batch = next(iterator)
    except StopIteration:
        return None, 0
    finally:
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
    tensors = list(iter_tensors(batch))
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    pinned = all(t.is_pinned() for t in tensors) if tensors else None
    return pinned, sum(seen.values())
