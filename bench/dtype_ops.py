"""Integer, boolean and half-precision ops: neuron vs the CPU, side by side in one run.

    python bench/dtype_ops.py [--elements 1048576] [--repeat 10]

The ops around a model rather than in it: casts, comparisons and masks on token ids and
positions, int64 arithmetic and reductions, bf16 and f16 elementwise ops, softmax and means
(bench/ops.py covers the float32 ones), a transposing copy, and the vocabulary-sized ops
`generate()` runs on every token (isin, where, argmax over 32000). Each row is the best of --repeat timed calls of 10 ops, neuron and CPU
alternating (common.best_pair); ratio = neuron time / CPU time (below 1: neuron is faster).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import best_pair  # noqa: E402

import torch_neuronx  # noqa: E402


def cases(n, device):
    g = torch.Generator().manual_seed(0)
    f32 = torch.randn(n, generator=g).to(device)
    i64 = torch.randint(-100, 100, (n,), generator=g).to(device)
    mask = (torch.randn(n, generator=g) > 0).to(device)
    bf = f32.bfloat16()
    f16 = f32.half()
    vocab = torch.arange(32000, device=device)
    eos = torch.tensor([2], device=device)
    logits = torch.randn(1, 32000, generator=g).to(device)
    return {
        "cast int64->float32": lambda: i64.float(),
        "cast float32->int64": lambda: f32.long(),
        "cast bool->float32": lambda: mask.float(),
        "cast int64->int32": lambda: i64.int(),
        "neg int64": lambda: -i64,
        "abs int64": lambda: i64.abs(),
        "eq int64 scalar": lambda: i64 == 3,
        "eq bf16": lambda: bf == bf,
        "add int64": lambda: i64 + i64,
        "logical_not": lambda: ~mask,
        "where mask": lambda: torch.where(mask, f32, 0.0),
        "mul int64 scalar": lambda: i64 * 3,
        "floor_divide int64": lambda: i64 // 7,
        "remainder int64": lambda: i64 % 7,
        "clamp int64": lambda: i64.clamp(-50, 50),
        "masked_fill int64": lambda: i64.masked_fill(mask, 0),
        "lt float32 scalar": lambda: f32 < 0.5,
        "cast float32->bf16": lambda: f32.bfloat16(),
        "cast bf16->float32": lambda: bf.float(),
        "sum int64": lambda: i64.sum(),
        "sum bool": lambda: mask.sum(),
        "max int64": lambda: i64.max(),
        "argmax int64": lambda: i64.argmax(),
        "arange int64": lambda: torch.arange(n, device=device),
        "cumsum int64 rows of 1024": lambda: i64.view(-1, 1024).cumsum(-1),
        "cumsum int64": lambda: i64.cumsum(0),
        "mean bf16": lambda: bf.mean(),
        "add bf16": lambda: bf + bf,
        "mul bf16 scalar": lambda: bf * 0.5,
        "silu bf16": lambda: torch.nn.functional.silu(bf),
        "gelu bf16": lambda: torch.nn.functional.gelu(bf),
        "silu_backward bf16": lambda: torch.ops.aten.silu_backward(bf, bf),
        "add f16": lambda: f16 + f16,
        "mul f16 scalar": lambda: f16 * 0.5,
        "silu f16": lambda: torch.nn.functional.silu(f16),
        "cast float32->f16": lambda: f32.half(),
        "softmax f16 rows of 1024": lambda: f16.view(-1, 1024).softmax(-1),
        "transpose f16 1024x1024": lambda: f16.view(1024, -1).t().contiguous(),
        "softmax bf16 rows of 1024": lambda: bf.view(-1, 1024).softmax(-1),
        "isin over 32000": lambda: torch.isin(vocab, eos),
        "where over 32000": lambda: torch.where(vocab == 2, -float("inf"), logits),
        "argmax over 32000": lambda: logits.argmax(-1),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elements", type=int, default=1 << 20)
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__} with {torch.get_num_threads()} threads; "
          f"neuron kernels: {torch_neuronx._C._isa()}; {args.elements} elements")
    cpu, dev = cases(args.elements, "cpu"), cases(args.elements, "neuron")
    print(f"{'op':>26} {'cpu us':>9} {'neuron us':>10} {'ratio':>7}")

    def ten(fn, sync):
        def run():
            for _ in range(10):
                fn()
            sync()
        return run

    for name in cpu:
        t_cpu, t_dev = best_pair(ten(cpu[name], lambda: None), ten(dev[name], torch.neuron.synchronize),
                                 args.repeat)
        print(f"{name:>26} {t_cpu / 10 * 1e6:9.1f} {t_dev / 10 * 1e6:10.1f} {t_dev / t_cpu:6.2f}x", flush=True)


if __name__ == "__main__":
    main()
