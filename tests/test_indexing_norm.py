"""index_select / embedding, where / masked_fill, cat and layer norm against the CPU."""
import pytest
import torch
import torch_neuronx

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-7, atol=1e-7),
       torch.bfloat16: dict(rtol=1.6e-2, atol=2e-2), torch.float16: dict(rtol=1e-3, atol=2e-3)}


def on(t):
    return t.to("neuron")


def native(fn):
    torch_neuronx.clear_op_tracking()
    out = fn()
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_index_select_and_embedding(dtype):
    table = torch.arange(60).reshape(12, 5).to(dtype)
    idx = torch.tensor([3, 0, 11, 3, 7])
    got = native(lambda: torch.index_select(on(table), 0, on(idx)))
    torch.testing.assert_close(got.cpu(), torch.index_select(table, 0, idx))
    cols = torch.tensor([4, 1], dtype=torch.int32)
    torch.testing.assert_close(torch.index_select(on(table), 1, on(cols)).cpu(), torch.index_select(table, 1, cols))
    # dense slices copied whole (a 3-D table's 2-D slices), and a transposed table's rows,
    # which are not dense and go element by element
    cube = torch.arange(120).reshape(6, 4, 5).to(dtype)
    sel = torch.tensor([5, 0, 5, 2])
    torch.testing.assert_close(torch.index_select(on(cube), 0, on(sel)).cpu(), torch.index_select(cube, 0, sel))
    wide = table.t()
    torch.testing.assert_close(torch.index_select(on(wide), 0, on(cols)).cpu(), torch.index_select(wide, 0, cols))
    if dtype.is_floating_point:
        emb = torch.nn.Embedding(12, 5).to(dtype)
        tokens = torch.tensor([[1, 2, 3], [11, 0, 0]])
        dev_emb = on(__import__("copy").deepcopy(emb))
        got = native(lambda: dev_emb(on(tokens)))
        torch.testing.assert_close(got.cpu(), emb(tokens))


def test_index_out_of_range_raises_at_sync():
    table = on(torch.zeros(4, 3))
    with pytest.raises(RuntimeError, match="index out of range in self"):
        torch.index_select(table, 0, on(torch.tensor([1, 4]))).cpu()
    with pytest.raises(RuntimeError, match="index out of range in self"):
        torch.index_select(table, 0, on(torch.tensor([-1]))).cpu()   # negative: refused, as on the CPU
    torch.neuron.synchronize()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_where_and_masked_fill(dtype):
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(4, 6, generator=g) * 5).to(dtype)
    b = (torch.randn(4, 6, generator=g) * 5).to(dtype)
    cond = torch.rand(4, 6, generator=g) > 0.5
    got = native(lambda: torch.where(on(cond), on(a), on(b)))
    torch.testing.assert_close(got.cpu(), torch.where(cond, a, b))
    row = cond[0]
    torch.testing.assert_close(torch.where(on(row), on(a), on(b)[:1]).cpu(), torch.where(row, a, b[:1]))
    if dtype != torch.bool:
        torch.testing.assert_close(torch.where(on(cond), on(a), 0).cpu(), torch.where(cond, a, 0))
        x = on(a.clone())
        native(lambda: x.masked_fill_(on(row), -7))
        torch.testing.assert_close(x.cpu(), a.clone().masked_fill_(row, -7))
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    scores = torch.randn(2, 5, 5, generator=g)
    torch.testing.assert_close(on(scores).masked_fill(on(causal), float("-inf")).cpu(),
                               scores.masked_fill(causal, float("-inf")))
    with pytest.raises(RuntimeError, match="boolean"):
        torch.where(on(torch.ones(3)), on(torch.ones(3)), on(torch.ones(3)))


