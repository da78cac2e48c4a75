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
    _unpickled_meshes_belong_to_this_process()


def _unpickled_meshes_belong_to_this_process():
    """A DeviceMesh pickles its whole state, including what only holds in the process that made
    it: its cached hash (string hashing is seeded per process) and its rank and coordinates.
    Compiled DTensor graphs hold meshes in their cache entries, which every rank and every later
    run reads: an entry written by rank 1 would give rank 0 meshes that claim rank 1's
    coordinates and that, equal to the live mesh, hash differently, so a dict keyed by mesh (as
    Accelerate's gradient clipping groups gradients) splits on one rank only and the ranks' next
    collectives no longer match. Unpickled here, a mesh drops its hash and takes this process's
    rank."""
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError:
        return
    setstate = getattr(DeviceMesh, "__setstate__", None)
    if setstate is None or getattr(setstate, "_neuron", False):
        return

    def __setstate__(self, state):
        setstate(self, state)
        self.__dict__.pop("_hash", None)
        if dist.is_initialized() and "_rank_map" in self.__dict__:
            self._rank = dist.get_rank()
            self._coordinate_on_dim = self._compute_coordinate_on_dim()

    __setstate__._neuron = True
    DeviceMesh.__setstate__ = __setstate__


_register()
