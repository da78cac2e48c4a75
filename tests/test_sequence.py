"""arange, cumsum, repeat_interleave, triu/tril, isinf tests, and a transformer layer end to end, against CPU."""
import copy

import pytest
import torch
import torch_neuronx


def native(fn):
    torch_neuronx.clear_op_tracking()
    out = fn()
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    return out


@pytest.mark.parametrize("args,dtype", [((10,), None), ((2, 11, 3), None), ((0.5, 3.0, 0.25), None),
                                        ((5, -5, -2), torch.int32), ((0, 1, 0.1), torch.float64),
                                        ((3,), torch.bfloat16)])
def test_arange(args, dtype):
    got = native(lambda: torch.arange(*args, dtype=dtype, device="neuron"))
    torch.testing.assert_close(got.cpu(), torch.arange(*args, dtype=dtype))
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 3, 0, device="neuron")



@pytest.mark.parametrize("args,dtype", [
    ((0, 1, 5), torch.float32), ((-3.3, 7.1, 1000), torch.float32), ((0.1, 1.7, 33), torch.bfloat16),
    ((0.1, 1.7, 33), torch.float16), ((1e-3, 1.0, 17), torch.float64), ((2, 2, 4), torch.float32),
    ((0, 10, 5), torch.int64), ((2.7, -5.9, 7), torch.int32), ((0, 255, 256), torch.uint8),
    ((4, 9, 1), torch.float32), ((1, 0, 0), torch.float32),
])
def test_linspace(args, dtype):
    """Both ends exact; close to the CPU, which steps in the result's dtype (bfloat16
    arithmetic for bfloat16), and within half an ulp of the float64 linspace rounded, which
    neuron's double-precision steps give (from the ends rounded to the dtype, as the CPU takes
    them). Integers as the CPU: truncated ends, exact."""
    got = native(lambda: torch.linspace(*args, dtype=dtype, device="neuron")).cpu()
    expect = torch.linspace(*args, dtype=dtype)
    assert got.dtype == expect.dtype and got.shape == expect.shape
    if not dtype.is_floating_point or got.numel() <= 1:
        assert torch.equal(got, expect)
        return
    assert got[0] == expect[0] and got[-1] == expect[-1]
    ends = [torch.tensor(a, dtype=dtype).item() for a in args[:2]]  # the ends in the dtype
    # the CPU's start + i * step rounds at the scale of the ends (near a zero crossing that is
    # many ulps of the result)
    eps = torch.finfo(dtype).eps
    assert ((got.double() - expect.double()).abs() <= 2 * eps * max(map(abs, ends))).all()
    ulp = eps * got.double().abs().clamp_min(torch.finfo(dtype).tiny)
    exact = torch.linspace(*ends, args[2], dtype=torch.float64)
    bound = ulp if dtype == torch.float64 else ulp / 2  # float64: the steps' own rounding
    assert ((got.double() - exact).abs() <= bound).all()


def test_linspace_strided_out_and_errors():
    out = torch.zeros(10, device="neuron")
    native(lambda: torch.linspace(-1, 1, 5, out=out[::2]))
    expect = torch.zeros(10)
    torch.linspace(-1, 1, 5, out=expect[::2])
    torch.testing.assert_close(out.cpu(), expect)
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        torch.linspace(0, 1, -1, device="neuron")

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.bfloat16], ids=str)
def test_cumsum(dtype):
    x = torch.randint(-5, 5, (4, 7)).to(dtype)
    for dim in (0, 1, -1):
        got = native(lambda: torch.cumsum(x.to("neuron"), dim))
        torch.testing.assert_close(got.cpu(), torch.cumsum(x, dim), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(torch.cumsum(x.to("neuron"), 1, dtype=torch.float64).cpu(),
                               torch.cumsum(x, 1, dtype=torch.float64))


def test_cumsum_typed_rows_match_cpu_exactly():
    """The typed rows: positions from a bool attention mask, int64 sums that wrap around,
    int32 promoted to int64, and a long float32 row accumulated in double as the CPU does
    (bit for bit), along contiguous and strided rows."""
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(3, 50, generator=g) > 0.3
    big = torch.tensor([2**62, 2**62, 2**62, -5, 7])
    i32 = torch.randint(-2**31, 2**31 - 1, (6, 9), generator=g, dtype=torch.int32)
    f32 = torch.randn(100_000, generator=g)
    cases = [(mask, -1), (mask.t(), 0), (big, 0), (i32, 1), (i32, 0), (f32, 0), (f32.view(100, 1000), 0)]
    for x, dim in cases:
        got = native(lambda: torch.cumsum(x.to("neuron"), dim)).cpu()
        assert got.dtype == torch.cumsum(x, dim).dtype
        torch.testing.assert_close(got, torch.cumsum(x, dim), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool],
                         ids=str)
