"""Compiled graphs replay their recorded launches (compiler/replay.py), with every input read
where it is on that call and every output in memory of its own: results follow the CPU call
after call with new inputs (large ones, ones the graph writes, views of other storage), weights
updated in place, earlier outputs left intact, and in training (forward and backward graphs);
small host tensors while their value holds; work that cannot replay (random numbers) runs as
compiled, with the same results as eager."""
import pytest
import torch
import torch_neuronx  # noqa: F401
from torch_neuronx.compiler import get_dynamo_metrics, reset_dynamo_metrics

from test_compile import Block, TOL, pair


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    monkeypatch.delenv("TORCH_NEURONX_GRAPH_REPLAY", raising=False)
    torch._dynamo.reset()
    reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


def compiled(module):
    return torch.compile(module, backend="neuron", fullgraph=True, dynamic=False)


def calls_match_cpu(run, cpu, calls):
    """`calls` calls of the compiled `run` on new inputs, each equal to the CPU module's."""
    with torch.no_grad():
        for _ in range(calls):
            x = torch.randn(8, 32)
            torch.testing.assert_close(run(x.to("neuron")).cpu(), cpu(x), **TOL)


def test_replays_follow_the_cpu_with_new_inputs():
    cpu, dev = pair(Block)
    run = compiled(dev)
    kept = []
    with torch.no_grad():
        for i in range(6):
            x = torch.randn(8, 32)
            got = run(x.to("neuron"))
            torch.testing.assert_close(got.cpu(), cpu(x), **TOL)
            kept.append((got, cpu(x)))
    m = get_dynamo_metrics()
    # the first call runs as compiled, the second is recorded, the others replay it, each
    # with its input wherever it was allocated
    assert m["recordings"] == 1 and m["replays"] == 4 and m["replay_refusals"] == 0, m
    # each call returned its own tensor: later replays did not overwrite earlier outputs
    for got, ref in kept:
        torch.testing.assert_close(got.cpu(), ref, **TOL)
    assert len({got.data_ptr() for got, _ in kept}) == len(kept)


def test_replays_read_weights_updated_in_place():
    cpu, dev = pair(Block)
    run = compiled(dev)
    x = torch.randn(8, 32)
    with torch.no_grad():
        for step in range(5):
            for p, q in zip(cpu.parameters(), dev.parameters()):
                p.mul_(0.9).add_(0.01)
                q.mul_(0.9).add_(0.01)
            torch.testing.assert_close(run(x.to("neuron")).cpu(), cpu(x), **TOL)
    assert get_dynamo_metrics()["replays"] == 3


def test_recorded_gemms_read_weights_packed_once():
    """A recorded GEMM whose B is a weight (a graph input) reads a packed copy the recording
    owns: packed once, not at every replay (the replays ran every GEMM single-threaded, packing
    B on the fly, at 0.4-0.8x the eager speed)."""
    cpu, dev = pair(Block)
    calls_match_cpu(compiled(dev), cpu, 4)
    m = get_dynamo_metrics()
    assert m["recordings"] == 1 and m["replays"] == 2 and m["packed_weights"] == 2, m  # up, down


def test_replays_with_another_modules_weights_pack_them():
    """One compiled function called with two modules: the replay reads the other module's
    weights (relocated), so the recording's packed copies are packed again from them."""
    cpu1, dev1 = pair(Block)
    cpu2, dev2 = pair(Block)
    with torch.no_grad():
        for p, q in zip(cpu2.parameters(), dev2.parameters()):
            noise = torch.randn(p.shape)
            p.add_(noise)
            q.add_(noise.to("neuron"))
    run = torch.compile(lambda m, x: m(x), backend="neuron", fullgraph=True, dynamic=False)
    with torch.no_grad():
        for step in range(6):
            cpu, dev = (cpu1, dev1) if step % 2 == 0 else (cpu2, dev2)
            x = torch.randn(8, 32)
            torch.testing.assert_close(run(dev, x.to("neuron")).cpu(), cpu(x), **TOL)
    m = get_dynamo_metrics()
    assert m["replays"] >= 3 and m["packed_weights"] >= 2, m


def test_a_graph_writing_a_weight_it_multiplies_by_is_not_replayed_with_a_stale_pack():
    """A packed copy made before the replay would miss the graph's own write: refused."""
    lin_cpu = torch.nn.Linear(32, 32)
    lin_dev = torch.nn.Linear(32, 32).to("neuron")
    lin_dev.load_state_dict(lin_cpu.state_dict())

    def step(lin, x):
        lin.weight.mul_(0.5)
        return lin(x)

    run = torch.compile(step, backend="neuron", fullgraph=True, dynamic=False)
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(8, 32)
            torch.testing.assert_close(run(lin_dev, x.to("neuron")).cpu(), step(lin_cpu, x), **TOL)


