"""The RNG higher-order operators on neuron: `run_and_save_rng_state` and `run_with_rng_state`.

AOTAutograd puts them in compiled training graphs that recompute random ops, as activation
checkpointing does with dropout (TRL turns gradient checkpointing on by default): the forward
saves the device generator's state before the random op, the backward runs the op again with
that state, so the recomputed mask equals the first one. PyTorch implements them for the CPU,
CUDA, HPU and XPU only, in closures that refuse any other device ("Backend not supported for
neuron"); this module adds neuron, with the state of the device's Philox generator
(`torch.neuron.get_rng_state()`), and hands every other device to PyTorch's implementation.
"""
import torch
from torch._C import DispatchKey
from torch._prims import rng_prims
from torch._higher_order_ops.utils import registered_hop_fake_fns
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, track_tensor_tree
from torch.utils import _pytree as pytree

DEVICE = "neuron"


def _on_neuron(args, kwargs):
    return rng_prims.get_device(args, kwargs) == DEVICE


def _save(op, *args, **kwargs):
    return torch.neuron.get_rng_state(), op(*args, **kwargs)


def _run_with(rng_state, op, *args, **kwargs):
    current = torch.neuron.get_rng_state()
    torch.neuron.set_rng_state(rng_state.cpu())
    try:
        return op(*args, **kwargs)
    finally:
        torch.neuron.set_rng_state(current)


def _replace(hop, key, make):
    """Puts make(previous kernel) in place of `hop`'s kernel for `key` (a dispatch key or a mode)."""
    table = hop.python_key_table if isinstance(key, type) else hop.py_kernels
    table[key] = make(table.get(key))
    hop._dispatch_cache.clear()


def _install():
    save, run_with = rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state
    if getattr(save, "_neuron_installed", False):
        return

    def save_select(previous):
        def select(op, *args, **kwargs):
            return _save(op, *args, **kwargs) if _on_neuron(args, kwargs) else previous(op, *args, **kwargs)
        return select

    def save_proxy(previous):
        def proxy(mode, op, *args, **kwargs):
            if not _on_neuron(args, kwargs):
                return previous(mode, op, *args, **kwargs)
            out = _save(op, *args, **kwargs)
            proxy_args = pytree.tree_map(mode.tracer.unwrap_proxy, (op, *args))
            proxy_kwargs = pytree.tree_map(mode.tracer.unwrap_proxy, kwargs)
            out_proxy = mode.tracer.create_proxy("call_function", save, proxy_args, proxy_kwargs)
            return track_tensor_tree(out, out_proxy, constant=None, tracer=mode.tracer)
        return proxy

    def save_fake(previous):
        def fake(op, *args, **kwargs):
            return _save(op, *args, **kwargs) if _on_neuron(args, kwargs) else previous(op, *args, **kwargs)
        return fake

    def run_select(previous):
        def select(rng_state, op, *args, **kwargs):
            if _on_neuron(args, kwargs):
                return _run_with(rng_state, op, *args, **kwargs)
            return previous(rng_state, op, *args, **kwargs)
        return select

    _replace(save, DispatchKey.BackendSelect, save_select)
    _replace(save, DispatchKey.PrivateUse1, lambda _: _save)
    _replace(save, ProxyTorchDispatchMode, save_proxy)
    registered_hop_fake_fns[save] = save_fake(registered_hop_fake_fns[save])
    _replace(run_with, DispatchKey.BackendSelect, run_select)
    _replace(run_with, DispatchKey.PrivateUse1, lambda _: _run_with)
    save._neuron_installed = True


_install()
