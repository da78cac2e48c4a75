"""Graph passes that cut the host's work per call of a compiled graph.

A decode step of a small language model is a few thousand ATen calls, most of them views, and
on a 2-core machine the host thread that makes them takes compute from the device threads.

- share_common_subexpressions: a pure node computed again with the same arguments (every
  layer rebuilds the same attention mask, for instance) is computed once. A node that reads a
  graph input the graph mutates is only shared with nodes on the same side of the mutation.
- fold_constants: pure nodes that read no graph input (aranges, scalar tensors) are computed
  once at compile time and become constants of the graph, unless the graph returns them.
- attend_grouped_heads: grouped-query attention reads the shared key and value heads
  directly; Transformers' repeat_kv (unsqueeze, expand, clone, view: a copy of the whole KV
  cache per layer and step) is dropped, as the fused kernel maps query head h to kv head
  h / (Hq / Hkv) itself.
- bind_fast_calls: ATen calls whose Tensor method or torch function means the same are made
  through those (Python's argument parser in C++ instead of the boxed operator call: a view
  costs about 1 us instead of 2.6); `slice` becomes `narrow`, its bounds resolved from the
  static shape.

Passes change the graph only; the caller regenerates the module's code once after the last
(`gm.recompile()`, about 0.1 s for a SmolLM2 graph).
"""
import operator

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten
T = torch.Tensor

# ATen overload -> (the same call through a fast binding, keyword arguments it accepts)
FAST = {
    aten.view.default: (T.view, ()),
    aten._unsafe_view.default: (T.view, ()),  # a view of a tensor nothing else aliases
    aten.t.default: (T.t, ()),
    aten.unsqueeze.default: (T.unsqueeze, ()),
    aten.squeeze.dim: (T.squeeze, ()),
    aten.transpose.int: (T.transpose, ()),
    aten.permute.default: (T.permute, ()),
    aten.expand.default: (T.expand, ()),
    aten.mm.default: (torch.mm, ()),
    aten.bmm.default: (torch.bmm, ()),
    aten.mul.Tensor: (torch.mul, ()),
    aten.add.Tensor: (torch.add, ("alpha",)),
    aten.neg.default: (torch.neg, ()),
    aten.cat.default: (torch.cat, ()),
    aten.where.self: (torch.where, ()),
    aten.clone.default: (torch.clone, ("memory_format",)),
    aten.mean.dim: (torch.mean, ("dtype",)),
    aten.index_copy_.default: (T.index_copy_, ()),
    aten.copy_.default: (T.copy_, ()),
}


def _pure(node):
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return all(not a.alias_info or not a.alias_info.is_write for a in target._schema.arguments)


def _key(node):
    def freeze(x):
        if isinstance(x, (list, tuple)):
            return tuple(freeze(y) for y in x)
        if isinstance(x, dict):
            return tuple(sorted((k, freeze(v)) for k, v in x.items()))
        if isinstance(x, (Node, int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                          torch.memory_format)):
            return (type(x), x)
        raise TypeError
    try:
        return (node.target, freeze(node.args), freeze(node.kwargs))
    except TypeError:
        return None


def _written(node):
    """The argument nodes a mutating call writes (all of them when the schema cannot say)."""
    schema, out = node.target._schema, []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            out += value if isinstance(value, (list, tuple)) else [value]
    out = [x for x in out if isinstance(x, Node)]
    return out or node.all_input_nodes


