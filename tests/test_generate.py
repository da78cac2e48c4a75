"""generate() on neuron against the CPU with a tiny random Llama: greedy tokens identical with
the dynamic cache, the static cache (which Transformers compiles with backend "neuron"),
chunked prefill and left-padded batches; sampling reproducible from the device generator; no
op on the CPU fallback."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import torch_neuronx

transformers = pytest.importorskip("transformers")
from transformers import CompileConfig, GenerationConfig, LlamaConfig, LlamaForCausalLM  # noqa: E402

NEW = 8


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=0, eos_token_id=1, bos_token_id=2)
    cpu = LlamaForCausalLM(config).eval()
    dev = LlamaForCausalLM(config).eval()
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to("neuron")


def batch():
    """Two prompts, the shorter left-padded, as a tokenizer with padding_side='left' gives."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 96, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    ids[1, :3], mask[1, :3] = 0, 0
    return ids, mask


def generate_both(models, **kw):
    cpu, dev = models
    ids, mask = batch()
    want = cpu.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False, **kw)
    torch_neuronx.clear_op_tracking()
    got = dev.generate(input_ids=ids.to("neuron"), attention_mask=mask.to("neuron"), max_new_tokens=NEW,
                       do_sample=False, **kw)
    assert got.device.type == "neuron"
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    return want, got.cpu()


def test_greedy_dynamic_cache_left_padding(models):
    want, got = generate_both(models)
    assert torch.equal(got, want)


def test_greedy_chunked_prefill(models):
    want, got = generate_both(models, prefill_chunk_size=4)
    assert torch.equal(got, want)


def test_greedy_static_cache_compiles_with_the_neuron_backend(models):
    torch_neuronx.reset_dynamo_metrics()
    want, got = generate_both(models, cache_implementation="static")
    assert torch.equal(got, want)
    m = torch_neuronx.get_dynamo_metrics()
    assert m["graphs"] >= 1, m  # the decode step went through torch.compile
    assert m["replays"] >= 1 and m["replay_refusals"] == 0, m  # and replayed its launches


def test_static_cache_with_dynamic_shapes_is_refused_clearly(models):
    _, dev = models
    ids, mask = batch()
    config = GenerationConfig(max_new_tokens=2, do_sample=False, cache_implementation="static",
                              compile_config=CompileConfig(backend="neuron", dynamic=True))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="static shapes only"):
        dev.generate(input_ids=ids.to("neuron"), attention_mask=mask.to("neuron"), generation_config=config)
    torch._dynamo.reset()


def test_sampling_is_reproducible_from_the_device_generator(models):
    _, dev = models
    ids, mask = batch()
    runs = []
    for _ in range(2):
        torch.neuron.manual_seed(123)
        runs.append(dev.generate(input_ids=ids.to("neuron"), attention_mask=mask.to("neuron"), max_new_tokens=NEW,
                                 do_sample=True, top_k=20, temperature=0.8).cpu())
    assert torch.equal(runs[0], runs[1])
    assert runs[0].shape == (2, 9 + NEW) and int(runs[0].max()) < 96
