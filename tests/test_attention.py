"""scaled_dot_product_attention on neuron: the fused C kernel (forward and backward) against
the CPU for causal, boolean and additive masks, grouped-query attention and the half types;
dropout in the fused kernel against the math path drawing the same mask; mask gradients
through the native math path."""
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
    # 3 kv heads (SmolLM2's) or 1 on 2 threads: the backward's threads share a group's query
    # heads and add their key and value gradients from slots
    "shared_groups": ((1, 9, 40, 16), (1, 3, 40, 16), dict(is_causal=True, enable_gqa=True)),
    "one_kv_head": ((1, 4, 64, 16), (1, 1, 70, 16), dict(is_causal=True, enable_gqa=True)),
    # a decode step: one query row per head against the keys directly, four keys at a time
    # and a tail, in vectors of 16 along the head dimension (bfloat16 widened as loaded)
    "decode_gqa": ((1, 9, 1, 64), (1, 3, 37, 64), dict(enable_gqa=True)),
    # the same against a static cache: the slots past the sequence masked out
    "decode_static_cache": ((1, 9, 1, 64), (1, 3, 40, 64),
                            dict(enable_gqa=True, mask=(torch.arange(40) < 29).view(1, 1, 1, 40))),
    "decode_additive_mask": ((1, 4, 2, 32), (1, 4, 23, 32), dict(mask=torch.randn(1, 4, 2, 23))),
    # a group's heads in one unit (two units for two threads), and a group split in two units
    "decode_grouped_heads": ((2, 8, 2, 32), (2, 2, 50, 32), dict(enable_gqa=True, is_causal=True)),
    "decode_split_group": ((1, 4, 1, 64), (1, 1, 40, 64),
                           dict(enable_gqa=True, mask=(torch.arange(40) < 33).view(1, 1, 1, 40))),
    # query tiles (96 rows) and key blocks with a mask, and left padding in a query tile
    "additive_mask_tiles": ((1, 2, 100, 32), (1, 2, 100, 32), dict(mask=torch.randn(1, 1, 100, 100))),
    "padded_rows_tiles": ((2, 2, 12, 8), (2, 2, 12, 8),
                          dict(mask=(torch.arange(12) >= torch.tensor([[0], [5]])).view(2, 1, 1, 12)
                               & torch.ones(12, 12).tril().bool())),
    # head dimensions the bf16 tiles take (pairs along E, whole 32-value panels of Ev): key
    # blocks of 128 with a tail, a boolean mask, GQA, and a causal diagonal across two tiles
    "bf16_tile_shapes": ((1, 4, 150, 64), (1, 2, 300, 64),
                         dict(enable_gqa=True, mask=torch.rand(1, 1, 150, 300, generator=torch.Generator().manual_seed(1)) > 0.2)),
    "bf16_tile_causal": ((2, 2, 200, 96), (2, 2, 200, 96), dict(is_causal=True)),
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


DROPOUT_CASES = {
    "rows": ((2, 4, 5, 16), (2, 4, 40, 16), {}),
    "tiles_causal": ((1, 2, 130, 32), (1, 2, 130, 32), dict(is_causal=True)),
    "gqa_mask": ((1, 4, 50, 16), (1, 2, 70, 16), dict(enable_gqa=True, attn_mask=torch.randn(1, 1, 50, 70))),
    "bf16_tiles": ((1, 2, 100, 64), (1, 2, 260, 64), {}),
}


