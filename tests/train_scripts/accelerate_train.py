"""Plain Accelerate, written for any accelerator, run by `accelerate launch`:

    accelerate launch --num_processes 2 tests/train_scripts/accelerate_train.py OUT_DIR
    accelerate launch --cpu --num_processes 1 tests/train_scripts/accelerate_train.py OUT_DIR

`Accelerator(mixed_precision="bf16")` trains a small MLP with AdamW for STEPS steps on a global
batch of GLOBAL_BATCH rows (split over the processes, no shuffle: the same rows per step for any
number of processes), then `save_state`, then, as the "after" record, draws random numbers on
the device and on the CPU and takes one more step. It then scrambles the weights and draws more
random numbers, `load_state`s, and repeats the "after" draws and step, which must come out equal.
Rank 0 writes OUT_DIR/result.pt: what Accelerate chose (device, distributed type, backend), the
gathered losses, the parameters after the training, and both "after" records.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

IN, HID, OUT = 16, 32, 4
GLOBAL_BATCH = 8
STEPS = 4


def data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(GLOBAL_BATCH * (STEPS + 1), IN, generator=g)
    return TensorDataset(x, torch.tanh(x[:, :OUT] * 2) + 0.1 * torch.randn(len(x), OUT, generator=g))


def step(accelerator, model, optimizer, batch):
    x, y = batch
    loss = F.mse_loss(model(x).float(), y)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    return accelerator.gather(loss.detach()).mean().item()


def after_save(accelerator, model, optimizer, batch):
    return {"device_random": torch.randn(5, device=accelerator.device).cpu(),
            "cpu_random": torch.rand(5),
            "loss": step(accelerator, model, optimizer, batch),
            "params": snapshot(accelerator, model)}


def snapshot(accelerator, model):
    return {k: v.detach().to("cpu", torch.float32, copy=True) for k, v in accelerator.unwrap_model(model).state_dict().items()}


def main(out_dir):
    accelerator = Accelerator(mixed_precision="bf16")
    set_seed(0)
    model = nn.Sequential(nn.Linear(IN, HID), nn.GELU(), nn.Linear(HID, OUT))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = DataLoader(data(), batch_size=GLOBAL_BATCH // accelerator.num_processes, shuffle=False)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    batches = list(loader)
    init = snapshot(accelerator, model)
    losses = [step(accelerator, model, optimizer, b) for b in batches[:STEPS]]
    params = snapshot(accelerator, model)

    state = os.path.join(out_dir, "state")
    accelerator.save_state(state)
    first = after_save(accelerator, model, optimizer, batches[STEPS])
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(-3.0)
    torch.randn(100, device=accelerator.device)
    torch.rand(100)
    accelerator.load_state(state)
    second = after_save(accelerator, model, optimizer, batches[STEPS])

    backend = dist.get_backend() if dist.is_initialized() else None
    if accelerator.is_main_process:
        torch.save({"device": str(accelerator.device),
                    "distributed_type": str(accelerator.distributed_type),
                    "backend": backend,
                    "num_processes": accelerator.num_processes,
                    "saved_files": sorted(os.listdir(state)),
                    "losses": losses, "init": init, "params": params, "first": first, "second": second},
                   os.path.join(out_dir, "result.pt"))
    accelerator.end_training()
    return backend


if __name__ == "__main__":
    if main(sys.argv[1]) == "gloo":
        # The CPU reference (torch alone, Gloo) leaves without interpreter finalization: a Gloo
        # worker thread can drop a finished all_gather's tensors while Python finalizes, and
        # taking the GIL then aborts the process ("terminate called without an active
        # exception", from ProcessGroupGloo::runLoop; about 1 run in 10 on a 2-core machine).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
