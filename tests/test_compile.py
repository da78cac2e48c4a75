"""torch.compile(backend="neuron"): compiled against eager on the CPU, forward and backward;
fused regions built by the C compiler and found again by a second process; recompiles on new
shapes; the failure and fallback paths; the debug artifacts."""
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch
import torch_neuronx
from torch_neuronx.compiler import get_dynamo_metrics, reset_dynamo_metrics

TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """Each test compiles afresh into its own kernel cache."""
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    torch._dynamo.reset()
    reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = torch.nn.functional.silu(h) * torch.sigmoid(h) + 0.5 * h
        return x + torch.tanh(self.down(h)) * 2.0


def pair(module_cls, dtype=torch.float32):
    torch.manual_seed(0)
    cpu = module_cls().to(dtype)
    dev = module_cls().to(dtype).to("neuron")
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev


def test_block_forward_backward_match_cpu():
    cpu, dev = pair(Block)
    x = torch.randn(8, 32)
    compiled = torch.compile(dev, backend="neuron", fullgraph=True, dynamic=False)
    xd = x.to("neuron").requires_grad_(True)
    out = compiled(xd)
    xc = x.clone().requires_grad_(True)
    ref = cpu(xc)
    torch.testing.assert_close(out.cpu(), ref, **TOL)
    out.square().sum().backward()
    ref.square().sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **TOL)
    for p, q in zip(dev.parameters(), cpu.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, **TOL)
    m = get_dynamo_metrics()
    assert m["graphs"] == 1 and m["compilations"] == 2 and m["fallbacks"] == 0, m
    assert m["fused_regions"] >= 3 and m["kernel_builds"] >= 1, m


def test_bf16_pointwise_chain():
    def f(x, y):
        return (torch.nn.functional.gelu(x * y, approximate="tanh") - y).exp().to(torch.float32)

    x, y = torch.randn(4, 33).bfloat16(), torch.randn(33).bfloat16()
    got = torch.compile(f, backend="neuron", dynamic=False)(x.to("neuron"), y.to("neuron"))
    # one kernel keeps float32 intermediates; eager rounds each step to bf16
    torch.testing.assert_close(got.cpu(), f(x.float(), y.float()), rtol=2e-2, atol=2e-2)
    assert get_dynamo_metrics()["fused_regions"] == 1


def test_tiny_llama_forward_and_training_step():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    torch.manual_seed(0)
    cpu = transformers.LlamaForCausalLM(cfg)
    dev = transformers.LlamaForCausalLM(cfg).to("neuron")
    dev.load_state_dict(cpu.state_dict())
    ids = torch.randint(0, 100, (2, 12))
    compiled = torch.compile(dev, backend="neuron", fullgraph=True, dynamic=False)
    loss = compiled(ids.to("neuron"), labels=ids.to("neuron")).loss
    ref = cpu(ids, labels=ids).loss
    torch.testing.assert_close(loss.cpu(), ref, **TOL)
    loss.backward()
    ref.backward()
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-3, atol=1e-4, msg=name)
    m = get_dynamo_metrics()
    assert m["fallbacks"] == 0 and m["fused_regions"] > 10, m


def test_new_shape_recompiles_same_shape_does_not():
    f = torch.compile(lambda x: torch.sigmoid(x) * x + 1, backend="neuron", dynamic=False)
    a, b = torch.randn(5, 7), torch.randn(3, 9)
    for x in (a, a, b, b):
        torch.testing.assert_close(f(x.to("neuron")).cpu(), torch.sigmoid(x) * x + 1, **TOL)
    assert get_dynamo_metrics()["graphs"] == 2


def test_graph_breaks_are_counted():
    """A graph break splits the function into two graphs, each compiled; the results follow
    the CPU and the metrics count the break."""
    def f(x):
        y = torch.sigmoid(x) * x
        torch._dynamo.graph_break()
        return torch.tanh(y) + 1

    run = torch.compile(f, backend="neuron", dynamic=False)
    x = torch.randn(4, 6)
    for _ in range(3):
        torch.testing.assert_close(run(x.to("neuron")).cpu(), f(x), **TOL)
    m = get_dynamo_metrics()
    assert m["graph_breaks"] == 1 and m["graphs"] == 2 and m["compilations"] == 2, m
    assert m["recompiles"] == 0, m


