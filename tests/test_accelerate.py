"""Plain Accelerate on neuron, as users launch it (tests/train_scripts/accelerate_train.py):
`accelerate launch --num_processes 2` runs DDP on the `neuron` backend with
`Accelerator(mixed_precision="bf16")`, against the same two-process run on the CPU (Gloo);
`save_state` / `load_state` round-trips the weights, the optimizer and the RNG states (the
device's included: Accelerate saves `torch.neuron.get_rng_state_all()`).

Tolerances. Both sides compute the MLP in bfloat16 under autocast, with float32 weights, grads
and AdamW: observed ≤ 7e-6 on losses and ≤ 1.1e-5 on weights. A run on one process instead of
two (bf16 partial products over 8 rows instead of 4) moves the losses by 6e-4 and, through
AdamW's normalised steps, some weights by up to 1e-2 (lr), so the bounds below tell them apart.
"""
import importlib.util
import os
import sys

import pytest
import torch
from torch.testing import assert_close

from dist_harness import child_env, free_port, run_command, run_torchrun

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "train_scripts", "accelerate_train.py")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("accelerate") is None, reason="accelerate is not installed")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("accelerate")
    neuron, cpu = root / "neuron", root / "cpu"
    neuron.mkdir(), cpu.mkdir()
    run_command([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
                 "--main_process_port", str(free_port()), SCRIPT, str(neuron)],
                env=child_env({"TORCH_NEURONX_DISABLE_CPU_FALLBACK": "1"}), timeout=300, what="accelerate launch")
    # the reference: torch alone (no torch_neuronx), Accelerate's CPU DDP on Gloo
    run_torchrun([SCRIPT, cpu], env=child_env({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "ACCELERATE_USE_CPU": "true",
                                               "ACCELERATE_MIXED_PRECISION": "bf16"}), timeout=300, what="cpu")
    return (torch.load(neuron / "result.pt", weights_only=False), torch.load(cpu / "result.pt", weights_only=False))


def test_launch_picks_the_neuron_backend(runs):
    neuron, cpu = runs
    assert (neuron["device"], neuron["distributed_type"], neuron["backend"], neuron["num_processes"]) == (
        "neuron:0", "DistributedType.MULTI_NEURON", "neuron", 2)
    assert (cpu["distributed_type"], cpu["backend"], cpu["num_processes"]) == ("DistributedType.MULTI_CPU", "gloo", 2)
    assert neuron["saved_files"] == ["model.safetensors", "optimizer.bin", "random_states_0.pkl", "random_states_1.pkl"]


def test_ddp_bf16_training_matches_cpu(runs):
    neuron, cpu = runs
    assert_close(torch.tensor(neuron["losses"]), torch.tensor(cpu["losses"]), rtol=0, atol=1e-4)
    assert cpu["losses"][-1] < cpu["losses"][0] - 0.2  # it trains
    for name, value in cpu["params"].items():
        assert_close(neuron["params"][name], value, rtol=0, atol=1e-4, msg=name)
        assert (value - cpu["init"][name]).abs().max() > 100 * 1e-4  # the weights moved far beyond the bound


def test_load_state_restores_weights_optimizer_and_rng(runs):
    """After load_state the device's and the CPU's random numbers, the next step's loss and the
    weights after it are those drawn and reached right after save_state."""
    neuron, _ = runs
    first, second = neuron["first"], neuron["second"]
    assert_close(second["device_random"], first["device_random"], rtol=0, atol=0)
    assert_close(second["cpu_random"], first["cpu_random"], rtol=0, atol=0)
    assert second["loss"] == first["loss"]
    for name, value in first["params"].items():
        assert_close(second["params"][name], value, rtol=0, atol=0, msg=name)
