"""generate() end to end: neuron with a static cache compiled by the neuron backend, neuron
eager with the dynamic cache, and the CPU (eager, dynamic cache), in one run.

    python bench/generate.py [--models smollm2,tiny-llama] [--dtype float32] [--new-tokens 64]
                             [--prompt-len 32] [--repeat 3] [--sample]

Batch 1, a random prompt, greedy, exactly --new-tokens tokens (min_new_tokens: no early stop).
--sample samples instead (temperature 0.7, top-k 50, top-p 0.9: a top-k and a sort of the
vocabulary every step); the tokens then differ between runs and "same" shows "-".
The static configuration is what the issue's user writes:
GenerationConfig(cache_implementation="static", compile_config=CompileConfig(backend="neuron",
fullgraph=False, dynamic=False)). Its first call compiles (reported apart, "first s"); the
figure is the best of --repeat calls after it. "same" says whether the tokens equal neuron
eager's (greedy: they should).
"""
import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import CompileConfig, GenerationConfig
from transformers.utils import logging as hf_logging

sys.path.insert(0, os.path.dirname(__file__))
from llm import MODELS  # noqa: E402

import torch_neuronx  # noqa: E402


def run(model, ids, config, repeat):
    """(best seconds, first call's seconds, tokens)."""
    def once():
        t = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
        out.cpu()  # the tokens reach the host: the device has finished
        return time.perf_counter() - t, out.cpu()
    first, tokens = once()
    return min(once()[0] for _ in range(repeat)), first, tokens


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="smollm2,tiny-llama")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sample", action="store_true", help="top-k / top-p sampling instead of greedy")
    args = p.parse_args()
    hf_logging.set_verbosity_error()
    dtype = getattr(torch, args.dtype)
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}; neuron kernels: "
          f"{torch_neuronx._C._isa()}; dtype {args.dtype}; prompt {args.prompt_len}, "
          f"{args.new_tokens} new tokens, batch 1, {'sampling' if args.sample else 'greedy'}")
    common = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=args.sample)
    if args.sample:
        common.update(temperature=0.7, top_k=50, top_p=0.9)
    configs = [
        ("neuron static+compile", "neuron", GenerationConfig(
            cache_implementation="static", **common,
            compile_config=CompileConfig(backend="neuron", fullgraph=False, dynamic=False))),
        ("neuron eager", "neuron", GenerationConfig(**common)),
        ("cpu eager", "cpu", GenerationConfig(**common)),
    ]
    print(f"{'model':>10} {'config':>22} {'tok/s':>8} {'vs neuron eager':>16} {'first s':>8} {'same':>5}")
    for name in args.models.split(","):
        model = MODELS[name](dtype)
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(3, model.config.vocab_size, (1, args.prompt_len), generator=g)
        for cfg in (c for _, _, c in configs):
            cfg.pad_token_id = model.config.eos_token_id if model.config.pad_token_id is None else model.config.pad_token_id
        rows = []
        for label, device, cfg in configs:
            torch._dynamo.reset()
            model = model.to(device)
            rows.append((label, *run(model, ids.to(device), cfg, args.repeat)))
        eager = dict((r[0], r) for r in rows)["neuron eager"]
        for label, t, first, tokens in rows:
            same = "-" if args.sample else "yes" if torch.equal(tokens, eager[3]) else "no"
            print(f"{name:>10} {label:>22} {args.new_tokens / t:>8.1f} {eager[1] / t:>15.2f}x "
                  f"{first:>8.1f} {same:>5}", flush=True)
        del model


if __name__ == "__main__":
    main()
