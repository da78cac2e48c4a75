"""Convolutions on neuron against the CPU, forward and backward, with no fallback: the shapes
language models (depthwise causal conv1d of state-space and short-convolution layers), vision
and diffusion models (conv2d; transposed ones in DPT's and SAM's necks) and video or
vision-language patch embeddings (conv3d, Qwen2-VL's) use."""
import pytest
import torch
import torch_neuronx

F = torch.nn.functional

CASES = {
    "conv1d": (F.conv1d, (2, 4, 11), (6, 4, 3), dict()),
    "conv1d_depthwise_causal": (F.conv1d, (2, 8, 10), (8, 1, 4), dict(groups=8, padding=3)),
    "conv1d_strided_dilated": (F.conv1d, (1, 4, 20), (4, 2, 3), dict(groups=2, stride=2, dilation=3, padding=2)),
    "conv1d_unbatched": (F.conv1d, (3, 9), (5, 3, 2), dict()),
    "conv2d": (F.conv2d, (2, 3, 9, 8), (5, 3, 3, 3), dict(padding=1)),
    "conv2d_strided_grouped": (F.conv2d, (1, 4, 10, 9), (6, 2, 3, 2), dict(stride=(2, 1), groups=2, dilation=(1, 2))),
    "conv2d_1x1": (F.conv2d, (2, 8, 5, 5), (4, 8, 1, 1), dict()),
    "conv3d": (F.conv3d, (2, 3, 5, 6, 4), (4, 3, 2, 3, 2), dict(stride=(1, 2, 1), padding=1)),
    "conv3d_patches": (F.conv3d, (1, 3, 4, 8, 8), (8, 3, 2, 4, 4), dict(stride=(2, 4, 4))),
    # transposed: zero-stuffed (stride, padding, output_padding, dilation, groups, a padding
    # larger than the kernel's reach, which crops) or, kernel == stride, one GEMM
    "conv_transpose1d": (F.conv_transpose1d, (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    "conv_transpose1d_grouped_dilated": (F.conv_transpose1d, (2, 4, 7), (4, 2, 4),
                                         dict(stride=3, padding=2, groups=2, dilation=2)),
    "conv_transpose2d": (F.conv_transpose2d, (2, 3, 5, 6), (3, 4, 4, 4), dict(stride=2, padding=1)),
    "conv_transpose2d_cropped": (F.conv_transpose2d, (1, 2, 6, 6), (2, 3, 3, 3), dict(padding=3)),
    "conv_transpose2d_kernel_is_stride": (F.conv_transpose2d, (2, 6, 5, 4), (6, 4, 2, 2), dict(stride=2, groups=2)),
    "conv_transpose2d_unbatched": (F.conv_transpose2d, (3, 5, 6), (3, 4, 3, 3), dict(stride=2)),
    "conv_transpose3d": (F.conv_transpose3d, (1, 2, 3, 4, 3), (2, 3, 2, 3, 2),
                         dict(stride=(1, 2, 2), padding=(0, 1, 0), output_padding=(0, 1, 1))),
    "conv_transpose3d_kernel_is_stride": (F.conv_transpose3d, (1, 4, 2, 3, 3), (4, 3, 2, 2, 2), dict(stride=2)),
}
TRANSPOSED = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("with_bias", [True, False])
def test_convolution_matches_cpu(name, with_bias):
    fn, xs, ws, kw = CASES[name]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(xs, generator=g, requires_grad=True)
    w = torch.randn(ws, generator=g, requires_grad=True)
    out_channels = ws[1] * kw.get("groups", 1) if fn in TRANSPOSED else ws[0]
    b = torch.randn(out_channels, generator=g, requires_grad=True) if with_bias else None
    dx, dw = x.detach().to("neuron").requires_grad_(), w.detach().to("neuron").requires_grad_()
    db = b.detach().to("neuron").requires_grad_() if with_bias else None
    ref = fn(x, w, b, **kw)
    torch_neuronx.clear_op_tracking()
    out = fn(dx, dw, db, **kw)
    grad = torch.randn(ref.shape, generator=g)
    ref.backward(grad)
    out.backward(grad.to("neuron"))
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    for d, c in ((dx, x), (dw, w)) + (((db, b),) if with_bias else ()):
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-4, atol=1e-4)


def test_bfloat16_and_errors():
    x, w = torch.randn(1, 4, 12), torch.randn(4, 1, 3)
    got = F.conv1d(x.bfloat16().to("neuron"), w.bfloat16().to("neuron"), groups=4, padding=2)
    torch.testing.assert_close(got.float().cpu(), F.conv1d(x.bfloat16(), w.bfloat16(), groups=4, padding=2).float(),
                               rtol=2e-2, atol=2e-2)
    ones = torch.ones
    for fn in (lambda d: F.conv1d(ones(1, 3, 5, device=d), ones(2, 2, 3, device=d)),    # channels
               lambda d: F.conv1d(ones(1, 2, 2, device=d), ones(2, 2, 3, device=d)),    # too short
               lambda d: F.conv_transpose1d(ones(1, 3, 5, device=d), ones(2, 2, 3, device=d)),  # channels
               lambda d: F.conv_transpose2d(ones(1, 2, 4, 4, device=d), ones(2, 2, 3, 3, device=d),
                                            stride=2, output_padding=2),                  # output padding
               lambda d: F.conv_transpose1d(ones(1, 2, 2, device=d), ones(2, 2, 2, device=d), padding=3),  # empty
               lambda d: F.conv_transpose1d(ones(1, 2, 5, device=d), ones(2, 2, 3, device=d), ones(3, device=d))):
        with pytest.raises(Exception) as cpu_error:
            fn("cpu")
        with pytest.raises(cpu_error.type):
            fn("neuron")


def test_inference_mode():
    x, w = torch.randn(2, 4, 9), torch.randn(4, 1, 3)
    with torch.inference_mode():
        got = F.conv1d(x.to("neuron"), w.to("neuron"), groups=4, padding=1)
    torch.testing.assert_close(got.cpu(), F.conv1d(x, w, groups=4, padding=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("channels,side", [(32, 4), (4, 8)], ids=["positions<channels", "positions>=channels"])
def test_both_product_orientations_match_cpu(channels, side, dtype):
    """A 2-D convolution's product runs as W columns when it has at least as many output
    positions as channels, else as columns^T W^T: both forward and backward equal the CPU's."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(6, channels, 3, padding=1).to(dtype)
    dev = torch.nn.Conv2d(6, channels, 3, padding=1).to(dtype).to("neuron")
    dev.load_state_dict(conv.state_dict())
    x = torch.randn(2, 6, side, side, dtype=dtype, requires_grad=True)
    xd = x.detach().to("neuron").requires_grad_(True)
    out, outd = conv(x), dev(xd)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(outd.cpu(), out, **tol)
    g = torch.randn_like(out)
    out.backward(g)
    outd.backward(g.to("neuron"))
    torch.testing.assert_close(xd.grad.cpu(), x.grad, **tol)
    torch.testing.assert_close(dev.weight.grad.cpu(), conv.weight.grad, **tol)
    torch.testing.assert_close(dev.bias.grad.cpu(), conv.bias.grad, **tol)
