"""Advanced indexing on neuron against the CPU: integer and boolean index tensors in every
position (complex tensors too: complex rotary tables are indexed by position),
position, index_put_ with and without accumulation, nonzero, masked_select, count_nonzero,
and the errors PyTorch raises for bad indices."""
import pytest
import torch
import torch_neuronx


def on(x):
    return x.to("neuron") if isinstance(x, torch.Tensor) else x


def native(fn):
    torch_neuronx.clear_op_tracking()
    result = fn()
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    return result


X = torch.arange(5 * 5 * 4 * 3, dtype=torch.float32).reshape(5, 5, 4, 3)
I = torch.tensor([[0, 3], [4, 1]])
J = torch.tensor([2, 0])
M = torch.tensor([True, False, True, True, False])

GETS = {
    "leading": lambda x, i, j, m: x[i],
    "leading_pair": lambda x, i, j, m: x[j, i],
    "middle": lambda x, i, j, m: x[:, i],
    "middle_adjacent_pair": lambda x, i, j, m: x[:, i, j],
    "split_pair": lambda x, i, j, m: x[j, :, j],          # not adjacent: B goes first
    "negative": lambda x, i, j, m: x[:, -i],
    "int32": lambda x, i, j, m: x[:, i.int()],
    "bool_mask": lambda x, i, j, m: x[:, m],
    "bool_mask_full": lambda x, i, j, m: x[x.real > 50],
    "mask_and_index": lambda x, i, j, m: x[torch.tensor([True, False, False, True, False]), j],
    "scalar_and_index": lambda x, i, j, m: x[1, :, j],
    "ellipsis": lambda x, i, j, m: x[..., j],
    "empty_index": lambda x, i, j, m: x[i[:0]],
    "cpu_index": lambda x, i, j, m: x[i.cpu()],
    "broadcast_both": lambda x, i, j, m: x[i[:, :1], j],             # (2, 1) with (2,): (2, 2)
}


@pytest.mark.parametrize("name", list(GETS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64], ids=str)
def test_index(name, dtype):
    x = {torch.bool: X % 7 > 2, torch.complex64: torch.complex(X, 0.5 - X)}.get(dtype, X.to(dtype))
    expect = GETS[name](x, I, J, M)
    got = native(lambda: GETS[name](on(x), on(I) if name != "cpu_index" else I, on(J), on(M)))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expect, rtol=0, atol=0)


PUTS = {
    "leading": lambda x, v: (x.__setitem__(I, v[: 1]), x)[1],
    "scalar": lambda x, v: (x.__setitem__((slice(None), J), 7.0), x)[1],
    "mask": lambda x, v: (x.__setitem__(x > 60, -1), x)[1],
    "split_pair": lambda x, v: (x.__setitem__((J, slice(None), J), v[0, :1, 0, :]), x)[1],
    "accumulate_repeats": lambda x, v: x.index_put_((torch.tensor([1, 1, 0], device=x.device),),
                                                   v[:3], accumulate=True),
    "accumulate_2d": lambda x, v: x.index_put_((J.to(x.device), I[0].to(x.device)), v[0, 0, 0],
                                              accumulate=True),
    "functional": lambda x, v: torch.index_put(x, (I[1].to(x.device),), v[1, 1], accumulate=False),
}


@pytest.mark.parametrize("name", list(PUTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_index_put(name, dtype):
    x, v = X.to(dtype), (-X - 1).to(dtype)
    expect = PUTS[name](x.clone(), v)
    got = native(lambda: PUTS[name](on(x), on(v)))
    torch.testing.assert_close(got.cpu(), expect, rtol=0, atol=0)


def test_index_gradients():
    x = torch.randn(6, 4, requires_grad=True)
    d = x.detach().to("neuron").requires_grad_()
    idx = torch.tensor([0, 2, 2, 5])
    g = torch.randn(4, 4)
    x[idx].backward(g)
    native(lambda: d[on(idx)].backward(on(g)))      # index_put_ with accumulate
    torch.testing.assert_close(d.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool], ids=str)
def test_nonzero_masked_select_count(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(5, 6, 7, generator=g) > 0.3).to(dtype) * (torch.randn(5, 6, 7, generator=g) > 0).to(dtype)
    d = on(x)
    torch.testing.assert_close(native(lambda: torch.nonzero(d)).cpu(), torch.nonzero(x))
    torch.testing.assert_close(native(lambda: torch.nonzero(d.transpose(0, 2))).cpu(), torch.nonzero(x.transpose(0, 2)))
    torch.testing.assert_close(native(lambda: d.nonzero(as_tuple=True)[1]).cpu(), x.nonzero(as_tuple=True)[1])
    mask = x[0] != 0
    torch.testing.assert_close(native(lambda: torch.masked_select(d, on(mask))).cpu(), torch.masked_select(x, mask))
    torch.testing.assert_close(native(lambda: torch.count_nonzero(d, (0, 2))).cpu(), torch.count_nonzero(x, (0, 2)))
    assert native(lambda: torch.nonzero(on(torch.zeros(3, 0, dtype=dtype)))).shape == (0, 2)
    assert native(lambda: torch.nonzero(on(torch.tensor(5, dtype=dtype)))).shape == (1, 0)


def test_errors_match_cpu():
    x, d = X[0], on(X[0])
    for fn in (lambda t: t[torch.tensor([0.5])],                        # float index
               lambda t: t[torch.tensor([True, False])],                # mask of the wrong shape
               lambda t: t[0, 0, 0, 0],                                 # too many indices
               lambda t: t[torch.tensor([0, 1]), torch.tensor([0, 1, 2])],   # no common shape
               lambda t: t.index_put_((torch.tensor([0, 1]),), torch.ones(2, 2, device=t.device)),  # shape
               lambda t: t.index_put_((torch.tensor([0]),), torch.ones(1, dtype=torch.int64, device=t.device))):
        with pytest.raises(Exception) as cpu_error:
            fn(x.clone())
        with pytest.raises(cpu_error.type):
            fn(d.clone())
            torch.neuron.synchronize()


def test_out_of_range_index_reported_at_sync():
    d = on(X[0])
    with pytest.raises(RuntimeError, match="out of bounds"):
        d[on(torch.tensor([0, 9]))]
        torch.neuron.synchronize()


@pytest.mark.parametrize("shape", [(1003,), (37, 29), (5, 7, 11), (4096,)], ids=str)
@pytest.mark.parametrize("density", [0.0, 0.02, 0.5, 1.0])
def test_nonzero_and_mask_selection_of_dense_masks(shape, density):
    """Dense bool masks: zero words skipped whole, eight positions written without branches
    while eight more rows fit, the odometer carried across rows; against the CPU exactly."""
    g = torch.Generator().manual_seed(6)
    mask = torch.rand(shape, generator=g) < density
    x = torch.randn(shape, generator=g)
    md, xd = mask.to("neuron"), x.to("neuron")
    assert torch.equal(md.nonzero().cpu(), mask.nonzero())
    assert torch.equal(torch.count_nonzero(md).cpu(), torch.count_nonzero(mask))
    assert torch.equal(xd[md].cpu(), x[mask])
    assert torch.equal(xd.masked_select(md).cpu(), x.masked_select(mask))
    assert torch.equal(md.t().nonzero().cpu() if mask.dim() == 2 else md.nonzero().cpu(),
                       mask.t().nonzero() if mask.dim() == 2 else mask.nonzero())   # a strided mask
