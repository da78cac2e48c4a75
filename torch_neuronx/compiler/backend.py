"""The `neuron` Dynamo backend (see the package docstring) and its counters."""
import logging
import operator
import os
import threading
import time

import torch

_lock = threading.Lock()
_COUNTERS = ("graphs", "graph_nodes", "compilations", "fused_regions", "fused_row_sums", "kernel_builds",
             "kernel_cache_hits", "inplace_updates", "shared_nodes", "folded_constants", "restored_upsamples", "grouped_attention",
             "fast_calls", "fallbacks", "recordings", "packed_weights", "replays", "replay_refusals", "plans_saved",
             "plans_loaded", "graph_cache_hits", "compile_seconds")
_metrics = dict.fromkeys(_COUNTERS, 0)

# One line per compiled graph on stderr: which graph, how long, and whether it was compiled or
# came from the caches. TORCH_NEURONX_COMPILE_LOG=0 silences it; so does the usual
# logging.getLogger("torch_neuronx.compile").setLevel(logging.WARNING).
log = logging.getLogger("torch_neuronx.compile")
if not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("[torch_neuronx] %(message)s"))
    log.addHandler(_handler)
    log.propagate = False
log.setLevel(logging.INFO if os.environ.get("TORCH_NEURONX_COMPILE_LOG", "1") != "0" else logging.WARNING)
# When the backend got the Dynamo graph now being compiled: the first graph compiled under it
# reports the time since then, AOTAutograd's tracing and cache lookup included.
_started = threading.local()


def get_dynamo_metrics():
    """{counter: value}:
    - graphs / graph_nodes: graphs Dynamo handed the backend (each new shape or guard failure
      brings one) and their FX nodes;
    - compilations: forward and backward graphs compiled (AOTAutograd splits a graph that
      needs gradients into both);
    - fused_regions: pointwise regions turned into generated kernels; fused_row_sums: sums and
      means over the last dimension computed inside those kernels; kernel_builds and
      kernel_cache_hits: how many of those the C compiler built, or were found on disk;
    - inplace_updates: updates of a graph input (a static cache) made in place rather than
      by copying the whole input;
    - shared_nodes: nodes dropped because an equal pure node computes the same value;
      folded_constants: values that read no graph input, computed once at compile time;
      grouped_attention: attention calls that read shared key/value heads instead of
      repeated copies; fast_calls: ATen calls made through their Tensor method or torch function (see
      compiler/passes.py);
    - fallbacks: graphs whose compilation failed and that run on the eager kernels instead
      (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0);
    - recordings, replays, replay_refusals: graphs (inference, forward and backward) whose
      launches were recorded, calls that replayed a recording as one launch, and graphs that
      stopped recording (work that cannot replay; see compiler/replay.py);
    - plans_saved, plans_loaded: recordings kept in the graph cache as plans, and plans a new
      process loaded there and replayed from its first call instead of recording;
    - graph_cache_hits: forward, backward and inference graphs that came back from
      AOTAutograd's cache on disk instead of being traced (compiler/graph_cache.py);
    - compile_seconds: time spent compiling;
    - graph_breaks and recompiles: Dynamo's own counts for this process."""
    with _lock:
        out = dict(_metrics)
    from torch._dynamo.utils import counters
    out["graph_breaks"] = sum(counters["graph_break"].values())
    out["recompiles"] = sum(counters["recompiles"].values())
    return out


def reset_dynamo_metrics():
    with _lock:
        for key in _metrics:
            _metrics[key] = 0
    from torch._dynamo.utils import counters
    counters["graph_break"].clear()
    counters["recompiles"].clear()


def _count(key, n=1):
    with _lock:
        _metrics[key] += n


def _symbolic(value):
    if isinstance(value, torch.SymInt):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
    return False


def cache_dir():
    """Where generated kernels are kept: TORCH_NEURONX_NEFF_CACHE_DIR, else `neff` under the
    user's cache (TORCH_NEURONX_CACHE_DIR, ~/.cache/torch_neuronx)."""
    explicit = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    if explicit:
        return explicit
    from ..models.smollm2 import cache_dir as user_cache
    return os.path.join(str(user_cache()), "neff")


def _debug_dir():
    if os.environ.get("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "0") != "1":
        return None
    return os.environ.get("TORCH_NEURONX_DEBUG_DIR") or os.path.join(cache_dir(), "debug")


def _fallback_allowed():
    return os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "1") == "0"


_graph_ids = iter(range(1 << 62))


def _compile_graph(gm, kind):
    """AOTAutograd's forward or backward graph -> the same graph with fused regions, and the
    counts of what the passes did (None when compilation failed and the graph runs on the
    eager kernels instead)."""
    from .fusion import fuse, reinplace_input_updates
    from .passes import (attend_grouped_heads, bind_fast_calls, fold_constants, restore_nearest_upsampling,
                         share_common_subexpressions)

    start = time.perf_counter()
    debug = _debug_dir()
    name = f"graph{next(_graph_ids)}_{kind}"
    if debug:
        os.makedirs(debug, exist_ok=True)
        with open(os.path.join(debug, name + ".fx.txt"), "w") as f:
            f.write(gm.print_readable(print_output=False))
    stats = dict(fused_regions=0, fused_row_sums=0, kernel_builds=0, kernel_cache_hits=0, inplace_updates=0,
                 nodes=len(gm.graph.nodes))
    try:
        stats["inplace_updates"] = reinplace_input_updates(gm)
        stats["shared_nodes"] = share_common_subexpressions(gm)
        stats["folded_constants"] = fold_constants(gm)
        stats["restored_upsamples"] = restore_nearest_upsampling(gm)
        stats["grouped_attention"] = attend_grouped_heads(gm)
        fuse(gm, cache_dir(), debug, stats)
        stats["fast_calls"] = bind_fast_calls(gm)
        gm.graph.lint()
    except Exception as e:  # noqa: BLE001 - reported or turned into eager execution below
        if not _fallback_allowed():
            raise RuntimeError(
                f"torch.compile(backend='neuron') could not compile the {kind} graph {name}: {e}\n"
                "Set TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 to run such graphs on the eager "
                "kernels instead.") from e
        _count("fallbacks")
        stats = None
    else:
        if debug:
            with open(os.path.join(debug, name + ".fused.txt"), "w") as f:
                f.write(gm.print_readable(print_output=False))
    gm.recompile()  # once, after every pass (each leaves the code to regenerate)
    count_compilation(start, stats, kind)
    return gm, stats


