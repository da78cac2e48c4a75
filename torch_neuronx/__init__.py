"""TorchNeuron: the `neuron` device for PyTorch.

Importing this package (PyTorch does it at `import torch` through the `torch.backends` entry
point, unless TORCH_DEVICE_BACKEND_AUTOLOAD=0) registers the device: tensors and modules take
`device="neuron"`, `torch.neuron` mirrors `torch.cuda`, and `torch.accelerator` reports neuron.
"""


def _autoload():
    """Entry point PyTorch calls at `import torch`. Registration happens in this module's body
    (below), which has run or is running by then; defined before `import torch` so that
    `import torch_neuronx` first also works (torch then finds this module half-imported)."""


import atexit  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402

from . import _C  # noqa: E402

__version__ = "0.1.0"

_BACKEND = "neuron"


def _register():
    if torch._C._get_privateuse1_backend_name() != _BACKEND:
        torch.utils.rename_privateuse1_backend(_BACKEND)
    from . import neuron

    if not hasattr(torch, _BACKEND):
        torch._register_device_module(_BACKEND, neuron)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


_register()

from . import distributed  # noqa: E402,F401  (registers the "neuron" c10d backend)
from . import hf_compat  # noqa: E402

hf_compat.install()
# pipelines saved with the tiny Qwen-Image-2.1 processor name this module; Diffusers loads
# components only from modules already imported (it defines its classes on first use)
from .models import qwen3_vl_text  # noqa: E402,F401


def _thread_names():
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                yield f.read()
        except OSError:  # the thread ended meanwhile
            pass


def _drain_autograd_threads():
    """At exit, while Python is still whole: lets PyTorch's autograd threads of the neuron
    devices finish cleaning up after the last backward pass, which otherwise may take the GIL
    during finalization and abort the process (csrc/runtime/AutogradExit.cpp). Only when such a
    thread exists, that is, when a backward pass ran on neuron in this process (never in a
    forked child: threads do not survive fork); at most 10 s (a backward still running in a
    daemon thread)."""
    if any(name.startswith("pt_autograd_") for name in _thread_names()):
        _C._drain_autograd_threads(timeout_seconds=10.0)


atexit.register(_drain_autograd_threads)


def get_executed_ops():
    """{aten op name: count} of ops that ran natively on neuron since the last clear."""
    return dict(_C._executed_ops())


def get_fallback_ops():
    """{aten op name: count} of ops that ran on the CPU fallback since the last clear."""
    return dict(_C._fallback_ops())


def clear_op_tracking():
    """Resets the executed and fallback op counts."""
    _C._clear_op_tracking()


def get_dynamo_metrics():
    """Counters of torch.compile(backend="neuron"): see torch_neuronx.compiler."""
    from .compiler import get_dynamo_metrics as metrics

    return metrics()


def reset_dynamo_metrics():
    from .compiler import reset_dynamo_metrics as reset

    reset()


__all__ = ["get_executed_ops", "get_fallback_ops", "clear_op_tracking", "get_dynamo_metrics",
           "reset_dynamo_metrics"]
