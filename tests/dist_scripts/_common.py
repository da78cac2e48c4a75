"""Shared set-up for the torchrun worker scripts in this directory.

The backend under test comes from TN_DIST_TEST_BACKEND:
  "neuron" (default): device "neuron", process-group backend "neuron"; each rank binds its own
                      logical core with torch.accelerator.set_device_index(LOCAL_RANK).
  "gloo":             device "cpu", backend "gloo" (validates the scripts without the device).

Each script builds its models and data on the CPU from fixed seeds (so every rank, and the
single-process reference in the pytest process, starts from the same bits), moves them to
DEVICE, runs, and ends with `finish(out_dir, tensors, summary)`: every rank saves its tensors
(moved to the CPU) to out_dir/rank<R>.pt and rank 0 prints one line
`TN_DIST_RESULT <json>` that the test parses.
"""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

BACKEND = os.environ.get("TN_DIST_TEST_BACKEND", "neuron")
if BACKEND == "gloo":
    DEVICE, PG_BACKEND = "cpu", "gloo"
elif BACKEND == "neuron":
    DEVICE, PG_BACKEND = "neuron", "neuron"
else:
    raise ValueError(f"TN_DIST_TEST_BACKEND must be 'neuron' or 'gloo', not {BACKEND!r}")

RESULT_PREFIX = "TN_DIST_RESULT "


def init():
    """Binds this rank's device and starts the default process group; returns (rank, world)."""
    if DEVICE == "neuron":
        import torch_neuronx  # noqa: F401  (autoloaded too; explicit so a missing build is loud)
    local_rank = int(os.environ["LOCAL_RANK"])
    if DEVICE != "cpu":
        torch.accelerator.set_device_index(local_rank)
    timeout = timedelta(seconds=float(os.environ.get("TN_DIST_TEST_PG_TIMEOUT", "120")))
    dist.init_process_group(PG_BACKEND, timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def device():
    if DEVICE == "cpu":
        return torch.device("cpu")
    return torch.device(DEVICE, torch.accelerator.current_device_index())


def to_cpu(obj):
    """Detached CPU copies of the tensors in nested dicts/lists (DTensors must already have been
    turned into plain tensors by the caller: full_tensor() is a collective)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def grads(module):
    return {n: p.grad for n, p in module.named_parameters() if p.grad is not None}


def finish(out_dir, tensors, summary):
    """Saves this rank's tensors, prints rank 0's summary line, tears the group down."""
    rank = dist.get_rank()
    torch.save(to_cpu(tensors), os.path.join(out_dir, f"rank{rank}.pt"))
    dist.barrier()
    if rank == 0:
        summary = dict(summary, backend=BACKEND, device=DEVICE, world_size=dist.get_world_size())
        print(RESULT_PREFIX + json.dumps(summary), flush=True)
    dist.destroy_process_group()
