"""``torchmem.read()``: one :class:`~torchmem.model.readings.Reading` of a device, now.

What each figure includes and costs (measured by ``benchmarks/collectors.py``):

=================  ==============================================  ================
figure             includes                                        cost
=================  ==============================================  ================
CUDA / XPU         allocator counters: allocated, reserved,        ~20-60 us
                   active, inactive-split, peaks, retries, OOMs;
                   ``free``/``total`` from the driver
MPS                ``current_allocated_memory``,                   a few us
                   ``driver_allocated_memory``
``rss``            every resident page of the process              ~5-25 us
``heap``           bytes in use through glibc ``malloc``: all CPU  ~1 us
                   tensors, plus other C/C++ allocations
``tensor_bytes``   (``exact=True``) unique live tensor storages    ms: scales with
                   on the device, autograd-saved tensors included  live objects
=================  ==============================================  ================

Every reading has ``rss`` and ``heap`` (host memory matters on every device); only
``exact=True`` pays for the census behind ``tensor_bytes``.

Device arguments: ``None``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"xpu:0"``,
a :class:`torch.device`, or an ``int`` (an index of the current accelerator type).
"""

from __future__ import annotations

import time
from typing import Any, Union

import torch

from torchmem.collect import accelerator, cpu
from torchmem.collect.cuda import cuda_fields
from torchmem.errors import DeviceError
from torchmem.model.readings import Reading

__all__ = ["read", "read_resolved", "resolve_device", "default_device", "DeviceLike"]

DeviceLike = Union[str, int, torch.device, None]

_TIP = "pass 'cpu', 'cuda:0', 'mps', 'xpu:0', a torch.device or an int; see docs/measure.md"


def default_device() -> str:
    """The current accelerator if this process has initialised one, else ``"cpu"``.

    Never initialises a device: a script that has not touched CUDA is read on the CPU.
    """
    if torch.cuda.is_initialized():
        return f"cuda:{torch.cuda.current_device()}"
    if accelerator.is_initialized("xpu"):
        return f"xpu:{torch.xpu.current_device()}"  # type: ignore[attr-defined]
    return "cpu"


def _accelerator_type() -> str:
    accel: Any = getattr(torch, "accelerator", None)
    if accel is not None and hasattr(accel, "current_accelerator"):
        try:
            current = accel.current_accelerator()
        except Exception:  # noqa: BLE001
            current = None
        if current is not None:
            return str(current.type)
    return "cuda"


def _current_index(device_type: str) -> int:
    # current_device() would initialise the device; before that, the current one is 0
    if device_type == "cuda":
        return torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    if device_type == "xpu" and accelerator.is_initialized("xpu"):
        return int(torch.xpu.current_device())  # type: ignore[attr-defined]
    return 0


def _count(device_type: str) -> int:
    if device_type == "cuda":
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device_type == "mps":
        return 1 if torch.backends.mps.is_available() else 0
    module: Any = getattr(torch, device_type, None)
    try:
        if module is not None and module.is_available():
            return int(module.device_count())
    except Exception:  # noqa: BLE001 - back-end that cannot answer: not available
        return 0
    return 0


def resolve_device(device: DeviceLike = None) -> str:
    """Normalise a device argument to ``"cpu"``, ``"mps"`` or ``"<type>:<index>"``.

    Args:
        device: see the module docstring; ``None`` means :func:`default_device`.

    Returns:
        The normalised device string.

    Raises:
        DeviceError: the argument is not a device, or names one this machine lacks.
    """
    if device is None:
        return default_device()
    if device == "cpu":  # the common case, without parsing
        return "cpu"
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise DeviceError(
            f"torchmem.read: cannot read a device from {type(device).__name__!s}; "
            f"expected a device string, torch.device or int, got {device!r}",
            tip=_TIP,
        )
    if isinstance(device, int):
        if device < 0:
            raise DeviceError(
                f"torchmem.read: negative device index; expected >= 0, got {device}", tip=_TIP
            )
        parsed = torch.device(_accelerator_type(), device)
    elif isinstance(device, str):
        try:
            parsed = torch.device(device.strip())
        except (RuntimeError, ValueError):
            raise DeviceError(
                f"torchmem.read: unknown device string; expected e.g. 'cpu' or 'cuda:0', "
                f"got {device!r}",
                tip=_TIP,
            ) from None
    else:
        parsed = device
    kind = parsed.type
    if kind == "cpu":
        return "cpu"
    if kind == "meta":
        raise DeviceError(
            "torchmem.read: the meta device holds no memory; expected a real device, got 'meta'",
            tip=_TIP,
        )
    count = _count(kind)
    if count == 0:
        raise DeviceError(
            f"torchmem.read: device {str(parsed)!r} is not available in this torch build or "
            f"machine; expected 'cpu' or an available accelerator, got {str(parsed)!r}",
            tip=_TIP,
        )
    if kind == "mps":
        return "mps"
    index = parsed.index if parsed.index is not None else _current_index(kind)
    if index >= count:
        raise DeviceError(
            f"torchmem.read: no {kind} device {index}; expected an index below {count}, "
            f"got {index}",
            tip=_TIP,
        )
    return f"{kind}:{index}"


def reading_device(name: str) -> str:
    """A storage's device name as :func:`read` names devices: a CPU/MPS storage may say
    ``"cpu:0"``/``"mps:0"`` (-> ``"cpu"``/``"mps"``), an indexless ``"cuda"`` means
    ``"cuda:0"``."""
    kind, _, index = name.partition(":")
    if kind in ("cpu", "mps"):
        return kind
    return f"{kind}:{index or 0}"


def _exact_tensor_bytes(device: str) -> int:
    from torchmem.collect.live import live_tensor_bytes

    return sum(int(n) for key, n in live_tensor_bytes().items() if reading_device(key) == device)


def read(device: DeviceLike = None, *, exact: bool = False) -> Reading:
    """Read the memory figures of ``device`` now.

    Args:
        device: which device (see :func:`resolve_device`); ``None`` is the current
            accelerator if this process has initialised one, else the CPU.
        exact: also measure ``tensor_bytes``: the exact bytes of unique live tensor
            storages on the device, including tensors only autograd holds. This walks
            every live object (milliseconds); the default reading costs microseconds.

    Returns:
        A frozen :class:`~torchmem.model.readings.Reading`; figures the device does not
        offer are ``None``.

    Raises:
        DeviceError: the device is unknown or not available.

    Example:
        >>> r = torchmem.read("cpu")
        >>> r.heap is None or r.heap > 0
        True
    """
    return read_resolved(resolve_device(device), exact=exact)


def read_resolved(name: str, *, exact: bool = False) -> Reading:
    """:func:`read` for a device string :func:`resolve_device` already normalised.

    Samplers call this to skip parsing the device on every reading.
    """
    kind = name.split(":", 1)[0]
    fields: dict[str, int | None] = {}
    if kind == "cuda":
        fields.update(cuda_fields(int(name.split(":")[1])))
    elif kind == "xpu":
        fields.update(accelerator.xpu_fields(int(name.split(":")[1])))
    elif kind == "mps":
        fields.update(accelerator.mps_fields())
    elif kind != "cpu":
        fields.update(accelerator.generic_fields(name))
    fields["rss"] = cpu.rss_bytes()
    fields["heap"] = cpu.heap_bytes()
    if exact:
        fields["tensor_bytes"] = _exact_tensor_bytes(name)
    return Reading(device=name, time=time.time(), **fields)
