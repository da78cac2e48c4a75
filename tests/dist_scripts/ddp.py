"""DDP of a small MLP, run under torchrun.

usage: ddp.py OUT_DIR

For each dtype (float32, bfloat16), with a global batch split evenly over the ranks:
  init:    ranks > 0 build the model from a different seed; DDP's construction must broadcast
           rank 0's parameters and buffer (saved as `<dt>/init`).
  sync:    one forward/backward on the rank's shard -> all-reduced (averaged) gradients
           (`<dt>/sync`), which must equal the single-process gradients of the mean loss over
           the whole batch.
  no_sync: two micro-batches (loss / 2 each); the first under no_sync() leaves purely local
           gradients (`<dt>/nosync_local`), the second backward syncs the accumulated ones
           (`<dt>/nosync_synced`), again equal to the whole-batch gradients.
  sgd:     a fresh DDP model, STEPS SGD steps (momentum) on per-step batches; per-rank local
           losses (`<dt>/losses`) and final parameters (`<dt>/params`).
The reference functions below are what the pytest process runs on the CPU.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

IN, HID, OUT = 8, 16, 4
GLOBAL_BATCH = 8
STEPS = 3
LR, MOMENTUM = 0.1, 0.9
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HID)
        self.fc2 = nn.Linear(HID, OUT)
        self.register_buffer("shift", torch.randn(IN))

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x + self.shift)))


def build_model(dtype, seed=0):
    torch.manual_seed(seed)
    return MLP().to(dtype)


def batch(step, dtype):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, IN, generator=g)
    y = torch.randn(GLOBAL_BATCH, OUT, generator=g)
    return x.to(dtype), y.to(dtype)


def shard(t, rank, world):
    return t.chunk(world)[rank]


def loss_fn(model, x, y):
    return F.mse_loss(model(x), y)


def make_sgd(model):
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


# ---- single-process references (CPU) ----

def reference_grads(dtype):
    """Gradients of the mean loss over the whole batch 0."""
    model = build_model(dtype)
    x, y = batch(0, dtype)
    loss_fn(model, x, y).backward()
    return {n: p.grad for n, p in model.named_parameters()}


def reference_local_microbatch_grads(dtype, rank, world):
    """What rank `rank` holds after the no_sync() micro-batch: its first half-shard, loss / 2."""
    model = build_model(dtype)
    x, y = batch(0, dtype)
    xs, ys = shard(x, rank, world).chunk(2)[0], shard(y, rank, world).chunk(2)[0]
    (loss_fn(model, xs, ys) / 2).backward()
    return {n: p.grad for n, p in model.named_parameters()}


def reference_sgd(dtype):
    model = build_model(dtype)
    opt = make_sgd(model)
    losses = []
    for step in range(STEPS):
        x, y = batch(step, dtype)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, dict(model.named_parameters())


# ---- the distributed run ----

def main(out_dir):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import _common

    rank, world = _common.init()
    dev = _common.device()
    results, summary = {}, {}
    # Small buckets: one per parameter or so, so several all-reduces are in flight at once.
    ddp_kwargs = dict(bucket_cap_mb=0.0005)

    for name, dtype in DTYPES.items():
        # ranks > 0 start from other weights: DDP must broadcast rank 0's state.
        model = build_model(dtype, seed=0 if rank == 0 else 1 + rank).to(dev)
        ddp = DDP(model, **ddp_kwargs)
        results[f"{name}/init"] = dict(model.state_dict())

        x, y = batch(0, dtype)
        xs, ys = shard(x, rank, world).to(dev), shard(y, rank, world).to(dev)
        loss_fn(ddp, xs, ys).backward()
        results[f"{name}/sync"] = _common.to_cpu(_common.grads(model))

        ddp.zero_grad(set_to_none=True)
        (x0, x1), (y0, y1) = xs.chunk(2), ys.chunk(2)
        with ddp.no_sync():
            (loss_fn(ddp, x0, y0) / 2).backward()
        results[f"{name}/nosync_local"] = _common.to_cpu(_common.grads(model))
        (loss_fn(ddp, x1, y1) / 2).backward()
        results[f"{name}/nosync_synced"] = _common.to_cpu(_common.grads(model))
        del ddp, model

        model = build_model(dtype).to(dev)
        ddp = DDP(model, **ddp_kwargs)
        opt = make_sgd(ddp)
        losses = []
        for step in range(STEPS):
            x, y = batch(step, dtype)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp, shard(x, rank, world).to(dev), shard(y, rank, world).to(dev))
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        results[f"{name}/losses"] = torch.stack(losses)
        results[f"{name}/params"] = dict(model.named_parameters())
        summary[f"{name}/rank0_losses"] = [v.item() for v in losses]
        del ddp, model, opt
        dist.barrier()

    _common.finish(out_dir, results, summary)


if __name__ == "__main__":
    main(sys.argv[1])
