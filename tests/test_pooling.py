"""2-D average pooling on neuron against the CPU, forward and backward, with no fallback:
kernel, stride, padding, ceil_mode, count_include_pad and divisor_override; float32, bfloat16
and float64; channels_last; out= forms; the CPU's errors; PoolFormer, whose token mixer is
an average pool without its padding."""
import pytest
import torch
import torch_neuronx

F = torch.nn.functional

CASES = {  # input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    "2x2": ((2, 3, 8, 8), 2, None, 0, False, True, None),
    "3x3_s1_p1_exclude_pad": ((2, 4, 7, 6), 3, 1, 1, False, False, None),  # PoolFormer
    "3x3_s2_p1_include_pad": ((1, 2, 9, 7), 3, 2, 1, False, True, None),
    "ceil_mode": ((1, 3, 7, 7), 3, 2, 1, True, True, None),
    "ceil_mode_exclude_pad": ((2, 2, 6, 9), (2, 3), (2, 2), (1, 1), True, False, None),
    "divisor": ((1, 2, 6, 6), 3, 3, 0, False, True, 5),
    "unbatched": ((3, 5, 5), 2, 1, 0, False, True, None),
}


def _no_fallback():
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_avg_pool2d_matches_cpu(name, dtype):
    shape, k, s, p, ceil, include_pad, divisor = CASES[name]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype).requires_grad_()
    dx = x.detach().to("neuron").requires_grad_()

    def pool(t):
        return F.avg_pool2d(t, k, s, p, ceil_mode=ceil, count_include_pad=include_pad, divisor_override=divisor)

    torch_neuronx.clear_op_tracking()
    out, ref = pool(dx), pool(x)
    grad = torch.randn(ref.shape, generator=g).to(dtype)
    ref.backward(grad)
    out.backward(grad.to("neuron"))
    _no_fallback()
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
    torch.testing.assert_close(dx.grad.cpu(), x.grad, **tol)


def test_channels_last_and_out_forms():
    x = torch.randn(2, 8, 6, 6).to(memory_format=torch.channels_last)
    got = F.avg_pool2d(x.to("neuron"), 3, 1, 1, count_include_pad=False)
    want = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
    out = torch.empty(0, device="neuron")
    torch.ops.aten.avg_pool2d.out(x.to("neuron"), [2, 2], [2, 2], [0, 0], False, True, None, out=out)
    torch.testing.assert_close(out.cpu(), F.avg_pool2d(x, 2), rtol=1e-6, atol=1e-6)
    g = torch.randn(2, 8, 3, 3)
    gin = torch.empty(0, device="neuron")
    torch.ops.aten.avg_pool2d_backward.grad_input(g.to("neuron"), x.to("neuron"), [2, 2], [2, 2], [0, 0], False,
                                                  True, None, grad_input=gin)
    want = torch.ops.aten.avg_pool2d_backward(g, x, [2, 2], [2, 2], [0, 0], False, True, None)
    torch.testing.assert_close(gin.cpu(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda d: F.avg_pool2d(torch.ones(1, 2, 4, 4, device=d), 2, divisor_override=0),   # divisor 0
    lambda d: F.avg_pool2d(torch.ones(1, 2, 4, 4, device=d), 2, padding=2),            # padding > kernel / 2
    lambda d: F.avg_pool2d(torch.ones(1, 2, 2, 2, device=d), 3),                       # output size 0
    lambda d: F.avg_pool2d(torch.ones(2, 4, device=d), 2),                             # 2-D input
], ids=["divisor", "padding", "too_small", "dims"])
def test_errors_match_cpu(call):
    with pytest.raises(Exception) as cpu_error:
        call("cpu")
    with pytest.raises(cpu_error.type):
        call("neuron")


def test_poolformer_runs_natively():
    transformers = pytest.importorskip("transformers")
    config = transformers.PoolFormerConfig(hidden_sizes=[8, 16], depths=[1, 1], num_encoder_blocks=2,
                                           patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], num_labels=3)
    torch.manual_seed(0)
    model = transformers.PoolFormerForImageClassification(config).eval()
    batch = dict(pixel_values=torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1)),
                 labels=torch.tensor([0, 2]))
    loss = model(**batch).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model.to("neuron")
    torch_neuronx.clear_op_tracking()
    got = model(**{k: v.to("neuron") for k, v in batch.items()}).loss
    got.backward()
    _no_fallback()
    torch.testing.assert_close(got.detach().cpu(), loss.detach(), rtol=1e-5, atol=1e-6)
    params = dict(model.named_parameters())
    for n, g in grads.items():
        torch.testing.assert_close(params[n].grad.cpu(), g, rtol=1e-3, atol=1e-5)
