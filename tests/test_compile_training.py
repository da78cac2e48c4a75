"""Compiled training steps on neuron against the CPU.

Activation checkpointing inside torch.compile(backend="neuron"): the RNG higher-order ops
(run_and_save_rng_state / run_with_rng_state) run on the device's generator, so that the dropout
recomputed in the backward uses the forward's mask; the gradient the device computes equals the
CPU's gradient of the same function with the forward's mask. Losses reduced from 3-D and 4-D
activations, whose backward starts from a gradient expanded with zero strides."""
import pytest
import torch
import torch.nn.functional as F
import torch_neuronx  # noqa: F401
from torch.utils.checkpoint import checkpoint

from torch_neuronx.compiler import get_dynamo_metrics, reset_dynamo_metrics

TOL = dict(rtol=1e-4, atol=1e-5)
P = 0.5


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    torch._dynamo.reset()
    reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


def make(device):
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 24).to(device)
    x = torch.randn(3, 5, 16).to(device).requires_grad_()
    return lin, x


def block(lin, x):
    return F.dropout(F.gelu(lin(x)), p=P, training=True)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_dropout_recomputes_the_forward_mask(reentrant):
    lin, x = make("neuron")

    def step(x):
        out = checkpoint(block, lin, x, use_reentrant=reentrant)
        return out, (out * out).sum()

    out, loss = torch.compile(step, backend="neuron")(x)
    loss.backward()
    mask = (out != 0).cpu()
    assert 0.2 < mask.float().mean() < 0.8  # dropout did drop

    ref_lin, ref_x = make("cpu")
    ref_out = F.gelu(ref_lin(ref_x)) * mask / (1 - P)
    (ref_out * ref_out).sum().backward()
    torch.testing.assert_close(out.cpu(), ref_out.detach(), **TOL)
    torch.testing.assert_close(x.grad.cpu(), ref_x.grad, **TOL)
    torch.testing.assert_close(lin.weight.grad.cpu(), ref_lin.weight.grad, **TOL)


def test_rng_state_ops_eagerly_on_the_device():
    """The higher-order ops themselves, on neuron tensors: the saved state replays the draw, and
    the generator's state afterwards is as before the replay."""
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state

    x = torch.ones(1000, device="neuron")
    state, first = run_and_save_rng_state(torch.ops.aten.rand_like.default, x)
    after = torch.neuron.get_rng_state()
    again = run_with_rng_state(state, torch.ops.aten.rand_like.default, x)
    torch.testing.assert_close(again.cpu(), first.cpu(), rtol=0, atol=0)
    assert torch.equal(torch.neuron.get_rng_state(), after)
    assert not torch.equal(torch.rand_like(x).cpu(), first.cpu())


def test_second_step_does_not_recompile():
    lin, x = make("neuron")

    def step(x):
        return (checkpoint(block, lin, x, use_reentrant=False) ** 2).sum()

    f = torch.compile(step, backend="neuron")
    f(x).backward()
    first = dict(get_dynamo_metrics())
    f(x).backward()
    assert first["graphs"] >= 1
    assert get_dynamo_metrics()["graphs"] == first["graphs"]
    assert get_dynamo_metrics()["compilations"] == first["compilations"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 8), (2, 3, 8), (2, 2, 3, 8)])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_reduced_loss_backward(reduction, shape, dtype):
    got = {}
    for device in ("cpu", "neuron"):
        torch.manual_seed(0)
        lin = torch.nn.Linear(8, 8).to(device, dtype)
        x = torch.randn(*shape).to(device, dtype).requires_grad_()

        def loss_fn(x):
            return getattr(F.silu(lin(x)) * 2, reduction)()

        f = torch.compile(loss_fn, backend="neuron") if device == "neuron" else loss_fn
        loss = f(x)
        loss.backward()
        got[device] = (loss.detach().cpu(), x.grad.cpu(), lin.weight.grad.cpu())
    tol = TOL if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    for want, have in zip(got["cpu"], got["neuron"]):
        torch.testing.assert_close(have, want, **tol)
