"""Matrix products on neuron against the CPU: shapes, transposes, dtypes, bias, batches,
autograd, and the errors PyTorch gives."""
import pytest
import torch
import torch_neuronx

# float32: sums of hundreds of products differ from the CPU's order of summation by ~sqrt(k) ulp
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
       torch.float16: dict(rtol=2e-3, atol=2e-3)}


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def on(t):
    return t.to("neuron")


def reference(fn, *args):
    """The CPU result, computed in float32 for half types (the device accumulates in float32)."""
    half = any(a.dtype in (torch.bfloat16, torch.float16) for a in args if isinstance(a, torch.Tensor))
    if not half:
        return fn(*args)
    dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor))
    return fn(*[a.float() if isinstance(a, torch.Tensor) else a for a in args]).to(dtype)


def assert_native(fn):
    torch_neuronx.clear_op_tracking()
    out = fn()
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 576, 1536), (3, 64, 100), (17, 300, 33),
                                   (128, 576, 576), (130, 70, 1100)])
def test_mm(dtype, m, k, n):
    a, b = rand(m, k, dtype=dtype, seed=1), rand(k, n, dtype=dtype, seed=2)
    got = assert_native(lambda: on(a) @ on(b))
    torch.testing.assert_close(got.cpu(), reference(torch.mm, a, b), **TOL[dtype])


