"""The `neuron` backend of torch.distributed.

Registered when torch_neuronx loads, so that `init_process_group("neuron")`,
`init_process_group("cpu:gloo,neuron:neuron")`, `init_process_group()` on a host with NeuronCores,
`new_group`, `split_group` and `init_device_mesh("neuron", ...)` create it. The collectives run in
the C runtime (src/ccl) on the group's own stream, ordered after the caller's kernels; see
docs/distributed.md.

A process group uses one logical NeuronCore: the process's current device when the group is made
(LOCAL_RANK under torchrun, or what `torch.neuron.set_device` chose). From then on the process
cannot use another core.
"""
import torch
import torch.distributed as dist

from . import _C

BACKEND = "neuron"


def _create_backend(dist_backend_opts, backend_options):
    """init_process_group's creator (extended API): the group's store, rank, size and timeout."""
    _C._init_distributed()
    timeout = dist_backend_opts.timeout
    # device -1: the group binds its core at its first collective (the current device then), or
    # when init_process_group(device_id=...) connects it eagerly
    return _C.ProcessGroupNeuron(dist_backend_opts.store, dist_backend_opts.group_rank,
                                 dist_backend_opts.group_size, timeout, -1)


def _gloo_group(store, rank, size, timeout):
    """A Gloo group for a neuron group that spans hosts (the C++ backend asks for two: one
    among the ranks of its local index on every host, one among all ranks)."""
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def collective_stats(group=None) -> dict:
    """What the neuron collectives of `group` (default: the world) have cost on this rank since the
    group was made: ``launches`` (stream tasks run), ``operations`` (collectives and sends/receives
    in them), ``bytes`` (their element counts times element sizes) and ``seconds`` (the time the
    tasks took on the group's streams, waiting for peers included). Compare ``seconds`` across two
    points of a run to get the collective share of a step."""
    group = group if group is not None else dist.group.WORLD
    if group is None:
        raise RuntimeError("collective_stats: no process group; call init_process_group first")
    backend = group._get_backend(torch.device(BACKEND))
    cls = getattr(_C, "ProcessGroupNeuron", None)
    if cls is None or not isinstance(backend, cls):
        raise ValueError(f"collective_stats: the group's neuron backend is {type(backend).__name__}, "
                         f"not '{BACKEND}'")
    return backend._stats()


def _register():
    if not dist.is_available() or BACKEND in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=[BACKEND])


_register()
