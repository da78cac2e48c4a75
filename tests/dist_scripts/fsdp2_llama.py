"""FSDP2 (fully_shard) on a tiny LlamaForCausalLM, run under torchrun.

usage: fsdp2_llama.py OUT_DIR

Two variants in one run:
  "bf16": MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)
  "fp32": no mixed precision
Each decoder layer is sharded, then the root, on a 1-D mesh of all ranks. STEPS AdamW steps,
each on a fixed token batch of which every rank takes its own rows. Saved per rank: the local
loss of every step (`<v>/losses`); on rank 0 also the full (unsharded) gradients of step 0
(`<v>/grads0`) and the full parameters after the last step (`<v>/params`).

The single-process reference (`reference` below, run by the pytest process on the CPU) trains
the same model without FSDP on the whole batch. For "bf16" it does by hand what the policy
does: an fp32 master copy, parameters (not buffers: RoPE's inv_freq stays fp32, as under
FSDP) cast to bf16 for forward/backward, the bf16 gradients cast to fp32 for the fp32 AdamW.
"""
import copy
import sys

import torch

VOCAB, HIDDEN, INTER, LAYERS, HEADS, KV_HEADS = 128, 64, 128, 2, 4, 2
GLOBAL_BATCH, SEQ = 4, 16
STEPS = 3
LR, WEIGHT_DECAY = 1e-2, 0.01
VARIANTS = ("bf16", "fp32")


def build_model(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        max_position_embeddings=64, tie_word_embeddings=False, attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).float()


def tokens(step):
    g = torch.Generator().manual_seed(2000 + step)
    return torch.randint(0, VOCAB, (GLOBAL_BATCH, SEQ), generator=g)


def make_adamw(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)


def loss_of(model, ids):
    return model(input_ids=ids, labels=ids).loss


def reference(variant):
    """(losses per step, full grads of step 0, params after the last step), one process."""
    model = build_model()
    opt = make_adamw(model)
    losses, grads0 = [], None
    for step in range(STEPS):
        ids = tokens(step)
        if variant == "bf16":
            compute = copy.deepcopy(model)
            for p in compute.parameters():
                p.data = p.data.to(torch.bfloat16)
            loss = loss_of(compute, ids)
            loss.backward()
            for p, q in zip(model.parameters(), compute.parameters()):
                p.grad = q.grad.float()
        else:
            loss = loss_of(model, ids)
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
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    import _common

    rank, world = _common.init()
    dev = _common.device()
    mesh = init_device_mesh(_common.DEVICE, (world,))
    results, summary = {}, {}

    for variant in VARIANTS:
        if variant == "bf16":
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        else:
            mp = MixedPrecisionPolicy()
        model = build_model().to(dev)
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        opt = make_adamw(model)
        losses = []
        for step in range(STEPS):
            ids = tokens(step).chunk(world)[rank].to(dev)
            loss = loss_of(model, ids)
            loss.backward()
            if step == 0:
                # full_tensor() is a collective: every rank calls it, rank 0 keeps the result.
                g0 = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
                if rank == 0:
                    results[f"{variant}/grads0"] = _common.to_cpu(g0)
                del g0
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach().float())
        results[f"{variant}/losses"] = torch.stack(losses)
        full = {n: p.full_tensor() for n, p in model.named_parameters()}
        if rank == 0:
            results[f"{variant}/params"] = _common.to_cpu(full)
        summary[f"{variant}/rank0_losses"] = [v.item() for v in losses]
        del model, opt, full
        dist.barrier()

    _common.finish(out_dir, results, summary)


if __name__ == "__main__":
    main(sys.argv[1])
