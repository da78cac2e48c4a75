"""Reductions and softmax on neuron against the CPU."""
import pytest
import torch
import torch_neuronx

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-7, atol=1e-7),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2), torch.float16: dict(rtol=1e-3, atol=1e-3)}
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.3
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -20, 20, shape, generator=g, dtype=dtype)


def check(fn, *args):
    try:
        expect = fn(*args)
    except Exception as e:
        with pytest.raises(type(e)):
            fn(*[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args])
        return
    torch_neuronx.clear_op_tracking()
    got = fn(*[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args])
    exp_list = expect if isinstance(expect, tuple) else (expect,)
    got_list = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got_list, exp_list):
        assert g.device.type == "neuron" and g.dtype == e.dtype and g.shape == e.shape
        tol = TOL.get(e.dtype, dict(rtol=0, atol=0))
        torch.testing.assert_close(g.cpu(), e, equal_nan=True, **tol)
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()


REDUCTIONS = {
    "sum_all": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(1),
    "sum_dims_keep": lambda x: x.sum((0, 2), keepdim=True),
    "sum_neg": lambda x: x.sum(-1),
    "amax": lambda x: x.amax(1),
    "amin_all": lambda x: x.amin((0, 1, 2)),
    "max_dim": lambda x: x.max(2),
    "min_dim_keep": lambda x: x.min(0, keepdim=True),
    "max_all": lambda x: x.max(),
    "argmax": lambda x: x.argmax(1),
    "argmin_flat": lambda x: x.argmin(),
    "argmax_keep": lambda x: x.argmax(-1, keepdim=True),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.uint8], ids=str)
def test_reductions(name, dtype):
    check(REDUCTIONS[name], make((4, 7, 9), dtype))


VARIANCES = {
    "var_all": lambda x: x.var(),
    "var_dim": lambda x: torch.var(x, 1),
    "std_dims_keep": lambda x: torch.std(x, (0, 2), keepdim=True),
    "var_correction0": lambda x: torch.var(x, -1, correction=0),
    "std_correction2": lambda x: torch.std(x, 0, correction=2),
    "var_mean": lambda x: torch.var_mean(x, 1),
    "std_mean_all": lambda x: torch.std_mean(x),
    "std_mean_strided": lambda x: torch.std_mean(x.transpose(0, 2), (1, 2), keepdim=True),
    "var_dof_zero": lambda x: torch.var(x, 0, correction=4),      # N - correction = 0: inf/nan
    "var_empty": lambda x: torch.var(x[:, :0], 1),                # NaN over an empty dimension
    "var_int": lambda x: torch.var(x.to(torch.int64)),            # error, as on the CPU
}


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("name", list(VARIANCES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_var_std(name, dtype):
    check(VARIANCES[name], make((4, 7, 9), dtype) * 3 + 1)


def test_std_gradient():
    x = torch.randn(6, 10, requires_grad=True)
    d = x.detach().to("neuron").requires_grad_()
    torch.std(x, 1).sum().backward()
    torch.std(d, 1).sum().backward()
    torch.testing.assert_close(d.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mean_prod_and_dtype_arguments(dtype):
    x = make((5, 6, 7), dtype)
    check(lambda t: t.mean(), x)
    check(lambda t: t.mean((1, 2), keepdim=True), x)
    check(lambda t: t.sum(1, dtype=torch.float64), x)
    check(lambda t: t.prod(2), x * 0.5 + 1)
    check(lambda t: t.t().sum(0) if t.dim() == 2 else t.transpose(0, 2).sum(1), x)   # strided input


def test_integer_and_bool_reductions():
    i = make((6, 9), torch.int32)
    check(lambda t: t.sum(1), i)               # int64 result
    check(lambda t: t.prod(0), i % 3 + 1)
    check(lambda t: t.mean(), i)               # error, as on the CPU
    b = make((6, 9), torch.bool)
    check(lambda t: t.all(1), b)
    check(lambda t: t.any(0), b)
    check(lambda t: t.sum(), b)


def test_contiguous_int64_and_bool_sums_wrap_and_count_exactly():
    """The contiguous rows' loops: int64 sums wrap around as the CPU's (four partial sums), and
    a bool count past 2^24 elements (its 32-bit partial counts) is exact."""
    g = torch.Generator().manual_seed(0)
    big = torch.randint(-2**62, 2**62, (1003,), generator=g)
    for t, fn in ((big, lambda t: t.sum()), (big.view(17, 59), lambda t: t.sum(1)),
                  (big[:1000].view(10, 100).t(), lambda t: t.sum(0))):
        assert torch.equal(fn(t.to("neuron")).cpu(), fn(t))
    mask = torch.rand(2**24 + 77, generator=g) > 0.25
    assert torch.equal(mask.to("neuron").sum().cpu(), mask.sum())
    ones = torch.ones(3, 2**24 + 3, dtype=torch.bool)
    assert torch.equal(ones.to("neuron").sum(1).cpu(), ones.sum(1))


def test_empty_and_nan():
    e = torch.zeros(3, 0)
    check(lambda t: t.sum(1), e)
    check(lambda t: t.mean(1), e)
    check(lambda t: t.amax(1), e)              # error: reduction over an empty dim
    check(lambda t: t.max(), torch.zeros(0))   # error
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]])
    check(lambda t: t.max(1), x)
    check(lambda t: t.argmin(1), x)
    check(lambda t: t.sum(1), x)


