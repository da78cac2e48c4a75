"""2-D upsampling on neuron against the CPU: F.interpolate with mode nearest, nearest-exact,
bilinear and bicubic (align_corners either way), by output size and by scale factor (with and without
recompute_scale_factor, so the CPU's float index arithmetic must match), downsampling too,
forward and backward, in float32, float64, bfloat16 and uint8 (nearest); channels_last kept;
the CPU's errors. No op may fall back."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-10, rtol=1e-10),
       torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}

SIZES = [dict(size=(9, 11)), dict(size=(3, 2)), dict(scale_factor=2.0), dict(scale_factor=(1.7, 0.6)),
         dict(scale_factor=1.3, recompute_scale_factor=True)]


def _check(mode, dtype, kwargs, align=None):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 7).to(dtype)
    extra = {} if align is None else dict(align_corners=align)
    xc = x.clone().requires_grad_()
    xn = x.to("neuron").requires_grad_()
    torch_neuronx.clear_op_tracking()
    yn = F.interpolate(xn, mode=mode, **kwargs, **extra)
    yc = F.interpolate(xc, mode=mode, **kwargs, **extra)
    g = torch.randn(yc.shape).to(dtype)
    yc.backward(g)
    yn.backward(g.to("neuron"))
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    torch.testing.assert_close(yn.cpu(), yc, **TOL[dtype])
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kwargs", SIZES)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest(mode, dtype, kwargs):
    _check(mode, dtype, kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kwargs", SIZES)
@pytest.mark.parametrize("align", [False, True])
def test_bilinear(align, dtype, kwargs):
    _check("bilinear", dtype, kwargs, align)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kwargs", SIZES)
@pytest.mark.parametrize("align", [False, True])
def test_bicubic(align, dtype, kwargs):
    _check("bicubic", dtype, kwargs, align)


def test_bicubic_position_embeddings():
    """ViT's interpolate_pos_encoding: a 14x14 grid of 32-wide embeddings to 20x20, by scale
    factor, as Transformers calls it; and the model itself at a larger image"""
    grid = torch.randn(1, 32, 14, 14)
    kw = dict(scale_factor=(20 / 14, 20 / 14), mode="bicubic", align_corners=False)
    torch_neuronx.clear_op_tracking()
    got = F.interpolate(grid.to("neuron"), **kw)
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(got.cpu(), F.interpolate(grid, **kw), **TOL[torch.float32])
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=37)
    torch.manual_seed(0)
    model = transformers.ViTModel(config).eval()
    pixels = torch.randn(2, 3, 48, 48, generator=torch.Generator().manual_seed(1))
    want = model(pixels, interpolate_pos_encoding=True).last_hidden_state
    model.to("neuron")
    torch_neuronx.clear_op_tracking()
    out = model(pixels.to("neuron"), interpolate_pos_encoding=True).last_hidden_state
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(out.cpu(), want, rtol=1e-4, atol=1e-5)


def test_nearest_uint8_and_channels_last():
    x = torch.randint(0, 255, (1, 3, 6, 5), dtype=torch.uint8)
    torch_neuronx.clear_op_tracking()
    got = F.interpolate(x.to("neuron"), scale_factor=1.5, mode="nearest")
    assert torch_neuronx.get_fallback_ops() == {}
    assert torch.equal(got.cpu(), F.interpolate(x, scale_factor=1.5, mode="nearest"))
    cl = torch.randn(2, 4, 5, 5).to(memory_format=torch.channels_last)
    for mode in ("nearest", "bilinear"):
        out = F.interpolate(cl.to("neuron"), scale_factor=2, mode=mode)
        assert out.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(out.cpu(), F.interpolate(cl, scale_factor=2, mode=mode))


def test_out_forms_and_errors():
    x = torch.randn(1, 2, 4, 4)
    out = torch.empty(0, device="neuron")
    torch.ops.aten.upsample_bilinear2d.out(x.to("neuron"), [6, 6], False, None, None, out=out)
    torch.testing.assert_close(out.cpu(), torch.ops.aten.upsample_bilinear2d(x, [6, 6], False, None, None))
    with pytest.raises(RuntimeError, match="Input and output sizes should be greater than 0"):
        torch.ops.aten.upsample_nearest2d(x.to("neuron"), [0, 3])
    with pytest.raises(RuntimeError, match="Expected grad_output to have the same shape as output"):
        torch.ops.aten.upsample_nearest2d_backward(torch.randn(1, 2, 5, 5, device="neuron"), [6, 6], [1, 2, 4, 4])
