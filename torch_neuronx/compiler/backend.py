"""The `neuron` Dynamo backend (see the package docstring) and its counters."""
import threading

import torch

_lock = threading.Lock()
_metrics = {"graphs": 0, "graph_nodes": 0}


def get_dynamo_metrics():
    """{counter: value}: graphs the backend received (each new shape or guard failure brings
    one) and their total number of FX nodes."""
    with _lock:
        return dict(_metrics)


def reset_dynamo_metrics():
    with _lock:
        for key in _metrics:
            _metrics[key] = 0


def _symbolic(value):
    if isinstance(value, torch.SymInt):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
    return False


def neuron_backend(gm, example_inputs, **options):
    """Dynamo backend: returns the callable that runs the captured graph on the device."""
    if any(_symbolic(x) for x in example_inputs):
        raise RuntimeError(
            "torch.compile(backend='neuron') compiles static shapes only, as the device does: this "
            "graph has symbolic (dynamic) shapes. Pass dynamic=False to torch.compile (or "
            "CompileConfig(dynamic=False) to generate); each new input shape then compiles once.")
    with _lock:
        _metrics["graphs"] += 1
        _metrics["graph_nodes"] += len(gm.graph.nodes)
    return gm.forward