@pytest.mark.parametrize("layout", ["tt", "tn", "nt", "sliced"])
def test_mm_strided_operands(layout):
    a, b = rand(40, 30, seed=1), rand(30, 50, seed=2)
    if "t" in layout[:1]:
        a = rand(30, 40, seed=1).t()
    if layout[1:] == "t":
        b = rand(50, 30, seed=2).t()
    if layout == "sliced":
        a, b = rand(80, 60, seed=1)[::2, 1::2], rand(60, 100, seed=2)[1::2, ::2]
    got = assert_native(lambda: on(a) @ on(b))
    torch.testing.assert_close(got.cpu(), a @ b, **TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_linear_and_addmm(dtype):
    x, w, bias = rand(5, 64, dtype=dtype, seed=1), rand(48, 64, dtype=dtype, seed=2), rand(48, dtype=dtype, seed=3)
    got = assert_native(lambda: torch.nn.functional.linear(on(x), on(w), on(bias)))
    torch.testing.assert_close(got.cpu(), reference(torch.nn.functional.linear, x, w, bias), **TOL[dtype])
    c = rand(5, 48, dtype=dtype, seed=4)
    got = torch.addmm(on(c), on(x), on(w).t(), beta=0.5, alpha=2.0)
    torch.testing.assert_close(got.cpu(), reference(lambda *t: torch.addmm(*t, beta=0.5, alpha=2.0), c, x, w.t()),
                               **TOL[dtype])
    nan = torch.full((5, 48), float("nan"), dtype=dtype)
    got = torch.addmm(on(nan), on(x), on(w).t(), beta=0)   # beta=0 ignores the input, NaN included
    assert not torch.isnan(got.cpu()).any()


@pytest.mark.parametrize("m", [1, 2, 4])
@pytest.mark.parametrize("k", [64, 5000])
def test_float16_decode_products_match_cpu(m, k):
    """x @ W.T with few rows in float16 (a decode step): dot products over widened chunks of k,
    with a bias and with a batch of rows, as the CPU computes them (in float32)."""
    x, w, bias = rand(m, k, dtype=torch.float16, seed=1), rand(96, k, dtype=torch.float16, seed=2), \
        rand(96, dtype=torch.float16, seed=3)
    got = assert_native(lambda: torch.nn.functional.linear(on(x), on(w), on(bias)))
    torch.testing.assert_close(got.cpu(), reference(torch.nn.functional.linear, x, w, bias), **TOL[torch.float16])
    xb = rand(3, m, k, dtype=torch.float16, seed=4)
    got = assert_native(lambda: on(xb) @ on(w).t())
    torch.testing.assert_close(got.cpu(), reference(torch.matmul, xb, w.t()), **TOL[torch.float16])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("m", [1, 3])
def test_split_k_products_match_cpu(dtype, m):
    """x @ W with W stored k x n (GPT-2's Conv1D), few rows, k >= n and W of 2 MB or more: the
    threads split k and the launch adds their partial rows. With alpha and beta, a bias and a
    strided x; in bfloat16 the launch computes C in float32 and converts it."""
    k, n = (2048, 300) if dtype == torch.float32 else (4096, 300)
    x, w, c = rand(m, k, dtype=dtype, seed=1), rand(k, n, dtype=dtype, seed=2), rand(m, n, dtype=dtype, seed=3)
    got = assert_native(lambda: on(x) @ on(w))
    torch.testing.assert_close(got.cpu(), reference(torch.mm, x, w), **TOL[dtype])
    got = torch.addmm(on(c), on(x), on(w), beta=0.5, alpha=2.0)
    torch.testing.assert_close(got.cpu(), reference(lambda *t: torch.addmm(*t, beta=0.5, alpha=2.0), c, x, w),
                               **TOL[dtype])
    bias = rand(n, dtype=dtype, seed=4)
    got = torch.addmm(on(bias), on(x), on(w))
    torch.testing.assert_close(got.cpu(), reference(torch.addmm, bias, x, w), **TOL[dtype])
    wide = rand(m, 2 * k, dtype=dtype, seed=5)
    got = on(wide)[:, ::2] @ on(w)
    torch.testing.assert_close(got.cpu(), reference(torch.mm, wide[:, ::2], w), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_bmm_baddbmm_matmul(dtype):
    a, b = rand(6, 10, 32, dtype=dtype, seed=1), rand(6, 32, 12, dtype=dtype, seed=2)
    got = assert_native(lambda: torch.bmm(on(a), on(b)))
    torch.testing.assert_close(got.cpu(), reference(torch.bmm, a, b), **TOL[dtype])
    c = rand(6, 10, 12, dtype=dtype, seed=3)
    got = torch.baddbmm(on(c), on(a), on(b), beta=1.0, alpha=0.25)
    torch.testing.assert_close(got.cpu(), reference(lambda *t: torch.baddbmm(*t, alpha=0.25), c, a, b), **TOL[dtype])
    q, kt = rand(2, 3, 7, 16, dtype=dtype, seed=4), rand(2, 3, 16, 7, dtype=dtype, seed=5)
    got = torch.matmul(on(q), on(kt))                # 4-D, broadcasting matmul
    torch.testing.assert_close(got.cpu(), reference(torch.matmul, q, kt), **TOL[dtype])
    v = rand(16, dtype=dtype, seed=6)
    torch.testing.assert_close(torch.matmul(on(q), on(v)).cpu(), reference(torch.matmul, q, v), **TOL[dtype])


def test_gradients_match_cpu():
    x, w = rand(8, 20, seed=1), rand(12, 20, seed=2)
    grads = {}
    for dev in ("cpu", "neuron"):
        xd, wd = x.detach().to(dev).requires_grad_(), w.detach().to(dev).requires_grad_()
        (torch.nn.functional.linear(xd, wd) ** 2).sum().backward()
        grads[dev] = (xd.grad.cpu(), wd.grad.cpu())
    for g_dev, g_cpu in zip(grads["neuron"], grads["cpu"]):
        torch.testing.assert_close(g_dev, g_cpu, rtol=1e-5, atol=1e-4)


def test_other_dtypes_fall_back_correctly(quiet_fallback):
    a, b = rand(4, 5).double(), rand(5, 3).double()
    torch.testing.assert_close((on(a) @ on(b)).cpu(), a @ b)
    ai, bi = torch.randint(-5, 5, (4, 5)), torch.randint(-5, 5, (5, 3))
    torch.testing.assert_close((on(ai) @ on(bi)).cpu(), ai @ bi)


def test_errors_match_cpu():
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        on(rand(2, 3)) @ on(rand(4, 5))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(on(rand(2, 3)), on(rand(3, 2, dtype=torch.bfloat16)))
    out = torch.empty(0, device="neuron")
    torch.mm(on(rand(2, 3)), on(rand(3, 4)), out=out)
    assert out.shape == (2, 4)
    empty = torch.mm(on(rand(0, 3)), on(rand(3, 4)))
    assert empty.shape == (0, 4)
    zero_k = torch.mm(on(rand(2, 0)), on(rand(0, 4)))
    assert torch.equal(zero_k.cpu(), torch.zeros(2, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_weights_packed_once_stay_correct(dtype):
    """A weight used twice unchanged is packed once for the GEMM; every later change to it (in
    place, through .data, a new tensor at a reused address) still gives the CPU's answer."""
    from torch_neuronx import _C

    torch.neuron.empty_cache()
    g = torch.Generator().manual_seed(3)
    w = torch.randn(300, 70, generator=g).to(dtype)
    x = torch.randn(20, 70, generator=g).to(dtype)
    wd, xd = w.to("neuron"), x.to("neuron")

    def check():
        torch.testing.assert_close(torch.nn.functional.linear(xd, wd).cpu(),
                                   torch.nn.functional.linear(x, w), **TOL[dtype])

    check()
    assert _C._packed_weights()[1] == 0       # seen once: not packed yet
    check()
    check()
    tracked, packed, nbytes = _C._packed_weights()
    assert packed == 1 and nbytes >= w.numel() * w.element_size()
    w.add_(1.0)
    wd.add_(1.0)                              # in place: the version counter moves
    check()
    check()
    new = torch.randn(300, 70, generator=g).to(dtype)
    w.copy_(new)
    wd.data.copy_(new.to("neuron"))           # behind the version counter: samples differ
    check()
    x2 = torch.randn(5, 70, generator=g).to(dtype)  # m <= 4 reads B directly; 5 goes blocked
    torch.testing.assert_close(torch.nn.functional.linear(x2.to("neuron"), wd).cpu(),
                               torch.nn.functional.linear(x2, w), **TOL[dtype])
    del wd                                   # its storage goes; a new weight may reuse it
    wd = w.neg().to("neuron")
    w = w.neg()
    check()
    check()
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):              # another stream does not read this packing
        check()
    torch.neuron.empty_cache()
    assert _C._packed_weights() == (0, 0, 0)


def test_training_steps_keep_device_memory_flat():
    """Activations a step uses twice as a product's B are packed on the second use; once they
    die, their packed copies go with them (they had stayed until the 2 GB budget ran out, and
    every step's copies took fresh pages). After the first steps, a training loop takes no new
    device memory, and the gradients match the CPU's."""
    from torch_neuronx import _C

    torch.neuron.empty_cache()
    g = torch.Generator().manual_seed(0)
    w1, w2 = torch.randn(96, 64, generator=g), torch.randn(64, 96, generator=g)
    x = torch.randn(48, 64, generator=g)

    def step(dev):
        a, b = w1.to(dev).requires_grad_(), w2.to(dev).requires_grad_()
        h = torch.relu(x.to(dev) @ a.t())     # h is B of both weight gradients' products below
        y = (h @ b.t()).square().sum() + (h @ b[:32].t()).sum()
        y.backward()
        return a.grad, b.grad

    for _ in range(3):
        got = step("neuron")                  # as below: the last step's gradients stay alive
    torch.neuron.synchronize()
    before = torch.neuron.memory_stats()["num_device_alloc"], _C._packed_weights()
    for _ in range(4):
        got = step("neuron")
    torch.neuron.synchronize()
    assert (torch.neuron.memory_stats()["num_device_alloc"], _C._packed_weights()) == before
    for d, c in zip(got, step("cpu")):
        torch.testing.assert_close(d.cpu(), c, rtol=1e-4, atol=1e-4)
    torch.neuron.empty_cache()


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_integer_products_wrap_like_the_cpu(dtype):
    """Integer mm / bmm / addmm / baddbmm run natively and wrap around as the CPU's do (large
    values make the sums overflow); transposed operands keep their strides."""
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(0)
    a = torch.randint(info.min, info.max, (5, 7), generator=g, dtype=torch.int64).to(dtype)
    b = torch.randint(info.min, info.max, (6, 7), generator=g, dtype=torch.int64).to(dtype).t()
    c = torch.randint(info.min, info.max, (5, 6), generator=g, dtype=torch.int64).to(dtype)
    batch = torch.randint(info.min, info.max, (3, 4, 5), generator=g, dtype=torch.int64).to(dtype)
    torch_neuronx.clear_op_tracking()
    cases = [lambda a, b, c, x: a @ b, lambda a, b, c, x: torch.addmm(c, a, b, beta=3, alpha=-2),
             lambda a, b, c, x: torch.bmm(x, x.transpose(1, 2)),
             lambda a, b, c, x: torch.baddbmm(x[:, :, :4], x, x.transpose(1, 2), beta=0)]
    for f in cases:
        want = f(a, b, c, batch)
        got = f(a.to("neuron"), b.to("neuron"), c.to("neuron"), batch.to("neuron"))
        assert got.dtype == dtype and torch.equal(got.cpu(), want)
    assert torch_neuronx.get_fallback_ops() == {}


KERNEL_CHOICE = """
import torch, torch_neuronx
from torch_neuronx import _C
g = torch.Generator().manual_seed(0)
a = torch.randn(70, 544, generator=g).bfloat16()
w = torch.randn(96, 544, generator=g).bfloat16()
got = torch.nn.functional.linear(a.to("neuron"), w.to("neuron")).cpu()
want = torch.nn.functional.linear(a.float(), w.float()).bfloat16()
torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
print("isa", _C._isa())
"""


@pytest.mark.parametrize("env", [{"TN_AMX": "0"}, {"TN_ISA": "avx2"}, {"TN_ISA": "ref"}])
def test_kernel_choice_from_the_environment(env):
    """TN_ISA and TN_AMX pick the kernels at start (TN_ISA_DEBUG says which, without hanging the
    start: it once waited on its own initialisation); bf16 products agree with the CPU on each."""
    import os
    import subprocess
    import sys
    full = dict(os.environ, TN_ISA_DEBUG="1", **env)
    run = subprocess.run([sys.executable, "-c", KERNEL_CHOICE], env=full, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "[torchneuron] kernels:" in run.stderr
    isa = run.stdout.split("isa ", 1)[1].strip()
    assert "amx" not in isa
    order = ["ref", "avx2", "avx512"]
    best = torch_neuronx._C._isa().split("+")[0]  # this process: the best the CPU has
    if "TN_ISA" in env and order.index(env["TN_ISA"]) <= order.index(best):
        assert isa == env["TN_ISA"]
