"""torch.compile: a decode step and a training step, neuron compiled vs neuron eager vs CPU
eager vs CPU inductor, in one run, with compile times.

    python bench/compile.py [--models tiny-llama,smollm2] [--dtype float32] [--steps 32]

Decode step: one token through the model with a StaticCache of 160 positions after a
32-token prompt (the shape transformers compiles for generate() with a static cache), timed
over --steps tokens, best of 3. Training step (tiny Llama only): forward, loss and backward
on a batch of 4 x 64 tokens ("tr 4x64", the kernels' time dominates) and, with a vocabulary
of 1000, of 1 x 16 ("tr small", the launches' host time does), best of 3 runs of 3 steps. "compile s" is the first call's time minus an eager
call's: Dynamo, AOTAutograd and the backend (for neuron: fusion and C builds, or loading
them from the kernel cache, TORCH_NEURONX_NEFF_CACHE_DIR), after a throwaway compile with
Dynamo's "eager" backend has paid Dynamo's own start in this process. "no replay" is the
compiled step with TORCH_NEURONX_GRAPH_REPLAY=0: every ATen call launched from Python, as
before replay (compiler/replay.py; a training step replays its forward and backward graphs
from its third call, so one step is run untimed after the first). "% roof" is, as in
bench/llm.py, the decode rate against reading every weight once per token at the copy
bandwidth. "graph cache" says whether neuron's
compile found the graph in AOTAutograd's cache (compiler/graph_cache.py) or compiled it.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import StaticCache
from transformers.utils import logging as hf_logging

sys.path.insert(0, os.path.dirname(__file__))
from common import copy_bandwidth  # noqa: E402
from llm import MODELS, tiny_llama  # noqa: E402

import torch_neuronx  # noqa: E402,F401
from torch_neuronx.compiler import get_dynamo_metrics, reset_dynamo_metrics  # noqa: E402

PROMPT, CACHE_LEN = 32, 160
# Training steps (label, batch of sequences x tokens, vocabulary): one the kernels bound, one
# the host's launches bound (a small vocabulary: no large head or embedding gradient).
TRAIN_CASES = (("tr 4x64", (4, 64), 32000), ("tr small", (1, 16), 1000))


def cache_state(backend):
    """For neuron rows: how many of the compiled graphs came from the graph cache."""
    if backend != "neuron":
        return "-"
    m = get_dynamo_metrics()
    return f"{m['graph_cache_hits']} of {m['compilations']} hit"


def sync(device):
    if device == "neuron":
        torch.neuron.synchronize()


def timed(fn, device):
    sync(device)
    t = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t, out


@torch.inference_mode()
def decode(model, device, backend, steps):
    """(seconds per token, compile seconds)."""
    model = model.to(device)
    cache = StaticCache(config=model.config, max_cache_len=CACHE_LEN)
    ids = torch.randint(0, 1000, (1, PROMPT), generator=torch.Generator().manual_seed(0)).to(device)
    out = model(ids, past_key_values=cache, cache_position=torch.arange(PROMPT, device=device), use_cache=True)
    tok = out.logits[:, -1:].argmax(-1)

    def step(tok, pos):
        return model(tok, past_key_values=cache, cache_position=pos, use_cache=True).logits

    fn = step if backend is None else torch.compile(step, backend=backend, dynamic=False)
    pos = PROMPT
    eager_t, _ = timed(lambda: step(tok, torch.tensor([pos], device=device)), device)
    pos += 1
    first_t, logits = timed(lambda: fn(tok, torch.tensor([pos], device=device)), device)
    pos += 1
    best_t = float("inf")
    for _ in range(3):
        start_pos = pos
        sync(device)
        t = time.perf_counter()
        for i in range(steps):
            logits = fn(tok, torch.tensor([start_pos + i % (CACHE_LEN - start_pos - 1)], device=device))
            tok = logits[:, -1:].argmax(-1)
        sync(device)
        best_t = min(best_t, (time.perf_counter() - t) / steps)
    return best_t, max(0.0, first_t - eager_t) if backend else 0.0


def train(model, device, backend, shape):
    model = model.to(device).train()
    ids = torch.randint(0, 1000, shape, generator=torch.Generator().manual_seed(0)).to(device)
    fn = model if backend is None else torch.compile(model, backend=backend, dynamic=False)

    def step(m):
        model.zero_grad(set_to_none=True)
        m(ids, labels=ids).loss.backward()

    eager_t, _ = timed(lambda: step(model), device)
    first_t, _ = timed(lambda: step(fn), device)
    step(fn)  # recorded (compiler/replay.py)
    best_t = min(timed(lambda: [step(fn) for _ in range(3)], device)[0] / 3 for _ in range(3))
    return best_t, max(0.0, first_t - eager_t) if backend else 0.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="tiny-llama,smollm2")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--steps", type=int, default=32)
    args = p.parse_args()
    hf_logging.set_verbosity_error()
    dtype = getattr(torch, args.dtype)
    from torch_neuronx import _C
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__} with {torch.get_num_threads()} "
          f"threads; neuron kernels: {_C._isa()}; dtype {args.dtype}")
    bw = copy_bandwidth(10)
    print(f"copy bandwidth {bw / 1e9:.1f} GB/s")
    configs = [("neuron compiled", "neuron", "neuron", "1"), ("  no replay", "neuron", "neuron", "0"),
               ("neuron eager", "neuron", None, "1"), ("cpu eager", "cpu", None, "1"),
               ("cpu inductor", "cpu", "inductor", "1")]
    print(f"{'model':>10} {'step':>7} {'config':>16} {'ms/step':>9} {'vs neuron eager':>16} {'compile s':>10}"
          f" {'% roof':>7} {'graph cache':>12}")
    # Dynamo's first compilation in a process also pays for its own start (imports, first
    # traces of Transformers' code); one throwaway compile with the "eager" backend takes that
    # out of whichever configuration would come first
    torch._dynamo.reset()
    decode(tiny_llama(dtype), "cpu", "eager", 1)
    train(tiny_llama(dtype), "cpu", "eager", TRAIN_CASES[0][1])
    for name in args.models.split(","):
        rows = []
        for label, device, backend, replay in configs:
            torch._dynamo.reset()
            os.environ["TORCH_NEURONX_GRAPH_REPLAY"] = replay
            model = MODELS[name](dtype)
            weight_bytes = sum(t.numel() * t.element_size() for t in model.parameters())
            reset_dynamo_metrics()
            rows.append((label, *decode(model, device, backend, args.steps), cache_state(backend)))
            del model
        base = dict((label, t) for label, t, _, _ in rows)["neuron eager"]
        for label, t, c, cached in rows:
            roof = 100 * weight_bytes / bw / t
            print(f"{name:>10} {'decode':>7} {label:>16} {t * 1e3:>9.2f} {base / t:>15.2f}x {c:>10.1f} {roof:>6.0f}%"
                  f" {cached:>12}")
        if name != "tiny-llama":
            continue
        for step, shape, vocab in TRAIN_CASES:
            rows = []
            for label, device, backend, replay in configs:
                torch._dynamo.reset()
                os.environ["TORCH_NEURONX_GRAPH_REPLAY"] = replay
                reset_dynamo_metrics()
                model = tiny_llama(dtype, vocab)
                rows.append((label, *train(model, device, backend, shape), cache_state(backend)))
            base = dict((label, t) for label, t, _, _ in rows)["neuron eager"]
            for label, t, c, cached in rows:
                print(f"{name:>10} {step:>7} {label:>16} {t * 1e3:>9.2f} {base / t:>15.2f}x {c:>10.1f} {'':>7}"
                      f" {cached:>12}")
    os.environ.pop("TORCH_NEURONX_GRAPH_REPLAY")


if __name__ == "__main__":
    main()
