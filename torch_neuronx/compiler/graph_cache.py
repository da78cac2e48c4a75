"""Compiled graphs that outlive the process: AOTAutograd's cache, holding neuron's programs.

Most of a first call's compile time is Dynamo tracing the Python and AOTAutograd tracing the
result into ATen graphs (for SmolLM2's decode step about 4.4 s and 3.6 s). The second part is
what this module saves across processes: AOTAutograd's cache keys an entry by the Dynamo
graph, its input signature, the torch version and its configs, and stores the forward and
backward graphs with the runtime wrappers around them. Its entries hold an `OutputCode`; ours,
`CompiledGraph`, holds a `Program`: the graph as it runs after neuron's passes, which is the
Python source FX generated for it, the objects that source names (ATen ops, Tensor methods,
and the launches of fused kernels, kept as the kernels' specs), the constants the passes
folded and which inputs the graph writes. A hit executes that source and loads the kernels
from their own cache (TORCH_NEURONX_NEFF_CACHE_DIR; a kernel missing there is built again):
it neither unpickles an FX graph nor runs the passes again, which took 1.0-1.3 s of
SmolLM2's warm start.

Entries live under `<cache_dir()>/aotautograd/<tag>/`, apart from Inductor's: the key does
not name the backend. The tag hashes what a program depends on beyond the key: the
decompositions neuron asks for, the compiler's own Python sources (the passes that made it)
and the C graph compiler's op numbers (in the kernels' specs). torch's switches apply:
TORCHINDUCTOR_AUTOGRAD_CACHE=0 or `torch.compiler.config.force_disable_caches` turn the
cache off. A graph that names something that does not pickle, or that fell back to the eager
kernels, is not stored.
"""
import contextlib
import dataclasses
import functools
import hashlib
import importlib
import linecache
import operator
import os
import pickle
import time
import types
from unittest import mock

import torch
from torch._inductor.output_code import OutputCode


class CompiledGraph(OutputCode):
    """One forward, backward or inference graph, ready to run, that pickles as its Program."""

    def __init__(self, gm, kind):
        from .backend import build

        super().__init__()
        self.kind = kind
        self._boxed_call = True
        self._fn, program = build(gm, kind)
        self._program = _dumps(program) if program is not None and enabled() else None
        self._keep_plan()

    def __call__(self, inputs):
        return self._fn(inputs)

    def prepare_for_serialization(self):
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        if self._program is None:
            raise BypassAOTAutogradCache("the graph fell back to the eager kernels or names "
                                         "objects that do not pickle")
        self._fn = None

    def post_compile(self, example_inputs, constants, graph_kwargs):
        if self._fn is not None:
            return
        from .backend import _count

        self._fn = pickle.loads(self._program).load()
        self._keep_plan()
        _count("graph_cache_hits")

    def _keep_plan(self):
        """A graph in the cache keeps its replay plan beside it (replay.py)."""
        from .backend import cache_dir
        from .replay import plan_path

        if self._program is not None and hasattr(self._fn, "plan"):
            self._fn.plan = plan_path(cache_dir(), self._program)

    def set_triton_bundle(self, triton_bundle):
        pass

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fn"] = None
        return state


def _dumps(program):
    try:
        return pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - such a graph is simply not cached
        return None


@dataclasses.dataclass
class Program:
    """A compiled graph as the cache keeps it (see the module docstring)."""
    kind: str
    source: str     # FX's Python code for the graph: `def forward(self, <inputs>)`
    names: dict     # global name in source -> ("module", name) | ("kernel", spec, device) | ("value", object)
    constants: dict  # attribute of `self` -> (tensor on the CPU, device)
    stats: dict     # what the passes did (backend.get_dynamo_metrics), counted again on a hit

    @classmethod
    def of(cls, gm, kind, stats):
        """The Program of a compiled GraphModule; None when it reads a constant that is not
        a tensor attribute (a subgraph of a higher-order op)."""
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        source = gm.code  # first: a lazy GraphModule generates its code (and forward) here
        names = {}
        for name, value in type(gm).forward.__globals__.items():
            if name == "__builtins__":
                continue
            if isinstance(value, types.ModuleType):
                names[name] = ("module", value.__name__)
            elif hasattr(value, "kernel_spec"):  # fusion.launcher
                names[name] = ("kernel", value.kernel_spec, str(value.device))
            else:
                names[name] = ("value", value)
        constants = {}
        for node in gm.graph.nodes:
            if node.op != "get_attr":
                continue
            value = operator.attrgetter(node.target)(gm)
            if "." in node.target or not isinstance(value, torch.Tensor):
                return None
            with unset_fake_temporarily():  # the backend runs in AOTAutograd's fake mode
                constants[node.target] = (value.detach().cpu(), str(value.device))
        return cls(kind, source, names, constants, dict(stats))

    def load(self):
        """The callable that runs the program (backend.runner), its kernels loaded."""
        from .backend import _debug_dir, cache_dir, count_compilation, runner
        from .fusion import _spec_key, build_kernels, count_kernel, kernel, launcher

        start = time.perf_counter()
        root, debug = cache_dir(), _debug_dir()
        specs = {_spec_key(ref[1]): ref[1] for ref in self.names.values() if ref[0] == "kernel"}
        prebuilt = build_kernels(specs, root, debug)
        stats = dict(self.stats, kernel_builds=0, kernel_cache_hits=0)
        counted = set()
        env = {}
        for name, ref in self.names.items():
            if ref[0] == "module":
                env[name] = importlib.import_module(ref[1])
            elif ref[0] == "kernel":
                k = kernel(ref[1], root, debug, prebuilt)
                count_kernel(k, counted, stats)
                env[name] = launcher(k, ref[1], torch.device(ref[2]))
            else:
                env[name] = ref[1]
        # a file name of its own, so that tracebacks and debuggers show the graph's lines
        filename = f"<neuron {self.kind} graph {hashlib.sha256(self.source.encode()).hexdigest()[:16]}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        exec(compile(self.source, filename, "exec"), env)  # noqa: S102 - code FX generated, from our cache
        attrs = types.SimpleNamespace(**{name: t.to(device) for name, (t, device) in self.constants.items()})
        if debug:
            os.makedirs(debug, exist_ok=True)
            with open(os.path.join(debug, filename[1:-1].replace(" ", "_") + ".py"), "w") as f:
                f.write(self.source)
        count_compilation(start, stats, self.kind, cached=True)
        return runner(functools.partial(env["forward"], attrs), list(vars(attrs).values()))


def enabled():
    from torch._functorch._aot_autograd.autograd_cache import should_use_local_autograd_cache

    return should_use_local_autograd_cache() and torch._inductor.config.fx_graph_cache


# Bumped when what an entry holds changes meaning.
FORMAT = 4


@functools.lru_cache(maxsize=None)
def _compiler_tag():
    """The compiler's Python sources and the C graph compiler's op numbers, hashed."""
    from .. import _C

    h = hashlib.sha256(repr(sorted(_C.graph_ops.items())).encode())
    folder = os.path.dirname(__file__)
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


def directory(root, decompositions):
    names = [f"format {FORMAT}", _compiler_tag()] + sorted(str(op) for op in decompositions)
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