def test_dynamic_shapes_refused():
    f = torch.compile(lambda x: x * 2 + 1, backend="neuron", dynamic=True)
    with pytest.raises(Exception, match="static shapes only"):
        f(torch.randn(4, device="neuron"))


SCRIPT = """
import torch, torch_neuronx
from torch_neuronx.compiler import get_dynamo_metrics
torch.manual_seed(0)
f = torch.compile(lambda x, y: torch.tanh(x * y + 3.0) - y, backend="neuron", dynamic=False)
x, y = torch.randn(16, 40), torch.randn(40)
torch.testing.assert_close(f(x.to("neuron"), y.to("neuron")).cpu(), torch.tanh(x * y + 3.0) - y)
# a training graph: its forward and backward come back from the cache together
g = torch.compile(lambda w, x: (torch.sigmoid(x @ w) * x[:, :8]).sum(), backend="neuron", dynamic=False)
w = torch.randn(40, 8, requires_grad=True)
wn = w.detach().to("neuron").requires_grad_()
g(wn, x.to("neuron")).backward()
(torch.sigmoid(x @ w) * x[:, :8]).sum().backward()
torch.testing.assert_close(wn.grad.cpu(), w.grad, rtol=1e-4, atol=1e-4)
m = get_dynamo_metrics()
print(m["kernel_builds"], m["kernel_cache_hits"], m["graph_cache_hits"], m["compilations"])
"""


def test_second_process_finds_the_graphs_and_kernels(tmp_path):
    """The second process takes the ATen graphs from AOTAutograd's cache (compiler/graph_cache.py)
    and the kernels from the kernel cache: it traces no ATen graph and builds nothing."""
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=str(tmp_path / "shared"))
    runs = [subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    first, second = (tuple(int(v) for v in r.stdout.split()[-4:]) for r in runs)
    builds, hits = first[0], first[1]
    assert builds >= 2 and first[2:] == (0, 3), first  # inference, forward, backward graphs
    assert second == (0, builds + hits, 3, 3), (first, second)
    assert any(name.endswith(".so") for name in os.listdir(tmp_path / "shared"))
    assert os.listdir(tmp_path / "shared" / "aotautograd")
    # the compile log: one line per graph, how long, compiled or from the caches
    logged = [[line for line in r.stderr.splitlines() if line.startswith("[torch_neuronx] ")] for r in runs]
    kinds = ("inference", "forward", "backward")
    assert len(logged[0]) == 3 and all(
        re.fullmatch(rf"\[torch_neuronx\] compiled {kind} graph \(\d+ nodes; 1 fused kernel: 1 built\) in \d+\.\d\d s",
                     line) for kind, line in zip(kinds, logged[0])), logged[0]
    assert len(logged[1]) == 3 and all(
        re.fullmatch(rf"\[torch_neuronx\] loaded {kind} graph from the graph cache \(\d+ nodes; 1 fused kernel: "
                     rf"1 from the kernel cache\) in \d+\.\d\d s", line) for kind, line in zip(kinds, logged[1])), logged[1]
    quiet = subprocess.run([sys.executable, "-c", SCRIPT], env=dict(env, TORCH_NEURONX_COMPILE_LOG="0"),
                           capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and "[torch_neuronx]" not in quiet.stderr, quiet.stderr[-2000:]


def test_compiler_failure_raises_or_falls_back(monkeypatch):
    monkeypatch.setenv("CC", "false")  # a C compiler that always fails

    def f(x):
        return torch.exp(x) * 3.0 - x

    x = torch.randn(6, 5)
    with pytest.raises(Exception, match="could not compile the (forward|inference) graph.*C compiler \\(false\\) failed") as e:
        torch.compile(f, backend="neuron", dynamic=False)(x.to("neuron"))
    # the error names the nodes whose kernel failed
    assert "fused region of nodes exp (aten.exp.default), mul (aten.mul.Tensor)" in str(e.value)
    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    got = torch.compile(f, backend="neuron", dynamic=False)(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), f(x), **TOL)
    assert get_dynamo_metrics()["fallbacks"] == 1


def test_debug_dir_keeps_graphs_and_sources(tmp_path, monkeypatch):
    debug = tmp_path / "debug"
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(debug))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    f = torch.compile(lambda x: torch.relu(x) * 2 - 1, backend="neuron", dynamic=False)
    f(torch.randn(3, 3, device="neuron"))
    names = os.listdir(debug)
    assert any(n.endswith(".fx.txt") for n in names) and any(n.endswith(".fused.txt") for n in names)
    sources = [n for n in names if n.endswith(".c")]
    assert sources and "void tn_fused(" in (debug / sources[0]).read_text()
    # compiled again, the graph comes from the cache: its Python source is kept
    torch._dynamo.reset()
    torch.compile(lambda x: torch.relu(x) * 2 - 1, backend="neuron", dynamic=False)(torch.randn(3, 3, device="neuron"))
    assert get_dynamo_metrics()["graph_cache_hits"] == 1
    loaded = [n for n in os.listdir(debug) if n.startswith("neuron_inference_graph_")]
    assert loaded and "def forward(self" in (debug / loaded[0]).read_text()


