"""Launch overhead: microseconds per op on tiny tensors, neuron vs CPU eager, in one run.

    python bench/dispatch.py [--ops 2000] [--repeat 7]

Each op runs `--ops` times back to back on 8-element (or 4x4) tensors, so the time is the
dispatcher, the backend's wrapper and (on neuron) the stream launch, not the math. neuron is
timed as a device: all launches, then one synchronize. The two sides alternate, best of
`--repeat` each. Target: neuron within 2x CPU eager.
"""
import argparse
import os

import torch

from common import best_pair


def cases(dev):
    x = torch.ones(8, device=dev)
    y = torch.empty(8, device=dev)
    m = torch.ones(4, 4, device=dev)
    idx = torch.tensor([0, 2, 1], device=dev)
    return {
        "add out=": lambda: torch.add(x, x, out=y),
        "add (allocates)": lambda: x + x,
        "mul scalar": lambda: x * 1.5,
        "add_ in place": lambda: y.add_(x),
        "relu": lambda: torch.relu(x),
        "clamp": lambda: x.clamp(-0.5, 0.5),
        "sum": lambda: x.sum(),
        "softmax": lambda: torch.softmax(m, -1),
        "mm 4x4": lambda: m @ m,
        "index_select": lambda: x.index_select(0, idx),
        "cat": lambda: torch.cat([x, x]),
        "view + contiguous": lambda: m.t().contiguous(),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'op':>18}  {'neuron us/op':>12} {'cpu us/op':>10}  {'ratio':>6}")
    dev_cases, cpu_cases = cases("neuron"), cases("cpu")
    ratios = []
    for name in dev_cases:
        fd, fc = dev_cases[name], cpu_cases[name]

        def run(fn):
            for _ in range(args.ops):
                fn()

        # alternated, so that both sides see the same moments of a noisy machine
        t_dev, t_cpu = best_pair(lambda: (run(fd), torch.neuron.synchronize()), lambda: run(fc),
                                 args.repeat)
        t_dev, t_cpu = t_dev / args.ops * 1e6, t_cpu / args.ops * 1e6
        ratios.append(t_dev / t_cpu)
        print(f"{name:>18}  {t_dev:>12.2f} {t_cpu:>10.2f}  {t_dev / t_cpu:>5.2f}x")
    geo = 1.0
    for r in ratios:
        geo *= r
    print(f"\ngeometric mean ratio neuron / cpu: {geo ** (1 / len(ratios)):.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
