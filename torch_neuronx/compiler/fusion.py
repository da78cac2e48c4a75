"""Fusing pointwise chains of an ATen FX graph into kernels built by the C graph compiler.

Regions are formed in one pass over the nodes in order: a pointwise node (an op of LOWERING on
float32/bfloat16/float16 tensors) joins the open region when its result has the region's
shape, else it opens a new one; a node outside the region that reads one of its values closes
it. A sum or mean over the last dimension with keepdim (the mean of an RMS norm) joins the
region that iterates over its input's shape: its value is one per row (a "row value"), and
pointwise nodes of shape (..., 1) computed from row values join as row values too, so
`x * rsqrt(mean(x * x, -1, keepdim=True) + eps) * w` is one region (one kernel, two passes
over each row). Nodes that do not read the region may sit between its members, so every input of a
member comes before the region's last member and every outside reader after it: the kernel
launch goes right after the last member. Values the rest of the graph reads become the
region's outputs. A detach of a member (AOTAutograd detaches the values it saves for
backward) does not close the region: it moves after the launch. Every other node (matrix
products, attention, reductions, views, copies) stays an ATen call on neuron's native
kernels. A region of a single op is left as that op: the eager kernel is the same loop.
"""
import operator
import os
from concurrent.futures import ThreadPoolExecutor

import torch
from torch.fx import GraphModule, Node

from .. import _C

aten = torch.ops.aten
FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _unary(name):
    return lambda args, kwargs: (name, [args[0]])


def _binary(name, swap=False):
    def lower(args, kwargs):
        a, b = args[0], args[1]
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        if alpha != 1:
            if isinstance(b, Node):
                return None  # b * alpha needs its own node: left to the eager kernel
            b = b * alpha
        return (name, [b, a] if swap else [a, b])
    return lower


def _pow(args, kwargs):
    return ("pow", [args[0], args[1]]) if isinstance(args[0], Node) else None


def _gelu(args, kwargs):
    approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    return ("gelu_tanh" if approximate == "tanh" else "gelu", [args[0]])


def _where(args, kwargs):
    return ("where", [args[0], args[1], args[2]])


def _cast(args, kwargs):
    dtype = kwargs.get("dtype")
    if dtype in (None, torch.float32):
        return ("identity", [args[0]])  # values are float32 inside a region already
    if dtype in (torch.bfloat16, torch.float16) and kwargs.get("memory_format") in (None, torch.preserve_format):
        return ("round", [args[0]], dtype)
    return None


# aten op -> lowering(args, kwargs) -> (region op, operands[, dtype]) or None (not fused)
LOWERING = {
    aten.neg.default: _unary("neg"), aten.abs.default: _unary("abs"), aten.exp.default: _unary("exp"),
    aten.log.default: _unary("log"), aten.sqrt.default: _unary("sqrt"), aten.rsqrt.default: _unary("rsqrt"),
    aten.reciprocal.default: _unary("reciprocal"), aten.sigmoid.default: _unary("sigmoid"),
    aten.silu.default: _unary("silu"), aten.tanh.default: _unary("tanh"), aten.relu.default: _unary("relu"),
    aten.sin.default: _unary("sin"), aten.cos.default: _unary("cos"), aten.gelu.default: _gelu,
    aten.add.Tensor: _binary("add"), aten.add.Scalar: _binary("add"),
    aten.sub.Tensor: _binary("sub"), aten.sub.Scalar: _binary("sub"),
    aten.rsub.Scalar: _binary("sub", swap=True), aten.rsub.Tensor: _binary("sub", swap=True),
    aten.mul.Tensor: _binary("mul"), aten.mul.Scalar: _binary("mul"),
    aten.div.Tensor: _binary("div"), aten.div.Scalar: _binary("div"),
    aten.maximum.default: _binary("max"), aten.minimum.default: _binary("min"),
    aten.pow.Tensor_Scalar: _pow, aten.pow.Tensor_Tensor: _pow,
    aten.where.self: _where, aten._to_copy.default: _cast,
}