class RMSNorm(torch.nn.Module):
    """Transformers' Llama RMS norm, with other reductions around it that stay ATen calls."""
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 40))

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        y = self.weight * h.to(x.dtype)
        return y + y.mean(0, keepdim=True) + y.sum(-1).unsqueeze(-1) * 0.01


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_sums_fuse_forward_and_backward(dtype):
    """The norm's mean over the last dimension is computed inside a fused kernel (and the sums
    of its backward); means over other dimensions or without keepdim stay native calls. In
    bfloat16 a fused kernel keeps float32 between its ops where eager rounds after each, so
    neuron and the CPU are each compared with float32 and must be about as close to it."""
    cpu, dev = pair(RMSNorm, dtype)
    ideal = RMSNorm()
    ideal.load_state_dict({k: v.float() for k, v in cpu.state_dict().items()})
    x = torch.randn(6, 40).to(dtype)
    compiled = torch.compile(dev, backend="neuron", fullgraph=True, dynamic=False)
    runs = []
    for model, inp in ((compiled, x.to("neuron")), (cpu, x.clone()), (ideal, x.float())):
        inp.requires_grad_(True)
        out = model(inp)
        out.float().square().sum().backward()
        weight = dev.weight if model is compiled else model.weight
        runs.append([t.detach().cpu().float() for t in (out, inp.grad, weight.grad)])
    for got, ref, exact in zip(*runs):
        if dtype == torch.float32:
            torch.testing.assert_close(got, ref, **TOL)
        else:
            assert (got - exact).abs().max() <= 2 * (ref - exact).abs().max() + 1e-3
    assert get_dynamo_metrics()["fused_row_sums"] >= 2, get_dynamo_metrics()


