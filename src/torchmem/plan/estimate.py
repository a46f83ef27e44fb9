"""``torchmem.estimate()``: the peak memory of a training step, before running it.

The model's parameters and buffers and the inputs are replaced by *fake tensors*
(``torch._subclasses.FakeTensorMode``: metadata, no memory), and the step runs for real
on them: forward, loss, backward, optimizer step. Every storage the step creates is
counted by the same dispatch-mode engine the CPU ``Tracker`` uses
(:mod:`torchmem.collect._engine`), so the estimate is the exact tensor-storage peak of
the same aten ops, without allocating any of it. A model built on the ``meta`` device
(too big for this machine) works too, and the step can be simulated on a device this
machine lacks when torch was built for it (``device="cuda"`` with a CUDA build of torch
and no GPU).

Nothing of the user's is changed: the model's parameters are swapped for fakes only
for the duration of the call (torch's own reparametrization, as in
``torch.func.functional_call``), the optimizer given is
only read (a fresh one of the same class and hyperparameters runs on the fakes), and
the hooks that attribute memory to modules are removed before returning, on error too.

Cost: one step of Python and dispatch overhead per simulated step (no kernel runs), a
few ms for a small model, about a second for a 12-layer transformer block stack.

Known limitations:
    * Forwards whose shapes depend on tensor *values* (``nonzero``, boolean masks,
      ``.item()`` in Python control flow) cannot run on fake tensors: a
      :class:`~torchmem.errors.UsageError` says which op.
    * A few fused kernels allocate differently from their fake (meta) implementation,
      e.g. ``nn.LSTM`` on CPU (its real kernel keeps extra workspace for backward):
      the estimate is then lower than the real peak.
    * Scratch memory inside kernels (matmul workspaces) and the CUDA allocator's
      rounding are not tensor storages and are not counted.
    * The forward runs on the calling thread with the model's parameters swapped: do
      not use the same model from another thread meanwhile.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

from torchmem.errors import DeviceError, UsageError
from torchmem.model.estimate import Estimate, ModuleEstimate
from torchmem.plan._meter import Counter, ModuleMeter, Phases
from torchmem.plan._optimizer import optimizer_groups
from torchmem.plan.wrap import check_names, checkpointed

__all__ = ["estimate"]

_TIP = "see docs/estimate.md for what an estimate can run"


def _unique_bytes(tensors: Iterator[Any]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (non-tensors skipped). Not
    :func:`torchmem.collect.graph.storage_key`: that one skips meta storages, and every
    storage here is a fake tensor's meta storage."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            st = t.untyped_storage()
            seen.setdefault(int(st._cdata), int(st.nbytes()))
    return sum(seen.values())


def estimate(
    model: nn.Module,
    *inputs: Any,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    target: Any = None,
    optimizer: torch.optim.Optimizer | None = None,
    steps: int = 2,
    device: str | torch.device | None = None,
    grad: bool = True,
    per_module: bool = True,
    checkpoint: Iterable[str] = (),
) -> Estimate:
    """Estimate the peak memory of ``steps`` training (or inference) steps.

    Each simulated step runs ``out = model(*inputs)``; then, with ``loss_fn``,
    ``loss = loss_fn(out, target)`` (``loss_fn(out)`` without a target) and
    ``loss.backward()``; then, with ``optimizer``, ``step()`` and ``zero_grad()`` of a
    fresh optimizer of the same class and hyperparameters. Two steps by default: the
    second one has the optimizer state the first created, as every later step has.

    Args:
        model: the model, on any device, ``meta`` included. It is not changed.
        *inputs: the forward's arguments (tensors, or nested lists/dicts of them); only
            their shapes, dtypes and devices matter.
        loss_fn: the loss; without it only the forward runs.
        target: the loss's second argument (labels...).
        optimizer: the optimizer whose class and hyperparameters to simulate; it is only
            read (its state is neither used nor changed).
        steps: how many steps to simulate (>= 1).
        device: simulate on this device (``"cuda"`` works without a GPU in a CUDA
            build of torch); default: where the model's parameters are.
        grad: False runs the forward under ``torch.no_grad()`` (inference; no backward).
        per_module: also attribute the forward's memory to each module.
        checkpoint: names of submodules (as in ``named_modules()``) to simulate under
            activation checkpointing (see :func:`torchmem.plan.wrap.checkpointed`).

    Returns:
        An :class:`~torchmem.model.estimate.Estimate` (plain data).

    Raises:
        UsageError: bad arguments, or a forward that needs tensor values (data-dependent
            shapes) and so cannot run on fake tensors.
        DeviceError: ``device`` is of a type this torch build has no support for.

    Example:
        >>> import torch, torchmem
        >>> model = torch.nn.Linear(1024, 1024)
        >>> est = torchmem.estimate(model, torch.randn(64, 1024),
        ...                         loss_fn=lambda out: out.pow(2).mean(),
        ...                         optimizer=torch.optim.Adam(model.parameters()))
        >>> est.optimizer_state_bytes      # exp_avg, exp_avg_sq and step of 2 params
        8396808
    """
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.utils.stateless import _reparametrize_module

    if not isinstance(model, nn.Module):
        raise UsageError(
            f"torchmem.estimate: expected an nn.Module; got {type(model).__name__}", tip=_TIP
        )
    if steps < 1:
        raise UsageError(f"torchmem.estimate: steps must be >= 1; got {steps}", tip=_TIP)
    if optimizer is not None and loss_fn is None:
        raise UsageError(
            "torchmem.estimate: an optimizer step needs gradients; expected loss_fn too",
            tip="pass loss_fn=... (e.g. torch.nn.functional.cross_entropy) and target=...",
        )
    if not grad and loss_fn is not None:
        raise UsageError(
            "torchmem.estimate: grad=False runs no backward; expected no loss_fn with it",
            tip=_TIP,
        )
    checkpoint = check_names(model, checkpoint, "estimate")
    for i, value in enumerate(inputs):
        _check_data(value, f"input {i}")
    _check_data(target, "target")
    t0 = time.perf_counter()
    named_params = list(model.named_parameters(remove_duplicate=False))
    named_buffers = list(model.named_buffers(remove_duplicate=False))
    if device is None:
        first = next((t for _, t in named_params + named_buffers), None)
        device = first.device if first is not None else torch.device("cpu")
    target_device = _check_device(torch.device(device))

    mode = FakeTensorMode(allow_non_fake_inputs=False)
    fakes: dict[int, torch.Tensor] = {}  # id(real tensor) -> its fake (ties stay tied)

    def fake(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        f = fakes.get(id(t))
        if f is None:
            with mode:
                if t.device == target_device:
                    f = mode.from_tensor(t)
                else:  # made there directly: .to() would need that device's runtime
                    f = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                            device=target_device)
                    f.requires_grad_(t.requires_grad)
            fakes[id(t)] = f
        return f

    state = {name: fake(t) for name, t in named_params + named_buffers}
    args = tree_map(fake, inputs)
    fake_target = tree_map(fake, target)
    param_bytes = _unique_bytes(state[n] for n, _ in named_params)
    buffer_bytes = _unique_bytes(state[n] for n, _ in named_buffers)
    input_bytes = _unique_bytes(iter(tree_flatten((args, fake_target))[0]))
    static = _unique_bytes(iter(tree_flatten((state, args, fake_target))[0]))
    fake_params = [state[n] for n, _ in named_params]

    notes: list[str] = []
    parts = {"gradients": 0, "optimizer_state": 0, "activations": 0}
    modules: list[ModuleEstimate] = []
    opt_name = type(optimizer).__name__ if optimizer is not None else None
    with mode:
        counter = Counter()
        phases = Phases(counter, static)
        meter = ModuleMeter(model, phases) if per_module else None
        try:
            opt: Any = None
            if optimizer is not None:  # subclasses take (params, **hyperparameters)
                opt_cls: Any = type(optimizer)
                opt = opt_cls(optimizer_groups(optimizer, fakes, target_device.type, tip=_TIP))
            with _reparametrize_module(model, state, tie_weights=True, strict=False), \
                    checkpointed(model, checkpoint):
                _steps(model, args, fake_target, target is not None, loss_fn, opt, steps, grad,
                       phases, meter, fake_params, parts)
        except UsageError:
            raise
        except Exception as err:  # noqa: BLE001 - fake-tensor limits become one clear line
            raise _explain(err) from err
        finally:
            if meter is not None:
                modules = meter.remove()
            counter.release()
    if any(isinstance(m, (nn.LSTM, nn.GRU, nn.RNN)) for m in model.modules()):
        notes.append(
            "recurrent layers (LSTM/GRU/RNN): their real CPU kernels keep workspace that "
            "the fake implementation does not; the real peak can be higher"
        )
    rows = phases.rows
    return Estimate(
        device=str(target_device),
        peak_bytes=max([r.peak_bytes for r in rows] + [static]),
        parameter_bytes=param_bytes,
        buffer_bytes=buffer_bytes,
        input_bytes=input_bytes,
        gradient_bytes=parts["gradients"],
        optimizer_state_bytes=parts["optimizer_state"],
        activation_bytes=parts["activations"],
        phases=tuple(rows),
        modules=tuple(modules),
        steps=steps,
        backward=loss_fn is not None,
        optimizer=opt_name,
        notes=tuple(notes),
        elapsed_s=time.perf_counter() - t0,
    )


def _steps(
    model: nn.Module,
    args: Any,
    target: Any,
    has_target: bool,
    loss_fn: Callable[..., torch.Tensor] | None,
    opt: Any,
    steps: int,
    grad: bool,
    phases: Phases,
    meter: ModuleMeter | None,
    params: list[torch.Tensor],
    parts: dict[str, int],
) -> None:
    """Run the simulated steps on fake tensors, recording phases and the step's parts."""
    for step in range(1, steps + 1):
        phases.start()
        before = phases.live()
        with torch.set_grad_enabled(grad):
            out = model(*args)
            loss = None
            if loss_fn is not None:
                try:
                    loss = loss_fn(out, target) if has_target else loss_fn(out)
                except UsageError:
                    raise
                except Exception as err:  # noqa: BLE001 - the loss refused out/target
                    raise _loss_failed(err, out, target, has_target) from err
        if meter is not None:
            meter.active = False  # modules are attributed on the first step only
        end = phases.end(step, "forward")
        if step == 1:
            parts["activations"] = end - before
        del out
        if loss is None:
            continue
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise UsageError(
                "torchmem.estimate: loss_fn must return a one-element tensor", tip=_TIP
            )
        phases.start()
        loss.backward()
        del loss
        phases.end(step, "backward")
        if step == 1:
            parts["gradients"] = _unique_bytes(p.grad for p in params)
        if opt is None:
            for p in params:
                p.grad = None
            continue
        phases.start()
        opt.step()
        if step == 1:
            parts["optimizer_state"] = _unique_bytes(
                v for s in opt.state.values() for v in s.values()
            )
        opt.zero_grad()
        phases.end(step, "optimizer")