@pytest.mark.parametrize("name", list(DROPOUT_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_dropout_in_the_fused_kernel_keeps_the_math_paths_mask(name, dtype):
    # The fused kernel drops the probabilities that native_dropout of softmax(scores) drops for
    # the same generator state, so the math path is the reference, forward and backward.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    shape_q, shape_kv, kw = DROPOUT_CASES[name]
    kw = dict(kw)
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(shape_q, generator=g), torch.randn(shape_kv, generator=g), torch.randn(shape_kv, generator=g)
    grad = torch.randn(shape_q, generator=g)
    if "attn_mask" in kw:
        kw["attn_mask"] = kw["attn_mask"].to(dtype).to("neuron")
    results = {}
    for backend in (SDPBackend.OVERRIDEABLE, SDPBackend.MATH):
        leaves = [t.to(dtype).to("neuron").requires_grad_() for t in (q, k, v)]
        torch.neuron.manual_seed(7)
        torch_neuronx.clear_op_tracking()
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(*leaves, dropout_p=0.3, **kw)
        out.backward(grad.to(dtype).to("neuron"))
        assert (FUSED in torch_neuronx.get_executed_ops()) == (backend == SDPBackend.OVERRIDEABLE)
        assert torch_neuronx.get_fallback_ops() == {}
        results[backend] = [t.float().cpu() for t in (out, *(x.grad for x in leaves))]
    fused, math = results.values()
    for a, b in zip(fused, math):
        torch.testing.assert_close(a, b, **TOL[dtype])


def test_dropout_debug_mask_and_rate():
    # return_debug_mask gives the kept probabilities; the output is then exactly
    # (softmax(scores) * mask / (1 - p)) v, and about 1 - p of them are kept.
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(2, 3, 64, 16, generator=g), torch.randn(2, 3, 96, 16, generator=g), torch.randn(2, 3, 96, 16, generator=g)
    p = 0.2
    out, *_, mask = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        q.to("neuron"), k.to("neuron"), v.to("neuron"), None, p, False, True)
    mask = mask.cpu()
    assert mask.shape == (2, 3, 64, 96) and set(mask.unique().tolist()) == {0.0, 1.0}
    assert abs(mask.mean().item() - (1 - p)) < 0.01  # 36864 draws: 5 standard deviations
    probs = torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1)
    torch.testing.assert_close(out.cpu(), (probs * mask / (1 - p)) @ v, rtol=1e-4, atol=1e-4)
    # every probability dropped: zeros and zero gradients
    leaves = [t.to("neuron").requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, dropout_p=1.0)
    out.sum().backward()
    for t in (out, *(x.grad for x in leaves)):
        assert torch.count_nonzero(t.cpu()) == 0


def test_compiled_dropout_draws_like_eager_and_never_replays():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.25, is_causal=True)

    g = torch.Generator().manual_seed(2)
    inputs = [torch.randn(1, 2, 40, 16, generator=g) for _ in range(3)]
    results = []
    for fn in (f, torch.compile(f, backend="neuron")):
        leaves = [t.to("neuron").requires_grad_() for t in inputs]
        torch.neuron.manual_seed(3)
        out = fn(*leaves)
        out.sum().backward()
        results.append([t.cpu() for t in (out, *(x.grad for x in leaves))])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b)
    # inference: each call draws a new mask (a replay would repeat the first)
    compiled = torch.compile(lambda q: F.scaled_dot_product_attention(q, q, q, dropout_p=0.5), backend="neuron")
    q = inputs[0].to("neuron")
    outs = [compiled(q).cpu() for _ in range(4)]
    assert all(not torch.equal(outs[i], outs[i + 1]) for i in range(3))


def test_mask_gradient_uses_the_native_math_path():
    q = torch.randn(1, 2, 16, 8, device="neuron")
    torch_neuronx.clear_op_tracking()
    mask = torch.zeros(16, 16, device="neuron", requires_grad=True)
    F.scaled_dot_product_attention(q, q, q, attn_mask=mask).sum().backward()
    assert FUSED not in torch_neuronx.get_executed_ops()
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


def test_llama_with_attention_dropout_trains_on_the_fused_kernel():
    # A Transformers Llama in training mode passes attention_dropout to SDPA: the fused kernel
    # takes it, and a training step's loss and gradients equal the math path's with the same
    # seed (the same masks).
    transformers = pytest.importorskip("transformers")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, attention_dropout=0.2,
                                      attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to("neuron").train()
    ids = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(1)).to("neuron")
    results = {}
    for backend in (SDPBackend.OVERRIDEABLE, SDPBackend.MATH):
        model.zero_grad(set_to_none=True)
        torch.neuron.manual_seed(11)
        torch_neuronx.clear_op_tracking()
        with sdpa_kernel(backend):
            loss = model(ids, labels=ids).loss
            loss.backward()
        assert (FUSED + "_backward" in torch_neuronx.get_executed_ops()) == (backend == SDPBackend.OVERRIDEABLE)
        assert torch_neuronx.get_fallback_ops() == {}
        results[backend] = [loss.detach().cpu()] + [p.grad.cpu() for p in model.parameters()]
    fused, math = results.values()
    for a, b in zip(fused, math):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # and the dropout is real: another seed gives another loss
    torch.neuron.manual_seed(12)
    assert not torch.equal(model(ids, labels=ids).loss.detach().cpu(), fused[0])
