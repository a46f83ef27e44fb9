"""Every row of the view-vs-copy table in docs/views-and-copies.md, checked on real torch.

``kind`` is what the operation returns: ``"self"`` (the very same tensor object),
``"view"`` (a new tensor on the same storage) or ``"copy"`` (a new storage).
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import torchmem


def src() -> torch.Tensor:
    return torch.arange(24, dtype=torch.float32).reshape(4, 6)


def kind(a: torch.Tensor, b: torch.Tensor) -> str:
    if a is b:
        return "self"
    return "view" if torchmem.shares_storage(a, b) else "copy"


ROWS: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], str]] = [
    ("view(-1)", lambda x: x.view(-1), "view"),
    ("reshape of contiguous", lambda x: x.reshape(6, 4), "view"),
    ("reshape of transposed, flattening", lambda x: x.t().reshape(-1), "copy"),
    ("reshape of non-contiguous slice, splitting a dim", lambda x: x[:, :4].reshape(4, 2, 2), "view"),
    ("flatten of contiguous", lambda x: x.flatten(), "view"),
    ("flatten of transposed", lambda x: x.t().flatten(), "copy"),
    ("transpose(0, 1)", lambda x: x.transpose(0, 1), "view"),
    ("permute(1, 0)", lambda x: x.permute(1, 0), "view"),
    (".T", lambda x: x.T, "view"),
    ("basic slicing t[1:3]", lambda x: x[1:3], "view"),
    ("integer index t[0]", lambda x: x[0], "view"),
    ("step slicing t[:, ::2]", lambda x: x[:, ::2], "view"),
    ("narrow", lambda x: x.narrow(1, 2, 3), "view"),
    ("chunk / split", lambda x: x.chunk(2, dim=1)[1], "view"),
    ("squeeze", lambda x: x.unsqueeze(0).squeeze(0), "view"),
    ("unsqueeze", lambda x: x.unsqueeze(1), "view"),
    ("expand", lambda x: x[:1].expand(5, 6), "view"),
    ("detach", lambda x: x.detach(), "view"),
    (".data", lambda x: x.data, "view"),
    ("clone", lambda x: x.clone(), "copy"),
    ("detach().clone()", lambda x: x.detach().clone(), "copy"),
    ("contiguous of contiguous", lambda x: x.contiguous(), "self"),
    ("contiguous of transposed", lambda x: x.t().contiguous(), "copy"),
    ("repeat", lambda x: x.repeat(2, 1), "copy"),
    ("boolean mask indexing", lambda x: x[x > 5], "copy"),
    ("index tensor (fancy) indexing", lambda x: x[torch.tensor([0, 2])], "copy"),
    ("index list indexing", lambda x: x[[0, 2]], "copy"),
    ("to(same dtype)", lambda x: x.to(torch.float32), "self"),
    ("to(same device)", lambda x: x.to("cpu"), "self"),
    ("to(other dtype)", lambda x: x.to(torch.float64), "copy"),
    ("to(same dtype, copy=True)", lambda x: x.to(torch.float32, copy=True), "copy"),
    ("type_as(same)", lambda x: x.type_as(x), "self"),
    ("float() of float32", lambda x: x.float(), "self"),
]


@pytest.mark.parametrize(("label", "op", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_row(label: str, op: Callable[[torch.Tensor], torch.Tensor], expected: str) -> None:
    x = src()
    assert kind(x, op(x)) == expected, label


def test_view_writes_through_and_copy_does_not() -> None:
    x = src()
    x[1:3].fill_(-1)
    assert x[1, 0] == -1
    x.clone().fill_(7)
    assert x[0, 0] == 0


def test_view_of_non_contiguous_raises_where_reshape_copies() -> None:
    t = src().t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(-1)
    assert not torchmem.shares_storage(t, t.reshape(-1))


def test_expand_uses_stride_zero() -> None:
    e = src()[:1].expand(5, 6)
    assert e.stride() == (0, 1)
    assert torchmem.storage_info(e).used_bytes == 6 * 4


def test_clone_preserves_strides_of_dense_non_contiguous_input() -> None:
    """The seed guide says cloning a non-contiguous tensor gives a contiguous one: wrong
    for a transpose (dense, non-overlapping), whose strides clone() keeps."""
    t = src().t()
    c = t.clone()
    assert not c.is_contiguous() and c.stride() == t.stride() == (1, 6)
    assert c.clone(memory_format=torch.contiguous_format).is_contiguous()
    gappy = src()[:, ::2]  # not dense: clone compacts it
    assert gappy.clone().is_contiguous()


def test_copy_into_keeps_target_storage() -> None:
    target = torch.zeros(3, 3)
    before = target.data_ptr()
    target.copy_(torch.tensor([1.0, 2.0, 3.0]))  # broadcasts
    assert target.data_ptr() == before and target[2].tolist() == [1.0, 2.0, 3.0]


def test_slice_keeps_whole_storage_alive_until_cloned() -> None:
    x = torch.zeros(1000, 100)
    y = x[0, :]
    assert torchmem.storage_info(y).storage_bytes == 400_000
    z = x[0, :].clone()
    assert torchmem.storage_info(z).storage_bytes == 400  # only what it uses
