"""Collectives of a group that spans two "hosts" (TORCH_NEURONX_DIST_HOST differs per torchrun
node): the hierarchical path (shared memory within a host, Gloo between hosts) and the network
path, against their definitions computed from every rank's known inputs.

Each rank r holds x_r = arange(n) * (r + 1) + r (small integers: every reduction is exact in
float32 whatever its order). Saves the results per rank; rank 0 prints the summary line.
"""
import sys

import torch
import torch.distributed as dist

from _common import device, finish, init


def data(r, n, dtype=torch.float32):
    return (torch.arange(n) * (r + 1) + r).to(dtype)


def main(out_dir):
    rank, world = init()
    dev = device()
    out = {}
    for n in (0, 1, 1000, 70_000):
        t = data(rank, n).to(dev)
        dist.all_reduce(t)
        out[f"all_reduce_sum_{n}"] = t.cpu()
    t = data(rank, 33).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["all_reduce_avg"] = t.cpu()
    t = data(rank, 33).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    out["all_reduce_max"] = t.cpu()
    t = (data(rank, 17, torch.int64) % 3 == 0).to(dev)
    dist.all_reduce(t)  # bool: or
    out["all_reduce_bool"] = t.cpu()
    t = data(rank, 20, torch.bfloat16).to(dev)  # sums below 256: exact in bfloat16
    dist.all_reduce(t)
    out["all_reduce_bf16"] = t.cpu()
    for root in range(world):
        t = data(rank, 21).to(dev)
        dist.broadcast(t, src=root)
        out[f"broadcast_{root}"] = t.cpu()
        t = data(rank, 21).to(dev)
        dist.reduce(t, dst=root)
        if rank == root:
            out[f"reduce_{root}"] = t.cpu()
    g = torch.empty(world * 13, device=dev)
    dist.all_gather_into_tensor(g, data(rank, 13).to(dev))
    out["all_gather"] = g.cpu()
    r = torch.empty(9, device=dev)
    dist.reduce_scatter_tensor(r, data(rank, 9 * world).to(dev))
    out["reduce_scatter"] = r.cpu()
    # uneven all_to_all: rank r sends j + 1 rows of 3 to rank j
    send = data(rank, 3 * sum(j + 1 for j in range(world))).view(-1, 3).to(dev)
    recv = torch.empty((rank + 1) * world, 3, device=dev)
    dist.all_to_all_single(recv, send, [rank + 1] * world, [j + 1 for j in range(world)])
    out["all_to_all"] = recv.cpu()
    gl = [torch.empty(5, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(data(rank, 5).to(dev), gl, dst=0)
    if rank == 0:
        out["gather"] = torch.stack(gl).cpu()
    s = torch.empty(4, device=dev)
    dist.scatter(s, [data(j, 4).to(dev) for j in range(world)] if rank == world - 1 else None, src=world - 1)
    out["scatter"] = s.cpu()
    # a ring of sends: each rank to the next, across the host boundary too
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    got = torch.empty(6, device=dev)
    ops = [dist.P2POp(dist.isend, data(rank, 6).to(dev), nxt), dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    out["ring"] = got.cpu()
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    dist.barrier()
    finish(out_dir, out, {"objects": objs})


if __name__ == "__main__":
    main(sys.argv[1])
