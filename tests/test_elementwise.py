"""Native elementwise ops against PyTorch on the CPU: dtypes, broadcasting, type promotion,
non-contiguous operands, scalars, out= and in-place forms, autograd."""
import pytest
import torch
import torch_neuronx

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
TOL = {torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.float64: dict(rtol=1e-7, atol=1e-7),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2), torch.float16: dict(rtol=1e-3, atol=1e-3)}


def make(shape, dtype, seed=0, low=-4.0, high=4.0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    lo = 0 if dtype == torch.uint8 else -50
    return torch.randint(lo, 50, shape, generator=g, dtype=dtype)


def check(fn, *args, tol_dtype=None, **kwargs):
    """fn on neuron copies of args vs on the CPU; returns the neuron result."""
    dev_args = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args]
    try:
        expect = fn(*args, **kwargs)
    except Exception as e:   # the device must refuse what the CPU refuses, the same way
        with pytest.raises(type(e)):
            fn(*dev_args, **kwargs)
        return None
    got = fn(*dev_args, **kwargs)
    assert got.device.type == "neuron"
    assert got.dtype == expect.dtype and got.shape == expect.shape
    tol = TOL.get(tol_dtype or expect.dtype, dict(rtol=0, atol=0))
    torch.testing.assert_close(got.cpu(), expect, equal_nan=True, **tol)
    return got


def native_only(fn):
    torch_neuronx.clear_op_tracking()
    fn()
    torch.neuron.synchronize()
    fb = torch_neuronx.get_fallback_ops()
    assert fb == {}, f"fell back: {fb}"


BINARY = {
    "add": lambda a, b: a + b,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub": lambda a, b: torch.sub(a, b, alpha=3) if a.dtype != torch.bool else a ^ b,
    "mul": lambda a, b: a * b,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
}


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool], ids=str)
def test_binary_same_dtype(name, dtype):
    a, b = make((7, 33), dtype, 1), make((7, 33), dtype, 2)
    native_only(lambda: check(BINARY[name], a, b))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_division(dtype):
    a, b = make((5, 40), dtype, 1), make((5, 40), dtype, 2)
    b[b == 0] = 1
    native_only(lambda: check(torch.div, a, b))
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)
    check(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b)
    check(torch.div, a, torch.zeros_like(b))   # inf and nan, as on the CPU


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_alpha_and_trunc_division_round_as_the_cpu(dtype):
    """Bit for bit as the CPU's vectorised kernels: add/sub with a float alpha is one fused
    multiply-add, with alpha rounded to the dtype for bf16/f16; a bf16/f16 quotient is
    rounded to its dtype before `trunc`."""
    torch.manual_seed(0)
    a, b = torch.randn(4096).mul(8).to(dtype), torch.randn(4096).to(dtype)  # a whole number of vectors
    for fn in (lambda x, y: torch.add(x, y, alpha=3.14), lambda x, y: torch.sub(x, y, alpha=0.3),
               lambda x, y: torch.div(x, y, rounding_mode="trunc")):
        assert torch.equal(fn(a.to("neuron"), b.to("neuron")).cpu(), fn(a, b))


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_division(dtype):
    a, b = make((5, 40), dtype, 1), make((5, 40), dtype, 2)
    b[b == 0] = 3
    check(torch.div, a, b)   # true division: float result
    native_only(lambda: check(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b))
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_integer_arithmetic_rows(dtype):
    """Contiguous rows against a row and against a scalar, and strided views (each a loop of
    its own), bit for bit as on the CPU, wrapping around at the type's ends."""
    info = torch.iinfo(dtype)
    x = make((3, 1000), dtype, 1)
    x[0, :4] = torch.tensor([info.max, info.min, info.max - 1, info.min + 1], dtype=dtype)
    y = make((3, 1000), dtype, 2)
    for a, b in ((x, y), (x.t().contiguous().t(), y[:, ::1]), (x[:, ::3], y[:, ::3])):
        for fn in (lambda p, q: p + q, lambda p, q: torch.sub(p, q, alpha=3), lambda p, q: p * q,
                   torch.maximum, torch.minimum, lambda p, q: p & q, lambda p, q: p | q, lambda p, q: p ^ q,
                   lambda p, q: p * 3, lambda p, q: p + 7, lambda p, q: p.clamp(-50, 50),
                   lambda p, q: p.clamp(min=q), lambda p, q: torch.add(p, 5, alpha=-2)):
            assert torch.equal(fn(a.to("neuron"), b.to("neuron")).cpu(), fn(a, b))


