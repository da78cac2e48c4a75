"""Training step throughput: neuron eager and compiled vs CPU eager and Inductor, one run.

    python bench/train.py [--models tiny-llama,smollm2] [--seqs 128,512] [--dtypes bfloat16,float32]
                          [--steps 3] [--slow-cpu]

The step of an SFT run: a causal-LM forward with labels on a batch of 4 random sequences, its
backward, AdamW's step (fused, the Trainer's default `adamw_torch_fused`) and zero_grad; the model in bfloat16, as `--dtype bfloat16` trains it,
and in float32. Where PyTorch's CPU has no bf16 GEMM (AVX2 without AVX512-BF16 or AMX: the
header line gives its bf16/f32 ratio) its bf16 rows measure that missing kernel, not a
competitor: the float32 rows are then the fair comparison, and SmolLM2's CPU bf16 rows (minutes
per step) are skipped unless --slow-cpu.
"compiled" is what the Trainer's `--torch_compile true` does: the model goes through
`torch.compile(backend=..., dynamic=False)`, the optimizer runs eagerly. Models: a tiny random
Llama (bench/llm.py: hidden 256, 4 layers, vocab 32000) and SmolLM2-135M.

Every row is a new process, given the threads the device has (torch.set_num_threads =
TN_NUM_THREADS, default the machine's CPUs) and a cache directory of its own that starts
empty: "first s" is its first step (cold: compiled from nothing). A compiled row then runs a
second process on the cache the first left: "warm first s" is that process's first step
(the disk caches: AOTAutograd's, the kernels', the replay plans). "tok/s" is batch × seq over
the best of --steps steady steps (on neuron after two unmeasured ones: a compiled graph records
its launches at its second call and replays from the third). "gemm s" (neuron eager rows) is the
step's Linear products alone, forward and backward, on the device: the floor that fusing the
rest cannot go below. The eager row's notes also give the device time of the ops the compiler
can fuse (pointwise chains and row means, timed in a third process with launch blocking): the
ratio line turns it into the most that compiling the step could gain. "traced s" is the warm process's Dynamo tracing, which no cache skips. "loss" is the first
step's, the same computation on every row of a model, dtype and length. The ratios at the end are the
issue's targets: eager ≥ 1.0× CPU eager; compiled ≥ 1.3× neuron eager and ≥ 1.0× Inductor;
cold compiled first step ≤ Inductor's; warm first step ≤ 3 steady steps.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BATCH = 4
ROWS = (("neuron", "eager"), ("cpu", "eager"), ("neuron", "compiled"), ("cpu", "compiled"))


def threads():
    return int(os.environ.get("TN_NUM_THREADS", os.cpu_count()))


def gemm_seconds(model, tokens, device, repeat=3):
    """The matrix products of one step's Linear layers alone, on `device`: for each Linear
    (in -> out) over `tokens` rows, the forward (T x in @ in x out) and the backward's two
    (T x out @ out x in, and out x T @ T x in), each timed best of `repeat` and summed over the
    layers. What a step cannot go below however well the rest of it is fused."""
    import torch

    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
    shapes = {}
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            key = (m.in_features, m.out_features)
            shapes[key] = shapes.get(key, 0) + 1
    total = 0.0
    dtype = next(model.parameters()).dtype
    for (fin, fout), count in shapes.items():
        x, w = torch.randn(tokens, fin, dtype=dtype, device=device), torch.randn(fin, fout, dtype=dtype, device=device)
        g = torch.randn(tokens, fout, dtype=dtype, device=device)
        for a, b in ((x, w), (g, w.t()), (g.t(), x)):
            a @ b
            sync()
            best = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                a @ b
                sync()
                best = min(best, time.perf_counter() - start)
            total += best * count
    return total


def fusable_seconds(step, steps=2):
    """Of one eager step on neuron, the device time of the ops the compiler can fuse: those of
    its pointwise table (fusion.LOWERING), row sums and means, dtype copies, and the autograd
    formulas built from them, timed as each op's self time with NEURON_LAUNCH_BLOCKING=1 (the
    process must have been started so). Matrix products, attention, log-softmax, the loss, the
    embedding and the optimizer stay the same kernels in a compiled graph; a fused region still
    reads and writes its tensors once, so eager / (eager - this) is an upper bound on what
    compiling the step can gain."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from torch_neuronx.compiler.fusion import LOWERING

    names = {f"aten::{op._schema.name.split('::')[1]}" for op in LOWERING}
    names |= {"aten::mean", "aten::sum", "aten::_to_copy", "aten::copy_", "aten::_copy_from",
              "aten::silu_backward", "aten::gelu_backward", "aten::threshold_backward",
              "aten::sigmoid_backward", "aten::tanh_backward", "aten::add_", "aten::mul_"}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        torch.neuron.synchronize()
    us = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in names)
    return us / 1e6 / steps


