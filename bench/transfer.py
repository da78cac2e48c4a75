"""Copy bandwidth and launch overhead of the neuron runtime, side by side with the CPU.

    python bench/transfer.py [--repeat 20]

Rows: host->device, device->host and device->device copies of 1-256 MiB (GB/s), compared
with a CPU tensor copy of the same size (memcpy bandwidth, the ceiling for a software
device); then the per-launch cost of a tiny fill_ on neuron vs on the CPU (us/op). This
machine is noisy: read the ratios.
"""
import argparse
import os

import torch

from common import best




def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    sync = torch.neuron.synchronize
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'size':>8}  {'cpu copy':>9}  {'H2D':>9}  {'D2H':>9}  {'D2D':>9}   H2D/cpu  D2H/cpu  D2D/cpu")
    for mib in (1, 16, 64, 256):
        n = mib << 20
        host = torch.empty(n, dtype=torch.uint8).fill_(1)
        host_dst = torch.empty_like(host)
        dev = torch.empty(n, dtype=torch.uint8, device="neuron")
        dev2 = torch.empty_like(dev)
        t_cpu = best(lambda: host_dst.copy_(host), args.repeat)
        t_h2d = best(lambda: (dev.copy_(host), sync()), args.repeat)
        t_d2h = best(lambda: host_dst.copy_(dev), args.repeat)
        t_d2d = best(lambda: (dev2.copy_(dev), sync()), args.repeat)
        gbs = [n / t / 1e9 for t in (t_cpu, t_h2d, t_d2h, t_d2d)]
        print(f"{mib:>5}MiB  {gbs[0]:>7.2f}GB/s {gbs[1]:>6.2f}GB/s {gbs[2]:>6.2f}GB/s {gbs[3]:>6.2f}GB/s"
              f"   {gbs[1] / gbs[0]:>6.2f}x  {gbs[2] / gbs[0]:>6.2f}x  {gbs[3] / gbs[0]:>6.2f}x")

    tiny_dev = torch.empty(1, device="neuron")
    tiny_cpu = torch.empty(1)
    ops = 2000

    def launches(t):
        for _ in range(ops):
            t.fill_(1.0)

    t_dev = best(lambda: (launches(tiny_dev), sync()), 5) / ops * 1e6
    t_cpu = best(lambda: launches(tiny_cpu), 5) / ops * 1e6
    print(f"\ntiny fill_ launch: neuron {t_dev:.2f} us/op, cpu {t_cpu:.2f} us/op, "
          f"ratio {t_dev / t_cpu:.2f}x")


if __name__ == "__main__":
    main()