def _row_reduction(node):
    """(op, [x], None, scale) for a float sum / mean over the last dimension with keepdim."""
    if node.op != "call_function" or node.target not in (aten.mean.dim, aten.sum.dim_IntList):
        return None
    args = list(node.args) + [None] * 3
    dims = args[1] if args[1] is not None else node.kwargs.get("dim")
    keepdim = args[2] if args[2] is not None else node.kwargs.get("keepdim", False)
    x, xv, out = args[0], _val(args[0]), _val(node)
    if node.kwargs.get("dtype") is not None or not keepdim or not isinstance(xv, torch.Tensor) \
            or not isinstance(out, torch.Tensor) or xv.dim() == 0 or xv.dtype not in FLOATS \
            or out.dtype != xv.dtype or xv.device.type != "neuron" or xv.shape[-1] < 2:
        return None
    if not isinstance(dims, (list, tuple)) or len(dims) != 1 or dims[0] not in (-1, xv.dim() - 1):
        return None
    scale = 1.0 / xv.shape[-1] if node.target == aten.mean.dim else 1.0
    return ("row_sum", [x], None, scale)


def _val(node):
    return node.meta.get("val") if isinstance(node, Node) else None


def _lower(node):
    """(op, operands[, dtype]) when `node` can join a region, else None."""
    if node.op != "call_function" or node.target not in LOWERING:
        return None
    out = _val(node)
    if not isinstance(out, torch.Tensor) or out.dtype not in FLOATS or out.numel() == 0 or out.dim() == 0:
        return None
    if out.device.type != "neuron":
        return None
    lowered = LOWERING[node.target](node.args, node.kwargs)
    if lowered is None:
        return None
    for x in lowered[1]:
        v = _val(x)
        if isinstance(x, Node) and not (isinstance(v, torch.Tensor) and v.device == out.device and
                                        (v.dtype in FLOATS or (v.dtype == torch.bool and lowered[0] == "where"))
                                        and _broadcasts(v.shape, out.shape)):
            return None
        if not isinstance(x, (Node, int, float, bool)):
            return None
    return lowered


def _broadcasts(shape, to):
    if len(shape) > len(to):
        return False
    return all(s == t or s == 1 for s, t in zip(reversed(shape), reversed(to)))


def _region_strides(val, shape):
    """The strides of `val` seen over `shape` (0 along broadcast dimensions)."""
    pad = len(shape) - val.dim()
    strides = []
    for d in range(len(shape)):
        k = d - pad
        strides.append(0 if k < 0 or val.shape[k] == 1 and shape[d] != 1 else val.stride()[k])
    return strides


class Region:
    def __init__(self, shape):
        self.shape = tuple(shape)
        self.members = []       # FX nodes, in order
        self.member_set = set()
        self.row_values = set()  # members with one value per row (row sums and what they feed)
        self.detached = []      # detaches of members met inside the region (moved after it)

    def add(self, node, row_value=False):
        self.members.append(node)
        self.member_set.add(node)
        if row_value:
            self.row_values.add(node)

    def reads(self, node):
        return any(a in self.member_set or a in self.detached for a in node.all_input_nodes)

    def row_shape(self):
        return self.shape[:-1] + (1,) if self.shape and self.shape[-1] > 1 else None

    def accepts(self, node, reduction):
        """None if `node` cannot join, else whether it joins as a row value."""
        if reduction:
            return True if tuple(_val(node.args[0]).shape) == self.shape and self.row_shape() else None
        shape = tuple(_val(node).shape)
        if shape == self.shape:
            return False
        inside = [a for a in node.all_input_nodes if a in self.member_set]
        if shape == self.row_shape() and inside and all(a in self.row_values for a in inside):
            return True
        return None


def find_regions(graph):
    regions, open_ = [], None
    for node in graph.nodes:
        reduction = _row_reduction(node) is not None
        if reduction or _lower(node) is not None:
            row_value = open_.accepts(node, reduction) if open_ is not None else None
            if row_value is None:
                if open_ is not None:
                    regions.append(open_)
                open_ = Region(_val(node.args[0]).shape if reduction else _val(node).shape)
                row_value = reduction
            open_.add(node, row_value)
            continue
        if open_ is not None and node.op == "call_function" and node.target == aten.detach.default \
                and node.args[0] in open_.member_set:
            # AOTAutograd detaches the values it saves for backward (a norm's rsqrt): the
            # detach reads the region's output after its launch, and the region stays open
            open_.detached.append(node)
            continue
        if open_ is not None and (open_.reads(node) or node.op == "output"):
            regions.append(open_)
            open_ = None
    if open_ is not None:
        regions.append(open_)
    return regions