def test_replay_off_by_environment(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_GRAPH_REPLAY", "0")
    cpu, dev = pair(Block)
    run = compiled(dev)
    x = torch.randn(8, 32)
    with torch.no_grad():
        for _ in range(4):
            torch.testing.assert_close(run(x.to("neuron")).cpu(), cpu(x), **TOL)
    m = get_dynamo_metrics()
    assert m["recordings"] == 0 and m["replays"] == 0, m


def test_random_numbers_are_not_replayed():
    """Dropout draws new numbers every call: the recording is refused, not repeated."""
    def f(x):
        return torch.nn.functional.dropout(x * 2.0, p=0.5, training=True) + 1.0

    run = compiled(f)
    x = torch.ones(64, 64, device="neuron")
    with torch.no_grad():
        outs = [run(x).cpu() for _ in range(4)]
    m = get_dynamo_metrics()
    assert m["replay_refusals"] == 1 and m["replays"] == 0, m
    for out in outs:  # every element dropped (1) or kept and scaled (2 * 2 + 1)
        assert torch.all((out == 1.0) | (out == 5.0))
    assert not torch.equal(outs[2], outs[3])


def test_large_inputs_and_outputs_viewing_an_input_replay():
    def scale(x):
        return torch.sin(x) * 2.0 + 1.0

    def view_of_input(x):
        return x[1:], torch.cos(x) + 1.0

    big = compiled(scale)
    views = compiled(view_of_input)
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(600, 600)  # 1.4 MB, a new tensor every call
            torch.testing.assert_close(big(x.to("neuron")).cpu(), scale(x), **TOL)
            y = torch.randn(16)
            yn = y.to("neuron")
            got = views(yn)
            for g, r in zip(got, view_of_input(y)):
                torch.testing.assert_close(g.cpu(), r, **TOL)
            # the view is of this call's input, not of the recorded one
            assert got[0].untyped_storage().data_ptr() == yn.untyped_storage().data_ptr()
    m = get_dynamo_metrics()
    assert m["replays"] == 4 and m["replay_refusals"] == 0, m


def test_inputs_at_another_storage_offset_are_recorded_again():
    """A replay reads an input at the recorded offset into its storage: an input that comes
    at another offset (same shape and strides, so the same graph) is recorded again."""
    def f(x):
        return torch.exp(x) * 3.0

    run = compiled(f)
    buf = torch.randn(40)
    bn = buf.to("neuron")
    with torch.no_grad():
        for start in (0, 0, 0, 4, 4, 8, 8):
            torch.testing.assert_close(run(bn[start:start + 32]).cpu(), f(buf[start:start + 32]), **TOL)
    m = get_dynamo_metrics()
    assert m["recordings"] == 3 and m["replays"] == 3 and m["replay_refusals"] == 0, m


def test_small_views_at_another_storage_offset_replay():
    """A small input that views a larger storage at a new offset every call (a diffusion
    scheduler's timestep, an element of its timesteps tensor): the graph reads it from a buffer
    of its own, so one recording replays for every offset. A graph that writes into such an
    input writes into the caller's tensor, and an output that views it views the caller's."""
    def step(x, t):
        return torch.sin(x) * t + t

    def bump(t):
        t.add_(1.0)
        return t * 2.0

    def alias(x, t):
        return t.view(1), x * t

    run, run_bump, run_alias = compiled(step), compiled(bump), compiled(alias)
    ts = torch.linspace(1.0, 2.0, 6)
    with torch.no_grad():
        tn, x = ts.to("neuron"), torch.randn(8, 8)
        for i in range(6):
            torch.testing.assert_close(run(x.to("neuron"), tn[i]).cpu(), step(x, ts[i]), **TOL)
        m = get_dynamo_metrics()
        assert m["recordings"] == 1 and m["replays"] == 4 and m["replay_refusals"] == 0, m
        for i in range(5):
            torch.testing.assert_close(run_bump(tn[i]).cpu(), (ts[i] + 1.0) * 2.0, **TOL)
        torch.testing.assert_close(tn.cpu()[:5], ts[:5] + 1.0, **TOL)  # written where the caller's views are
        for i in range(4):
            v, y = run_alias(x.to("neuron"), tn[i])
            assert v.untyped_storage().data_ptr() == tn.untyped_storage().data_ptr()
            torch.testing.assert_close(v.cpu(), tn.cpu()[i:i + 1], **TOL)
            torch.testing.assert_close(y.cpu(), x * tn.cpu()[i], **TOL)


def test_expanded_small_views_replay():
    """A timestep broadcast over the batch (`t.expand(2)`: stride 0) of an element at a new offset
    every call, as PixArt and SD3 pass it: staged through its one element, one recording replays."""
    def step(x, t):
        return x * t[:, None] + t[:, None]

    run = compiled(step)
    ts = torch.linspace(1.0, 2.0, 6)
    with torch.no_grad():
        tn, x = ts.to("neuron"), torch.randn(2, 8)
        for i in range(6):
            got = run(x.to("neuron"), tn[i].expand(2))
            torch.testing.assert_close(got.cpu(), step(x, ts[i].expand(2)), **TOL)
        m = get_dynamo_metrics()
        assert m["recordings"] == 1 and m["replays"] == 4 and m["replay_refusals"] == 0, m


def test_training_steps_replay_forward_and_backward():
    """A training step's forward saves activations that its backward reads: both graphs
    replay, each activation in memory of its own, and the losses, gradients and weights
    follow the CPU step after step."""
    cpu, dev = pair(Block)
    run = compiled(dev)
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.05)
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.05)
    for step in range(5):
        x = torch.randn(8, 32)
        losses = []
        for model, fn, opt, data in ((cpu, cpu, opt_cpu, x), (dev, run, opt_dev, x.to("neuron"))):
            opt.zero_grad(set_to_none=True)
            loss = fn(data).square().mean()
            loss.backward()
            losses.append(loss)
        torch.testing.assert_close(losses[1].cpu(), losses[0], **TOL)
        for p, q in zip(cpu.parameters(), dev.parameters()):
            torch.testing.assert_close(q.grad.cpu(), p.grad, **TOL)
        opt_cpu.step()
        opt_dev.step()
        for p, q in zip(cpu.parameters(), dev.parameters()):
            torch.testing.assert_close(q.detach().cpu(), p.detach(), **TOL)
    m = get_dynamo_metrics()
    # forward and backward: recorded on the second step, replayed on the last three
    assert m["recordings"] == 2 and m["replays"] == 6 and m["replay_refusals"] == 0, m