def test_cat():
    parts = [torch.randn(2, 3), torch.randn(4, 3), torch.randn(1, 3)]
    got = native(lambda: torch.cat([on(p) for p in parts]))
    torch.testing.assert_close(got.cpu(), torch.cat(parts))
    cols = [torch.randn(3, 1), torch.randn(3, 2).t().contiguous().t()]
    torch.testing.assert_close(torch.cat([on(c) for c in cols], 1).cpu(), torch.cat(cols, 1))
    mixed = [torch.randn(2, 2), torch.ones(2, 2, dtype=torch.bfloat16)]
    torch.testing.assert_close(torch.cat([on(m) for m in mixed]).cpu(), torch.cat(mixed))
    torch.testing.assert_close(torch.stack([on(p) for p in parts[:1] * 3]).cpu(), torch.stack(parts[:1] * 3))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        torch.cat([on(torch.ones(2, 3)), on(torch.ones(2, 4))])
    with pytest.raises(ValueError, match="non-empty list"):
        torch.cat([])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_layer_norm_forward_backward(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 5, 16, generator=g) * 2 + 1).to(dtype)
    ln = torch.nn.LayerNorm(16).to(dtype)
    with torch.no_grad():
        ln.weight.copy_(torch.randn(16, generator=g))
        ln.bias.copy_(torch.randn(16, generator=g))
    dev_ln = on(__import__("copy").deepcopy(ln))
    got = native(lambda: dev_ln(on(x)))
    torch.testing.assert_close(got.detach().cpu(), ln(x).detach(), **TOL[dtype])
    if dtype == torch.bfloat16:
        return
    xs = [x.detach().clone().requires_grad_(), on(x).detach().requires_grad_()]
    w = torch.randn(3, 5, 16, generator=g).to(dtype)
    (ln(xs[0]) * w).sum().backward()
    (dev_ln(xs[1]) * on(w)).sum().backward()
    torch.testing.assert_close(xs[1].grad.cpu(), xs[0].grad, **TOL[dtype])
    torch.testing.assert_close(dev_ln.weight.grad.cpu(), ln.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dev_ln.bias.grad.cpu(), ln.bias.grad, rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        torch.nn.functional.layer_norm(on(x), [7])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["weight", "no_weight"])