def child(model_name, seq, device, mode, steps, dtype_name):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers.utils import logging as hf_logging

    sys.path.insert(0, os.path.dirname(__file__))
    from llm import MODELS

    import torch_neuronx  # noqa: F401

    hf_logging.set_verbosity_error()
    torch.set_num_threads(threads())
    model = MODELS[model_name](getattr(torch, dtype_name)).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)  # the Trainer's default optim
    forward = model  # modes "eager" and "fusable"
    if mode == "compiled":
        forward = torch.compile(model, backend="neuron" if device == "neuron" else "inductor", dynamic=False)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (BATCH, seq), generator=g).to(device)
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)

    def step():
        loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    start = time.perf_counter()
    first_loss = step().item()  # the same computation on every row: a check that all rows agree
    first = time.perf_counter() - start
    # a neuron graph records its launches at its second call and replays them from the third
    unmeasured = 2 if device == "neuron" and steps else 0
    best = float("inf")
    for i in range(steps + unmeasured):
        start = time.perf_counter()
        step()
        sync()
        if i >= unmeasured:
            best = min(best, time.perf_counter() - start)
    from torch._dynamo.utils import compilation_time_metrics
    out = {"first": first, "step": best if steps else None, "loss": first_loss,
           "traced": sum(compilation_time_metrics.get("bytecode_tracing", []))}
    if mode == "eager" and steps and device == "neuron":
        out["gemm"] = gemm_seconds(model, BATCH * seq, device)
    if mode == "fusable":  # an eager process under NEURON_LAUNCH_BLOCKING=1 (see fusable_seconds)
        out["fusable"] = fusable_seconds(step)
    if device == "neuron":
        out["fallbacks"] = sum(torch_neuronx.get_fallback_ops().values())
        m = torch_neuronx.get_dynamo_metrics()
        out["cache"] = f"{m['graph_cache_hits']} graphs, {m['plans_loaded']} plans"
    print(json.dumps(out))


def run(args, env):
    r = subprocess.run([sys.executable, __file__, "--child", *map(str, args)], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="tiny-llama,smollm2")
    p.add_argument("--seqs", default="128,512")
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--slow-cpu", action="store_true",
                   help="also run the CPU's bfloat16 rows of SmolLM2 where its bf16 GEMM is slow (see below)")
    p.add_argument("--child", nargs=6, metavar=("MODEL", "SEQ", "DEVICE", "MODE", "STEPS", "DTYPE"))
    args = p.parse_args()
    if args.child:
        m, seq, device, mode, steps, dtype = args.child
        return child(m, int(seq), device, mode, int(steps), dtype)
    import torch
    torch.set_num_threads(threads())
    slow_bf16 = cpu_bf16_slowdown()
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}; {threads()} threads each side "
          f"(TN_NUM_THREADS); batch {BATCH}, AdamW; each row a new process; PyTorch's CPU bf16 GEMM is "
          f"{slow_bf16:.1f}x slower than its float32 GEMM on this CPU")
    print(f"{'model':>10} {'seq':>4} {'dtype':>8} {'device':>6} {'mode':>8}  {'tok/s':>8} {'step s':>7} {'gemm s':>7} "
          f"{'first s':>8} {'warm first s':>12} {'traced s':>8}  {'loss':>7}  notes")
    for model in args.models.split(","):
        for dtype in args.dtypes.split(","):
            for seq in map(int, args.seqs.split(",")):
                compare(model, seq, dtype, args, skip_cpu=dtype == "bfloat16" and model != "tiny-llama"
                        and slow_bf16 > 8 and not args.slow_cpu)


