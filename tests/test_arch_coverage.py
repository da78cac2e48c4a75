"""Tiny Hugging Face causal LMs give the same logits and the same greedy tokens on neuron as on
the CPU (the CI subset of `python -m torch_neuronx.tools.arch_coverage`, run with its code)."""
import pytest

pytest.importorskip("transformers")

from torch_neuronx.tools import arch_coverage as ac  # noqa: E402

# Architectures that fail today because of the neuron backend (strict: a fix shows up as an
# unexpected pass and the entry must go). None in the CI subset at the moment.
KNOWN_FAILURES = {}


def _params():
    for arch in ac.CI_SUBSET:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[arch])] if arch in KNOWN_FAILURES else []
        yield pytest.param(arch, marks=marks, id=arch)


@pytest.mark.parametrize("arch", list(_params()))
def test_matches_cpu(arch):
    result = ac.check_arch(arch)
    assert result["status"] == "pass", (
        f"{arch}: {result['status']}: {result['reason']} (CPU-fallback ops: {result['fallback_ops']})\n"
        + result.get("traceback", ""))


def test_tiny_configs_are_tiny():
    from transformers import AutoModelForCausalLM

    for arch in ac.CI_SUBSET:
        cfg = ac.tiny_config(arch)
        text = cfg.get_text_config()
        assert text.vocab_size <= ac.VOCAB, arch
        model = AutoModelForCausalLM.from_config(cfg)
        assert sum(p.numel() for p in model.parameters()) < 1_000_000, arch


def test_inputs_are_fixed_and_left_padded():
    cfg = ac.tiny_config("llama")
    ids, mask, pad = ac.make_inputs(cfg)
    ids2, mask2, _ = ac.make_inputs(cfg)
    assert ids.shape == mask.shape == (ac.BATCH, ac.SEQ)
    assert ids.equal(ids2) and mask.equal(mask2)
    assert mask[-1, :ac.LEFT_PAD].eq(0).all() and mask[-1, ac.LEFT_PAD:].eq(1).all() and mask[0].eq(1).all()
    assert ids[-1, :ac.LEFT_PAD].eq(pad).all()


def test_report():
    results = [
        {"arch": "a", "status": "pass", "reason": "", "fallback_ops": {"aten::histc": 1}, "max_abs_diff": 1e-7,
         "params": 10, "seconds": 1.0},
        {"arch": "b", "status": "fail", "reason": "logits differ: max abs 0.1", "max_abs_diff": 0.1,
         "fallback_ops": {"aten::histc": 2, "aten::floor_divide": 1}, "params": 10, "seconds": 2.0},
        {"arch": "c", "status": "skip", "reason": "needs audio", "fallback_ops": {}, "max_abs_diff": None,
         "params": None, "seconds": 0.0},
    ]
    summary = ac.summarize(results)
    assert (summary["pass"], summary["fail"], summary["skip"], summary["pass_percent"]) == (1, 1, 1, 50.0)
    assert summary["fallback_ops"] == {"aten::histc": ["a", "b"], "aten::floor_divide": ["b"]}
    text = ac.render_markdown(results)
    assert "| b | fail | logits differ: max abs 0.1 |" in text
    assert "| c | needs audio |" in text
    assert "| aten::histc | 2 | a, b |" in text