def share_common_subexpressions(gm: GraphModule):
    """Returns how many nodes were replaced by an earlier equal one."""
    graph = gm.graph
    # node -> the graph inputs it reads, directly or not, as a bit set (bit i: placeholder i):
    # a late node of a language model reads hundreds of them (with sets of nodes this pass took
    # 0.21 s of SmolLM2's warm start, 0.08 s with bits)
    inputs = {}
    seen = {}    # key -> node
    shared = 0
    placeholders = 0
    for node in list(graph.nodes):
        if node.op == "placeholder":
            inputs[node] = 1 << placeholders
            placeholders += 1
            continue
        reads = 0
        for a in node.all_input_nodes:
            reads |= inputs.get(a, 0)
        inputs[node] = reads
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
                node.target._schema.is_mutable:
            # values read before this mutation differ from the same reads after it
            written = 0
            for a in _written(node):
                written |= inputs.get(a, 0)
            seen = {k: n for k, n in seen.items() if not (inputs[n] & written)}
            continue
        if not _pure(node):
            continue
        key = _key(node)
        if key is None:
            continue
        if key in seen:
            node.replace_all_uses_with(seen[key])
            graph.erase_node(node)
            shared += 1
        else:
            seen[key] = node
    return shared


# A folded value stays in device memory as long as the graph: larger ones are computed per call.
MAX_FOLDED_BYTES = 1 << 20


def _escapes(node):
    """The node's value, or a view of it, is an output of the graph (the caller may change it)."""
    return any(u.op == "output" or (isinstance(u.target, torch._ops.OpOverload) and u.target.is_view
                                    and _escapes(u)) for u in node.users)


def fold_constants(gm: GraphModule):
    """Pure nodes that read no graph input (aranges, scalar tensors, masks built from them)
    are computed once, here, and read as constants of the graph. Returns how many values
    were folded (the nodes computing them go)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    graph = gm.graph
    values = {}  # constant node -> its value
    for node in graph.nodes:
        if node.op == "get_attr":
            values[node] = operator.attrgetter(node.target)(gm)
        elif _pure(node) and all(a in values for a in node.all_input_nodes):
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor) or val.numel() * val.element_size() > MAX_FOLDED_BYTES:
                continue
            with unset_fake_temporarily(), torch.no_grad():
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
                values[node] = node.target(*args, **kwargs)
    folded = 0
    for node in [n for n in values if n.op == "call_function"]:
        if _escapes(node) or all(u in values for u in node.users):
            continue  # only values that non-constant nodes read become constants
        name = f"_folded{folded}"
        gm.register_buffer(name, values[node], persistent=False)
        with graph.inserting_before(node):
            attr = graph.get_attr(name)
        attr.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(attr, delete_user_cb=lambda user: user not in values)
        folded += 1
    for node in reversed([n for n in values if n.op == "call_function"]):
        if not node.users:
            graph.erase_node(node)
    return folded


def _nearest_gather(gm: GraphModule, node):
    """(output height, output width) when `node` gathers x[:, :, ih, iw] with folded index
    constants that are exactly nearest upsampling's to that size (checked by value), else None."""
    if node.target not in (aten._unsafe_index.Tensor, aten.index.Tensor) or len(node.args) != 2:
        return None
    x, indices = node.args
    val = x.meta.get("val") if isinstance(x, Node) else None
    if not isinstance(val, torch.Tensor) or val.dim() != 4 or len(indices) != 4 or indices[0] is not None \
            or indices[1] is not None or not all(isinstance(i, Node) and i.op == "get_attr" for i in indices[2:]):
        return None
    ih, iw = (operator.attrgetter(i.target)(gm) for i in indices[2:])
    h, w = val.shape[2], val.shape[3]
    if ih.dtype not in (torch.int64, torch.int32) or ih.dim() != 2 or ih.shape[1] != 1 or iw.dim() != 1 \
            or iw.dtype != ih.dtype or h * w >= 1 << 24:
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    out = (ih.shape[0], iw.shape[0])
    with unset_fake_temporarily(), torch.no_grad():
        grid = torch.arange(h * w, dtype=torch.float32).view(1, 1, h, w)
        want = torch.nn.functional.interpolate(grid, size=out, mode="nearest")
        got = grid[:, :, ih.cpu().long(), iw.cpu().long()]
        same = torch.equal(got, want)
    return out if same else None