def _spec(region):
    """What the C compiler gets for a region (shape, input specs, nodes, output specs), with
    the region's input and output FX nodes."""
    shape = list(region.shape) or [1]
    inputs, input_index, nodes, node_index = [], {}, [], {}
    ops = _C.graph_ops

    def operand(x):
        if isinstance(x, Node):
            if x in node_index:
                return node_index[x]
            if x not in input_index:
                input_index[x] = len(inputs)
                inputs.append(x)
                nodes.append((ops["input"], [input_index[x]], 0.0, None))
                node_index[x] = len(nodes) - 1
            return node_index[x]
        nodes.append((ops["const"], [], float(x), None))
        return len(nodes) - 1

    for member in region.members:
        # lowered again: an earlier region's rewrite may have replaced the member's arguments
        op, args, *extra = _row_reduction(member) or _lower(member)
        refs = [operand(a) for a in args]
        if op == "identity":
            node_index[member] = refs[0]
            continue
        dtype = extra[0] if extra else None
        value = extra[1] if len(extra) > 1 else 0.0
        nodes.append((ops[op], refs, value, dtype))
        node_index[member] = len(nodes) - 1
    outputs = [m for m in region.members if any(u not in region.member_set for u in m.users)]

    in_specs = [(_val(x).dtype, list(_val(x).shape), list(_val(x).stride()), _region_strides(_val(x), region.shape))
                for x in inputs]
    out_specs = []
    for m in outputs:  # laid out as traced: later views rely on the strides
        v = _val(m)
        out_specs.append((v.dtype, list(v.shape), list(v.stride()), _region_strides(v, region.shape),
                          node_index[m]))
    return (shape, in_specs, nodes, out_specs), inputs, outputs


def _spec_key(spec):
    return repr(spec)  # lists, numbers and dtypes: equal specs give equal text


def _fused(graph):
    """The regions fuse() turns into kernels: two ops or more, and a value read outside."""
    for region in find_regions(graph):
        members = region.member_set
        if len(region.members) >= 2 and any(u not in members for m in region.members for u in m.users):
            yield region


def _build_workers():
    """TORCH_NEURONX_COMPILE_WORKERS: kernels built at once (default: one per CPU)."""
    value = os.environ.get("TORCH_NEURONX_COMPILE_WORKERS", "")
    try:
        return max(1, int(value)) if value else (os.cpu_count() or 1)
    except ValueError:
        raise ValueError(f"TORCH_NEURONX_COMPILE_WORKERS={value!r}: expected a whole number of "
                         "parallel kernel builds, such as 1 or 4") from None


def build_kernels(specs, cache_dir, debug_dir):
    """{key: spec} -> {key: kernel}, built (or loaded from the kernel cache) a few at a time on
    threads: the C compiler runs in its own process, and a graph's new kernels are otherwise
    built one after another. A spec whose build fails is left out (the caller builds it again
    alone, which raises the error)."""
    workers = _build_workers()
    if workers < 2 or len(specs) < 2:
        return {}

    def build(spec):
        try:
            return _C.FusedKernel(*spec, cache_dir, debug_dir or "")
        except Exception:  # noqa: BLE001 - built again by the caller, which reports the error
            return None

    with ThreadPoolExecutor(max_workers=min(len(specs), workers)) as pool:
        kernels = dict(zip(specs, pool.map(build, specs.values())))
    return {key: k for key, k in kernels.items() if k is not None}


def kernel(spec, cache_dir, debug_dir, prebuilt):
    """The kernel of `spec`: from `prebuilt` (build_kernels) when it is there, else built now."""
    return prebuilt.get(_spec_key(spec)) or _C.FusedKernel(*spec, cache_dir, debug_dir or "")


def _prebuild(regions, cache_dir, debug_dir):
    """The kernels of `regions`, keyed by spec (build_kernels)."""
    if _build_workers() < 2:
        return {}
    specs = {}
    for region in regions:
        spec = _spec(region)[0]
        specs.setdefault(_spec_key(spec), spec)
    return build_kernels(specs, cache_dir, debug_dir)


def _build(region, cache_dir, debug_dir, prebuilt):
    """The kernel of a region, its spec, its input nodes and its output nodes. The spec is
    taken again here: earlier regions' rewrites replaced some of the input nodes, though not
    what the kernel is built from."""
    spec, inputs, outputs = _spec(region)
    try:
        built = kernel(spec, cache_dir, debug_dir, prebuilt)
    except Exception as e:
        raise RuntimeError(f"{_describe(region.members)}: {e}") from e
    return built, spec, inputs, outputs