def test_cumsum_side_by_side_matches_cpu_exactly(dtype):
    """Scans run side by side: over an outer dimension, rows adjacent in memory in blocks of
    64 (a partial block, runs that restart in a batch, the threads' split); over the last
    dimension, rows apart as four chains and the rows left over. bf16 and f16 accumulate in
    float and float32 in double, as the CPU does: bit for bit."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 37, 150, generator=g) * 20
    x = x > 0 if dtype == torch.bool else x.to(dtype)
    for dim in (0, 1, 2):
        for t in (x, x[:, :, 5:141], x.transpose(1, 2)):
            got = native(lambda: torch.cumsum(t.to("neuron"), dim)).cpu()
            want = torch.cumsum(t, dim)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    if dtype in (torch.bfloat16, torch.float16):
        # a large first element, then small ones that a float sum drops and a double one keeps
        big, small, count = (2.0**17, 2.0**-7, 2**17) if dtype == torch.bfloat16 else (2.0**14, 2.0**-10, 2**14)
        row = torch.full((count + 1,), small, dtype=dtype)
        row[0] = big
        for t in (row, row.view(1, -1).expand(2, -1)):
            got = native(lambda: torch.cumsum(t.to("neuron"), -1)).cpu()
            torch.testing.assert_close(got, torch.cumsum(t, -1), rtol=0, atol=0)


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_triu_tril(k):
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(native(lambda: torch.triu(x.to("neuron"), k)).cpu(), torch.triu(x, k))
    torch.testing.assert_close(torch.tril(x.to("neuron").transpose(1, 2), k).cpu(), torch.tril(x.transpose(1, 2), k))
    y = x.to("neuron")
    y.tril_(k)
    torch.testing.assert_close(y.cpu(), torch.tril(x, k))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.triu(torch.ones(3, device="neuron"))


def test_isinf_family():
    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan")])
    for fn in (torch.isneginf, torch.isposinf, torch.isinf, torch.isnan, torch.isfinite):
        torch.testing.assert_close(fn(x.to("neuron")).cpu(), fn(x))
    torch.testing.assert_close(torch.isneginf(torch.arange(3, device="neuron")).cpu(), torch.zeros(3, dtype=torch.bool))


def test_transformer_layer_forward_backward_native():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, activation="gelu")
    x = torch.randn(2, 10, 64)
    dev_layer = copy.deepcopy(layer).to("neuron")
    ref = layer(x)
    ref.sum().backward()

    def run():
        out = dev_layer(x.to("neuron"))
        out.sum().backward()
        return out

    out = native(run)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    for p, q in zip(layer.parameters(), dev_layer.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-3, atol=1e-3)
    q = torch.randn(2, 4, 10, 16)
    got = native(lambda: torch.nn.functional.scaled_dot_product_attention(q.to("neuron"), q.to("neuron"),
                                                                          q.to("neuron"), is_causal=True))
    torch.testing.assert_close(got.cpu(), torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("repeats", [[2, 0, 3], [0, 2], [0, 0], [5], [], [1] * 40 + [0, 7]], ids=str)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_repeat_interleave(repeats, dtype):
    r = torch.tensor(repeats, dtype=dtype)
    got = native(lambda: torch.repeat_interleave(r.to("neuron")))
    expect = torch.repeat_interleave(r)
    assert got.dtype == expect.dtype
    torch.testing.assert_close(got.cpu(), expect, rtol=0, atol=0)
    x = torch.randn(len(repeats), 3)  # the tensor form gathers with the indices
    got = native(lambda: torch.repeat_interleave(x.to("neuron"), r.to("neuron"), dim=0))
    torch.testing.assert_close(got.cpu(), torch.repeat_interleave(x, r, dim=0), rtol=0, atol=0)


@pytest.mark.parametrize("repeats, kwargs, error, message", [
    (torch.tensor([[1]]), {}, RuntimeError, "only accept 1D vector"),
    (torch.tensor([1.0]), {}, NotImplementedError, "not implemented for 'Float'"),
    (torch.tensor([1, -1]), {}, RuntimeError, "repeats can not be negative"),
    (torch.tensor([2, 3]), {"output_size": 4}, RuntimeError, "allocated size does not match"),
], ids=["2d", "float", "negative", "output_size"])
def test_repeat_interleave_errors_match_cpu(repeats, kwargs, error, message):
    for device in ("cpu", "neuron"):
        with pytest.raises(error, match=message):
            torch.repeat_interleave(repeats.to(device), **kwargs)