def test_large_reductions_split_across_threads():
    """Outputs fewer than threads: each output's elements are split between the threads, and
    the parts combine in order (first extreme wins, NaN wins, integer sums wrap exactly)."""
    n = 300_001
    x = make((n,), torch.float32)
    check(lambda t: t.sum(), x)
    check(lambda t: t.mean(), x)
    check(lambda t: t.sum(1), x[:300_000].view(1, 300_000))
    check(lambda t: t.amax(), x)
    ties = torch.zeros(n)
    ties[[5, 200_000, 250_000]] = 2.0        # the first of equal maxima, in another thread's part
    check(lambda t: (t.argmax(), t.argmin()), ties)
    late_nan = x.clone()
    late_nan[290_000] = float("nan")
    check(lambda t: (t.max(), t.argmax(), t.sum(), t.amax(), t.amin()), late_nan)
    early_nan = x.clone()                    # amax's chunks of 64K after the NaN are skipped
    early_nan[1000] = float("nan")
    check(lambda t: (t.amax(), t.amin(), t.argmin()), early_nan)
    check(lambda t: t.view(2, -1).max(1), x[:300_000].clone())
    i = make((n,), torch.int64) * (1 << 58)   # wraps around, as on the CPU
    check(lambda t: (t.max(), t.min(), t.amax(), t.argmax(), t.argmin()), i)
    ties = torch.zeros(n, dtype=torch.int64)
    ties[[7, 1500, 200_000]] = 5                # first of equal maxima: in a later chunk, another thread
    ties[[9, 250_000]] = -3
    check(lambda t: (t.max(), t.argmax(), t.min(), t.argmin(), t[1000:].argmax()), ties)
    check(lambda t: (t.sum(), t.prod()), i)
    b = torch.ones(n, dtype=torch.bool)
    b[299_999] = False
    check(lambda t: (t.all(), t.any(), (~t).any(), t.sum()), b)
    check(lambda t: t.sum(), make((n,), torch.bfloat16))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_forward_backward(dtype, dim):
    x = make((6, 50), dtype) * 3
    check(lambda t: torch.softmax(t, dim), x)
    check(lambda t: torch.log_softmax(t, dim), x)
    check(lambda t: torch.softmax(t.t(), dim), x)       # non-contiguous
    if dtype in (torch.float32, torch.float64):
        grads = []
        for dev in ("cpu", "neuron"):
            t = x.detach().to(dev).requires_grad_()
            w = torch.arange(300.0, dtype=dtype).reshape(6, 50).to(dev)
            (torch.softmax(t, dim) * w).sum().backward()
            s = t.grad.clone()
            t.grad = None
            (torch.log_softmax(t, dim) * w).sum().backward()
            grads.append((s.cpu(), t.grad.cpu()))
        for a, b in zip(grads[1], grads[0]):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-3)