def test_static_cache_decode_steps_match_cpu():
    """The decode step transformers compiles for a static cache: the cache is written in
    place (not copied whole every step) and the logits follow the CPU's step after step."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    torch.manual_seed(0)
    cpu = transformers.LlamaForCausalLM(cfg).eval()
    dev = transformers.LlamaForCausalLM(cfg).to("neuron").eval()
    dev.load_state_dict(cpu.state_dict())
    caches = {m: transformers.StaticCache(config=cfg, max_cache_len=24) for m in (cpu, dev)}

    def step(model, tok, pos):
        return model(tok, past_key_values=caches[model], cache_position=pos, use_cache=True).logits

    prompt = torch.randint(0, 100, (1, 5))
    with torch.inference_mode():
        ref = step(cpu, prompt, torch.arange(5))
        step(dev, prompt.to("neuron"), torch.arange(5, device="neuron"))

    def decode(positions):
        nonlocal ref
        compiled = torch.compile(step, backend="neuron", fullgraph=True, dynamic=False)
        with torch.inference_mode():
            for pos in positions:
                tok = ref[:, -1:].argmax(-1)
                ref = step(cpu, tok, torch.tensor([pos]))
                got = compiled(dev, tok.to("neuron"), torch.tensor([pos], device="neuron"))
                torch.testing.assert_close(got.cpu(), ref, **TOL)
        return get_dynamo_metrics()

    m = decode(range(5, 11))
    assert m["inplace_updates"] == 2 * cfg.num_hidden_layers and m["fallbacks"] == 0, m
    # the layers share one attention mask, attention reads the 2 kv heads without repeat_kv's
    # copies, and views go through Tensor methods
    assert m["shared_nodes"] > 0 and m["grouped_attention"] == cfg.num_hidden_layers, m
    assert m["fast_calls"] > 0, m
    # from the third step on, the step's launches replay as one (compiler/replay.py)
    assert m["replays"] >= 2 and m["replay_refusals"] == 0, m
    # compiled again (Dynamo forgets its code): the graph comes back from AOTAutograd's cache
    # on disk, with the cache writes that AOTAutograd's wrappers make, and decodes the same
    torch._dynamo.reset()
    reset_dynamo_metrics()
    m = decode(range(11, 16))
    assert m["graph_cache_hits"] == 1 and m["inplace_updates"] == 2 * cfg.num_hidden_layers, m
    assert m["replays"] >= 2 and m["fallbacks"] == 0, m


def test_constants_fold_unless_returned():
    """Values that read no graph input are computed once at compile time; one the graph
    returns is computed per call, so a caller changing it changes nothing else."""
    def f(x):
        ramp = torch.arange(8, device=x.device, dtype=torch.float32) * 0.5 + 1.0
        return x * ramp, torch.arange(4, device=x.device)

    compiled = torch.compile(f, backend="neuron", dynamic=False)
    x = torch.randn(3, 8)
    for _ in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # the folded values are the module's own
            got, ids = compiled(x.to("neuron"))
        torch.testing.assert_close(got.cpu(), f(x)[0], **TOL)
        assert torch.equal(ids.cpu(), torch.arange(4))
        ids.add_(10)  # the caller owns what it gets
    assert get_dynamo_metrics()["folded_constants"] == 1, get_dynamo_metrics()


def test_shared_values_stop_at_a_mutation():
    """A pure node equal to an earlier one takes its value, unless a mutation of what it reads
    lies between them."""
    from torch.fx import Graph, GraphModule
    from torch_neuronx.compiler.passes import share_common_subexpressions
    aten = torch.ops.aten
    g = Graph()
    x = g.placeholder("x")
    a1, a2 = g.call_function(aten.mul.Tensor, (x, 2)), g.call_function(aten.mul.Tensor, (x, 2))
    g.call_function(aten.add_.Tensor, (x, 1))
    a3 = g.call_function(aten.mul.Tensor, (x, 2))
    g.output((a1, a2, a3))
    gm = GraphModule(torch.nn.Module(), g)
    assert share_common_subexpressions(gm) == 1
    gm.recompile()
    t = torch.ones(3, device="neuron")
    r1, r2, r3 = gm(t)
    assert r1 is r2 and torch.equal(r1.cpu(), torch.full((3,), 2.0)) and torch.equal(r3.cpu(), torch.full((3,), 4.0))


def test_detached_values_stay_in_their_region(tmp_path):
    """AOTAutograd detaches the values a forward saves for backward (a norm's rsqrt); such a
    detach does not split the norm into two kernels: it reads the region's output after the
    launch, and a reader of the detached value still closes the region before itself."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_neuronx.compiler.fusion import find_regions, fuse
    aten = torch.ops.aten

    def norm(x, w):
        r = aten.rsqrt(aten.add(aten.mean(aten.mul(x, x), [-1], True), 1e-6))
        saved = aten.detach(r)
        return aten.mul(aten.mul(x, r), w), saved

    def norm_read_early(x, w):
        r = aten.rsqrt(aten.add(aten.mean(aten.mul(x, x), [-1], True), 1e-6))
        total = aten.sum(aten.detach(r))  # not fusable: ends the region here
        return aten.mul(aten.mul(x, r), w), total

    x, w = torch.randn(6, 40), torch.randn(40)
    for fn, kernels in ((norm, 1), (norm_read_early, 2)):
        gm = make_fx(fn, tracing_mode="fake")(x.to("neuron"), w.to("neuron"))
        regions = find_regions(gm.graph)
        assert [len(r.detached) for r in regions] == [1] + [0] * (len(regions) - 1)
        stats = dict(fused_regions=0, fused_row_sums=0, kernel_builds=0, kernel_cache_hits=0)
        fuse(gm, str(tmp_path), None, stats)
        gm.graph.lint()
        gm.recompile()
        assert stats["fused_regions"] == kernels, (fn.__name__, stats)
        got = gm(x.to("neuron"), w.to("neuron"))
        for g, want in zip(got, fn(x, w)):
            torch.testing.assert_close(g.cpu(), want, **TOL)


@pytest.mark.parametrize("workers", ["1", "3"])
def test_kernels_build_in_parallel_or_one_by_one(workers, tmp_path, monkeypatch):
    """TORCH_NEURONX_COMPILE_WORKERS kernels are built at once (threads, each running the C
    compiler); the result and the count of builds and cache hits are the same either way."""
    monkeypatch.setenv("TORCH_NEURONX_COMPILE_WORKERS", workers)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / workers))
    cpu, dev = pair(Block)
    x = torch.randn(8, 32)
    compiled = torch.compile(dev, backend="neuron", fullgraph=True, dynamic=False)
    xd = x.to("neuron").requires_grad_(True)
    out = compiled(xd)
    out.square().sum().backward()
    xc = x.clone().requires_grad_(True)
    ref = cpu(xc)
    ref.square().sum().backward()
    torch.testing.assert_close(out.cpu(), ref, **TOL)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **TOL)
    m = get_dynamo_metrics()
    built = len(list((tmp_path / workers).glob("*.so")))
    assert built >= 3 and m["kernel_builds"] == built, (m, built)
    assert m["kernel_builds"] + m["kernel_cache_hits"] == m["fused_regions"], m
    assert not list((tmp_path / workers).glob("*.tmp")) and not list((tmp_path / workers).glob("*.log"))