def restore_nearest_upsampling(gm: GraphModule):
    """AOTAutograd decomposes `upsample_nearest2d` into a gather with computed indices (which
    fold_constants then folds). A gather whose indices are exactly nearest upsampling's becomes
    the upsample again: the native kernel took 5 ms where the gather took 87 ms (a VAE decoder
    at 256 px, bfloat16). Returns how many were restored."""
    restored = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        size = _nearest_gather(gm, node)
        if size is None:
            continue
        with gm.graph.inserting_before(node):
            up = gm.graph.call_function(aten.upsample_nearest2d.default, (node.args[0], list(size)))
        up.meta = dict(node.meta)
        node.replace_all_uses_with(up)
        gm.graph.erase_node(node)
        restored += 1
    if restored:
        gm.graph.eliminate_dead_code()
    return restored


def _repeated_heads(node, heads):
    """x (B, Hkv, S, E) when node is repeat_kv(x) with Hkv * rep == heads, else None."""
    def call(n, *targets):
        return isinstance(n, Node) and n.op == "call_function" and n.target in targets
    if not call(node, aten.view.default, aten._unsafe_view.default) or len(node.users) != 1:
        return None
    clone = node.args[0]
    if not call(clone, aten.clone.default) or len(clone.users) != 1:
        return None
    expand = clone.args[0]
    if not call(expand, aten.expand.default) or len(expand.users) != 1:
        return None
    unsqueeze = expand.args[0]
    if not call(unsqueeze, aten.unsqueeze.default) or unsqueeze.args[1] != 2 or len(unsqueeze.users) != 1:
        return None
    x = unsqueeze.args[0]
    shape = x.meta.get("val").shape if isinstance(x, Node) and "val" in x.meta else None
    if shape is None or len(shape) != 4 or heads % shape[1] or list(node.args[1]) != \
            [shape[0], heads, shape[2], shape[3]]:
        return None
    return x


def attend_grouped_heads(gm: GraphModule):
    """Returns how many attention calls now read shared kv heads."""
    graph, rewritten = gm.graph, 0
    for node in list(graph.nodes):
        if node.target is not aten._scaled_dot_product_fused_attention_overrideable.default:
            continue
        # inference only: a training graph saves k and v for the backward as they are
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            continue
        q, k, v = node.args[:3]
        if not (isinstance(q, Node) and "val" in q.meta):
            continue
        heads = q.meta["val"].shape[1]
        kx, vx = _repeated_heads(k, heads), _repeated_heads(v, heads)
        if kx is None or vx is None:
            continue
        node.args = (q, kx, vx) + tuple(node.args[3:])
        for chain in (k, v):
            while isinstance(chain, Node) and not chain.users:
                nxt = chain.args[0]
                graph.erase_node(chain)
                chain = nxt if nxt is not kx and nxt is not vx else None
        rewritten += 1
    return rewritten


def _narrow(node):
    """aten.slice with step 1 on a static shape as torch.narrow (start, length)."""
    x, dim = node.args[0], node.args[1] if len(node.args) > 1 else 0
    start = node.args[2] if len(node.args) > 2 else None
    end = node.args[3] if len(node.args) > 3 else None
    step = node.args[4] if len(node.args) > 4 else 1
    val = x.meta.get("val") if isinstance(x, Node) else None
    if node.kwargs or step != 1 or val is None or not all(isinstance(v, (int, type(None))) for v in (dim, start, end)):
        return None
    size = val.shape[dim]
    if not isinstance(size, int):
        return None
    start, end = start or 0, size if end is None else end
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    return (x, dim, start, end - start)


def bind_fast_calls(gm: GraphModule):
    """Returns how many calls were rebound."""
    bound = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is aten.slice.Tensor:
            args = _narrow(node)
            if args is not None:
                node.target, node.args = torch.narrow, args
                bound += 1
            continue
        fast = FAST.get(node.target)
        if fast is None:
            continue
        fn, allowed = fast
        kwargs = {k: v for k, v in node.kwargs.items() if not (k == "implicit" and v is False)}
        if any(k not in allowed for k in kwargs):
            continue
        node.target, node.kwargs = fn, kwargs
        bound += 1
    return bound
