"""Ops built from native ops (addcmul, addcdiv, lerp, clamp, norms, nll_loss) and the optimizer
loop that uses them, against the CPU."""
import copy

import pytest
import torch
import torch_neuronx


def native(fn):
    torch_neuronx.clear_op_tracking()
    out = fn()
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    return out


def on(t):
    return t.to("neuron")


def test_pointwise_compositions():
    g = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(5, 6, generator=g) for _ in range(3))
    c = c.abs() + 0.5
    for fn in (lambda x, y, z: torch.addcmul(x, y, z, value=0.3), lambda x, y, z: torch.addcdiv(x, y, z, value=-2),
               lambda x, y, z: torch.lerp(x, y, 0.1), lambda x, y, z: torch.lerp(x, y, 0.9)):
        got = native(lambda: fn(on(a), on(b), on(c)))
        torch.testing.assert_close(got.cpu(), fn(a, b, c))
    for kw in (dict(min=-0.5), dict(max=0.5), dict(min=-0.2, max=0.3), dict(min=1.0, max=-1.0)):
        torch.testing.assert_close(native(lambda: torch.clamp(on(a), **kw)).cpu(), torch.clamp(a, **kw))
    i = torch.arange(-3, 4)
    torch.testing.assert_close(torch.clamp(on(i), min=0.5).cpu(), torch.clamp(i, min=0.5))   # promotes
    torch.testing.assert_close(torch.clamp(on(i), -1, 1).cpu(), torch.clamp(i, -1, 1))
    nan = torch.tensor([float("nan"), 2.0])
    torch.testing.assert_close(torch.clamp(on(nan), max=1.0).cpu(), torch.clamp(nan, max=1.0), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32])
def test_clamp_with_both_bounds_is_one_launch_as_the_cpu(dtype):
    """Both bounds: one pass (the upper bound travels with the launch), with the CPU's rules:
    a NaN element or bound gives NaN, a lower bound above the upper gives the upper, bounds
    round to the tensor's dtype, out= of another dtype takes the cast result."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(7, 33, generator=g) * 100).to(dtype)
    if dtype.is_floating_point:
        x[0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    bounds = [(-50, 50), (60, -60), (0, 0)] + ([] if dtype == torch.float16 else [(-1e9, 1e9)])
    if dtype == torch.float16:   # a bound past float16's range: the CPU's error
        with pytest.raises(RuntimeError, match="without overflow"):
            torch.clamp(on(x), -1e9, 1e9)
    if dtype.is_floating_point:
        bounds += [(-0.3333, 0.7777), (float("nan"), 1.0), (-1.0, float("nan"))]
    for lo, hi in bounds:
        got = native(lambda: torch.clamp(on(x), lo, hi)).cpu()
        torch.testing.assert_close(got, torch.clamp(x, lo, hi), rtol=0, atol=0, equal_nan=True)
        got = native(lambda: torch.clamp(on(x).t(), lo, hi)).cpu()   # strided rows
        torch.testing.assert_close(got, torch.clamp(x.t(), lo, hi), rtol=0, atol=0, equal_nan=True)
    y = on(x)
    y.clamp_(-5, 5)
    torch.testing.assert_close(y.cpu(), torch.clamp(x, -5, 5), rtol=0, atol=0, equal_nan=True)
    out = torch.empty(7, 33, dtype=torch.float64, device="neuron")
    torch.clamp(on(x), -5, 5, out=out)
    torch.testing.assert_close(out.cpu(), torch.clamp(x, -5, 5).double(), rtol=0, atol=0, equal_nan=True)


def test_vector_norms():
    x = torch.randn(4, 9)
    for kw in (dict(), dict(dim=1), dict(dim=0, keepdim=True), dict(ord=float("inf"), dim=1)):
        got = native(lambda: torch.linalg.vector_norm(on(x), **kw))
        torch.testing.assert_close(got.cpu(), torch.linalg.vector_norm(x, **kw))
    torch.testing.assert_close(torch.linalg.vector_norm(on(x), ord=1).cpu(), torch.linalg.vector_norm(x, ord=1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_and_nll(reduction, weighted):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 5, generator=g)
    target = torch.tensor([0, 4, 2, -100, 1, 4])
    weight = torch.rand(5, generator=g) + 0.5 if weighted else None
    kw = dict(reduction=reduction, ignore_index=-100, weight=weight)
    grads = []
    for dev in ("cpu", "neuron"):
        x = logits.detach().to(dev).requires_grad_()
        kwd = dict(kw, weight=weight.to(dev) if weighted else None)
        loss = torch.nn.functional.cross_entropy(x, target.to(dev), **kwd)
        (loss if loss.dim() == 0 else loss.sum()).backward()
        grads.append((loss.detach().cpu(), x.grad.cpu()))
    torch.testing.assert_close(grads[1][0], grads[0][0])
    torch.testing.assert_close(grads[1][1], grads[0][1])


def test_cross_entropy_every_target_ignored():
    """0 / 0 total weight: the loss is NaN and the gradient zero, as on the CPU."""
    logits, target = torch.randn(3, 7), torch.full((3,), -100)
    out = []
    for dev in ("cpu", "neuron"):
        x = logits.detach().to(dev).requires_grad_()
        loss = torch.nn.functional.cross_entropy(x, target.to(dev))
        loss.backward()
        out.append((loss.detach().cpu(), x.grad.cpu()))
    torch.testing.assert_close(out[1][0], out[0][0], equal_nan=True)
    torch.testing.assert_close(out[1][1], out[0][1])


def test_adamw_with_clipping_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4))
    dev_model = copy.deepcopy(model).to("neuron")
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def train(m, dev):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        for _ in range(3):
            loss = torch.nn.functional.cross_entropy(m(x.to(dev)), y.to(dev))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()

    train(model, "cpu")
    native(lambda: train(dev_model, "neuron"))
    for p, q in zip(model.parameters(), dev_model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-5, atol=1e-6)