def count_compilation(start, stats, kind, cached=False):
    """One `kind` graph compiled (or, `cached`, loaded from the graph cache) since `start`, and
    what its passes did; reported on the compile log."""
    end = time.perf_counter()
    for key, n in (stats or {}).items():
        if key in _metrics:
            _count(key, n)
    _count("compilations")
    _count("compile_seconds", end - start)
    since = getattr(_started, "at", None)
    _started.at = None
    if since is not None and since < start:
        start = since  # the first graph of a Dynamo graph: AOTAutograd's work is part of its wait
    if log.isEnabledFor(logging.INFO):
        log.info(describe_compilation(kind, stats, end - start, cached))


def describe_compilation(kind, stats, seconds, cached):
    """'compiled forward graph (212 nodes; 9 fused kernels: 7 built, 2 from the kernel cache) in 3.21 s'."""
    if stats is None:
        return f"{kind} graph could not be compiled and runs on the eager kernels ({seconds:.2f} s)"
    built, hits = stats.get("kernel_builds", 0), stats.get("kernel_cache_hits", 0)
    kernels = f"{built + hits} fused kernel{'s' if built + hits != 1 else ''}"
    if built + hits:
        kernels += ": " + ", ".join(part for part in (f"{built} built" if built else "",
                                                      f"{hits} from the kernel cache" if hits else "") if part)
    nodes = f"{stats['nodes']} nodes; " if "nodes" in stats else ""
    verb = "loaded" if cached else "compiled"
    where = " from the graph cache" if cached else ""
    return f"{verb} {kind} graph{where} ({nodes}{kernels}) in {seconds:.2f} s"


def runner(forward, constants=()):
    """The boxed callable AOTAutograd gets for a graph's forward function (which takes the
    inputs as arguments; `constants` are the values it reads besides them, of which the neuron
    tensors matter to a replay): it replays
    the graph's launches from its third call on (replay.py)."""
    from torch._functorch.aot_autograd import make_boxed_func

    from .replay import Replayer

    return Replayer(make_boxed_func(forward), _count, constants)


def build(gm, kind):
    """An ATen graph -> the callable that runs it (fused), and what the cache keeps of it
    (graph_cache.Program; None when the graph fell back to the eager kernels)."""
    from .graph_cache import Program

    gm, stats = _compile_graph(gm, kind)
    program = Program.of(gm, kind, stats) if stats is not None else None
    constants = [operator.attrgetter(n.target)(gm) for n in gm.graph.nodes if n.op == "get_attr"]
    return runner(gm.forward, constants), program


def _compiler(kind):
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    from .graph_cache import CompiledGraph

    return SerializableAOTDispatchCompiler(CompiledGraph, lambda gm, example_inputs: CompiledGraph(gm, kind))


def _decompositions():
    from torch._decomp import get_decompositions
    aten = torch.ops.aten
    # Pointwise backward formulas as pointwise ops, so they fuse with their neighbours.
    return get_decompositions([aten.silu_backward, aten.sigmoid_backward, aten.tanh_backward,
                               aten.rsub])


def neuron_backend(gm, example_inputs, **options):
    """Dynamo backend: AOTAutograd's forward (and backward) ATen graphs, with their pointwise
    chains fused into kernels the C graph compiler generates."""
    if any(_symbolic(x) for x in example_inputs):
        raise RuntimeError(
            "torch.compile(backend='neuron') compiles static shapes only, as the device does: this "
            "graph has symbolic (dynamic) shapes. Pass dynamic=False to torch.compile (or "
            "CompileConfig(dynamic=False) to generate); each new input shape then compiles once.")
    _count("graphs")
    _count("graph_nodes", len(gm.graph.nodes))
    _started.at = time.perf_counter()
    from torch._dynamo.backends.common import aot_autograd

    from . import graph_cache

    # keep_inference_input_mutations: an input the graph updates (a static KV cache) is
    # written by a copy_ inside the graph, where reinplace_input_updates can see it
    # Inference graphs (nothing needs gradients) get their own compiler, so that a graph run
    # with and without gradients compiles once each; every graph replays its launches
    # (compiler/replay.py). AOTAutograd's cache keeps the ATen graphs across processes
    # (compiler/graph_cache.py).
    decompositions = _decompositions()
    backend = aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                           inference_compiler=_compiler("inference"),
                           decompositions=decompositions, keep_inference_input_mutations=True)
    with graph_cache.active(graph_cache.directory(cache_dir(), decompositions)):
        return backend(gm, example_inputs)
