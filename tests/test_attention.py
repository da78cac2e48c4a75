"""scaled_dot_product_attention on neuron: the fused C kernel (forward and backward) against
the CPU for causal, boolean and additive masks, grouped-query attention and the half types;
dropout and mask gradients through the native math path."""
import pytest
import torch
import torch_neuronx

F = torch.nn.functional
FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
       torch.float16: dict(rtol=2e-3, atol=2e-3)}


def run(shape_q, shape_kv, dtype=torch.float32, mask=None, **kw):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(shape_q, generator=g).to(dtype).requires_grad_()
    k = torch.randn(shape_kv, generator=g).to(dtype).requires_grad_()
    v = torch.randn(shape_kv, generator=g).to(dtype).requires_grad_()
    dq, dk, dv = [t.detach().to("neuron").requires_grad_() for t in (q, k, v)]
    # the CPU reference in float32 (its half-precision kernels round differently)
    additive = mask is not None and mask.is_floating_point()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                         attn_mask=mask.to(dtype).float() if additive else mask, **kw)
    dev_mask = None if mask is None else mask.to(dtype).to("neuron") if additive else mask.to("neuron")
    torch_neuronx.clear_op_tracking()
    out = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=dev_mask, **kw)
    grad = torch.randn(ref.shape, generator=g)
    ref.backward(grad)
    out.backward(grad.to(dtype).to("neuron"))
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    torch.testing.assert_close(out.float().cpu(), ref, **TOL[dtype])
    for d, c in ((dq, q), (dk, k), (dv, v)):
        torch.testing.assert_close(d.grad.float().cpu(), c.grad.float(), **TOL[dtype])
    return torch_neuronx.get_executed_ops()


CASES = {
    "plain": ((2, 4, 7, 16), (2, 4, 9, 16), {}),
    "causal": ((1, 2, 70, 8), (1, 2, 70, 8), dict(is_causal=True)),
    "causal_rectangular": ((1, 2, 5, 8), (1, 2, 9, 8), dict(is_causal=True)),
    "gqa_causal": ((1, 4, 33, 8), (1, 2, 33, 8), dict(is_causal=True, enable_gqa=True)),
    "additive_mask": ((2, 2, 5, 16), (2, 2, 130, 16), dict(mask=torch.randn(2, 1, 5, 130))),
    "bool_mask": ((1, 2, 6, 8), (1, 2, 6, 8), dict(mask=torch.tensor([[1, 0, 1, 1, 0, 1]] * 6).bool())),
    "scale": ((1, 1, 4, 8), (1, 1, 4, 8), dict(scale=0.3)),
    # language-model head size: several query tiles and key blocks on the GEMM micro-kernel
    "llm_heads": ((1, 4, 100, 64), (1, 2, 150, 64), dict(is_causal=True, enable_gqa=True)),
    # query tiles (96 rows) and key blocks with a mask, and left padding in a query tile
    "additive_mask_tiles": ((1, 2, 100, 32), (1, 2, 100, 32), dict(mask=torch.randn(1, 1, 100, 100))),
    "padded_rows_tiles": ((2, 2, 12, 8), (2, 2, 12, 8),
                          dict(mask=(torch.arange(12) >= torch.tensor([[0], [5]])).view(2, 1, 1, 12)
                               & torch.ones(12, 12).tril().bool())),
    # a left-padded query row sees no key: zeros, as the math path's safe softmax gives
    "fully_masked_row": ((2, 2, 4, 8), (2, 2, 4, 8),
                         dict(mask=torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]).bool().view(2, 1, 1, 4)
                              & torch.ones(4, 4).tril().bool())),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_fused_attention_matches_cpu(name, dtype):
    shape_q, shape_kv, kw = CASES[name]
    kw = dict(kw)
    executed = run(shape_q, shape_kv, dtype, mask=kw.pop("mask", None), **kw)
    assert FUSED in executed and FUSED + "_backward" in executed


@pytest.mark.parametrize("rows", [4, 40], ids=["rows", "tiles"])
def test_nan_scores_match_cpu(rows):
    q, k, v = torch.randn(1, 2, rows, 16), torch.randn(1, 2, rows, 16), torch.randn(1, 2, rows, 16)
    q[0, 1, 3, 5] = float("nan")
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), is_causal=True)
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True)


def test_strided_inputs_take_the_fused_kernel():
    # (B, L, H, E) transposed to (B, H, L, E), as attention layers produce them
    q = torch.randn(2, 9, 4, 8).transpose(1, 2)
    torch_neuronx.clear_op_tracking()
    out = F.scaled_dot_product_attention(q.to("neuron"), q.to("neuron"), q.to("neuron"), is_causal=True)
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, q, q, is_causal=True),
                               rtol=1e-4, atol=1e-4)
    assert FUSED in torch_neuronx.get_executed_ops()


def test_dropout_and_mask_gradient_use_the_native_math_path():
    q = torch.randn(1, 2, 16, 8, device="neuron")
    torch_neuronx.clear_op_tracking()
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    torch.neuron.synchronize()
    assert FUSED not in torch_neuronx.get_executed_ops() and torch_neuronx.get_fallback_ops() == {}
    assert out.shape == q.shape and torch.isfinite(out).all()
    mask = torch.zeros(16, 16, device="neuron", requires_grad=True)
    F.scaled_dot_product_attention(q, q, q, attn_mask=mask).sum().backward()
    assert mask.grad is not None and torch_neuronx.get_fallback_ops() == {}


def test_errors_match_cpu():
    for make in (lambda d: (torch.randn(1, 4, 3, 8, device=d), torch.randn(1, 2, 3, 8, device=d)),  # no enable_gqa
                 lambda d: (torch.randn(1, 2, 3, 8, device=d), torch.randn(1, 2, 3, 4, device=d))):  # head dims
        with pytest.raises(Exception) as cpu_error:
            q, k = make("cpu")
            F.scaled_dot_product_attention(q, k, k)
        with pytest.raises(cpu_error.type):
            q, k = make("neuron")
            F.scaled_dot_product_attention(q, k, k)
            torch.neuron.synchronize()
