"""torch.compile(backend="neuron").

The backend is registered through the `torch_dynamo_backends` entry point, so
`torch.compile(model, backend="neuron")` finds it without importing anything, and so does
Transformers, which compiles `generate()` with a static cache on a `neuron` device with
`CompileConfig(backend="neuron", dynamic=False)`.

Pipeline: Dynamo captures the graph; AOTAutograd turns it into functional ATen forward and
backward graphs (backend.py); fusion.py finds the chains of pointwise ops in them and hands
each chain to the graph compiler in C (include/tn/graph.h, src/graph/), which generates a
kernel, builds it with the system C compiler for this CPU and keeps it in the on-disk cache
(TORCH_NEURONX_NEFF_CACHE_DIR); the other nodes (matrix products, attention, reductions,
views) stay calls of neuron's native kernels. Shapes are static, as on the hardware: symbolic
shapes (`dynamic=True`) are refused with a message saying what to do.
"""
from . import rng_ops  # noqa: F401  (the RNG higher-order ops on neuron)
from .backend import cache_dir, get_dynamo_metrics, neuron_backend, reset_dynamo_metrics

__all__ = ["cache_dir", "get_dynamo_metrics", "neuron_backend", "reset_dynamo_metrics"]
