"""Compiled graphs that outlive the process: AOTAutograd's cache, holding neuron's graphs.

Most of a first call's compile time is Dynamo tracing the Python and AOTAutograd tracing the
result into ATen graphs (for SmolLM2's decode step about 4.4 s and 3.6 s; neuron's own passes
take 0.3 s). The second part is what this module saves across processes: AOTAutograd's cache
keys an entry by the Dynamo graph, its input signature, the torch version and its configs, and
stores the forward/backward ATen graphs with the runtime wrappers around them. Its entries
hold an `OutputCode`; ours, `CompiledGraph`, keeps the ATen graph as AOTAutograd produced it
(before neuron's passes, which change it in place) and runs the passes again on a hit. The
generated kernels come from their own cache (TORCH_NEURONX_NEFF_CACHE_DIR), so a hit compiles
nothing.

Entries live under `<cache_dir()>/aotautograd/<decompositions>/`, apart from Inductor's: the
key does not name the backend, and the graphs depend on the decompositions the backend asked
for. torch's switches apply: TORCHINDUCTOR_AUTOGRAD_CACHE=0 or
`torch.compiler.config.force_disable_caches` turn the cache off.
"""
import contextlib
import hashlib
import os
from unittest import mock

import torch
from torch._inductor.output_code import OutputCode


class CompiledGraph(OutputCode):
    """One forward, backward or inference graph, ready to run, that pickles as its ATen graph."""

    def __init__(self, gm, kind):
        from .backend import build

        super().__init__()
        self.kind = kind
        self._boxed_call = True
        self._pickled = _pickle(gm)
        self._fn = build(gm, kind)

    def __call__(self, inputs):
        return self._fn(inputs)

    def prepare_for_serialization(self):
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        if self._pickled is None:
            raise BypassAOTAutogradCache("the graph has values that do not pickle")
        self._fn = None

    def post_compile(self, example_inputs, constants, graph_kwargs):
        if self._fn is not None:
            return
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler

        from .backend import _count, build

        gm = GraphPickler.loads(self._pickled, FakeTensorMode())
        self._fn = build(gm, self.kind)
        _count("graph_cache_hits")

    def set_triton_bundle(self, triton_bundle):
        pass

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fn"] = None
        return state


def _pickle(gm):
    """The graph as bytes (fake tensors in its metadata included), or None when it holds
    something that does not pickle (an op that is neither ATen nor registered by name)."""
    if not enabled():
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.fx._graph_pickler import GraphPickler, Options

    try:
        with unset_fake_temporarily():  # constants in the graph are real tensors
            # The passes read only each node's value (a fake tensor): its shape, strides and dtype.
            return GraphPickler.dumps(gm, Options(ops_filter=None,
                                                  node_metadata_key_filter=lambda key: key == "val"))
    except Exception:  # noqa: BLE001 - such a graph is simply not cached
        return None


def enabled():
    from torch._functorch._aot_autograd.autograd_cache import should_use_local_autograd_cache

    return should_use_local_autograd_cache() and torch._inductor.config.fx_graph_cache


# Bumped when what an entry holds changes meaning (the graph before which passes).
FORMAT = 1


def directory(root, decompositions):
    names = [f"format {FORMAT}"] + sorted(str(op) for op in decompositions)
    tag = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    return os.path.join(root, "aotautograd", tag)


@contextlib.contextmanager
def active(path):
    """While the backend runs AOTAutograd: entries are bundled (they hold CompiledGraph) and
    live under `path`; backward graphs compile with their forward, so that both are saved.
    Dynamo compiles one frame at a time (its compile lock), so the patch is not seen by others."""
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache

    with torch._functorch.config.patch(bundled_autograd_cache=True,
                                       force_non_lazy_backward_lowering=True), \
            mock.patch.object(AOTAutogradCache, "_get_tmp_dir", classmethod(lambda cls: path)):
        yield
