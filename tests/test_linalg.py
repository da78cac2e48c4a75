"""Singular value decompositions on neuron (the Jacobi kernel, src/kernels/svd.c) against the
CPU: singular values, the factors up to their signs (reconstruction and orthonormality), the
layouts PyTorch's meta function gives, empty and rank-deficient matrices, the errors, and
what is built on the SVD (nuclear and 2-norms with their gradients, pinv)."""
import warnings

import pytest
import torch
import torch_neuronx

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}
SHAPES = [(5, 3), (3, 5), (4, 4), (2, 6, 4), (2, 3, 7), (3, 1, 8), (1, 1), (40, 33)]


def native(fn):
    torch_neuronx.clear_op_tracking()
    out = fn()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    assert "aten::_linalg_svd.U" in torch_neuronx.get_executed_ops()
    return out


@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_svd_matches_the_cpu_up_to_signs(shape, dtype, full):
    a = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(0))
    u, s, vh = native(lambda: torch.linalg.svd(a.to("neuron"), full_matrices=full))
    cu, cs, cvh = torch.linalg.svd(a, full_matrices=full)
    for got, want in ((u, cu), (s, cs), (vh, cvh)):
        assert got.shape == want.shape and got.stride() == want.stride() and got.dtype == want.dtype
    u, s, vh = u.cpu(), s.cpu(), vh.cpu()
    torch.testing.assert_close(s, cs, **TOL[dtype])
    k = s.shape[-1]
    torch.testing.assert_close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a, **TOL[dtype])
    eye = lambda n: torch.eye(n, dtype=dtype).expand(*shape[:-2], n, n)  # noqa: E731
    torch.testing.assert_close(u.mT @ u, eye(u.shape[-1]), **TOL[dtype])
    torch.testing.assert_close(vh @ vh.mT, eye(vh.shape[-2]), **TOL[dtype])


@pytest.mark.parametrize("shape", [(0, 3), (5, 0), (2, 0, 3), (0, 4, 4), (3, 3)], ids=str)
@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
def test_empty_and_zero_matrices_give_the_cpus_identity_factors(shape, full):
    got = native(lambda: torch.linalg.svd(torch.zeros(shape, device="neuron"), full_matrices=full))
    for g, w in zip(got, torch.linalg.svd(torch.zeros(shape), full_matrices=full)):
        assert g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g.cpu(), w)


def test_rank_deficient_matrix_keeps_orthonormal_factors():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(7, 2, dtype=torch.float64, generator=g) @ torch.randn(2, 5, dtype=torch.float64, generator=g)
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to("neuron"), full_matrices=True))
    torch.testing.assert_close(s, torch.linalg.svdvals(a), rtol=0, atol=1e-12)
    torch.testing.assert_close(u.mT @ u, torch.eye(7, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(vh @ vh.mT, torch.eye(5, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close((u[:, :5] * s) @ vh, a, rtol=0, atol=1e-12)


def test_non_finite_inputs_behave_as_on_the_cpu():
    a = torch.randn(2, 3, 4)
    a[1, 0, 0] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 1\): The algorithm failed to converge"):
        torch.linalg.svd(a.to("neuron"))
    a[1, 0, 0] = float("inf")  # LAPACK gives NaN for that matrix, no error
    s = torch.linalg.svdvals(a.to("neuron")).cpu()
    torch.testing.assert_close(s[0], torch.linalg.svdvals(a[0]))
    assert s[1].isnan().all()
    with pytest.raises(NotImplementedError), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's warning; the error is the CPU's own
        torch.linalg.svd(torch.randn(3, 3, device="neuron", dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.linalg.svd(torch.randn(3, device="neuron"))


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_matrix_norms_from_singular_values_and_their_gradients(ord):
    x = torch.randn(3, 6, 4, generator=torch.Generator().manual_seed(2), requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    want = torch.linalg.matrix_norm(x, ord)
    got = native(lambda: torch.linalg.matrix_norm(xn, ord))
    torch.testing.assert_close(got.cpu(), want)
    want.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad, rtol=1e-4, atol=1e-5)


def test_matrices_past_the_jacobi_size_take_the_hosts_lapack():
    a = torch.randn(70, 90, generator=torch.Generator().manual_seed(4))
    torch_neuronx.clear_op_tracking()
    with warnings.catch_warnings():  # the fallback's warning (once per op and process)
        warnings.simplefilter("ignore")
        s = torch.linalg.svdvals(a.to("neuron"))
    assert "aten::_linalg_svd.U" in torch_neuronx.get_fallback_ops()
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a))


def test_pinv_solves_least_squares_like_the_cpu():
    a = torch.randn(6, 4, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(native(lambda: torch.linalg.pinv(a.to("neuron"))).cpu(), torch.linalg.pinv(a),
                               rtol=1e-5, atol=1e-5)