def _check_data(value: Any, what: str) -> None:
    """Inputs and the target are data: a tensor with an autograd graph (the model's
    output, say) would make the simulated backward run into a graph the estimate cannot
    see (torch fails with 'Tried to backward() through example input')."""
    for t in tree_flatten(value)[0]:
        if isinstance(t, torch.Tensor) and t.grad_fn is not None:
            hint = (" target= is the loss's second argument (the labels), not the model's "
                    "output" if what == "target" else "")
            raise UsageError(
                f"torchmem.estimate: the {what} carries an autograd graph "
                f"({type(t.grad_fn).__name__}: it was computed from tensors that require "
                f"grad); expected data, a tensor without grad_fn, got shape "
                f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')} with a graph.{hint}",
                tip="pass the labels (e.g. torch.randint(0, classes, (batch,))) or "
                "tensor.detach()",
            )


def _describe(value: Any) -> str:
    tensors = [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
    if not tensors:
        return type(value).__name__
    shown = ", ".join(f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"
                      for t in tensors[:3])
    return shown + (", ..." if len(tensors) > 3 else "")


def _loss_failed(err: Exception, out: Any, target: Any, has_target: bool) -> UsageError:
    name = type(err).__name__
    if "DataDependent" in name or "DynamicOutputShape" in name:
        return _explain(err)
    text = str(err).strip().splitlines()[0] if str(err).strip() else name
    call = "loss_fn(out, target)" if has_target else "loss_fn(out)"
    got = f"out {_describe(out)}" + (f", target {_describe(target)}" if has_target else "")
    return UsageError(
        f"torchmem.estimate: {call} failed ({name}: {text}); expected a loss that accepts "
        f"the model's output{' and the target' if has_target else ''}, got {got}",
        tip="target= is the loss's second argument: labels shaped as the loss expects "
        "(F.cross_entropy: class indices of shape (batch,))",
    )


def _check_device(device: torch.device) -> torch.device:
    """``device``, if this torch build can run fake tensors on it (a device guard for its
    type must be compiled in: without one, torch aborts the process)."""
    if device.type in ("cpu", "meta"):
        built = True
    elif device.type == "cuda":
        built = torch.backends.cuda.is_built()
    elif device.type == "mps":
        built = torch.backends.mps.is_built()
    else:
        backend = getattr(torch, device.type, None)
        is_compiled = getattr(backend, "_is_compiled", None)
        built = bool(is_compiled()) if callable(is_compiled) else False
    if not built:
        raise DeviceError(
            f"torchmem.estimate: this torch build cannot simulate {device.type!r} tensors; "
            f"expected one of cpu, meta or a device type it was built for",
            tip="tensor bytes do not depend on the device: estimate on 'cpu' (or 'meta'), "
            "or install a torch build with that backend",
        )
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    return device


def _explain(err: Exception) -> UsageError:
    name = type(err).__name__
    text = str(err).strip().splitlines()[0] if str(err).strip() else name
    if "DataDependent" in name or "DynamicOutputShape" in name or "data-dependent" in text:
        return UsageError(
            f"torchmem.estimate: the forward needs tensor values ({name}: {text}); an "
            "estimate knows only shapes, expected a forward whose shapes depend on input "
            "shapes alone",
            tip="estimate the part before the data-dependent op, or measure with "
            "torchmem.track() instead",
        )
    return UsageError(
        f"torchmem.estimate: the step failed on fake tensors ({name}: {text})", tip=_TIP
    )
