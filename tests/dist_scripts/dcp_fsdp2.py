"""torch.distributed.checkpoint of an FSDP2-sharded tiny Llama, run under torchrun.

usage: dcp_fsdp2.py OUT_DIR CKPT_DIR

  1. The tiny Llama of fsdp2_llama.py, fully_shard per layer + root, one AdamW step.
  2. dcp.save({"model": ..., "optim": ...}) from get_state_dict (sharded DTensor state) to
     CKPT_DIR. Rank 0 keeps full_tensor() of every parameter (`saved/params`) and of every
     optimizer state tensor (`saved/optim/<fqn>/<key>`): the reference the pytest process
     compares its own single-process load of CKPT_DIR against.
  3. A fresh model (other seed) and optimizer, sharded the same way, dcp.load + set_state_dict:
     rank 0 keeps their full parameters (`reloaded/params`).
  4. Both the original and the reloaded model take one more step on the same batch; rank 0
     keeps both sets of parameters (`resumed/orig`, `resumed/reloaded`): a restored optimizer
     state gives the same update.
"""
import sys

import torch

from fsdp2_llama import build_model, make_adamw, loss_of, tokens


def shard_model(model, mesh):
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def train_step(model, opt, step, rank, world, dev):
    ids = tokens(step).chunk(world)[rank].to(dev)
    loss = loss_of(model, ids)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def full_params(model):
    return {n: p.full_tensor() for n, p in model.named_parameters()}


def main(out_dir, ckpt_dir):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    import _common

    rank, world = _common.init()
    dev = _common.device()
    mesh = init_device_mesh(_common.DEVICE, (world,))
    res = {}

    model = shard_model(build_model().to(dev), mesh)
    opt = make_adamw(model)
    train_step(model, opt, 0, rank, world, dev)

    msd, osd = get_state_dict(model, opt)
    assert all(isinstance(v, DTensor) for v in msd.values()), "expected sharded state"
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=ckpt_dir)
    saved = full_params(model)
    saved_optim = {}
    for fqn, state in osd["state"].items():
        for key, value in state.items():
            if isinstance(value, DTensor):
                value = value.full_tensor()
            saved_optim[f"{fqn}/{key}"] = value
    if rank == 0:
        res["saved/params"] = _common.to_cpu(saved)
        res["saved/optim"] = _common.to_cpu(saved_optim)
    del saved, saved_optim, msd, osd

    fresh = shard_model(build_model(seed=123).to(dev), mesh)
    fresh_opt = make_adamw(fresh)
    msd, osd = get_state_dict(fresh, fresh_opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=ckpt_dir)
    set_state_dict(fresh, fresh_opt, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    reloaded = full_params(fresh)
    if rank == 0:
        res["reloaded/params"] = _common.to_cpu(reloaded)
    del reloaded, msd, osd, state

    loss_orig = train_step(model, opt, 1, rank, world, dev)
    loss_reloaded = train_step(fresh, fresh_opt, 1, rank, world, dev)
    orig, again = full_params(model), full_params(fresh)
    if rank == 0:
        res["resumed/orig"] = _common.to_cpu(orig)
        res["resumed/reloaded"] = _common.to_cpu(again)
    res["resumed/losses"] = torch.stack([loss_orig, loss_reloaded])
    dist.barrier()
    _common.finish(out_dir, res, {"resumed_losses_rank0": [loss_orig.item(), loss_reloaded.item()]})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
