"""F.unfold (im2col) and F.fold (col2im) on neuron against the CPU, forward and backward (each
is the other's backward), with no fallback: kernel, stride, padding and dilation, unbatched
inputs, 16-bit and float64 data, columns given transposed; the CPU's errors; ConvBERT, whose
span-based convolution unfolds its keys."""
import pytest
import torch
import torch_neuronx

F = torch.nn.functional

GEOMETRIES = {  # input (N, C, H, W), kernel, dilation, padding, stride
    "3x3": ((2, 3, 6, 7), 3, 1, 1, 1),
    "strided": ((1, 2, 9, 8), (3, 2), 1, (0, 1), (2, 3)),
    "dilated": ((2, 2, 8, 8), 2, (2, 3), 2, 1),
    "1x1": ((1, 4, 3, 5), 1, 1, 0, 1),
    "unbatched": ((3, 5, 5), 2, 1, 1, 2),
    "conv1d_like": ((2, 4, 1, 12), (1, 5), 1, (0, 2), 1),
}


def _check_no_fallback():
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()


@pytest.mark.parametrize("name", list(GEOMETRIES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_unfold_and_fold_match_cpu(name, dtype):
    shape, k, d, p, s = GEOMETRIES[name]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype).requires_grad_()
    dx = x.detach().to("neuron").requires_grad_()
    torch_neuronx.clear_op_tracking()
    cols, ref = F.unfold(dx, k, d, p, s), F.unfold(x, k, d, p, s)
    torch.testing.assert_close(cols.detach().cpu(), ref.detach(), rtol=0, atol=0)  # a copy: exact
    grad = torch.randn(ref.shape, generator=g).to(dtype)
    ref.backward(grad)
    cols.backward(grad.to("neuron"))                                               # col2im
    # col2im adds in the order the CPU does; 16-bit sums are float32 rounded once, where the
    # CPU's add in bfloat16: the reference is the CPU's float32 sum, rounded
    grad_ref = F.fold(grad.float(), shape[-2:], k, d, p, s).to(dtype) if dtype == torch.bfloat16 else x.grad
    torch.testing.assert_close(dx.grad.cpu(), grad_ref, rtol=0, atol=0)
    # fold of the columns back (col2im forward, im2col backward)
    c = ref.detach().clone().requires_grad_()
    dc = c.detach().to("neuron").requires_grad_()
    out, want = F.fold(dc, shape[-2:], k, d, p, s), F.fold(c, shape[-2:], k, d, p, s)
    fold_ref = F.fold(c.detach().float(), shape[-2:], k, d, p, s).to(dtype) if dtype == torch.bfloat16 else want
    torch.testing.assert_close(out.detach().cpu(), fold_ref.detach(), rtol=0, atol=0)
    g2 = torch.randn(want.shape, generator=g).to(dtype)
    want.backward(g2)
    out.backward(g2.to("neuron"))
    torch.testing.assert_close(dc.grad.cpu(), c.grad, rtol=0, atol=0)
    _check_no_fallback()


def test_fold_reads_transposed_columns():
    cols = torch.randn(2, 25, 2 * 6)                 # (N, L, C * taps), as a product leaves it
    want = F.fold(cols.transpose(1, 2), (5, 4), (3, 2), padding=1, stride=(1, 1))
    torch_neuronx.clear_op_tracking()
    got = F.fold(cols.to("neuron").transpose(1, 2), (5, 4), (3, 2), padding=1, stride=(1, 1))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
    _check_no_fallback()


def test_out_forms():
    x = torch.randn(1, 2, 5, 5)
    out = torch.empty(0, device="neuron")
    torch._C._nn.im2col(x.to("neuron"), (2, 2), (1, 1), (0, 0), (1, 1), out=out)
    torch.testing.assert_close(out.cpu(), torch._C._nn.im2col(x, (2, 2), (1, 1), (0, 0), (1, 1)))
    cols = torch.randn(1, 8, 16)
    out = torch.empty(0, device="neuron")
    torch._C._nn.col2im(cols.to("neuron"), (5, 5), (2, 2), (1, 1), (0, 0), (1, 1), out=out)
    torch.testing.assert_close(out.cpu(), torch._C._nn.col2im(cols, (5, 5), (2, 2), (1, 1), (0, 0), (1, 1)))


@pytest.mark.parametrize("call", [
    lambda d: F.unfold(torch.ones(1, 2, 2, 2, device=d), 3),                     # kernel larger than the input
    lambda d: F.unfold(torch.ones(1, 2, 4, 4, device=d), 2, stride=0),           # stride 0
    lambda d: F.fold(torch.ones(1, 7, 9, device=d), (4, 4), 2),                  # rows not a multiple of taps
    lambda d: F.fold(torch.ones(1, 8, 10, device=d), (4, 4), 2),                 # blocks do not match
    lambda d: F.unfold(torch.ones(1, 2, 4, 4, dtype=torch.int64, device=d), 2),  # integers: not implemented
], ids=["kernel", "stride", "rows", "blocks", "int64"])
def test_errors_match_cpu(call):
    with pytest.raises(Exception) as cpu_error:
        call("cpu")
    with pytest.raises(cpu_error.type):
        call("neuron")


def test_convbert_runs_natively():
    transformers = pytest.importorskip("transformers")
    config = transformers.ConvBertConfig(vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=37)
    torch.manual_seed(0)
    model = transformers.ConvBertModel(config).eval()
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(1))
    want = model(ids).last_hidden_state
    want.square().mean().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model.to("neuron")
    torch_neuronx.clear_op_tracking()
    got = model(ids.to("neuron")).last_hidden_state
    got.square().mean().backward()
    _check_no_fallback()
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    for n, g in grads.items():
        torch.testing.assert_close(dict(model.named_parameters())[n].grad.cpu(), g, rtol=1e-3, atol=1e-5)
