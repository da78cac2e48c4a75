"""GEMM throughput: neuron (our C GEMM) vs torch.mm on the CPU with the same threads.

    python bench/gemm.py [--dtypes float32,bfloat16] [--quick]

Shapes are language-model shapes: M in (1, 16, 128, 512), K and N in (576, 1536, 2048, 4096).
Prints GFLOP/s for both and the ratio neuron/CPU (this machine is noisy: read the ratios).
neuron is timed as a device is: several launches back to back, then one synchronize.
"""
import argparse
import itertools
import os

import torch

from common import best




def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    ms = (1, 16, 128, 512)
    kns = (576, 2048) if args.quick else (576, 1536, 2048, 4096)
    from torch_neuronx import _C

    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__} with {torch.get_num_threads()} "
          f"threads; neuron kernels: {_C._isa()}")
    print(f"{'dtype':>9} {'M':>5} {'K':>5} {'N':>5}  {'neuron GF/s':>11} {'cpu GF/s':>9}  ratio")
    for dname in args.dtypes.split(","):
        dtype = getattr(torch, dname)
        for m, k, n in itertools.product(ms, kns, kns):
            a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
            da, db = a.to("neuron"), b.to("neuron")
            out = torch.empty(m, n, dtype=dtype, device="neuron")
            launches = 8

            def run_dev():
                for _ in range(launches):
                    torch.mm(da, db, out=out)
                torch.neuron.synchronize()

            def run_cpu():
                for _ in range(launches):
                    torch.mm(a, b)

            t_dev = best(run_dev, args.repeat) / launches
            t_cpu = best(run_cpu, args.repeat) / launches
            flops = 2 * m * k * n
            g_dev, g_cpu = flops / t_dev / 1e9, flops / t_cpu / 1e9
            print(f"{dname:>9} {m:>5} {k:>5} {n:>5}  {g_dev:>11.1f} {g_cpu:>9.1f}  {g_dev / g_cpu:5.2f}x")


if __name__ == "__main__":
    main()
