"""The claims of TMM904 and TMM905 (and of what they leave alone), checked against PyTorch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_pairwise_broadcast_builds_the_n_m_d_tensor_that_cdist_does_not_need():
    torch.manual_seed(0)
    x, y = torch.randn(50, 16, dtype=torch.float64), torch.randn(40, 16, dtype=torch.float64)
    diff = x[:, None, :] - y[None, :, :]
    assert diff.shape == (50, 40, 16)  # D times the size of the result
    dist = diff.norm(dim=-1)
    assert dist.shape == (50, 40)
    exact = torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")
    assert torch.allclose(dist, exact)
    assert torch.allclose((x[:, None, :] * y[None, :, :]).sum(-1), x @ y.T)


def test_matmul_reads_a_transposed_operand_without_a_contiguous_copy():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 8, 5), torch.randn(2, 3, 8, 5)
    kt = k.transpose(-2, -1)
    assert not kt.is_contiguous()
    assert torch.allclose(q @ kt, q @ kt.contiguous())
    w = torch.randn(6, 5)
    strided = w.t().contiguous().t()  # the same values in column-major layout
    # the same product up to rounding: another layout may take another kernel
    assert torch.allclose(torch.nn.functional.linear(q, strided),
                          torch.nn.functional.linear(q, w), rtol=1e-5, atol=1e-6)


def test_contiguous_on_a_contiguous_tensor_is_no_copy():
    """Why no rule flags ``.contiguous()`` on a fresh tensor: it returns the tensor itself."""
    t = torch.zeros(3, 4)
    assert t.contiguous() is t
    assert t.t().contiguous().data_ptr() != t.data_ptr()  # a transposed one is copied
