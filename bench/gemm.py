"""GEMM throughput: neuron (our C GEMM) vs torch.mm on the CPU with the same threads.

    python bench/gemm.py [--dtypes float32,bfloat16] [--ms 1,16,128,512] [--kns 576,4096] [--quick]

Shapes are language-model shapes: M in (1, 16, 128, 512), K and N in (576, 1536, 2048, 4096).
Prints GFLOP/s for both and the ratio neuron/CPU (this machine is noisy: read the ratios).
For M >= 16 the last column is neuron's GFLOP/s as a fraction of the FMA peak (every kernel
thread running independent FMA chains: `_C._fma_peak_gflops`) measured next to that row: the
larger of the measurements just before and just after it, so that a row and its roof see the
same state of this noisy machine. The summary at the end reads each M against those adjacent
peaks, and also against the largest peak of the whole run (the stricter figure).
At M=1 the product streams B once: the last column is neuron's B bytes per second as a
fraction of the measured copy bandwidth (read + write bytes of a 256 MiB copy).
neuron is timed as a device is: several launches back to back, then one synchronize; the
CPU makes as many calls. A block is at least 8 launches and about 4 GFLOP (at most 64
launches), so that a small product's row measures throughput rather than the wake-up of idle
threads after the pause between blocks (bench/dispatch.py measures launch latency).
The same B comes back on every launch, so from the second launch on neuron reads it packed
(as it does a model's weights); TORCH_NEURONX_PACKED_WEIGHTS_MB=0 measures packing B on every
call, as for a product of two activations.
"""
import argparse
import itertools
import os
import statistics
import time

import torch

from common import best, best_pair, copy_bandwidth




def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--ms", default="1,16,128,512", help="the M values")
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--kns", help="the K and N values (default 576,1536,2048,4096; --quick: 576,2048)")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    ms = tuple(int(m) for m in args.ms.split(","))
    kns = (576, 2048) if args.quick else (576, 1536, 2048, 4096)
    if args.kns:
        kns = tuple(int(v) for v in args.kns.split(","))
    from torch_neuronx import _C

    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__} with {torch.get_num_threads()} "
          f"threads; neuron kernels: {_C._isa()}")
    bw = copy_bandwidth() if 1 in ms else None
    if bw:
        print(f"copy bandwidth: {bw / 1e9:.1f} GB/s")
    peaks = [_C._fma_peak_gflops()]
    print(f"FMA peak ({torch.get_num_threads()} threads, measured): {peaks[0]:.1f} GFLOP/s")
    print(f"{'dtype':>9} {'M':>5} {'K':>5} {'N':>5}  {'neuron GF/s':>11} {'cpu GF/s':>9}  ratio  "
          f"B of bw / of peak")
    rows = []
    for dname in args.dtypes.split(","):
        dtype = getattr(torch, dname)
        for m, k, n in itertools.product(ms, kns, kns):
            a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
            da, db = a.to("neuron"), b.to("neuron")
            out = torch.empty(m, n, dtype=dtype, device="neuron")
            # PyTorch's CPU bf16 product without AVX512-BF16 runs at well under 1 GFLOP/s:
            # when one CPU call is that slow, the CPU side is timed over one call per sample
            # and fewer samples, so that the table still ends
            t = time.perf_counter()
            torch.mm(a, b)
            slow = time.perf_counter() - t > 0.25
            launches = min(64, max(8, -(-4_000_000_000 // (2 * m * k * n))))
            cpu_launches, repeat = 1 if slow else launches, 2 if slow else args.repeat

            def run_dev():
                for _ in range(launches):
                    torch.mm(da, db, out=out)
                torch.neuron.synchronize()

            def run_cpu():
                for _ in range(cpu_launches):
                    torch.mm(a, b)

            t_dev, t_cpu = best_pair(run_dev, run_cpu, repeat)
            if slow:  # two samples are too few for neuron's side: give it the usual count
                t_dev = min(t_dev, best(run_dev, args.repeat))
            t_dev, t_cpu = t_dev / launches, t_cpu / cpu_launches
            flops = 2 * m * k * n
            g_dev, g_cpu = flops / t_dev / 1e9, flops / t_cpu / 1e9
            of = f"{b.numel() * b.element_size() / t_dev / bw:8.0%}" if m == 1 else ""
            if m > 1:  # the roof next to this row
                peaks.append(_C._fma_peak_gflops())
                adjacent = max(peaks[-2:])
                of = f"{g_dev / adjacent:8.0%}"
                rows.append((dname, m, g_dev, adjacent))
            print(f"{dname:>9} {m:>5} {k:>5} {n:>5}  {g_dev:>11.1f} {g_cpu:>9.1f}  {g_dev / g_cpu:5.2f}x{of}")
    if len(peaks) > 1:
        print(f"FMA peak over the run: {min(peaks):.1f}-{max(peaks):.1f} GFLOP/s")
    for dname in args.dtypes.split(","):
        for m in ms:
            near = [g / p for d, mm, g, p in rows if d == dname and mm == m]
            run = [g / max(peaks) for d, mm, g, p in rows if d == dname and mm == m]
            if near:
                print(f"{dname} M={m}: median {statistics.median(near):.0%} of the adjacent FMA peak "
                      f"({min(near):.0%}-{max(near):.0%}); median {statistics.median(run):.0%} of the "
                      f"run's largest")


if __name__ == "__main__":
    main()
