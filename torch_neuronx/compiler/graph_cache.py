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
import dataclasses
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
        from .backend import _count, build

        self._fn = build(_unpickle(self._pickled), self.kind)
        _count("graph_cache_hits")

    def set_triton_bundle(self, triton_bundle):
        pass

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fn"] = None
        return state


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """What the passes read of a node's value (a fake tensor), kept in its place in the pickle.
    A fake tensor rebuilt from it costs about 11 us; pickled whole, it goes back through
    FakeTensorMode's conversion of a real tensor, several times slower."""
    shape: tuple
    stride: tuple
    offset: int
    dtype: torch.dtype
    device: torch.device


def _map(fn, kind, value):
    """fn applied to every `kind` in a node's value (a tensor, or a tuple or list of values)."""
    if isinstance(value, kind):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map(fn, kind, v) for v in value)
    return value


def _spec(t):
    return TensorSpec(tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.device)


def _pickle(gm):
    """The graph as bytes, each node's value as TensorSpecs; None when the graph holds something
    that does not pickle."""
    if not enabled():
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.fx._graph_pickler import GraphPickler, Options

    vals = {node: node.meta["val"] for node in gm.graph.nodes if "val" in node.meta}
    try:
        for node, val in vals.items():
            node.meta["val"] = _map(_spec, torch.Tensor, val)
        with unset_fake_temporarily():  # constants in the graph are real tensors
            options = Options(ops_filter=None, node_metadata_key_filter=lambda key: key == "val")
            return GraphPickler.dumps(gm, options)
    except Exception:  # noqa: BLE001 - such a graph is simply not cached
        return None
    finally:
        for node, val in vals.items():
            node.meta["val"] = val


def _unpickle(data):
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler

    mode = FakeTensorMode()

    def fake(spec):
        meta = torch.empty_strided(spec.shape, spec.stride, dtype=spec.dtype, device="meta")
        if spec.offset:
            meta = meta.as_strided(spec.shape, spec.stride, spec.offset)
        return FakeTensor(mode, meta, spec.device)

    gm = GraphPickler.loads(data, mode)
    for node in gm.graph.nodes:
        if "val" in node.meta:
            node.meta["val"] = _map(fake, TensorSpec, node.meta["val"])
    return gm


def enabled():
    from torch._functorch._aot_autograd.autograd_cache import should_use_local_autograd_cache

    return should_use_local_autograd_cache() and torch._inductor.config.fx_graph_cache


# Bumped when what an entry holds changes meaning (the graph before which passes).
FORMAT = 3


def directory(root, decompositions):
    names = [f"format {FORMAT}"] + sorted(str(op) for op in decompositions)
    tag = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    return os.path.join(root, "aotautograd", tag)


@contextlib.contextmanager
def active(path):
    """While the backend runs AOTAutograd: entries are bundled (they hold CompiledGraph) and
    live under `path`; backward graphs compile with their forward, so that both are saved.
    The key's hash of Inductor's settings does not register Inductor's code generators first
    (imports that cost 0.5 s and that neuron never uses; their custom passes, none by default,
    are what it hashes). Dynamo compiles one frame at a time (its compile lock), so these
    patches are not seen by other compilations."""
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor import codecache

    with torch._functorch.config.patch(bundled_autograd_cache=True,
                                       force_non_lazy_backward_lowering=True), \
            mock.patch.object(AOTAutogradCache, "_get_tmp_dir", classmethod(lambda cls: path)), \
            mock.patch.object(codecache, "init_backend_registration", lambda: None):
        yield