def test_float16_rows_match_cpu():
    """float16 rows computed in one loop with the F16C conversions: a row against a row, a
    scalar on either side, both operands broadcast, a tail past the last 16 elements, and a
    strided row (the chunked path), bit for bit as the CPU's float32 arithmetic rounded."""
    torch.manual_seed(0)
    a, b = torch.randn(4099).half(), torch.randn(4099).half()
    s = torch.tensor(0.3).half()
    cases = [(a, b), (a, s), (s, b), (s.expand(4099), torch.tensor(-1.5).half().expand(4099)), (a[::2], b[::2])]
    for x, y in cases:
        for fn in (torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum):
            assert torch.equal(fn(x.to("neuron"), y.to("neuron")).cpu(), fn(x, y))
    for x, y in cases[:2]:  # (with a scalar first, the CPU's own scalar tail rounds a + alpha*b differently)
        assert torch.equal(torch.add(x.to("neuron"), y.to("neuron"), alpha=2.5).cpu(), torch.add(x, y, alpha=2.5))
    for fn in (torch.neg, torch.abs, torch.relu, torch.sqrt, torch.floor):
        for x in (a, a[::2]):
            torch.testing.assert_close(fn(x.to("neuron")).cpu(), fn(x), rtol=0, atol=0, equal_nan=True)
    for fn in (torch.nn.functional.silu, torch.exp, torch.tanh, torch.sigmoid):
        torch.testing.assert_close(fn(a.to("neuron")).cpu(), fn(a), rtol=1e-3, atol=1e-3)


def test_integer_division_by_zero_raises_at_sync():
    a = torch.tensor([4, 5], device="neuron")
    b = torch.tensor([2, 0], device="neuron")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a, b, rounding_mode="floor").cpu()


