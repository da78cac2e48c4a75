"""safetensors files load onto the neuron device however it is named (torch_neuronx/hf_compat.py)."""
import os
import subprocess
import sys

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file

import torch_neuronx  # noqa: F401


@pytest.fixture
def saved(tmp_path):
    g = torch.Generator().manual_seed(0)
    tensors = {"w": torch.randn(4, 3, generator=g), "b": torch.randn(3, generator=g).to(torch.bfloat16),
               "i": torch.arange(6, dtype=torch.int64).reshape(2, 3)}
    path = str(tmp_path / "t.safetensors")
    save_file(tensors, path)
    return path, tensors


@pytest.mark.parametrize("device", ["neuron", "neuron:0", torch.device("neuron"), torch.device("neuron", 0), 0],
                         ids=str)
def test_load_file_onto_neuron(saved, device):
    path, expected = saved
    loaded = load_file(path, device=device)
    assert loaded.keys() == expected.keys()
    for name, t in loaded.items():
        assert t.device == torch.device("neuron", 0)
        assert t.dtype == expected[name].dtype
        torch.testing.assert_close(t.cpu(), expected[name], rtol=0, atol=0)


def test_cpu_and_bad_devices_unchanged(saved):
    path, expected = saved
    assert load_file(path, device="cpu")["w"].device == torch.device("cpu")
    with pytest.raises(RuntimeError, match="Invalid device id"):
        load_file(path, device=f"neuron:{torch.neuron.device_count() + 3}")
    with pytest.raises(SafetensorError):
        load_file(path, device="bogus")


def test_load_model_onto_neuron(saved, tmp_path):
    model = torch.nn.Linear(3, 4)
    path = str(tmp_path / "m.safetensors")
    save_file({k: v.clone() for k, v in model.state_dict().items()}, path)
    target = torch.nn.Linear(3, 4).to("neuron")
    load_model(target, path, device="neuron:0")
    for name, t in target.state_dict().items():
        assert t.device.type == "neuron"
        torch.testing.assert_close(t.cpu(), model.state_dict()[name], rtol=0, atol=0)


@pytest.mark.parametrize("order", ["safetensors first", "torch_neuronx first"])
def test_import_order(saved, order):
    """`from safetensors import safe_open` taken before or after torch_neuronx loads both see
    the neuron device (Accelerate and Transformers take it at their import)."""
    path, _ = saved
    imports = ("from safetensors import safe_open; import torch, torch_neuronx" if order == "safetensors first"
               else "import torch, torch_neuronx; from safetensors import safe_open")
    code = (f"{imports}\n"
            "import safetensors.torch\n"
            f"with safe_open({path!r}, framework='pt', device='neuron:0') as f: print(f.get_tensor('w').device)\n"
            f"print(safetensors.torch.load_file({path!r}, device='neuron')['i'].device)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    if order == "safetensors first":
        # the name bound before torch_neuronx loaded is safetensors' own: it still refuses
        # "neuron:0", while the module attribute and safetensors.torch are patched
        assert out.returncode != 0 and "device neuron:0 is invalid" in out.stderr, out.stderr
        code = code.replace("with safe_open(", "with safetensors.safe_open(")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["neuron:0", "neuron:0"]
