"""PEFT adapters trained by TRL's SFTTrainer on neuron (tests/train_scripts/peft_sft.py): LoRA
and DoRA on every projection of a tiny Qwen3, 6 steps, then reloaded with PEFT and merged
(`merge_and_unload`) on the device; the losses, the adapter and the merged weights against
the same run on the CPU (`use_cpu=True`).

Tolerances. float32 on both sides: observed ≤ 3e-6 on losses, ≤ 7e-5 on merged weights (LoRA;
DoRA 1e-6). AdamW's first steps are sign-like (lr 1e-2), so adapter entries whose gradient is
near zero may differ by up to ~1e-3; the merged weights, which the adapter moves by ≥ 1e-2, are
the comparison that matters.
"""
import importlib.util
import os
import sys

import pytest
import torch
from torch.testing import assert_close

from dist_harness import child_env, run_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "train_scripts", "peft_sft.py")
MERGED_TOL = dict(rtol=0, atol=3e-4)

pytestmark = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("trl", "peft")),
                                reason="trl and peft are not installed")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from test_sft import make_data

    return make_data(tmp_path_factory.mktemp("peft"))


def train(root, kind, cpu):
    out = root / f"{kind}_{'cpu' if cpu else 'neuron'}"
    out.mkdir()
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"} if cpu else {"TORCH_NEURONX_DISABLE_CPU_FALLBACK": "1"}
    run_command([sys.executable, SCRIPT, str(root / "model"), str(root / "data"), str(out), kind,
                 *(["--cpu"] if cpu else [])], env=child_env(env), timeout=600, what=out.name)
    return torch.load(out / "result.pt", weights_only=False)


@pytest.mark.parametrize("kind", ["lora", "dora"])
def test_merged_adapter_matches_cpu(data, kind):
    neuron, cpu = train(data, kind, cpu=False), train(data, kind, cpu=True)
    assert (neuron["device"], cpu["device"]) == ("neuron:0", "cpu")
    assert len(cpu["losses"]) == 6
    assert_close(torch.tensor(neuron["losses"]), torch.tensor(cpu["losses"]), rtol=0, atol=2e-5)
    assert neuron["adapter"].keys() == cpu["adapter"].keys() and any("lora_B" in k for k in cpu["adapter"])
    if kind == "dora":
        assert any("lora_magnitude_vector" in k for k in cpu["adapter"])
    for name, value in cpu["adapter"].items():
        assert_close(neuron["adapter"][name], value, rtol=0, atol=3e-3, msg=name)
    assert neuron["merged"].keys() == cpu["merged"].keys()
    moved = 0.0
    for name, value in cpu["merged"].items():
        assert_close(neuron["merged"][name], value, **MERGED_TOL, msg=name)
        moved = max(moved, (value - cpu["base"][name]).abs().max().item())
    assert moved > 30 * MERGED_TOL["atol"], moved  # the adapter changed the weights far beyond the bound
