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
import threading
import time

import torch
import torch.distributed as dist
from torch_neuronx import _C
from torch_neuronx.distributed import collective_stats

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
    """Seconds per call (the slowest rank's median) and, on neuron, the seconds per call that the
    collective itself took (collective_stats: on the streams or the calling thread, waiting for
    peers included; the rest is the call path through torch.distributed and the launch)."""
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
    stats = collective_stats(group) if device == "neuron" else None
    for _ in range(3):
        dist.barrier(group=gloo_group)
        t = time.perf_counter()
        for _ in range(iters):
            call(op, a, b, group)
        sync()
        times.append((time.perf_counter() - t) / iters)
    own = float("nan")
    if stats is not None:
        after = collective_stats(group)
        own = (after["seconds"] - stats["seconds"]) / max(1, after["launches"] - stats["launches"])
    mine = torch.tensor([statistics.median(times), own], dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=gloo_group)  # the slowest rank
    return mine[0].item(), mine[1].item()


def worker(rank, n, port, args, queue):
    torch.set_num_threads(1)
    torch.neuron.set_device(rank)
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    solo = [dist.new_group([r]) for r in range(n)][rank]
    # the floors of a small collective's latency: torch.distributed's call path alone (an 8-byte
    # all_reduce in a group of one) and a shared-memory ping-pong between two threads (rank 0,
    # while the other ranks wait in a Gloo barrier, which sleeps)
    floor_call, _ = time_op("all_reduce", 2, 1, torch.float32, "neuron", solo, args.budget, gloo)
    dist.barrier(group=gloo)
    pingpong = min(_C._comm_pingpong_us(20000) for _ in range(3)) if rank == 0 else None
    dist.barrier(group=gloo)
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
                t_neuron, t_own = time_op(op, numel, n, dtype, "neuron", None, args.budget, gloo)
                t_gloo = time_op(op, numel, n, dtype, "cpu", gloo, args.budget, gloo)[0] if not args.no_gloo else float("nan")
                rows.append((str(dtype).split(".")[1], op, numel * es, t_neuron, t_own, t_gloo))
    queue.put((rows, floor_call, pingpong))
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


def concurrent_memcpy_gbps(nbytes, n):
    """Bandwidth of one thread copying `nbytes` while n - 1 other threads copy as much at the same
    time: what each rank of a collective gets for its own copies when all ranks copy at once."""
    srcs = [torch.ones(nbytes // 4) for _ in range(n)]
    dsts = [torch.empty_like(x) for x in srcs]
    reps = max(1, (64 << 20) // nbytes)
    start = threading.Barrier(n)
    took = [0.0] * n

    def copy(i):
        dsts[i].copy_(srcs[i])
        start.wait()
        t = time.perf_counter()
        for _ in range(reps):
            dsts[i].copy_(srcs[i])  # releases the GIL: the threads copy in parallel
        took[i] = (time.perf_counter() - t) / reps

    best = float("inf")
    for _ in range(3):
        threads = [threading.Thread(target=copy, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        best = min(best, max(took))
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

    class Out:
        def put(self, result):
            self.result = result

    out = Out()
    worker(rank, n, None, args, out)
    if rank != 0:
        return 0
    rows, floor_call, pingpong = out.result
    print(f"{n} ranks on one host ({os.cpu_count()} CPUs); floors of a small collective: shared-memory "
          f"ping-pong (round trip, 64 B, best of 3) {pingpong:.2f} us; torch.distributed's call path "
          f"(8-byte all_reduce in a group of one) {floor_call * 1e6:.1f} us")
    print(f"{'dtype':<9}{'op':<24}{'bytes':>11}{'neuron us':>11}{'own us':>8}{'algbw':>8}{'busbw':>8}"
          f"{'gloo us':>11}{'busbw':>8}{'vs gloo':>8}{'memcpy':>8}{'bus/memcpy':>11}{'memcpy|n':>9}")
    concurrent = {}
    for dtype, op, nbytes, tn, own, tg in rows:
        f = bus_factor(op, n)
        bus_n, bus_g, mc = nbytes / tn / 1e9 * f, nbytes / tg / 1e9 * f, memcpy_gbps(max(nbytes, 4096))
        if nbytes >= 1 << 20 and nbytes not in concurrent:
            concurrent[nbytes] = concurrent_memcpy_gbps(nbytes, n)
        par = f"{concurrent[nbytes]:>9.2f}" if nbytes in concurrent else f"{'':>9}"
        print(f"{dtype:<9}{op:<24}{nbytes:>11}{tn * 1e6:>11.1f}{own * 1e6:>8.1f}{nbytes / tn / 1e9:>8.2f}"
              f"{bus_n:>8.2f}{tg * 1e6:>11.1f}{bus_g:>8.2f}{tg / tn:>7.1f}x{mc:>8.2f}{bus_n / mc:>10.0%}{par}")
    print("bandwidths in GB/s; own us: the collective itself per call (collective_stats: on the streams or the "
          "calling thread, waiting for peers included); memcpy: one thread copying a CPU tensor of the same size; "
          f"memcpy|n: one thread's copy of that size while {n - 1} more copy as much at once (from 1 MiB)")


if __name__ == "__main__":
    main()
