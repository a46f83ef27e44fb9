"""explain_inplace against torch's actual behaviour; no_input_mutation."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchmem
from torchmem.errors import InputMutationError, UsageError
from torchmem.scope.inplace import InputMutationWarning


def _actual(t: torch.Tensor, loss: torch.Tensor) -> str:
    """What torch really does: add_ on t, then backward through the graph of ``loss``
    (built before the in-place op, as in real code)."""
    try:
        t.add_(1)
    except RuntimeError:
        return "error_now"
    try:
        loss.backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return "error_at_backward"
    return "safe"


def _case(name: str):  # type: ignore[no-untyped-def]
    """(tensor to modify, the loss that will be backpropagated)."""
    x = torch.randn(4, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    if name == "mul_by_scalar":  # seed 000 says this raises: it does not
        y = x * 2
        return y, y.sum()
    if name == "sigmoid_result":
        y = x.sigmoid()
        return y, y.sum()
    if name == "exp_result":
        y = x.exp()
        return y, y.sum()
    if name == "consumer_saves_input":
        y = x * 1
        z = y * w
        return y, z.sum()
    if name == "leaf_requires_grad":
        return x, x.sum()
    if name == "view_of_leaf":
        return x[1:], x.sum()
    if name == "unbind_piece":
        y = x * 1
        return y.unbind(0)[0], y.sum()
    if name == "nograd_view":
        y = x * 1
        with torch.no_grad():
            v = y[:2]
        return v, y.sum()
    if name == "view_of_saved_result":
        y = x.tanh()
        return y[1:], y.sum()
    if name == "no_grad_tensor":
        t = torch.randn(4)
        return t, (x * 2).sum()
    if name == "no_grad_tensor_saved":  # a constant the graph saved: w * t saves t
        t = torch.randn(4)
        return t, (w * t).sum()
    if name == "view_consumed":
        y = x * 1
        return y[1:], (y[1:] * 3).sum()
    raise AssertionError(name)


CASES = {
    "mul_by_scalar": "safe",
    "sigmoid_result": "error_at_backward",
    "exp_result": "error_at_backward",
    "consumer_saves_input": "error_at_backward",
    "leaf_requires_grad": "error_now",
    "view_of_leaf": "error_now",
    "unbind_piece": "error_now",
    "nograd_view": "error_now",
    "view_of_saved_result": "error_at_backward",
    "no_grad_tensor": "safe",
    "no_grad_tensor_saved": "error_at_backward",
    "view_consumed": "safe",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_verdict_matches_what_torch_does(name: str) -> None:
    t, loss = _case(name)
    verdict = torchmem.explain_inplace(t, loss)
    actual = _actual(t, loss)
    assert verdict.outcome == CASES[name] == actual
    assert verdict.safe == (actual == "safe")
    if not verdict.safe:
        assert verdict.fix


def test_without_roots_it_never_says_safe() -> None:
    # the seed answered safe=True here, and backward then raised
    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    y = x * 1
    loss = (y * w).sum()
    verdict = torchmem.explain_inplace(y)
    assert not verdict.safe and verdict.outcome == "unknown"
    assert "explain_inplace(t, loss)" in verdict.fix
    assert torchmem.explain_inplace(y, loss).outcome == "error_at_backward"
    assert _actual(y, loss) == "error_at_backward"  # why roots matter
    # a problem in its own node is found without roots
    assert torchmem.explain_inplace(x.sigmoid()).outcome == "error_at_backward"
    assert torchmem.explain_inplace(torch.randn(3)).outcome == "unknown"


def test_wrong_roots_are_refused_not_answered_safe() -> None:
    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    y = x * 1
    z = (y * w).sum()
    for bad in ([z], "loss", 3.0, {"loss": z}):
        with pytest.raises(UsageError, match="explain_inplace: root 1 is not a graph root"):
            torchmem.explain_inplace(y, bad)
    with pytest.raises(UsageError, match="explain_inplace: root 2"):
        torchmem.explain_inplace(y, z, [z])
    assert torchmem.explain_inplace(y, *[z]).outcome == "error_at_backward"
    assert torchmem.explain_inplace(y, z.grad_fn).outcome == "error_at_backward"


def test_roots_that_do_not_reach_the_tensor_give_unknown() -> None:
    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    y = x * 1
    other = (w * 2).sum()  # a graph that never goes through y
    verdict = torchmem.explain_inplace(y, other)
    assert verdict.outcome == "unknown" and not verdict.safe
    assert "do not reach" in verdict.reason
    with torch.no_grad():
        detached = (y * 2).sum()  # a root without a graph
    verdict = torchmem.explain_inplace(y, detached)
    assert verdict.outcome == "unknown" and "none of the roots" in verdict.reason


def test_names_the_saving_node_and_leaf_is_fine_under_no_grad() -> None:
    x = torch.randn(3, requires_grad=True)
    assert torchmem.explain_inplace(x.sigmoid()).nodes == ("SigmoidBackward0",)
    loss = x.sigmoid().sum()  # SigmoidBackward saved its result, not x
    with torch.no_grad():
        assert torchmem.explain_inplace(x, loss).safe  # reached through AccumulateGrad
        x.add_(1)  # what optimizers do
    loss.backward()
    w = torch.randn(3, requires_grad=True)
    loss = (x * w).sum()  # MulBackward saved x
    with torch.no_grad():
        assert torchmem.explain_inplace(x, loss).outcome == "error_at_backward"


def test_already_modified_and_inference_tensors() -> None:
    x = torch.randn(3, requires_grad=True)
    y = x.sigmoid()
    y.add_(1)
    v = torchmem.explain_inplace(y)
    assert v.outcome == "already_modified"
    with torch.inference_mode():
        inf = torch.ones(2)
    v = torchmem.explain_inplace(inf)
    assert v.outcome == "error_now"
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        inf.add_(1)
    with pytest.raises(UsageError):
        torchmem.explain_inplace([1])  # type: ignore[arg-type]


def test_after_backward_the_freed_graph_is_safe() -> None:
    x = torch.randn(4, requires_grad=True)
    y = x.sigmoid()
    loss = y.sum()
    loss.backward()  # saved tensors are freed
    assert torchmem.explain_inplace(y, loss).outcome == "safe"


def test_no_input_mutation_decorator_raises_naming_the_argument() -> None:
    @torchmem.no_input_mutation
    def bad(tensor: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        tensor.mul_(scale)  # seed 000's "unintended aliasing" bug
        return tensor

    @torchmem.no_input_mutation
    def good(tensor: torch.Tensor) -> torch.Tensor:
        result = tensor.clone()
        result.mul_(2)
        return result

    x = torch.ones(3)
    assert torch.equal(good(x), torch.full((3,), 2.0)) and torch.equal(x, torch.ones(3))
    with pytest.raises(InputMutationError, match=r"bad\(\) modified .*tensor \(version 0 -> 1\)"):
        bad(x)


def test_no_input_mutation_sees_containers_views_and_indexed_assignment() -> None:
    @torchmem.no_input_mutation(action="warn")
    def f(batch: dict) -> None:
        batch["x"][0] = 5.0  # indexed assignment is in place

    with pytest.warns(InputMutationWarning, match=r"batch\['x'\]"):
        f({"x": torch.zeros(3), "y": torch.zeros(1)})


def test_no_input_mutation_context_form() -> None:
    a, b = torch.zeros(2), torch.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torchmem.no_input_mutation(a, b):
            _ = a + b
    with pytest.raises(InputMutationError, match="argument 1"):
        with torchmem.no_input_mutation(a, b):
            b[:1].add_(1)  # through a view
    with pytest.raises(UsageError):
        torchmem.no_input_mutation(a, action="ignore")
