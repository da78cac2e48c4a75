"""Ops transformer models reach beyond the basic families, against the CPU and with no
fallback: histc (MoE routing), floor_divide, pow with a scalar base, full prod, sgn, isnan,
softplus, unfold, flip, eye, dot, mv, index_add, arange on integer dtypes, index_copy (the static KV cache), masked_scatter, erfinv, and the
complex products of complex rotary embeddings (polar, complex mul), and the fused weight norm of
wav2vec2-style positional convolutions."""
import pytest
import torch
import torch_neuronx


def check(fn, *args, tol=1e-5):
    expect = fn(*args)
    torch_neuronx.clear_op_tracking()
    got = fn(*[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args])
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expect, rtol=tol, atol=tol, equal_nan=True)


G = torch.Generator().manual_seed(0)
X = torch.randn(5, 7, generator=G)

CASES = {
    "histc_float": (lambda t: torch.histc(t, 8, -2, 2), X),
    "histc_data_range": (lambda t: torch.histc(t, 5), X),
    "floor_divide": (lambda a, b: torch.floor_divide(a, b), X, X.abs() + 0.5),
    "floor_divide_int": (lambda a, b: a // b, torch.arange(-9, 9), torch.full((18,), 4)),
    "pow_scalar_base": (lambda t: torch.pow(2.0, t), X),
    "prod_all": (lambda t: t.prod(), X),
    "prod_all_int": (lambda t: t.prod(), torch.arange(1, 8, dtype=torch.int32)),
    "sgn": (lambda t: torch.sgn(t), X),
    "isnan": (lambda t: torch.isnan(t), X.log()),
    "softplus": (lambda t: torch.nn.functional.softplus(t, 2.0, 1.0), X),
    "unfold_view": (lambda t: t.unfold(1, 3, 2), X),
    "flip": (lambda t: t.flip(0, 1), X),
    "eye": (lambda t: torch.eye(3, 4, device=t.device), X),
    "dot": (lambda a, b: torch.dot(a, b), X[0], X[1]),
    "mv": (lambda m, v: torch.mv(m, v), X, X[0]),
    "index_add": (lambda t, s, ix: t.index_add(0, ix, s, alpha=2.0), torch.zeros(4, 7), X,
                  torch.tensor([0, 2, 2, 3, 0])),
    "index_add_dim1": (lambda t, s, ix: t.index_add(1, ix, s), torch.zeros(5, 3), X[:, :4],
                       torch.tensor([2, 0, 2, 1], dtype=torch.int32)),
    "arange_int64_float_args": (lambda t: torch.arange(0, -8.000001, -4., dtype=torch.int64, device=t.device), X),
    "arange_int32_float_args": (lambda t: torch.arange(-0.9, 2.1, 2, dtype=torch.int32, device=t.device), X),
    "add_bool_alpha_false": (lambda a: torch.add(a, a.logical_not(), alpha=False), torch.tensor([True, False])),
    "index_copy_kv_cache": (lambda c, ix, v: c.clone().index_copy_(2, ix, v), torch.zeros(1, 2, 6, 3),
                            torch.tensor([4, 1]), torch.randn(1, 2, 2, 3, generator=G)),
    "masked_scatter": (lambda t, m, s: t.clone().masked_scatter_(m, s), X, X > 0, torch.randn(40, generator=G)),
    "erfinv": (lambda t: torch.erfinv(t),
               torch.tensor([-1, -0.999999, -0.5, 0, 1e-8, 0.3, 0.9, 0.99999, 1, 1.5, float("nan")])),
    "erfinv_double": (lambda t: torch.erfinv(t), torch.linspace(-0.999999, 0.999999, 101, dtype=torch.float64)),
    "polar": (lambda a, b: torch.polar(a, b), X.abs(), X.flip(0)),
    "complex_mul_broadcast": (lambda a, b: a * b, torch.randn(2, 5, 4, dtype=torch.complex64, generator=G),
                              torch.randn(5, 4, dtype=torch.complex64, generator=G)),
    "complex_mul_real_scalar": (lambda a: a * 0.5, torch.randn(5, 4, dtype=torch.complex64, generator=G)),
    "complex_mul_real_tensor": (lambda a, r: r * a, torch.randn(5, 4, dtype=torch.complex64, generator=G),
                                torch.randn(4, generator=G)),
    "complex_mul_inplace": (lambda a, b: a.clone().mul_(b), torch.randn(5, 4, dtype=torch.complex64, generator=G),
                            torch.randn(5, 4, dtype=torch.complex64, generator=G)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op(name):
    fn, *args = CASES[name]
    check(fn, *args)


def test_histc_on_integers_counts_like_float():
    # MoE routers call histc on int32 expert ids; PyTorch's CPU kernel has no integer version
    ids = torch.randint(0, 8, (300,), generator=G, dtype=torch.int32)
    got = torch.histc(ids.to("neuron"), bins=8, min=0, max=7)
    assert got.dtype == torch.int32
    assert torch.equal(got.cpu(), torch.histc(ids.float(), 8, 0, 7).int())


def test_gradients_through_new_ops():
    x = X.clone().requires_grad_()
    d = X.to("neuron").requires_grad_()
    for t in (x, d):
        (torch.nn.functional.softplus(t).sum() + t.abs().sum() + t.flip(1)[:, 0].sum()
         + t.unfold(1, 3, 2).pow(2).sum() + torch.linalg.vector_norm(t, 3)).backward()
    torch.testing.assert_close(d.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)


def test_errors_match_cpu():
    for fn in (lambda d: torch.histc(torch.ones(3, device=d), bins=0),
               lambda d: torch.dot(torch.ones(3, device=d), torch.ones(4, device=d)),
               lambda d: torch.arange(0, 5, 0.5, dtype=torch.int64, device=d),
               lambda d: torch.nn.functional.gelu(torch.ones(2, device=d), approximate="fast")):
        with pytest.raises(Exception) as cpu_error:
            fn("cpu")
        with pytest.raises(cpu_error.type):
            fn("neuron")


def test_complex_views_share_storage(quiet_fallback):
    # complex rotary embeddings view pairs of floats as complex numbers; complex arithmetic
    # itself runs on the counted CPU fallback for now
    x = torch.randn(3, 4, 2, generator=G)
    d = x.to("neuron")
    c = torch.view_as_complex(d)
    assert c.dtype == torch.complex64 and c.data_ptr() == d.data_ptr()
    assert torch.view_as_real(c).data_ptr() == d.data_ptr()
    got = torch.view_as_real(c * c)
    torch.testing.assert_close(got.cpu(), torch.view_as_real(torch.view_as_complex(x) ** 2))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(upper, left, unit):
    # batched and broadcast, as the chunked linear-attention layers call it
    a = torch.randn(2, 1, 5, 5, generator=G) + 4 * torch.eye(5)
    b = torch.randn(3, 5, 4, generator=G) if left else torch.randn(3, 4, 5, generator=G)
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit), a, b, tol=1e-4)


def test_solve_triangular_gradient_and_log_sigmoid():
    a = (torch.randn(4, 4, generator=G) + 4 * torch.eye(4)).requires_grad_()
    b = torch.randn(4, 3, generator=G).requires_grad_()
    x = torch.randn(6, generator=G).requires_grad_()
    da, db, dx = [t.detach().to("neuron").requires_grad_() for t in (a, b, x)]
    torch_neuronx.clear_op_tracking()
    for ta, tb, tx in ((a, b, x), (da, db, dx)):
        (torch.linalg.solve_triangular(ta, tb, upper=False).sum() + torch.nn.functional.logsigmoid(tx * 30).sum()).backward()
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    for d, c in ((da, a), (db, b), (dx, x)):
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layer, dim", [
    # wav2vec2/HuBERT's positional convolution: weight norm over all but the last dimension
    (lambda: torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), 2),
    (lambda: torch.nn.Linear(6, 4), 0),
])
@pytest.mark.parametrize("api", ["parametrization", "hook"])
def test_weight_norm(dtype, layer, dim, api):
    """The fused weight norm (_weight_norm_interface and its backward) against the CPU: output,
    and the gradients of g, v and the input, through both of PyTorch's weight-norm APIs."""
    torch.manual_seed(0)
    norm = (torch.nn.utils.parametrizations.weight_norm if api == "parametrization"
            else torch.nn.utils.weight_norm)
    cpu = norm(layer().to(dtype), dim=dim)
    dev = norm(layer().to(dtype), dim=dim)
    dev.load_state_dict(cpu.state_dict())
    dev.to("neuron")
    x = torch.randn(3, 8, 7, dtype=dtype) if isinstance(cpu, torch.nn.Conv1d) else torch.randn(3, 6, dtype=dtype)
    xc, xd = x.clone().requires_grad_(), x.to("neuron").requires_grad_()
    torch_neuronx.clear_op_tracking()
    outs = [m(t) for m, t in ((cpu, xc), (dev, xd))]
    ramp = torch.arange(outs[0].shape[-1], dtype=dtype) - 2  # a gradient that is not all ones
    for o in outs:
        (o * ramp.to(o.device)).sum().backward()
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs[1].cpu(), outs[0], **tol)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, **tol, msg=lambda m, name=name: f"{name}: {m}")


def test_weight_norm_interface_direct():
    """The op itself, as torch._weight_norm calls it: both results against the CPU (the norms
    in float32 for bfloat16 inputs), and a clear error for a dim it does not take."""
    v = torch.randn(4, 3, 5, generator=G, dtype=torch.bfloat16)
    for dim, g in ((0, torch.rand(4, 1, 1, generator=G)), (2, torch.rand(1, 1, 5, generator=G))):
        g = g.to(torch.bfloat16)
        expect = torch._weight_norm_interface(v, g, dim)
        got = torch._weight_norm_interface(v.to("neuron"), g.to("neuron"), dim)
        for e, d in zip(expect, got):
            assert d.dtype == e.dtype
            torch.testing.assert_close(d.cpu(), e, rtol=1.6e-2, atol=1e-3)
    with pytest.raises(RuntimeError, match="dim must be the first or the last"):
        torch._weight_norm_interface(v.to("neuron"), torch.ones(1, 3, 1, device="neuron"), 1)