def test_outputs_sharing_storage_keep_sharing_it():
    def f(x):
        y = torch.exp(x) + 1.0
        return y, y.t(), y[2:]

    run = compiled(f)
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(6, 6)
            got = run(x.to("neuron"))
            for g, r in zip(got, f(x)):
                torch.testing.assert_close(g.cpu(), r, **TOL)
            assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
    m = get_dynamo_metrics()
    assert m["replays"] >= 1 and m["recordings"] + m["replays"] == 3, m


def test_host_scalar_inputs_replay_while_their_value_holds():
    """A CPU scalar's value is read when its op is launched: a replay is only taken while the
    value is the recorded one, and a new value is recorded again."""
    def f(x, s):
        return torch.sin(x) * s + 1.0

    run = compiled(f)
    s = torch.tensor(1.0)
    with torch.no_grad():
        for value in (0.0, 1.0, 1.0, 1.0, 2.0, 2.0):
            s.fill_(value)  # same address, new value
            x = torch.randn(8)
            torch.testing.assert_close(run(x.to("neuron"), s).cpu(), f(x, s), **TOL)
    m = get_dynamo_metrics()
    assert m["recordings"] == 2 and m["replays"] == 3 and m["replay_refusals"] == 0, m


def test_written_inputs_that_move_are_updated_in_place():
    """A graph that updates an input in place (through copy_ or index_copy_, which the fast
    calls bind to Tensor methods): when a new tensor comes every call, the replay writes it
    there. The same holds for the graph loaded back from the cache, which loads the plan saved
    with it and replays from its first call."""
    def f(b, x):
        b.mul_(2.0).add_(x)
        b.index_copy_(0, torch.tensor([1], device=b.device), x[:1] * 3.0)
        return b.sum(0)

    for hits in (0, 1):
        torch._dynamo.reset()  # the second round finds the graph in AOTAutograd's cache
        reset_dynamo_metrics()
        run = compiled(f)
        with torch.no_grad():
            for i in range(5):
                b, x = torch.full((3, 4), float(i)), torch.randn(3, 4)
                bn = b.to("neuron")
                got = run(bn, x.to("neuron"))
                want = f(b, x)
                torch.testing.assert_close(bn.cpu(), b, **TOL)
                torch.testing.assert_close(got.cpu(), want, **TOL)
        m = get_dynamo_metrics()
        assert m["graph_cache_hits"] == hits and m["plans_loaded"] == hits and m["replay_refusals"] == 0, m
        assert m["replays"] == (5 if hits else 3) and m["recordings"] == 1 - hits, m


