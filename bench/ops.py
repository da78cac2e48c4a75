"""Elementwise, reduction and softmax throughput, neuron vs the CPU (launch cost: dispatch.py).

    python bench/ops.py [--sizes 1,16,64] [--repeat 5] [--ops copy,log,tanh]

For each op and size (millions of float32 elements): effective GB/s (bytes read + written per
second) on neuron and on the CPU with the same threads, their ratio, and neuron as a fraction
of the measured copy bandwidth (a software device's ceiling). neuron is timed as a device:
a block of launches (about 256M elements' worth, so that threads still spin-waiting after the
previous measurement do not weigh), then one synchronize; the CPU runs the same block. The two
blocks alternate, best of --repeat each, so that both see the same drift of the machine. One launch per synchronize measures the round trip instead (dispatch.py).
"""
import argparse
import os

import torch

from common import best_pair




POSITIVE = {"log"}  # ops timed on |x| + 0.001
OPS = {
    # name: (fn, bytes moved per element in units of 4 bytes: reads + writes)
    "copy": (lambda x, y: y.copy_(x), 2),
    "add": (lambda x, y: torch.add(x, x, out=y), 3),
    "mul_scalar": (lambda x, y: torch.mul(x, 1.5, out=y), 2),
    "exp": (lambda x, y: torch.exp(x, out=y), 2),
    "lerp_": (lambda x, y: y.lerp_(x, 0.1), 3),  # Adam's first moment
    "addcmul_": (lambda x, y: y.addcmul_(x, x, value=0.001), 3),  # its second moment
    "silu": (lambda x, y: torch.nn.functional.silu(x), 2),
    "gelu_tanh": (lambda x, y: torch.nn.functional.gelu(x, approximate="tanh"), 2),
    "gelu": (lambda x, y: torch.nn.functional.gelu(x), 2),  # the exact (erf) form
    "sin": (lambda x, y: torch.sin(x, out=y), 2),
    "log": (lambda x, y: torch.log(x, out=y), 2),  # of |x| (POSITIVE): NaN is slow on the CPU
    "tanh": (lambda x, y: torch.tanh(x, out=y), 2),
    "expm1": (lambda x, y: torch.expm1(x, out=y), 2),
    "erf": (lambda x, y: torch.erf(x, out=y), 2),
    "gelu_backward": (lambda x, y: torch.ops.aten.gelu_backward(x, x), 3),  # the exact form's
    "silu_backward": (lambda x, y: torch.ops.aten.silu_backward(x, x), 3),
    "softplus_backward": (lambda x, y: torch.ops.aten.softplus_backward(x, x, 1, 20), 3),  # Mamba's dt
    "randn_": (lambda x, y: y.normal_(), 1),
    "sum": (lambda x, y: x.sum(), 1),
    "sum_rows": (lambda x, y: x.view(-1, 1000).sum(1), 1),
    "sum_columns": (lambda x, y: x.view(-1, 1000).sum(0), 1),  # a bias's gradient
    "amax": (lambda x, y: x.amax(), 1),
    "argmax": (lambda x, y: x.argmax(), 1),
    "max_rows": (lambda x, y: x.view(-1, 1000).max(1), 1),  # values and positions
    "norm": (lambda x, y: torch.linalg.vector_norm(x), 1),
    "norm_columns": (lambda x, y: torch.linalg.vector_norm(x.view(-1, 1000), dim=0), 1),
    "var": (lambda x, y: x.var(), 1),
    "prod": (lambda x, y: x.prod(), 1),
    "softmax_rows": (lambda x, y: torch.softmax(x.view(-1, 1000), -1), 2),
    "layer_norm_rows": (lambda x, y: torch.nn.functional.layer_norm(x.view(-1, 1000), (1000,)), 2),
    "rms_norm_rows": (lambda x, y: torch.nn.functional.rms_norm(x.view(-1, 1000), (1000,)), 2),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1,16,64", help="millions of elements")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--ops", help="only these rows (comma-separated; copy always runs: the bandwidth column)")
    args = p.parse_args()
    chosen = set(args.ops.split(",")) | {"copy"} if args.ops else set(OPS)
    unknown = chosen - set(OPS)
    if unknown:
        p.error(f"unknown ops {sorted(unknown)}; choose from {', '.join(OPS)}")
    from torch_neuronx import _C

    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}, {torch.get_num_threads()} threads;"
          f" neuron kernels: {_C._isa()}")
    print(f"{'op':>13} {'Melem':>6}  {'neuron GB/s':>11} {'cpu GB/s':>9}  {'ratio':>6}  {'of copy bw':>10}")
    for mel in (int(s) for s in args.sizes.split(",")):
        n = mel * 1_000_000
        xc, yc = torch.randn(n), torch.empty(n)
        xd, yd = xc.to("neuron"), torch.empty(n, device="neuron")
        pc = xc.abs() + 0.001
        pd = pc.to("neuron")
        copy_bw = None
        launches = max(1, 256 // mel)
        for name, (fn, words) in OPS.items():
            if name not in chosen:
                continue

            xd_, xc_ = (pd, pc) if name in POSITIVE else (xd, xc)

            def run_dev():
                for _ in range(launches):
                    fn(xd_, yd)
                torch.neuron.synchronize()

            def run_cpu():
                for _ in range(launches):
                    fn(xc_, yc)

            t_dev, t_cpu = (t / launches for t in best_pair(run_dev, run_cpu, args.repeat))
            gb = n * 4 * words / 1e9
            bw_dev, bw_cpu = gb / t_dev, gb / t_cpu
            if name == "copy":
                copy_bw = bw_cpu
            print(f"{name:>13} {mel:>6}  {bw_dev:>11.2f} {bw_cpu:>9.2f}  {bw_dev / bw_cpu:>5.2f}x  "
                  f"{bw_dev / copy_bw:>9.0%}")


if __name__ == "__main__":
    main()