def test_softmax_half_to_float_and_large_values():
    x = make((3, 1000), torch.float32) * 50
    check(lambda t: torch.softmax(t, -1), x)
    h = make((3, 10), torch.bfloat16)
    check(lambda t: torch.softmax(t, -1, dtype=torch.float32), h)
    logits, target = make((3, 10), torch.float32), torch.tensor([1, 2, 3])
    loss = torch.nn.functional.cross_entropy(logits.to("neuron"), target.to("neuron"))
    torch.testing.assert_close(loss.cpu(), torch.nn.functional.cross_entropy(logits, target))


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_rows_with_nan_and_infinities(fn):
    """A NaN anywhere in a row makes the whole row NaN; +inf too (inf - inf); rows of -inf are
    NaN; other rows are untouched. Rows long enough for the vector loops and their tails."""
    x = make((5, 37), torch.float32)
    x[1, 3], x[2, 20], x[3] = float("nan"), float("inf"), -float("inf")
    x[4, 36] = float("nan")
    torch.testing.assert_close(fn(x.to("neuron"), -1).cpu(), fn(x, -1), equal_nan=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_and_gradient(reduction):
    x, y = make((7, 5), torch.float32, 1), make((7, 5), torch.float32, 2)
    check(lambda a, b: torch.nn.functional.mse_loss(a, b, reduction=reduction), x, y)
    grads = []
    for dev in ("cpu", "neuron"):
        t = x.detach().to(dev).requires_grad_()
        loss = torch.nn.functional.mse_loss(t, y.to(dev), reduction=reduction)
        (loss if loss.dim() == 0 else loss.sum()).backward()
        grads.append(t.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_sort_and_topk(dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 33, generator=g) * 10).to(dtype)
    x[0, 5] = x[0, 7]   # a tie: the stable order keeps the first
    for dim in (1, 0, -1):
        for descending in (False, True):
            exp_v, exp_i = torch.sort(x, dim=dim, descending=descending, stable=True)
            got_v, got_i = torch.sort(x.to("neuron"), dim=dim, descending=descending, stable=True)
            torch.testing.assert_close(got_v.cpu(), exp_v)
            torch.testing.assert_close(got_i.cpu(), exp_i)
    for largest in (True, False):
        exp_v, exp_i = torch.topk(x, 5, dim=1, largest=largest)
        got_v, got_i = torch.topk(x.to("neuron"), 5, dim=1, largest=largest)
        torch.testing.assert_close(got_v.cpu(), exp_v)
        torch.testing.assert_close(x.gather(1, got_i.cpu()), exp_v)   # ties may pick either index
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(x.to("neuron"), 40, dim=1)


def test_sort_nan_order():
    x = torch.tensor([[2.0, float("nan"), -1.0, float("nan"), 0.0]])
    for descending in (False, True):
        exp_v, exp_i = torch.sort(x, descending=descending, stable=True)
        got_v, got_i = torch.sort(x.to("neuron"), descending=descending, stable=True)
        torch.testing.assert_close(got_v.cpu(), exp_v, equal_nan=True)
        torch.testing.assert_close(got_i.cpu(), exp_i)


COLUMNS = {  # reductions over the outer dimension of a row-major matrix (a bias's gradient)
    "sum0": lambda t: t.sum(0),
    "mean0_keep": lambda t: t.mean(0, keepdim=True),
    "amax0": lambda t: t.amax(0),
    "amin0": lambda t: t.amin(0),
    "norm0": lambda t: torch.linalg.vector_norm(t, dim=0),
    "sum_outer_two": lambda t: t.view(-1, 5, t.shape[1]).sum((0, 1)) if t.shape[0] % 5 == 0 else t.sum(0),
    "sum_batch_expanded": lambda t: t[:1].expand(40, -1).sum(0),   # reduced stride 0
    "sum0_float64": lambda t: t.sum(0, dtype=torch.float64),
    "mean_middle": lambda t: t.view(10, -1, t.shape[1]).mean(1),    # kept dimensions on both sides
    "sum0_strided_out": lambda t: torch.sum(t, 0, out=torch.empty(t.shape[1], 2, dtype=t.dtype, device=t.device)[:, 0]),
}


@pytest.mark.parametrize("name", list(COLUMNS))
@pytest.mark.parametrize("shape", [(700, 3), (130, 1100), (4000, 600)], ids=str)
def test_column_reductions(name, shape):
    """Outputs along the contiguous dimension fold whole input rows: more columns than one
    block of outputs, rows past a float block (64), the threads' split inside a row."""
    x = make(shape, torch.float32) * 4
    x[7, 1] = float("nan")
    fn = COLUMNS[name]
    torch_neuronx.clear_op_tracking()
    got = fn(x.to("neuron")).cpu()
    assert torch_neuronx.get_fallback_ops() == {}
    cpu, exact = fn(x), fn(x.double())
    assert got.dtype == cpu.dtype and got.shape == cpu.shape
    # a float32 sum of thousands of rows is off the float64 one by more than float32's rtol
    # on both sides: as close to it as the CPU's result, or closer
    size = exact.abs().nan_to_num().max().item()
    bound = 2 * (cpu.double() - exact).abs().nan_to_num().max().item() + 1e-6 * size
    torch.testing.assert_close(got.double(), exact, rtol=0, atol=bound, equal_nan=True)


@pytest.mark.parametrize("name", ["sum0", "mean_middle", "norm0", "amax0", "sum0_strided_out"])
def test_column_reductions_past_the_cache(name):
    """Float32 input larger than the cache folds blocks of whole rows of up to 2048 outputs
    (from the cache, 512): with the threshold lowered, more columns than one such block and a
    partial one."""
    x = make((300, 4500), torch.float32) * 4
    x[7, 2100] = float("nan")
    fn = COLUMNS[name]
    torch_neuronx._C._set_nontemporal_min_bytes(1 << 20)
    try:
        got = fn(x.to("neuron")).cpu()
    finally:
        torch_neuronx._C._set_nontemporal_min_bytes(-1)
    exact = fn(x.double())
    bound = 2 * (fn(x).double() - exact).abs().nan_to_num().max().item() + 1e-6 * exact.abs().nan_to_num().max().item()
    torch.testing.assert_close(got.double(), exact, rtol=0, atol=bound, equal_nan=True)


@pytest.mark.parametrize("n", [1, 15, 1000, 1025, 300_001])
def test_vector_extremes_and_norms(n):
    """Extremes in vector chunks, positions looked up in the chunk that holds them; norms and
    products in one pass; over one row, many rows and a whole tensor split across threads."""
    x = make((n,), torch.float32)
    check(lambda t: (t.amax(), t.amin(), t.max(), t.argmin(), *torch.aminmax(t)), x)
    check(lambda t: (torch.linalg.vector_norm(t), t.norm(), (t * 0.01 + 1).prod()), x)
    if n > 1:
        ties = x.clone()
        ties[[n // 3, n - 1]] = 9.0               # equal maxima: the first one's position
        check(lambda t: (t.argmax(), *t.max(0)), ties)
        ties[n // 2] = float("nan")               # a NaN wins, at its own position
        check(lambda t: (t.argmax(), *t.max(0), t.amax(), t.amin(), torch.linalg.vector_norm(t)), ties)
    rows = make((37, n if n < 5000 else 5000), torch.float32)
    check(lambda t: (t.amax(1), *t.max(1), t.argmin(1), t.norm(dim=1), t.prod(1) if t.shape[1] < 100 else t.sum(1)),
          rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_aminmax(dtype):
    x = make((6, 40, 9), dtype)
    check(lambda t: tuple(torch.aminmax(t)), x)
    check(lambda t: tuple(torch.aminmax(t, dim=1)), x)
    check(lambda t: tuple(torch.aminmax(t, dim=-1, keepdim=True)), x)
    check(lambda t: tuple(torch.aminmax(t, keepdim=True)), x)
    check(lambda t: torch.aminmax(t, dim=3), x)                     # IndexError, as on the CPU
    check(lambda t: torch.aminmax(t), torch.zeros(0, dtype=dtype))  # RuntimeError: no identity
    check(lambda t: torch.aminmax(t, dim=1), torch.zeros(2, 0, dtype=dtype))


def test_variance_of_large_tensors():
    """Variance and std of a whole tensor split across the threads (moments combined), of
    long rows in L1 blocks, and with a mean far from zero (the blocks' centering)."""
    x = make((300_001,), torch.float32) * 3 + 1000
    check(lambda t: (t.var(), t.std(), *torch.var_mean(t), *torch.std_mean(t, correction=0)), x)
    check(lambda t: (t.var(1), *torch.std_mean(t, 1)), x[:300_000].view(3, 100_000))
    check(lambda t: t.var(0), x[:300_000].view(1000, 300))


def test_bool_sum_and_count_nonzero():
    """A boolean mask is counted in place (sum with an int64 result, count_nonzero)."""
    b = make((1000, 33), torch.bool)
    check(lambda t: (t.sum(), t.sum(1), t.sum(0), t.sum(dtype=torch.int64)), b)
    x = make((1000, 33), torch.float32)
    x[x.abs() < 0.5] = 0
    check(lambda t: (torch.count_nonzero(t), torch.count_nonzero(t, dim=1)), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_columns_and_extremes(dtype):
    """16-bit inputs widened on the way: outer-dimension sums and extremes (a bias's gradient in
    mixed precision), and extremes with positions along 16-bit rows."""
    x = make((600, 700), dtype)
    x[7, 1] = float("nan")
    check(lambda t: (t.sum(0), t.amax(0), t.amin(0), t.sum(0, dtype=torch.float32)), x)
    rows = make((9, 3000), dtype)
    rows[2, 2500] = 7.0
    rows[2, 2900] = 7.0
    rows[4, 1700] = float("nan")
    check(lambda t: (t.amax(1), *t.max(1), t.argmin(1), t.amax(), t.argmax()), rows)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_norms_variances_and_sums(dtype):
    """16-bit inputs read once, widened in L1 chunks: 2-norms (whole, rows, columns, a float32
    result), variance of a whole tensor and of long rows, and sums."""
    x = make((300, 2100), dtype)
    check(lambda t: (torch.linalg.vector_norm(t), torch.linalg.vector_norm(t, dim=1),
                     torch.linalg.vector_norm(t, dim=0)), x)
    # a float32 result: against float64 (the CPU's float32 norm of these 630K squares is itself
    # 2.6e-5 off, more than float32's tolerance)
    got = torch.linalg.vector_norm(x.to("neuron"), dtype=torch.float32).cpu()
    torch.testing.assert_close(got.double(), x.double().norm(), rtol=2e-6, atol=0)
    check(lambda t: (t.var(), *torch.std_mean(t, 1), t.sum(), t.sum(1)), x * 2 + 5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64], ids=str)
def test_topk_selection(dtype):
    """top-k of fewer than half a row keeps a heap of the best k (float32 rows skip 64-element
    chunks that cannot enter it): against the CPU's values, with the positions checked by
    gathering, over vocabulary-sized rows, NaN, ties, the smallest, k = 1, a strided row."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(3, 49152, generator=g) * 100).to(dtype)
    if dtype.is_floating_point:
        x[1, 40000] = float("nan")      # NaN counts as the largest
        x[1, 300] = float("nan")
    x[2, 100] = x[2, 30000] = x[2].max() + 1   # a tie at the top: the first position first
    for k, largest in ((50, True), (50, False), (1, True), (20000, True), (7, False)):
        exp_v, exp_i = torch.topk(x, k, largest=largest)
        got_v, got_i = torch.topk(x.to("neuron"), k, largest=largest)
        torch.testing.assert_close(got_v.cpu(), exp_v, equal_nan=True, rtol=0, atol=0)
        torch.testing.assert_close(x.gather(1, got_i.cpu()), exp_v, equal_nan=True, rtol=0, atol=0)
        if largest and 2 <= k < 20000:
            assert got_i[2, 0].item() == 100 and got_i[2, 1].item() == 30000
            if dtype.is_floating_point:
                assert got_i[1, :2].tolist() == [300, 40000]
    col = x[:, :999].t()                 # along dim 0 of a transposed view
    exp_v, _ = torch.topk(col, 3, dim=0)
    got_v, got_i = torch.topk(col.to("neuron"), 3, dim=0)
    torch.testing.assert_close(got_v.cpu(), exp_v, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(col.gather(0, got_i.cpu()), exp_v, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_radix_sorted_rows(dtype):
    """Rows of 256 or more 16/32-bit floats sort by radix on their keys: stable, -0 equal to
    +0, NaN above +inf, both directions, along a strided dimension too; the positions are
    compared exactly with the CPU's stable sort."""
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(5, 3001, generator=g) * 50).round().to(dtype)   # many ties
    x[0, :40] = 0.0
    x[0, 5:40:3] = -0.0
    x[1, 100:110] = float("nan")
    x[1, 7] = float("inf")
    x[1, 8] = -float("inf")
    x[2, 2000] = float("nan")
    for descending in (False, True):
        for t, dim in ((x, 1), (x.t().contiguous().t(), 1), (x[:, :512].t(), 0)):
            exp_v, exp_i = torch.sort(t, dim=dim, descending=descending, stable=True)
            got_v, got_i = torch.sort(t.to("neuron"), dim=dim, descending=descending, stable=True)
            torch.testing.assert_close(got_v.cpu(), exp_v, equal_nan=True, rtol=0, atol=0)
            assert torch.equal(got_i.cpu(), exp_i)
    exp_v, exp_i = torch.topk(x, 2000, largest=True)      # k >= n / 2 takes the full sort
    got_v, got_i = torch.topk(x.to("neuron"), 2000, largest=True)
    torch.testing.assert_close(got_v.cpu(), exp_v, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(x.gather(1, got_i.cpu()), exp_v, equal_nan=True, rtol=0, atol=0)