def test_llama_training_with_adamw_replays():
    """A tiny Llama trained compiled (AdamW, clip_grad_norm_ between steps): its forward and
    backward graphs replay from the third step, and every step's loss follows the CPU's."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def losses(device, compile_):
        torch.manual_seed(0)
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, vocab_size=200)
        model = LlamaForCausalLM(config).to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        run = compiled(model) if compile_ else model
        g = torch.Generator().manual_seed(1)
        out = []
        for _ in range(5):
            ids = torch.randint(0, 200, (2, 16), generator=g).to(device)
            opt.zero_grad(set_to_none=True)
            loss = run(ids, labels=ids).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            out.append(loss.detach().cpu())
        return torch.stack(out)

    want = losses("cpu", False)
    got = losses("neuron", True)
    torch.testing.assert_close(got, want, **TOL)
    m = get_dynamo_metrics()
    assert m["recordings"] == 2 and m["replays"] == 6 and m["replay_refusals"] == 0, m


PLAN_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import torch, torch_neuronx
from torch_neuronx.compiler import get_dynamo_metrics
from test_compile import Block, pair

class Net(Block):
    def forward(self, x):
        pos = torch.arange(x.shape[-1], device=x.device, dtype=x.dtype) * 0.01  # a folded constant
        return super().forward(x + pos)

cpu, dev = pair(Net)
run = torch.compile(dev, backend="neuron", fullgraph=True, dynamic=False)
opt_cpu, opt_dev = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (cpu, dev))
torch.manual_seed(1)
losses = []
for step in range(5):
    x = torch.randn(8, 32)
    for model, fn, opt, device in ((cpu, cpu, opt_cpu, "cpu"), (dev, run, opt_dev, "neuron")):
        opt.zero_grad()
        loss = fn(x.to(device)).square().mean()
        loss.backward()
        opt.step()
        if device == "neuron":
            losses.append(loss.item())
        else:
            ref = loss.item()
    torch.testing.assert_close(losses[-1], ref, rtol=1e-4, atol=1e-5)
with torch.no_grad():
    for _ in range(4):
        x = torch.randn(8, 32)
        got = run(x.to("neuron"))
        torch.testing.assert_close(got.cpu(), cpu(x), rtol=1e-4, atol=1e-4)
        losses.append(got.sum().item())
m = get_dynamo_metrics()
print(json.dumps(dict(losses=losses, **{{k: m[k] for k in ("recordings", "replays", "plans_saved",
                                                         "plans_loaded", "graph_cache_hits")}})))
"""


def test_plans_replay_in_another_process_from_the_first_call(tmp_path):
    """A graph from the graph cache loads its plan (compiler/replay.py) and replays from its
    first call, with the results of the process that recorded it; a damaged plan is not used:
    the graph records again and replaces it."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=str(tmp_path / "neff"))
    script = PLAN_SCRIPT.format(tests=os.path.dirname(__file__))

    def run():
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = run()
    # forward, backward and inference graphs: each recorded on its second call and saved
    assert first["recordings"] == 3 and first["plans_saved"] == 3 and first["plans_loaded"] == 0, first
    assert first["replays"] == 3 + 3 + 2, first
    second = run()
    assert second["graph_cache_hits"] == 3 and second["plans_loaded"] == 3, second
    assert second["recordings"] == 0 and second["replays"] == 5 + 5 + 4, second
    torch.testing.assert_close(second["losses"], first["losses"], rtol=1e-6, atol=1e-6)

    plans = tmp_path / "neff" / "plans"
    for plan in plans.iterdir():
        data = bytearray(plan.read_bytes())
        data[-100] ^= 0xFF  # inside the plan's bytes: its checksum no longer holds
        plan.write_bytes(bytes(data))
    third = run()
    assert third["plans_loaded"] == 0 and third["recordings"] == 3 and third["plans_saved"] == 3, third
    torch.testing.assert_close(third["losses"], first["losses"], rtol=1e-6, atol=1e-6)


def test_a_recording_that_cannot_be_saved_replays_as_recorded(monkeypatch):
    """When the plan cannot name every address of a recording (tn_capture_save refuses), the
    graph replays the recording itself, with its own pool, and saves no plan."""
    from torch_neuronx import _C

    def refuse(self):
        raise NotImplementedError("launch 1 (test): the argument word at byte 8 points at memory a plan cannot name")

    monkeypatch.setattr(_C.Capture, "save", refuse)
    cpu, dev = pair(Block)
    calls_match_cpu(compiled(dev), cpu, 5)
    m = get_dynamo_metrics()
    assert m["recordings"] == 1 and m["replays"] == 3 and m["plans_saved"] == 0, m