def test_rms_norm_forward_backward(dtype, affine):
    """F.rms_norm runs aten::_fused_rms_norm and its backward natively (eps defaults to the
    dtype's epsilon), float32 inside for 16-bit rows; rstd comes back as PyTorch's (float32
    for 16-bit rows)."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 5, 40, generator=g) * 2 + 1).to(dtype)
    w = torch.randn(40, generator=g).to(dtype) if affine else None
    grad = torch.randn(3, 5, 40, generator=g).to(dtype)
    runs = []
    for dev in ("cpu", "neuron"):
        xs = x.clone().to(dev).requires_grad_()
        ws = w.clone().to(dev).requires_grad_() if affine else None
        y = native(lambda: torch.nn.functional.rms_norm(xs, [40], ws)) if dev == "neuron" \
            else torch.nn.functional.rms_norm(xs, [40], ws)
        native(lambda: y.backward(grad.to(dev))) if dev == "neuron" else y.backward(grad)
        runs.append([t.detach().cpu() for t in (y, xs.grad) + ((ws.grad,) if affine else ())])
    tol = TOL[dtype] if dtype != torch.float64 else dict(rtol=1e-6, atol=1e-6)
    for got, want in zip(runs[1], runs[0]):
        torch.testing.assert_close(got, want, **tol)
    _, rstd = torch.ops.aten._fused_rms_norm(on(x), [5, 40], None, 1e-3)
    want = torch.rsqrt(x.double().pow(2).mean((-2, -1), keepdim=True) + 1e-3)
    assert rstd.dtype == (torch.float64 if dtype == torch.float64 else torch.float32) and rstd.shape == (3, 1, 1)
    torch.testing.assert_close(rstd.cpu().double(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        torch.nn.functional.rms_norm(on(x), [7])


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_backward(padding_idx):
    emb = torch.nn.Embedding(10, 6, padding_idx=padding_idx)
    dev = on(__import__("copy").deepcopy(emb))
    tokens = torch.tensor([[1, 2, 2, 9], [0, 1, 1, 1]])
    w = torch.randn(2, 4, 6)
    (emb(tokens) * w).sum().backward()
    native(lambda: (dev(on(tokens)) * on(w)).sum().backward())
    torch.testing.assert_close(dev.weight.grad.cpu(), emb.weight.grad)


def test_isin_and_whole_tensor_all_any():
    x = torch.tensor([[1, 5, 7], [2, 2, 9]])
    eos = torch.tensor([2, 7])
    for invert in (False, True):
        got = native(lambda: torch.isin(on(x), on(eos), invert=invert))
        torch.testing.assert_close(got.cpu(), torch.isin(x, eos, invert=invert))
    b = torch.tensor([[True, False], [True, True]])
    assert native(lambda: on(b).all()).item() is False
    assert native(lambda: on(b).any()).item() is True


def test_scatter_and_advanced_indexing():
    x = torch.zeros(3, 5)
    idx = torch.tensor([[4, 0], [1, 1], [2, 3]])
    src = torch.arange(6.0).reshape(3, 2)
    got = native(lambda: on(x).scatter(1, on(idx), on(src)))
    torch.testing.assert_close(got.cpu(), x.scatter(1, idx, src))
    col = torch.tensor([[0, 1, 2, 0, 1]])
    torch.testing.assert_close(on(x).scatter(0, on(col), on(torch.ones(1, 5))).cpu(), x.scatter(0, col, torch.ones(1, 5)))
    m = torch.arange(24.0).reshape(4, 6)
    rows, cols = torch.arange(4).view(4, 1), torch.tensor([0, 5, -1])
    got = native(lambda: on(m)[on(rows), on(cols)])
    torch.testing.assert_close(got.cpu(), m[rows, cols])
    torch.testing.assert_close(on(m)[on(torch.tensor([3, 0, 3]))].cpu(), m[torch.tensor([3, 0, 3])])
    torch.testing.assert_close(on(m)[torch.tensor([1, 2])].cpu(), m[torch.tensor([1, 2])])   # CPU index
    mask = m > 10
    torch.testing.assert_close(native(lambda: on(m)[on(mask)]).cpu(), m[mask])
    with pytest.raises(RuntimeError, match="out of bounds"):
        on(m)[on(torch.tensor([4]))].cpu()


def test_gather():
    x = torch.randn(4, 6)
    idx = torch.tensor([[5, 0], [1, 1], [2, 3], [0, 0]])
    got = native(lambda: torch.gather(on(x), 1, on(idx)))
    torch.testing.assert_close(got.cpu(), torch.gather(x, 1, idx))
    rows = torch.tensor([[3, 0, 1, 2, 0, 1]])
    torch.testing.assert_close(torch.gather(on(x), 0, on(rows)).cpu(), torch.gather(x, 0, rows))
    logp = torch.log_softmax(torch.randn(3, 5), -1)
    labels = torch.tensor([1, 4, 0])
    torch.testing.assert_close(torch.gather(on(logp), -1, on(labels).unsqueeze(-1)).cpu(),
                               torch.gather(logp, -1, labels.unsqueeze(-1)))
    with pytest.raises(RuntimeError, match="index out of range"):
        torch.gather(on(x), 1, on(torch.tensor([[6]]))).cpu()


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    """scatter_reduce (TAPAS's segment reductions, MoE token routing) against the CPU: repeated
    indices, NaN propagating through amax/amin, integer mean rounding down, and gradients."""
    x = torch.randn(4, 6)
    src = torch.randn(4, 5)
    src[1, 2] = float("nan")
    idx = torch.tensor([[0, 1, 1, 5, 5], [2, 2, 2, 0, 3], [4, 4, 0, 0, 1], [3, 3, 3, 3, 3]])
    got = native(lambda: on(x).scatter_reduce(1, on(idx), on(src), reduce, include_self=include_self))
    torch.testing.assert_close(got.cpu(), x.scatter_reduce(1, idx, src, reduce, include_self=include_self),
                               equal_nan=True)
    xi, si = torch.randint(-9, 9, (4, 6)), torch.randint(-9, 9, (4, 5))
    got = native(lambda: on(xi).scatter_reduce(1, on(idx), on(si), reduce, include_self=include_self))
    assert torch.equal(got.cpu(), xi.scatter_reduce(1, idx, si, reduce, include_self=include_self))
    src[1, 2] = 0.5
    grads = []
    for dev in ("cpu", "neuron"):
        a, b = x.detach().to(dev).requires_grad_(), src.detach().to(dev).requires_grad_()
        torch_neuronx.clear_op_tracking()
        a.scatter_reduce(1, idx.to(dev), b, reduce, include_self=include_self).pow(2).sum().backward()
        grads.append((a.grad.cpu(), b.grad.cpu()))
        assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    for g, e in zip(*grads[::-1]):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