@pytest.mark.parametrize("pair", [
    (torch.int32, torch.float32), (torch.float16, torch.float32), (torch.bfloat16, torch.float16),
    (torch.uint8, torch.int8), (torch.bool, torch.int64), (torch.float32, torch.float64),
    (torch.int64, torch.bfloat16),
], ids=str)
def test_type_promotion(pair):
    a, b = make((6, 10), pair[0], 1), make((6, 10), pair[1], 2)
    for fn in (lambda x, y: x + y, lambda x, y: x * y, torch.maximum, torch.lt):
        native_only(lambda: check(fn, a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_broadcasting_and_layouts(dtype):
    a = make((4, 1, 6), dtype, 1)
    b = make((5, 1), dtype, 2)
    native_only(lambda: check(lambda x, y: x * y + x, a, b))
    big = make((8, 12), dtype, 3)
    check(lambda x: x.t() - x.t()[0], big)          # transposed and broadcast row
    check(lambda x: x[::2, 1::3] * 2, big)          # strided, Python scalar
    check(lambda x: 3 - x[1:, 2:], big)             # offset, reversed scalar
    check(lambda x: x * torch.tensor(2, dtype=dtype), big)   # 0-dim CPU tensor operand


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_scalar_promotion_keeps_tensor_dtype(dtype):
    x = make((3, 4), dtype)
    got = check(lambda t: t * 2.5 + 1, x)
    assert got.dtype == dtype
    i = make((3, 4), torch.int32)
    assert check(lambda t: t * 2.5, i).dtype == torch.float32


def test_out_and_inplace():
    a, b = make((6, 7), torch.float32, 1), make((6, 7), torch.float32, 2)
    da, db = a.to("neuron"), b.to("neuron")
    out = torch.empty(6, 7, device="neuron")
    torch.add(da, db, out=out)
    torch.testing.assert_close(out.cpu(), a + b)
    out64 = torch.empty(6, 7, dtype=torch.float64, device="neuron")
    torch.mul(da, db, out=out64)
    torch.testing.assert_close(out64.cpu(), (a * b).double())
    da.add_(db, alpha=0.5)
    a.add_(b, alpha=0.5)
    torch.testing.assert_close(da.cpu(), a)
    col = da[:, 2]
    col.mul_(10)
    a[:, 2] *= 10
    torch.testing.assert_close(da.cpu(), a)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        torch.add(da, db, out=torch.empty(6, 7, dtype=torch.int64, device="neuron"))
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        torch.ones(2, dtype=torch.bool, device="neuron") - torch.ones(2, dtype=torch.bool, device="neuron")


DIRECT_BINARY = {"add": lambda a, b: a.add(b, alpha=2), "sub": lambda a, b: a.sub(b, alpha=3),
                 "mul": torch.Tensor.mul, "div": torch.Tensor.div}
DIRECT_UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh",
                "sigmoid"]


def test_functional_and_inplace_forms_are_registered_directly():
    # The composite forms would run a meta function and dispatch again (docs/kernels.md).
    ops = ["add.Tensor", "add_.Tensor", "sub.Tensor", "sub_.Tensor", "mul.Tensor", "mul_.Tensor",
           "div.Tensor", "div_.Tensor", "silu", "silu_", "silu_backward", "gelu", "gelu_", "sum", "sum.dim_IntList",
           "cat", "mean", "mean.dim", "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "lt.Tensor",
           "lt.Scalar", "le.Tensor", "le.Scalar", "gt.Tensor", "gt.Scalar", "ge.Tensor",
           "ge.Scalar"] + DIRECT_UNARY + [u + "_" for u in DIRECT_UNARY]
    missing = [op for op in ops if not torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + op, "PrivateUse1")]
    assert missing == []


