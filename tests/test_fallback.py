"""Ops without a native kernel run on the CPU fallback: correct, counted, warned once, and
refused in strict mode."""
import warnings

import pytest
import torch
import torch_neuronx


def test_fallback_op_is_correct_and_counted(quiet_fallback):
    torch_neuronx.clear_op_tracking()
    a = torch.randn(5, 7)
    b = torch.randn(5, 7)
    out = torch.nextafter(a.to("neuron"), b.to("neuron"))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), torch.nextafter(a, b))
    fb = torch_neuronx.get_fallback_ops()
    assert fb == {"aten::nextafter.out": 1}
    ex = torch_neuronx.get_executed_ops()
    assert ex["aten::_copy_from"] >= 3   # two inputs to the CPU, the result back
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == {}


def test_inplace_and_out_variants_write_the_device_tensor(quiet_fallback):
    x = torch.arange(6.0).reshape(2, 3)
    d = x.to("neuron")
    d.mul_(2)
    torch.testing.assert_close(d.cpu(), x * 2)
    out = torch.empty(2, 3, device="neuron")
    torch.add(d, 1, out=out)
    torch.testing.assert_close(out.cpu(), x * 2 + 1)
    col = d[:, 1]                       # a view: the result lands in the base tensor
    col.add_(100)
    expect = x * 2
    expect[:, 1] += 100
    torch.testing.assert_close(d.cpu(), expect)


def test_warns_once_per_op():
    torch_neuronx.clear_op_tracking()
    x = torch.randn(4, device="neuron")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.special.erfcx(x)
        torch.special.erfcx(x)
    msgs = [str(m.message) for m in w if "erfcx" in str(m.message)]
    assert len(msgs) <= 1   # at most once per process (it may have warned in an earlier test)
    assert torch_neuronx.get_fallback_ops()["aten::special_erfcx.out"] == 2


def test_first_use_warns():
    x = torch.randn(4, device="neuron")
    with pytest.warns(UserWarning, match="'aten::special_i1e.out' has no native neuron kernel"):
        torch.special.i1e(x)


def test_strict_mode_raises_naming_the_op(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_CPU_FALLBACK", "1")
    x = torch.randn(4, device="neuron")
    with pytest.raises(NotImplementedError, match="'aten::special_i0e.out' has no native neuron kernel"):
        torch.special.i0e(x)
    x.fill_(1.0)            # native ops still run
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_CPU_FALLBACK")
    assert torch.special.i0e(x).cpu().shape == (4,)


def test_training_step_matches_cpu(quiet_fallback):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    dev_model = __import__("copy").deepcopy(model).to("neuron")
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for m, dev in ((model, "cpu"), (dev_model, "neuron")):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            loss = torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
    for p, q in zip(model.parameters(), dev_model.parameters()):
        torch.testing.assert_close(q.cpu(), p)


def test_coverage_tool(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "torch_neuronx.tools.coverage", "--list"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "native on neuron:" in out.stdout
    listed = set(out.stdout.split())
    # computed through a native out= form (structured ops): not on the fallback
    assert {"aten::pow.Tensor_Scalar", "aten::clamp_", "aten::_softmax"}.isdisjoint(listed)
    assert {"aten::nextafter", "aten::nextafter.out"} <= listed  # no neuron kernel yet
    from torch_neuronx.tools.coverage import op_coverage
    kinds = op_coverage()
    assert kinds["aten::add.out"] == "native" and kinds["aten::pow.Tensor_Scalar"] == "out"
    script = tmp_path / "s.py"
    script.write_text("import torch\nx = torch.ones(3, device='neuron')\n(x + 1).cpu()\ntorch.nextafter(x, x).cpu()\n")
    out = subprocess.run([sys.executable, "-m", "torch_neuronx.tools.coverage", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fallback         1  aten::nextafter.out" in out.stdout