def test_compile_workers_must_be_a_number(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_COMPILE_WORKERS", "many")
    _, dev = pair(Block)
    compiled = torch.compile(dev, backend="neuron", fullgraph=True, dynamic=False)
    with pytest.raises(Exception, match="TORCH_NEURONX_COMPILE_WORKERS='many'"):
        compiled(torch.randn(8, 32).to("neuron"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_nearest_upsampling_stays_one_kernel(dtype):
    """AOTAutograd decomposes nearest upsampling into a gather; the compiled graph runs the
    native upsample again (a gather with other indices stays a gather)."""
    from torch_neuronx.compiler import get_dynamo_metrics, reset_dynamo_metrics

    def f(x, idx):
        up = torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest")
        odd = torch.nn.functional.interpolate(x, size=(5, 7), mode="nearest")
        return up * 2, odd + 1, x[:, :, idx[:, None], idx]  # the last: a gather that is no upsample

    x = torch.randn(2, 3, 4, 4).to(dtype)
    idx = torch.tensor([3, 0, 2])
    torch._dynamo.reset()
    reset_dynamo_metrics()
    run = torch.compile(f, backend="neuron", fullgraph=True, dynamic=False)
    torch_neuronx.clear_op_tracking()
    got = run(x.to("neuron"), idx.to("neuron"))
    for a, b in zip(got, f(x, idx)):
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)
    assert get_dynamo_metrics()["restored_upsamples"] == 2
    assert "aten::upsample_nearest2d" in torch_neuronx.get_executed_ops()