@pytest.mark.parametrize("name", list(DIRECT_BINARY))
def test_direct_binary_forms_match_cpu(name):
    fn = DIRECT_BINARY[name]
    inplace = getattr(torch.Tensor, name + "_")
    kw = {"alpha": 2} if name == "add" else {"alpha": 3} if name == "sub" else {}
    a, b = make((5, 6), torch.float32, 1), make((6,), torch.float32, 2, low=0.5, high=4.0)
    native_only(lambda: check(fn, a, b))                    # broadcast
    native_only(lambda: check(fn, a.t(), make((6, 5), torch.float32, 3)))  # non-contiguous
    scalar = torch.tensor(1.5)                                # stays on the CPU: a wrapped scalar
    native_only(lambda: torch.testing.assert_close(fn(a.to("neuron"), scalar).cpu(), fn(a, scalar)))
    native_only(lambda: check(fn, make((4,), torch.int64, 4), make((4,), torch.int64, 5, low=1)))
    da, ta = a.to("neuron"), a.clone()
    native_only(lambda: inplace(da, b.to("neuron"), **kw))
    inplace(ta, b, **kw)
    torch.testing.assert_close(da.cpu(), ta)
    view = da.t()[1:4]                                       # in place through a strided view
    inplace(view, 2.0)
    inplace(ta.t()[1:4], 2.0)
    torch.testing.assert_close(da.cpu(), ta)
    # errors as on the CPU: a broadcast past self's shape, a partial overlap, an unsafe cast
    def errors(dev):
        t = torch.ones(5, 6, device=dev)
        return [(torch.ones(6, device=dev), torch.ones(5, 6, device=dev)), (t[1:], t[:-1]),
                (torch.ones(3, dtype=torch.int64, device=dev), torch.full((3,), 0.5, device=dev))]
    for cpu_args, dev_args in zip(errors("cpu"), errors("neuron")):
        with pytest.raises(RuntimeError) as cpu_err:
            inplace(*cpu_args)
        with pytest.raises(RuntimeError) as dev_err:
            inplace(*dev_args)
        assert str(dev_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("name", DIRECT_UNARY + ["silu", "gelu"])
def test_direct_unary_forms_match_cpu(name):
    mod = torch.nn.functional if name in ("silu", "gelu") else torch
    fn, inplace = getattr(mod, name), getattr(torch.Tensor, name + "_", None)
    x = make((7, 9), torch.float32, 6, low=0.1, high=3.0)
    native_only(lambda: check(fn, x))
    native_only(lambda: check(fn, x.t()))
    native_only(lambda: check(fn, x.to(torch.bfloat16)))
    if inplace is None:  # silu_ / gelu_ exist as aten ops only: F.silu(x, inplace=True)
        inplace = lambda t: fn(t, inplace=True) if name == "silu" else torch.ops.aten.gelu_(t)
    d, t = x.to("neuron"), x.clone()
    native_only(lambda: inplace(d.t()))
    inplace(t.t())
    torch.testing.assert_close(d.cpu(), t, rtol=1.3e-6, atol=1e-5)
    if name not in ("neg", "abs"):  # integers: the CPU refuses (a float result, or no kernel)
        with pytest.raises(RuntimeError) as cpu_err:
            inplace(torch.ones(3, dtype=torch.int64))
        with pytest.raises(RuntimeError) as dev_err:
            inplace(torch.ones(3, dtype=torch.int64, device="neuron"))
        assert str(dev_err.value) == str(cpu_err.value)


def test_direct_sum_mean_cat_and_comparisons_match_cpu():
    x = make((4, 5), torch.float32, 7)
    native_only(lambda: check(lambda t: t.mean(), x))
    native_only(lambda: check(lambda t: t.mean(1, keepdim=True), x.to(torch.bfloat16)))
    native_only(lambda: check(lambda t: t.mean((0, 1), dtype=torch.float64), x))
    check(lambda t: t.mean(), make((4, 5), torch.int32, 8))    # integers: the CPU's error
    for cmp in [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]:
        native_only(lambda: check(cmp, x, x[0]))                # broadcast, bool result
        native_only(lambda: check(lambda t: cmp(t, 0.5), x))    # a Python scalar
        native_only(lambda: check(cmp, make((6,), torch.int64, 9), make((6,), torch.float32, 10)))
    native_only(lambda: check(lambda t: t.sum(), x))
    native_only(lambda: check(lambda t: t.sum((0,), keepdim=True), x))
    native_only(lambda: check(lambda t: t.sum(-1, dtype=torch.float64), x))
    native_only(lambda: check(lambda t: t.sum(), make((4, 5), torch.int32, 8)))   # promotes to int64
    native_only(lambda: check(lambda a, b: torch.cat([a, b], 1), x, make((4, 2), torch.float32, 9)))
    native_only(lambda: check(lambda a, b: torch.cat([a, b]), torch.empty(0), x[0]))  # legacy empty skip
    check(lambda a, b: torch.cat([a, b]), x.t(), x.t())                 # composite: strided inputs
    check(lambda a, b: torch.cat([a, b]), x, x.double())               # composite: mixed dtypes
    check(lambda a, b: torch.cat([a, b]), torch.tensor(1.0), torch.tensor(2.0))  # 0-dim: the CPU's error
    check(lambda a, b: torch.cat([a, b]), x, make((4, 2), torch.float32, 9))     # sizes: the CPU's error


def test_large_tensors_use_threads_consistently():
    a, b = make((1000, 1031), torch.float32, 1), make((1031,), torch.float32, 2)
    native_only(lambda: check(lambda x, y: torch.maximum(x * y - 1, x), a, b))


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "expm1": torch.expm1,
    "log": lambda x: torch.log(x.abs() + 0.1), "log1p": lambda x: torch.log1p(x.abs()),
    "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
    "reciprocal": lambda x: torch.reciprocal(x + 10), "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
    "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "relu": torch.relu, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc,
    "round": torch.round, "sign": torch.sign, "log2": lambda x: torch.log2(x.abs()),
    "log10": lambda x: torch.log10(x.abs()), "exp2": torch.exp2, "erfinv": lambda x: torch.erfinv(x / 6.5),
}


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_unary_floats(name, dtype):
    x = make((9, 37), dtype, low=-6, high=6)
    native_only(lambda: check(UNARY[name], x))
    check(UNARY[name], x.t())           # non-contiguous


