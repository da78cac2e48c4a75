"""Collectives in the manner of nccl-tests: the neuron backend on neuron tensors against Gloo on
CPU tensors, with the same ranks, in one run; plus this machine's single-process memcpy bandwidth
and the shared-memory ping-pong floor of a small collective's latency.

    python bench/collectives.py                        # 2 ranks, float32 and bfloat16, 8 B .. 256 MiB
    python bench/collectives.py --ranks 4 --max-mib 64 --dtypes float32

Per op and size: time per call (median of the timed calls, the slowest rank), algorithm
bandwidth (size / time, where size is, as in nccl-tests, the gathered output of all_gather, the
whole input of reduce_scatter, the one buffer of the others) and bus bandwidth (algbw times nccl-tests' factor:
all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast 1). Timed calls
are back to back and synchronized once at the end, as nccl-tests does. Each rank runs one
kernel thread (TN_NUM_THREADS=1), Gloo and the CPU copy one thread too.
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single", "broadcast"]


def bus_factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else 1.0 if op == "broadcast" else (n - 1) / n


def buffers(op, numel, n, dtype, device):
    """`numel` is the size nccl-tests reports: the gathered output of all_gather, the whole
    input of reduce_scatter, the one buffer of the others."""
    x = torch.ones(numel, dtype=dtype, device=device)
    if op == "all_gather_into_tensor":
        return torch.ones(numel // n, dtype=dtype, device=device), torch.empty(numel, dtype=dtype, device=device)
    if op == "reduce_scatter_tensor":
        return x, torch.empty(numel // n, dtype=dtype, device=device)
    if op == "all_to_all_single":
        return x, torch.empty_like(x)
    return x, None


def call(op, a, b, group):
    if op == "all_reduce":
        dist.all_reduce(a, group=group)
    elif op == "broadcast":
        dist.broadcast(a, 0, group=group)
    elif op == "all_gather_into_tensor":
        dist.all_gather_into_tensor(b, a, group=group)
    elif op == "reduce_scatter_tensor":
        dist.reduce_scatter_tensor(b, a, group=group)
    else:
        dist.all_to_all_single(b, a, group=group)


def time_op(op, numel, n, dtype, device, group, budget, gloo_group):
    a, b = buffers(op, numel, n, dtype, device)
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
    call(op, a, b, group)
    sync()
    dist.barrier(group=gloo_group)
    t = time.perf_counter()
    call(op, a, b, group)
    sync()
    one = time.perf_counter() - t
    iters = torch.tensor([max(3, min(200, int(budget / max(one, 1e-6))))])
    dist.all_reduce(iters, op=dist.ReduceOp.MIN, group=gloo_group)  # every rank the same count
    iters = int(iters.item())
    times = []
    for _ in range(3):
        dist.barrier(group=gloo_group)
        t = time.perf_counter()
        for _ in range(iters):
            call(op, a, b, group)
        sync()
        times.append((time.perf_counter() - t) / iters)
    mine = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=gloo_group)  # the slowest rank
    return mine.item()


def worker(rank, n, port, args, queue):
    torch.set_num_threads(1)
    torch.neuron.set_device(rank)
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    rows = []
    sizes = []
    b = 8
    while b <= args.max_mib << 20:
        sizes.append(b)
        b *= 4 if b < (1 << 20) else 2
    for dtype in [getattr(torch, d) for d in args.dtypes]:
        es = torch.empty(0, dtype=dtype).element_size()
        for op in OPS:
            for nbytes in sizes:
                numel = max(n, nbytes // es // n * n)
                if rank == 0:
                    print(f"  {dtype} {op} {nbytes} B ...", file=sys.stderr, flush=True)
                t_neuron = time_op(op, numel, n, dtype, "neuron", None, args.budget, gloo)
                t_gloo = time_op(op, numel, n, dtype, "cpu", gloo, args.budget, gloo) if not args.no_gloo else float("nan")
                rows.append((str(dtype).split(".")[1], op, numel * es, t_neuron, t_gloo))
    queue.put(rows)
    dist.destroy_process_group()


def memcpy_gbps(nbytes):
    src = torch.ones(nbytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        reps = max(1, (64 << 20) // nbytes)
        for _ in range(reps):
            dst.copy_(src)
        best = min(best, (time.perf_counter() - t) / reps)
    return nbytes / best / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--budget", type=float, default=0.3, help="seconds per timed block")
    p.add_argument("--no-gloo", action="store_true")
    args = p.parse_args()
    if "RANK" not in os.environ:  # start the ranks with torchrun, on a free port
        import subprocess
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, TN_NUM_THREADS="1", OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.ranks}",
               "--master_addr=127.0.0.1", f"--master_port={port}", __file__, *sys.argv[1:]]
        return subprocess.call(cmd, env=env)
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    class Rows:
        def put(self, rows):
            self.rows = rows

    out = Rows()
    worker(rank, n, None, args, out)
    if rank != 0:
        return 0
    rows = out.rows
    from torch_neuronx import _C

    print(f"{n} ranks on one host ({os.cpu_count()} CPUs); shared-memory ping-pong (round trip, 64 B): "
          f"{_C._comm_pingpong_us(20000):.2f} us")
    print(f"{'dtype':<9}{'op':<24}{'bytes':>11}{'neuron us':>11}{'algbw':>8}{'busbw':>8}"
          f"{'gloo us':>11}{'busbw':>8}{'vs gloo':>8}{'memcpy':>8}{'bus/memcpy':>11}")
    for dtype, op, nbytes, tn, tg in rows:
        f = bus_factor(op, n)
        bus_n, bus_g, mc = nbytes / tn / 1e9 * f, nbytes / tg / 1e9 * f, memcpy_gbps(max(nbytes, 4096))
        print(f"{dtype:<9}{op:<24}{nbytes:>11}{tn * 1e6:>11.1f}{nbytes / tn / 1e9:>8.2f}{bus_n:>8.2f}"
              f"{tg * 1e6:>11.1f}{bus_g:>8.2f}{tg / tn:>7.1f}x{mc:>8.2f}{bus_n / mc:>10.0%}")
    print("bandwidths in GB/s; memcpy: one thread copying a CPU tensor of the same size")


if __name__ == "__main__":
    main()
