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


# The zoo: whole training steps (forward, backward, AdamW) compiled on neuron, against the same
# steps run eagerly on neuron and on the CPU. float32; three steps, so that the second and third
# run the recorded launches (compiler/replay.py) with weights the optimizer moved.
STEPS = 3
ZOO_TOL = dict(rtol=1e-4, atol=2e-5)


def tiny_llama(**overrides):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **overrides)
    return LlamaForCausalLM(config)


def make_mlp():
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 32), torch.nn.SiLU(),
                               torch.nn.Linear(32, 5))


def make_llama_checkpointed():
    model = tiny_llama()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def make_lora():
    from peft import LoraConfig, get_peft_model

    return get_peft_model(tiny_llama(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                                                   lora_dropout=0.0, init_lora_weights=False))


ZOO = {"mlp": make_mlp, "llama": tiny_llama, "llama_checkpointed": make_llama_checkpointed, "lora": make_lora}


def zoo_loss(name, model, batch, device):
    if name == "mlp":
        x, y = batch
        return F.cross_entropy(model(x.to(device)), y.to(device))
    ids = batch.to(device)
    return model(input_ids=ids, labels=ids).loss


def zoo_run(name, device, compiled, seed_device=None):
    torch.manual_seed(0)
    model = ZOO[name]().to(device).train()
    g = torch.Generator().manual_seed(1)
    batch = ((torch.randn(8, 12, generator=g), torch.randint(0, 5, (8,), generator=g)) if name == "mlp"
             else torch.randint(0, 96, (2, 16), generator=g))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    step_model = torch.compile(model, backend="neuron", dynamic=False) if compiled else model
    if seed_device:
        torch.neuron.manual_seed(seed_device)
    losses = []
    for _ in range(STEPS):
        loss = zoo_loss(name, step_model, batch, device)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach().cpu())
    trained = {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if p.requires_grad}
    return torch.stack(losses), trained


def check_same(got, want, tol):
    torch.testing.assert_close(got[0], want[0], **tol)
    assert got[1].keys() == want[1].keys()
    for name in want[1]:
        torch.testing.assert_close(got[1][name], want[1][name], **tol, msg=name)


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_compiled_step_matches_eager_and_cpu(name):
    if name == "lora":
        pytest.importorskip("peft")
    cpu = zoo_run(name, "cpu", compiled=False)
    eager = zoo_run(name, "neuron", compiled=False)
    compiled = zoo_run(name, "neuron", compiled=True)
    check_same(eager, cpu, ZOO_TOL)
    check_same(compiled, cpu, ZOO_TOL)
    metrics = get_dynamo_metrics()
    assert metrics["compilations"] >= 2 and metrics["fallbacks"] == 0, metrics  # a forward and a backward
    assert metrics["replays"] >= 2, metrics  # steps 2 and 3 replayed
    assert cpu[0][-1] < cpu[0][0]  # it trains


def test_zoo_checkpointed_dropout_compiled_matches_eager():
    """A tiny Llama with dropout on its attention weights (attention_dropout) under non-reentrant
    checkpointing: compiled and eager draw from the device's generator from the same seed."""
    def make():
        model = tiny_llama(attention_dropout=0.25)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return model

    ZOO["llama_dropout"] = make
    try:
        eager = zoo_run("llama_dropout", "neuron", compiled=False, seed_device=7)
        compiled = zoo_run("llama_dropout", "neuron", compiled=True, seed_device=7)
        undropped = zoo_run("llama_checkpointed", "neuron", compiled=False)
    finally:
        del ZOO["llama_dropout"]
    check_same(compiled, eager, ZOO_TOL)
    assert (eager[0] - undropped[0]).abs().max() > 1e-3  # dropout is on