def test_unary_special_values():
    x = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 100.0, -100.0, 1e-30])
    for name in ("exp", "tanh", "sigmoid", "relu", "abs", "neg", "floor", "sign", "expm1", "exp2", "erf", "round"):
        check(UNARY[name], x)
    for fn in (torch.log1p, torch.log2, torch.log10, torch.erfinv):
        check(fn, x)
    check(torch.log1p, torch.tensor([-1.0, -0.5, -1e-8, 1e-8, 3e38]))
    check(torch.erfinv, torch.tensor([-1.0, 1.0, -0.9999999, 0.9999999, 1.5, 0.5, 1e-20]))
    check(torch.round, torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 8388607.5, 1e20]))
    # whole powers: exactly, as on the CPU
    powers = torch.tensor([2.0 ** k for k in range(-20, 21)])
    torch.testing.assert_close(torch.log2(powers.to("neuron")).cpu(), torch.log2(powers), rtol=0, atol=0)
    torch.testing.assert_close(torch.exp2(torch.arange(-30.0, 31.0).to("neuron")).cpu(),
                               torch.exp2(torch.arange(-30.0, 31.0)), rtol=0, atol=0)


def test_special_values_of_the_inverse_hyperbolic_and_activation_rows():
    """The float32 rows' edges as on the CPU: signed zeros, infinities, NaN, the ends of the
    domains, and large arguments (tan past the vector reduction's range, asinh/acosh past
    x^2's)."""
    edge = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 0.5, -0.5, 1e-30, 3.0, -3.0,
            2.5, -2.5, 100.0, -100.0, 1e5, 3e38, 88.5, -88.5, 89.2]
    x = torch.tensor(edge)
    fns = [torch.atan, torch.asin, torch.acos, torch.tan, torch.sinh, torch.cosh, torch.asinh, torch.acosh,
           torch.atanh, torch.frac, torch.nn.functional.hardswish, torch.nn.functional.hardsigmoid,
           torch.nn.functional.logsigmoid, torch.nn.functional.softplus,
           lambda t: torch.nn.functional.leaky_relu(t, 0.2), lambda t: torch.nn.functional.softplus(t, 2.0, 5.0)]
    for fn in fns:
        native_only(lambda: check(fn, x))
        check(fn, x.to(torch.bfloat16))
    check(torch.tan, torch.tensor([1e4, -3e5, 8191.9, 8192.1, 1.5707964]))
    a = torch.tensor([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("inf"), float("nan"), 2.0, -7.0, 3e38])
    b = torch.tensor([0.0, 0.0, -0.0, -0.0, float("inf"), -float("inf"), float("inf"), -float("inf"), 1.0, 1.0, -3.0, 0.0, 3e38])
    for fn in (torch.atan2, torch.copysign, torch.hypot):
        native_only(lambda: check(fn, a, b))
        native_only(lambda: check(fn, b, a))
    check(torch.hypot, torch.tensor([float("nan"), float("inf")]), torch.tensor([float("inf"), float("nan")]))


@pytest.mark.parametrize("dtype", INTS + [torch.bool], ids=str)
def test_unary_integers(dtype):
    x = make((5, 11), dtype)
    for fn in (torch.abs, torch.neg, torch.sign, torch.floor, torch.logical_not, torch.bitwise_not,
               torch.exp, torch.sqrt):
        check(fn, x, tol_dtype=torch.float32)
    if dtype != torch.bool:
        check(torch.relu, x)