def cpu_bf16_slowdown():
    """How much slower PyTorch's CPU multiplies 512 x 256 @ 256 x 4096 in bfloat16 than in
    float32: about 1 with AMX or AVX512-BF16, 60 where it has no bf16 kernel (AVX2)."""
    import torch

    seconds = []
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(512, 256, dtype=dtype), torch.randn(256, 4096, dtype=dtype)
        a @ b
        start = time.perf_counter()
        a @ b
        seconds.append(time.perf_counter() - start)
    return seconds[1] / seconds[0]


def compare(model, seq, dtype, args, skip_cpu):
    got = {}
    for device, mode in ROWS:
        if device == "cpu" and skip_cpu:
            print(f"{model:>10} {seq:>4} {dtype:>8} {device:>6} {mode:>8}  skipped: minutes per step with this "
                  "CPU's bf16 GEMM (--slow-cpu runs it)", flush=True)
            continue
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=cache, TORCHINDUCTOR_CACHE_DIR=cache,
                       TORCH_NEURONX_COMPILE_LOG="0", OMP_NUM_THREADS=str(threads()))
            r = run((model, seq, device, mode, args.steps, dtype), env)
            if mode == "compiled":
                r["warm"] = run((model, seq, device, mode, 0, dtype), env)
        if device == "neuron" and mode == "eager":
            r["fusable"] = run((model, seq, device, "fusable", 0, dtype), dict(env, NEURON_LAUNCH_BLOCKING="1"))["fusable"]
        got[device, mode] = r
        tok = BATCH * seq / r["step"]
        warm = f"{r['warm']['first']:12.2f}" if "warm" in r else f"{'-':>12}"
        traced = f"{r['warm']['traced']:8.2f}" if "warm" in r else f"{'-':>8}"
        gemm = f"{r['gemm']:7.3f}" if "gemm" in r else f"{'-':>7}"
        notes = []
        if "fusable" in r:
            notes.append(f"{r['fusable']:.3f} s in ops fusion can take")
        if "fallbacks" in r:
            notes.append(f"{r['fallbacks']} fallback calls")
        if "warm" in r and "cache" in r["warm"]:
            notes.append(f"warm loaded {r['warm']['cache']}")
        print(f"{model:>10} {seq:>4} {dtype:>8} {device:>6} {mode:>8}  {tok:8.0f} {r['step']:7.3f} {gemm} "
              f"{r['first']:8.2f} {warm} {traced}  {r['loss']:7.4f}  {'; '.join(notes)}", flush=True)
    ne, nc = got["neuron", "eager"], got["neuron", "compiled"]
    line = (f"{'':>10} {seq:>4} {dtype:>8} targets: compiled {ne['step'] / nc['step']:.2f}x neuron eager (>=1.3; "
            f"the GEMMs alone allow {ne['step'] / ne['gemm']:.2f}x, fusing every pointwise op at no cost "
            f"{ne['step'] / max(ne['step'] - ne['fusable'], 1e-9):.2f}x); warm first "
            f"{nc['warm']['first'] / nc['step']:.1f} steady steps (<=3; {nc['warm']['traced']:.1f} s of it Dynamo tracing)")
    if ("cpu", "eager") in got:
        ce, cc = got["cpu", "eager"], got["cpu", "compiled"]
        line += (f"; eager {ce['step'] / ne['step']:.2f}x CPU eager (>=1.0); compiled {cc['step'] / nc['step']:.2f}x "
                 f"Inductor (>=1.0); cold first {nc['first']:.1f} s vs Inductor {cc['first']:.1f} s (<=)")
    print(line, flush=True)


if __name__ == "__main__":
    main()
