"""torch.compile(backend="neuron").

The backend is registered through the `torch_dynamo_backends` entry point, so
`torch.compile(model, backend="neuron")` finds it without importing anything, and so does
Transformers, which compiles `generate()` with a static cache on a `neuron` device with
`CompileConfig(backend="neuron", dynamic=False)`.

Today the backend takes Dynamo's graph and runs it on neuron's eager kernels (every node is a
native kernel launch on the device stream); shapes are static, as on the hardware: symbolic
shapes (`dynamic=True`) are refused with a message saying what to do. The graph compiler in C
(fusion, generated kernels, on-disk cache) will take the same entry point.
"""
from .backend import get_dynamo_metrics, neuron_backend, reset_dynamo_metrics

__all__ = ["get_dynamo_metrics", "neuron_backend", "reset_dynamo_metrics"]