def test_activation_gradients_match_cpu():
    x = make((16, 24), torch.float32, low=-3, high=3)
    weights = torch.arange(24.0).expand(16, 24).contiguous()
    for fn in (torch.relu, torch.sigmoid, torch.tanh, torch.nn.functional.silu,
               torch.nn.functional.gelu, lambda t: torch.nn.functional.gelu(t, approximate="tanh")):
        grads = []
        for dev in ("cpu", "neuron"):
            t = x.detach().to(dev).requires_grad_()
            fn(t).backward(weights.to(dev))
            grads.append(t.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_softplus_and_gelu_backward_are_native_across_their_branches(dtype):
    """softplus_backward as one launch (beta x past the threshold, below it, and beta other
    than 1), and the exact GELU and its backward into both tails, where the normal CDF is
    1 - erfc / 2 or erfc / 2 (down to x = -13, where it is still a normal float)."""
    x = torch.cat([torch.linspace(-13, 10, 997), torch.tensor([0.0, -0.0, 4.9, 5.1, 20.5, -30.0])]).to(dtype)
    g = make(x.shape, dtype, 5)
    for beta, threshold in ((1, 20), (2.0, 5.0), (0.5, -1.0)):
        native_only(lambda: check(lambda a, b: torch.ops.aten.softplus_backward(a, b, beta, threshold), g, x))
    native_only(lambda: check(torch.nn.functional.gelu, x))
    native_only(lambda: check(lambda a, b: torch.ops.aten.gelu_backward(a, b), g, x))
    if dtype == torch.float32:  # the left tail to its relative accuracy (the CPU's cancels to 0)
        left = torch.linspace(-13, -4, 301)
        got = torch.nn.functional.gelu(left.to("neuron")).cpu().double()
        want = 0.5 * left.double() * torch.special.erfc(-left.double() / 2**0.5)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_round_decimals_is_native_and_rounds_as_the_cpu(dtype):
    """round(x, decimals) in one launch with the CPU's float arithmetic: ties to even after the
    scaling's own rounding, negative decimals, and scales past the float range (inf, NaN)."""
    x = torch.cat([make((997,), torch.float32, 7, low=-3000, high=3000),
                   torch.tensor([0.5, 1.5, 2.5, -0.5, 0.125, 0.375, 0.005, 1.005, 2.675, 15.0, -25.0, float("inf"),
                                 float("nan"), -0.0])]).to(dtype)
    for decimals in (1, 2, 3, -1, -2, 10, 40, -40):
        native_only(lambda: check(lambda t: torch.round(t, decimals=decimals), x))
    check(lambda t: torch.round(t, decimals=2), x.double())  # the CPU fallback's double arithmetic


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_activation_scalars_stay_float_for_half_tensors(dtype):
    """The activations' slope and thresholds are float in PyTorch's kernels, not values of the
    tensor's dtype: 0.1 rounded to bfloat16 (0.10009765625) had put softplus's and
    threshold_backward's cut-offs on the wrong side of x = 0.10009765625 (softplus off by 0.65
    there), and leaky_relu's slope of 0.01 a rounding off on thousands of elements."""
    x = torch.linspace(-3, 3, 20001).to(dtype)
    g = torch.linspace(-1, 1, 20001).to(dtype)
    cases = [lambda t, u: torch.nn.functional.leaky_relu(t, 0.01),
             lambda t, u: torch.ops.aten.leaky_relu_backward(u, t, 0.01, False),
             lambda t, u: torch.nn.functional.softplus(t, 1, 0.1),
             lambda t, u: torch.ops.aten.softplus_backward(u, t, 1, 0.1),
             lambda t, u: torch.ops.aten.threshold_backward(u, t, 0.1)]
    for fn in cases:
        got = fn(x.to("neuron"), g.to("neuron")).cpu()
        assert torch.equal(got, fn(x, g))


def test_activation_second_derivatives_match_cpu():
    """silu_backward runs as one native op (not PyTorch's composite), and autograd still
    differentiates it: the second derivatives of silu and gelu as on the CPU."""
    x = make((8, 12), torch.float32, 3, low=-4, high=4)
    for fn in (torch.nn.functional.silu, torch.nn.functional.gelu):
        results = []
        for dev in ("cpu", "neuron"):
            t = x.detach().to(dev).requires_grad_()
            (g,) = torch.autograd.grad(fn(t).sum(), t, create_graph=True)
            (gg,) = torch.autograd.grad((g * g).sum(), t)
            results.append((g.detach().cpu(), gg.cpu()))
        torch.testing.assert_close(results[1], results[0], rtol=1e-5, atol=1e-4)


def test_pow():
    x = make((4, 9), torch.float32, low=0.1, high=3)
    native_only(lambda: check(lambda t: t ** 2.5, x))
    check(lambda t: torch.pow(t, t), x)
    check(lambda t: t ** 3, make((4, 9), torch.int64))   # integer powers via the fallback


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_pow_of_tensors(dtype):
    """Integer powers of integer tensors run natively: overflow wraps, negative exponents give
    1 (base 1), +-1 (base -1) or 0, as on the CPU."""
    base = torch.tensor([2, -1, 1, 0, 3, -2, 7, -1, 5], dtype=dtype)
    exp = torch.tensor([3, -3, -5, 0, -1, 2, 40, 4, 0], dtype=dtype)
    native_only(lambda: check(lambda a, b: torch.pow(a, b), base, exp))


# Outputs larger than 3/4 of the last-level cache are written with non-temporal stores
# (src/kernels/nontemporal.h): 28 MB outputs are past that for caches up to 37 MB. The views
# start one element in, so the lines at both ends are partial.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_outputs_stream_past_the_cache(dtype):
    BIG = 28_000_000 // dtype.itemsize + 1
    if torch_neuronx._C._nontemporal_min_bytes() > (BIG - 1) * dtype.itemsize:
        pytest.skip("this machine's cache is larger than the test's tensors")
    x = make((BIG,), dtype, seed=1)[1:]
    y = make((BIG,), dtype, seed=2)[1:]
    dx, dy = x.to("neuron"), y.to("neuron")
    torch.testing.assert_close(torch.add(dx, dy, alpha=2).cpu(), torch.add(x, y, alpha=2), rtol=0, atol=0)
    torch.testing.assert_close((dx * dy).cpu(), x * y, rtol=0, atol=0)
    torch.testing.assert_close(torch.relu(dx).cpu(), torch.relu(x), rtol=0, atol=0)
    torch.testing.assert_close(dx.clone().cpu(), x, rtol=0, atol=0)
    other = torch.float32 if dtype == torch.bfloat16 else torch.bfloat16
    torch.testing.assert_close(dx.to(other).cpu(), x.to(other), rtol=0, atol=0)
    out = torch.empty(BIG, dtype=dtype, device="neuron")[1:]
    torch.testing.assert_close(out.fill_(-1.25).cpu(), torch.full((BIG - 1,), -1.25, dtype=dtype), rtol=0, atol=0)
    torch.testing.assert_close(out.zero_().cpu(), torch.zeros(BIG - 1, dtype=dtype), rtol=0, atol=0)


def test_comparison_rows_with_nan_and_ties():
    """Contiguous rows against a scalar and against a row (the loops of constant strides),
    with equal values and NaN, across vector widths and a tail."""
    x = make((1003,), torch.float32, 11)
    x[::7] = 0.5
    x[3::11] = float("nan")
    y = x.flip(0).clone()
    for cmp in [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]:
        native_only(lambda: check(lambda t: cmp(t, 0.5), x))
        native_only(lambda: check(lambda t: cmp(t, float("nan")), x))
        native_only(lambda: check(cmp, x, y))
        native_only(lambda: check(lambda a, b: cmp(a[::2], b[::2]), x, y))   # strided
