"""Batch and group normalisation on neuron against the CPU: nn.BatchNorm1d/2d in training (the
running statistics' update included) and evaluation, nn.GroupNorm, forward and backward, in
float32, float64, bfloat16 and with bfloat16 data beside float32 parameters; channels_last kept;
the CPU's errors. No op may fall back."""
import copy

import pytest
import torch
import torch.nn as nn

import torch_neuronx

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-10, rtol=1e-10),
       torch.bfloat16: dict(atol=3e-2, rtol=2e-2)}


def _run(module, x, dtype):
    """forward and backward of module on the CPU and on neuron; returns both runs' tensors"""
    torch.manual_seed(1)
    mod_n = copy.deepcopy(module).to("neuron")
    xc = x.clone().requires_grad_()
    xn = x.to("neuron").requires_grad_()
    yc = module(xc)
    torch_neuronx.clear_op_tracking()
    yn = mod_n(xn)
    g = torch.randn(yc.shape).to(dtype)
    yc.backward(g)
    yn.backward(g.to("neuron"))
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    cpu, dev = [yc, xc.grad], [yn, xn.grad]
    if module.weight is not None:
        cpu += [module.weight.grad, module.bias.grad]
        dev += [mod_n.weight.grad, mod_n.bias.grad]
    for name in ("running_mean", "running_var"):
        if getattr(module, name, None) is not None:
            cpu.append(getattr(module, name))
            dev.append(getattr(mod_n, name))
    return cpu, dev


def _randomise(module):
    with torch.no_grad():
        if module.weight is not None:
            module.weight.normal_()
            module.bias.normal_()
        if getattr(module, "running_mean", None) is not None:
            module.running_mean.normal_()
            module.running_var.uniform_(0.5, 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (2, 8, 10), (5, 4)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(dtype, shape, training):
    torch.manual_seed(0)
    module = (nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d)(shape[1]).to(dtype).train(training)
    _randomise(module)
    x = (torch.randn(*shape) * 3 + 2).to(dtype)
    cpu, dev = _run(module, x, dtype)
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.cpu(), c, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape, groups", [((4, 6, 5, 6), 3), ((2, 8, 10), 8), ((3, 4, 7), 1), ((2, 4), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(dtype, shape, groups, affine):
    torch.manual_seed(0)
    module = nn.GroupNorm(groups, shape[1], affine=affine).to(dtype)
    if affine:
        _randomise(module)
    x = (torch.randn(*shape) * 3 + 2).to(dtype)
    cpu, dev = _run(module, x, dtype)
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.cpu(), c, **TOL[dtype])


def test_large_offset_keeps_the_variance():
    # values 1e4 apart from their spread of 0.05: E[x^2] - E[x]^2 in float32 would be noise
    torch.manual_seed(0)
    x = (1e4 + 0.05 * torch.rand(8, 3, 16, 16, dtype=torch.float64)).float()
    want = torch.nn.functional.batch_norm(x.double(), None, None, training=True)
    got = torch.nn.functional.batch_norm(x.to("neuron"), None, None, training=True).cpu().double()
    torch.testing.assert_close(got, want, atol=2e-3, rtol=0)
    want = torch.nn.functional.group_norm(x.double(), 3)
    got = torch.nn.functional.group_norm(x.to("neuron"), 3).cpu().double()
    torch.testing.assert_close(got, want, atol=2e-3, rtol=0)


def test_mixed_dtypes_and_layout():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 3, 3).to(torch.bfloat16)
    w, b, rm, rv = torch.randn(4), torch.randn(4), torch.zeros(4), torch.ones(4)
    args = (w, b, rm, rv)
    want = torch.ops.aten.native_batch_norm(x, *[a.clone() for a in args], True, 0.1, 1e-5)
    dev_args = [a.to("neuron") for a in args]
    got = torch.ops.aten.native_batch_norm(x.to("neuron"), *dev_args, True, 0.1, 1e-5)
    assert [t.dtype for t in got] == [t.dtype for t in want] == [torch.bfloat16, torch.float32, torch.float32]
    for g, c in zip(got, want):
        torch.testing.assert_close(g.cpu(), c, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(dev_args[2].cpu(), 0.1 * want[1], atol=1e-6, rtol=1e-5)
    want = torch.ops.aten.native_group_norm(x, w, b, 2, 4, 9, 2, 1e-5)
    got = torch.ops.aten.native_group_norm(x.to("neuron"), w.to("neuron"), b.to("neuron"), 2, 4, 9, 2, 1e-5)
    assert [t.dtype for t in got] == [t.dtype for t in want]
    for g, c in zip(got, want):
        torch.testing.assert_close(g.cpu(), c, atol=2e-2, rtol=2e-2)
    cl = torch.randn(2, 4, 5, 5).to(memory_format=torch.channels_last)
    out = nn.BatchNorm2d(4).to("neuron")(cl.to("neuron"))
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out.cpu(), nn.BatchNorm2d(4)(cl), atol=1e-5, rtol=1e-5)


def test_errors():
    x = torch.randn(2, 4, 3, device="neuron")
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined"):
        torch.ops.aten.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
        torch.ops.aten.native_batch_norm(x, None, None, torch.zeros(3, device="neuron"),
                                         torch.ones(3, device="neuron"), True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="at least one element"):
        torch.ops.aten.native_batch_norm(torch.randn(0, 4, device="neuron"), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        torch.ops.aten.native_group_norm(x, None, None, 2, 4, 3, 3, 1e-5)
    empty = torch.ops.aten.native_group_norm(torch.randn(0, 4, device="neuron"), None, None, 0, 4, 1, 2, 1e-5)
    assert [tuple(t.shape) for t in empty] == [(0, 4), (0, 2), (0, 2)]
