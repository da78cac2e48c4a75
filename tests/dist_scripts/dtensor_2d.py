"""2-D parallelism (data parallel x tensor parallel) of a tiny MLP, run under torchrun with 4
processes.

usage: dtensor_2d.py OUT_DIR

init_device_mesh(device, (2, 2), mesh_dim_names=("dp", "tp")); ColwiseParallel/RowwiseParallel
on the "tp" sub-mesh, then fully_shard on the "dp" sub-mesh. STEPS AdamW steps; every dp group
takes its own rows of a fixed batch (both tp ranks of a group the same rows). Saved per rank:
its dp index and local losses (`dp_rank`, `losses`); on rank 0 also the full gradients of step
0 (`grads0`) and the full parameters at the end (`params`). The reference is the plain model
on the whole batch (`reference`), whose loss equals the mean of the dp groups' losses.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

IN, HID, OUT = 8, 16, 8
GLOBAL_BATCH = 8
STEPS = 2
LR = 1e-2
MESH = (2, 2)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(IN, HID)
        self.w2 = nn.Linear(HID, OUT)

    def forward(self, x):
        return self.w2(F.relu(self.w1(x)))


def build_model(seed=0):
    torch.manual_seed(seed)
    return MLP()


def batch(step):
    g = torch.Generator().manual_seed(7000 + step)
    return torch.randn(GLOBAL_BATCH, IN, generator=g), torch.randn(GLOBAL_BATCH, OUT, generator=g)


def make_opt(model):
    return torch.optim.AdamW(model.parameters(), lr=LR)


def reference():
    model = build_model()
    opt = make_opt(model)
    losses, grads0 = [], None
    for step in range(STEPS):
        x, y = batch(step)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        if step == 0:
            grads0 = {n: p.grad.clone() for n, p in model.named_parameters()}
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, grads0, {n: p.detach() for n, p in model.named_parameters()}


def main(out_dir):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    import _common

    rank, world = _common.init()
    assert world == MESH[0] * MESH[1], f"needs {MESH[0] * MESH[1]} processes, got {world}"
    dev = _common.device()
    mesh = init_device_mesh(_common.DEVICE, MESH, mesh_dim_names=("dp", "tp"))
    dp_rank, dp_size = mesh.get_local_rank("dp"), mesh["dp"].size()

    model = build_model().to(dev)
    parallelize_module(model, mesh["tp"], {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = make_opt(model)
    res = {"dp_rank": torch.tensor(dp_rank)}
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        x, y = x.chunk(dp_size)[dp_rank].to(dev), y.chunk(dp_size)[dp_rank].to(dev)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        if step == 0:
            g0 = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
            if rank == 0:
                res["grads0"] = _common.to_cpu(g0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    res["losses"] = torch.stack(losses)
    params = {n: p.full_tensor() for n, p in model.named_parameters()}
    if rank == 0:
        res["params"] = _common.to_cpu(params)
        res["placements"] = {n: str(p.placements) for n, p in model.named_parameters()}
    dist.barrier()
    _common.finish(out_dir, res, {"rank0_losses": [v.item() for v in losses]})


if __name__ == "__main__":
    main(sys.argv[1])
