"""Compile time from a new process, cold and warm: neuron vs CPU inductor, side by side.

    python bench/compile_start.py [--models tiny-llama,smollm2]

For each model and backend, two fresh processes run the first compiled call of a decode step
(one token, static cache, as bench/compile.py) and, for the tiny Llama, of a training step.
Both processes share a cache directory that starts empty (TORCH_NEURONX_NEFF_CACHE_DIR for
neuron, TORCHINDUCTOR_CACHE_DIR for inductor, which also holds AOTAutograd's cache): the first
process compiles cold, the second finds what the first stored. "first call s" is the wall
time of that first call, Dynamo's tracing included; "traced s" is the part Dynamo spent
tracing Python, which no cache skips, and "rest s" the remainder (AOTAutograd or its cache,
the backend, guards, the call itself). "next 4 ms" is the time of the four calls after the
first: a cold neuron process runs the second as compiled while recording it and replays from
the third (compiler/replay.py); a warm one loads the recording saved with the graph (its
plan) and replays every call, the first included ("plans saved/loaded").
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(model_name, backend, step):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import StaticCache
    from transformers.utils import logging as hf_logging

    sys.path.insert(0, os.path.dirname(__file__))
    from llm import MODELS

    import torch_neuronx  # noqa: F401

    hf_logging.set_verbosity_error()
    device = "neuron" if backend == "neuron" else "cpu"
    model = MODELS[model_name](torch.float32).to(device)
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
    ids = torch.randint(0, 1000, (1, 32), generator=torch.Generator().manual_seed(0)).to(device)
    if step == "decode":
        cache = StaticCache(config=model.config, max_cache_len=160)
        with torch.inference_mode():
            model(ids, past_key_values=cache, cache_position=torch.arange(32, device=device), use_cache=True)

        def run(tok, pos):
            return model(tok, past_key_values=cache, cache_position=pos, use_cache=True).logits

        fn = torch.compile(run, backend=backend, dynamic=False)

        def call(i):
            with torch.inference_mode():
                fn(ids[:, -1:], torch.tensor([32 + i], device=device))
    else:
        model.train()
        fn = torch.compile(model, backend=backend, dynamic=False)

        def call(i):
            fn(ids, labels=ids).loss.backward()
    start = time.perf_counter()
    call(0)
    sync()
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(1, 5):
        call(i)
    sync()
    after = time.perf_counter() - start
    from torch._dynamo.utils import compilation_time_metrics
    traced = sum(compilation_time_metrics.get("bytecode_tracing", []))
    plans = "-"
    if backend == "neuron":
        from torch_neuronx.compiler import get_dynamo_metrics
        m = get_dynamo_metrics()
        plans = f"{m['plans_saved']}/{m['plans_loaded']}"
    print(json.dumps({"seconds": seconds, "traced": traced, "after": after, "plans": plans}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="tiny-llama,smollm2")
    p.add_argument("--child", nargs=3, metavar=("MODEL", "BACKEND", "STEP"))
    args = p.parse_args()
    if args.child:
        return child(*args.child)
    print(f"machine: {os.cpu_count()} CPUs; each row: a new process with the cache directory "
          "the row above left (cold = empty)")
    print(f"{'model':>10} {'step':>7} {'backend':>9} {'cache':>5} {'first call s':>13} {'traced s':>9} {'rest s':>7} {'next 4 ms':>10} {'plans saved/loaded':>19}")
    for model in args.models.split(","):
        steps = ("decode", "train") if model == "tiny-llama" else ("decode",)
        for step in steps:
            for backend in ("neuron", "inductor"):
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=cache, TORCHINDUCTOR_CACHE_DIR=cache)
                    for state in ("cold", "warm"):
                        r = subprocess.run([sys.executable, __file__, "--child", model, backend, step],
                                           env=env, capture_output=True, text=True)
                        if r.returncode != 0:
                            sys.exit(f"{model} {step} {backend} failed:\n{r.stderr[-3000:]}")
                        out = json.loads(r.stdout.strip().splitlines()[-1])
                        print(f"{model:>10} {step:>7} {backend:>9} {state:>5} {out['seconds']:13.2f} "
                              f"{out['traced']:9.2f} {out['seconds'] - out['traced']:7.2f} {out['after'] * 1e3:10.1f} {out['plans']:>19}", flush=True)


if __name__ == "__main__":
    main()
