"""explain_inplace against torch's actual behaviour; no_input_mutation."""

from __future__ import annotations

import warnings
from typing import Callable

import pytest
import torch

import torchmem
from torchmem.errors import InputMutationError, UsageError
from torchmem.scope.inplace import InputMutationWarning


def _actual(t: torch.Tensor, backward: Callable[[], torch.Tensor]) -> str:
    """What torch really does: add_ on t, then backward through the graph."""
    try:
        t.add_(1)
    except RuntimeError:
        return "error_now"
    try:
        backward().backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return "error_at_backward"
    return "safe"


def _case(name: str):  # type: ignore[no-untyped-def]
    x = torch.randn(4, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    if name == "mul_by_scalar":  # seed 000 says this raises: it does not
        y = x * 2
        return y, (), lambda: y.sum()
    if name == "sigmoid_result":
        y = x.sigmoid()
        return y, (), lambda: y.sum()
    if name == "exp_result":
        y = x.exp()
        return y, (), lambda: y.sum()
    if name == "consumer_saves_input_unseen":
        y = x * 1
        z = y * w
        return y, (), lambda: z.sum()
    if name == "consumer_saves_input":
        y = x * 1
        z = y * w
        return y, (z,), lambda: z.sum()
    if name == "leaf_requires_grad":
        return x, (), lambda: x.sum()
    if name == "view_of_leaf":
        return x[1:], (), lambda: x.sum()
    if name == "unbind_piece":
        y = x * 1
        return y.unbind(0)[0], (), lambda: y.sum()
    if name == "nograd_view":
        y = x * 1
        with torch.no_grad():
            v = y[:2]
        return v, (), lambda: y.sum()
    if name == "view_of_saved_result":
        y = x.tanh()
        return y[1:], (), lambda: y.sum()
    if name == "no_grad_tensor":
        t = torch.randn(4)
        return t, (), lambda: (x * 2).sum()
    if name == "after_backward":
        y = x.sigmoid()
        y.sum().backward()  # saved tensors are freed
        return y, (), lambda: (x * 2).sum()
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
    "after_backward": "safe",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_verdict_matches_what_torch_does(name: str) -> None:
    t, roots, backward = _case(name)
    verdict = torchmem.explain_inplace(t, *roots)
    actual = _actual(t, backward)
    assert verdict.outcome == CASES[name] == actual
    assert verdict.safe == (actual == "safe")
    if not verdict.safe:
        assert verdict.fix


def test_without_roots_consumers_are_not_seen_and_the_reason_says_so() -> None:
    t, roots, backward = _case("consumer_saves_input_unseen")
    verdict = torchmem.explain_inplace(t)
    assert verdict.safe and "pass the loss as a root" in verdict.reason
    assert _actual(t, backward) == "error_at_backward"  # why roots matter


def test_names_the_saving_node_and_leaf_is_fine_under_no_grad() -> None:
    x = torch.randn(3, requires_grad=True)
    assert torchmem.explain_inplace(x.sigmoid()).nodes == ("SigmoidBackward0",)
    with torch.no_grad():
        assert torchmem.explain_inplace(x).safe
        x.add_(1)  # what optimizers do


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