def _describe(members):
    """The nodes of a region, for an error: their names and ops, and the user's line that
    produced the first."""
    nodes = ", ".join(f"{m.name} ({m.target})" for m in members[:8]) + (", ..." if len(members) > 8 else "")
    where = (members[0].meta.get("stack_trace") or "").strip().splitlines()[-2:]
    line = " at " + " ".join(w.strip() for w in where) if where else ""
    return f"the fused region of nodes {nodes}{line}"


def launcher(kernel, spec, device):
    """The graph's call of a kernel: allocates the outputs and launches it; an input laid out
    otherwise than traced is copied first. It keeps the spec and the device, which is what
    a cached graph stores of it (graph_cache.py)."""
    _, in_specs, _, out_specs = spec
    strides = [tuple(stride) for _, _, stride, _ in in_specs]
    outs_spec = [(tuple(size), tuple(stride), dtype) for dtype, size, stride, _, _ in out_specs]

    def run(*inputs):
        inputs = list(inputs)
        for i, want in enumerate(strides):
            if inputs[i].stride() != want and inputs[i].numel() > 1:
                dtype, size = in_specs[i][0], in_specs[i][1]
                inputs[i] = torch.empty_strided(size, want, dtype=dtype, device=device).copy_(inputs[i])
        outs = [torch.empty_strided(size, stride, dtype=dtype, device=device)
                for size, stride, dtype in outs_spec]
        kernel.launch(inputs, outs)
        return outs

    run.__name__ = run.__qualname__ = f"fused_{kernel.key}"
    run.kernel, run.kernel_spec, run.device = kernel, spec, device
    return run


def fuse(gm: GraphModule, cache_dir, debug_dir, stats):
    """Rewrites gm in place: every region of two or more ops becomes one kernel launch."""
    graph = gm.graph
    regions = list(_fused(graph))
    prebuilt = _prebuild(regions, cache_dir, debug_dir)
    counted = set()
    for region in regions:
        members = region.member_set
        built_kernel, spec, inputs, outputs = _build(region, cache_dir, debug_dir, prebuilt)
        stats["fused_regions"] += 1
        stats["fused_row_sums"] += sum(_row_reduction(m) is not None for m in region.members)
        count_kernel(built_kernel, counted, stats)
        device = _val(outputs[0]).device
        with graph.inserting_after(region.members[-1]):
            call = graph.call_function(launcher(built_kernel, spec, device), tuple(inputs))
        with graph.inserting_after(call):
            items = [graph.call_function(operator.getitem, (call, i)) for i in range(len(outputs))]
        for m, item in zip(outputs, items):
            item.meta["val"] = m.meta.get("val")
            m.replace_all_uses_with(item, delete_user_cb=lambda user: user is not call and user not in members)
        last = call  # the getitems follow the call (in reverse order of creation)
        while last.next in items:
            last = last.next
        for node in reversed(region.detached):  # each now reads an output: after the launch
            last.append(node)
        for m in reversed(region.members):
            graph.erase_node(m)
    return gm


def count_kernel(kernel, counted, stats):
    """A region's kernel in stats: a build, or a hit of the kernel cache (or of a kernel an
    earlier region of the graph built: `counted` holds the keys seen)."""
    built = not kernel.cache_hit and kernel.key not in counted
    counted.add(kernel.key)
    stats["kernel_builds" if built else "kernel_cache_hits"] += 1


_INPLACE = {aten.index_copy.default: aten.index_copy_.default,
            aten.index_put.default: aten.index_put_.default}


def reinplace_input_updates(gm: GraphModule):
    """`x2 = index_copy(x, ...)` followed by `copy_(x, x2)`, x a graph input (a static cache
    written at one position): the update happens in x itself, as eager code does, instead of
    copying the whole buffer twice. Sound when nothing reads the old x after the update."""
    graph = gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    changed = 0
    for node in list(graph.nodes):
        inplace = _INPLACE.get(node.target) if node.op == "call_function" else None
        if inplace is None:
            continue
        x = node.args[0]
        if not isinstance(x, Node) or x.op != "placeholder":
            continue
        copies = [u for u in x.users if u.op == "call_function" and u.target == aten.copy_.default
                  and u.args[0] is x and u.args[1] is node]
        others = [u for u in x.users if u is not node and u not in copies]
        if len(copies) != 1 or any(order[u] > order[node] for u in others):
            continue
        with graph.inserting_before(node):
            new = graph.call_function(inplace, node.args, node.kwargs)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        copy = copies[0]
        copy.replace_all_uses_with(x)
        graph.erase_node(copy)
        graph.erase_node(node)
        changed += 1
    return changed
