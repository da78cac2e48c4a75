"""DTensor placements, redistribution and tensor parallelism on a 1-D mesh, run under torchrun.

usage: dtensor.py OUT_DIR

Every rank saves (rank<R>.pt):
  place/<name>/<P>/local, .../full    distribute_tensor(FULL[name], [P]) for P in Shard(0),
                                      Shard(1), Replicate: the local piece and full_tensor()
  redist/<case>/local, .../full       redistribute between placements (see CASES)
  partial/<op>/<to>/local, .../full   DTensor.from_local(partial_local(rank), [Partial(op)])
                                      redistributed to Replicate (all-reduce) / Shard(0)
                                      (reduce-scatter)
  tp/out, tp/grads, tp/xgrad          Linear-ReLU-Linear with ColwiseParallel/RowwiseParallel
  sp/out, sp/grads, sp/xgrad          LayerNorm (SequenceParallel) -> Colwise(input Shard(1))
                                      -> ReLU -> Rowwise(output Shard(1)) on (B, S, H) input
                                      sharded along the sequence
Gradients are full_tensor() of the parameters' DTensor gradients. The test process computes
what each should be (chunks of the full tensors, sums over ranks, a plain CPU module).
"""
import sys

import torch
import torch.nn as nn

# Names -> full tensors (built identically on every rank and in the test). "uneven" has 5 rows:
# Shard(0) over 2 ranks gives 3 + 2 rows (DTensor pads for the collectives).
SHAPES = {"even": (4, 6), "uneven": (5, 6)}
IN, HID, OUT = 8, 16, 8
BATCH, SEQ = 2, 4


def full(name):
    g = torch.Generator().manual_seed(3000 + sorted(SHAPES).index(name))
    return torch.randn(*SHAPES[name], generator=g)


def partial_local(rank):
    """Rank r's summand of the Partial tensor (4 x 6); the full value is their sum/average."""
    g = torch.Generator().manual_seed(4000 + rank)
    return torch.randn(4, 6, generator=g)


# case -> (tensor name, source placement, target placement); placements as strings so the
# test can read them: "S0", "S1", "R".
CASES = {
    "S0_to_R": ("uneven", "S0", "R"),    # all-gather (uneven)
    "S1_to_R": ("even", "S1", "R"),      # all-gather along dim 1
    "R_to_S0": ("uneven", "R", "S0"),    # local chunk, no communication
    "R_to_S1": ("even", "R", "S1"),
    "S0_to_S1": ("even", "S0", "S1"),    # all-to-all
    "S1_to_S0": ("uneven", "S1", "S0"),
}


def placement(code):
    from torch.distributed.tensor import Replicate, Shard

    return {"S0": Shard(0), "S1": Shard(1), "R": Replicate()}[code]


class MLP(nn.Module):
    def __init__(self, norm=False):
        super().__init__()
        self.norm = nn.LayerNorm(IN) if norm else nn.Identity()
        self.w1 = nn.Linear(IN, HID)
        self.relu = nn.ReLU()
        self.w2 = nn.Linear(HID, OUT)

    def forward(self, x):
        return self.w2(self.relu(self.w1(self.norm(x))))


def build_mlp(norm=False, seed=0):
    torch.manual_seed(seed)
    m = MLP(norm)
    if norm:  # non-trivial LayerNorm parameters
        with torch.no_grad():
            m.norm.weight.uniform_(0.5, 1.5)
            m.norm.bias.uniform_(-0.5, 0.5)
    return m


def mlp_input(sequence):
    g = torch.Generator().manual_seed(5000 + sequence)
    shape = (BATCH, SEQ, IN) if sequence else (BATCH, IN)
    return torch.randn(*shape, generator=g)


def mlp_target(out_shape, sequence):
    g = torch.Generator().manual_seed(6000 + sequence)
    return torch.randn(*out_shape, generator=g)


def mlp_loss(out, target):
    # Not a plain sum: the gradient flowing back depends on the output values.
    return ((out - target) ** 2).mean()


def reference_mlp(sequence):
    """Plain single-process forward/backward: (out, param grads, input grad)."""
    model = build_mlp(norm=sequence)
    x = mlp_input(sequence).requires_grad_()
    out = model(x)
    mlp_loss(out, mlp_target(out.shape, sequence)).backward()
    return out.detach(), {n: p.grad for n, p in model.named_parameters()}, x.grad


def main(out_dir):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    import _common

    rank, world = _common.init()
    dev = _common.device()
    mesh = init_device_mesh(_common.DEVICE, (world,))
    res = {}

    def keep(key, dt):
        res[f"{key}/local"] = _common.to_cpu(dt.to_local())
        res[f"{key}/full"] = _common.to_cpu(dt.full_tensor())

    for name in SHAPES:
        for code in ("S0", "S1", "R"):
            keep(f"place/{name}/{code}", distribute_tensor(full(name).to(dev), mesh, [placement(code)]))

    for case, (name, src, dst) in CASES.items():
        dt = distribute_tensor(full(name).to(dev), mesh, [placement(src)])
        out = dt.redistribute(mesh, [placement(dst)])
        assert out.placements == (placement(dst),), out.placements
        keep(f"redist/{case}", out)

    for op in ("sum", "avg"):
        dt = DTensor.from_local(partial_local(rank).to(dev), mesh, [Partial(op)])
        for to, target in (("R", Replicate()), ("S0", Shard(0))):
            keep(f"partial/{op}/{to}", dt.redistribute(mesh, [target]))

    # Tensor parallelism: the same input on every rank (a plain tensor; Colwise's input is
    # Replicate) and a replicated plain output.
    model = build_mlp().to(dev)
    parallelize_module(model, mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    x = mlp_input(False).to(dev).requires_grad_()
    out = model(x)
    mlp_loss(out, mlp_target(out.shape, False).to(dev)).backward()
    res["tp/out"] = _common.to_cpu(out)
    res["tp/xgrad"] = _common.to_cpu(x.grad)
    res["tp/grads"] = _common.to_cpu({n: p.grad.full_tensor() for n, p in model.named_parameters()})

    # Sequence parallel: each rank holds its slice of the sequence (dim 1) in and out.
    model = build_mlp(norm=True).to(dev)
    parallelize_module(model, mesh, {
        "norm": SequenceParallel(),
        "w1": ColwiseParallel(input_layouts=Shard(1)),
        "w2": RowwiseParallel(output_layouts=Shard(1)),
    })
    x_full = mlp_input(True)
    x = x_full.chunk(world, dim=1)[rank].to(dev).requires_grad_()
    out = model(x)
    target = mlp_target((BATCH, SEQ, OUT), True).chunk(world, dim=1)[rank].to(dev)
    # Each rank's local loss is the mean over its slice; the sum over ranks / world is the
    # mean over the whole sequence, so scale by 1/world to match the single-process loss.
    (mlp_loss(out, target) / world).backward()
    res["sp/out"] = _common.to_cpu(out)
    res["sp/xgrad"] = _common.to_cpu(x.grad)
    res["sp/grads"] = _common.to_cpu({n: p.grad.full_tensor() for n, p in model.named_parameters()})
    res["sp/grad_placements"] = {n: str(p.grad.placements) for n, p in model.named_parameters()}

    dist.barrier()
    _common.finish(out_dir, res, {"cases": len(res)})


if __name__ == "__main__":
    main(sys.argv[1])
