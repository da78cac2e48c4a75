"""Lets Hugging Face's file formats name the neuron device.

safetensors (0.8 and earlier) parses a device name itself and knows only the in-tree ones
(cpu, cuda, mps, xpu, npu, ...): `safe_open(path, device="neuron:0")` raises
`SafetensorError: device neuron:0 is invalid`. Accelerate's `load_state` and PEFT's adapter
loading pass `str(device)` exactly so. A bare index is accepted, and safetensors then moves
each tensor with `tensor.to(index)`, which lands on the current accelerator, neuron. So
`safetensors.safe_open` is wrapped, as soon as safetensors is imported, to turn a neuron device
into its index; every other argument passes through unchanged.
"""
import importlib.abc
import importlib.machinery
import sys

import torch

_BACKEND = "neuron"


def _neuron_index(device):
    """The index of a neuron device given as str or torch.device, else None."""
    if isinstance(device, str):
        if not device.startswith(_BACKEND):
            return None
        try:
            device = torch.device(device)
        except RuntimeError:
            return None
    if not isinstance(device, torch.device) or device.type != _BACKEND:
        return None
    return device.index if device.index is not None else torch.neuron.current_device()


def _wrap_safe_open(original):
    def safe_open(filename, framework, device="cpu", *args, **kwargs):
        index = _neuron_index(device)
        return original(filename, framework, device if index is None else index, *args, **kwargs)

    safe_open.__doc__ = original.__doc__
    safe_open.__wrapped__ = original
    return safe_open


def _patch(module):
    if not hasattr(module.safe_open, "__wrapped__"):
        module.safe_open = _wrap_safe_open(module.safe_open)
    loaded_torch = sys.modules.get("safetensors.torch")
    if loaded_torch is not None:
        loaded_torch.safe_open = module.safe_open


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds `safetensors` with the other finders and patches it once its body has run, before
    anyone's `from safetensors import safe_open` takes the original."""

    def find_spec(self, name, path=None, target=None):
        if name != "safetensors":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install():
    if "safetensors" in sys.modules:
        _patch(sys.modules["safetensors"])
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
