"""PyTorch's OpInfo database swept over the neuron device, against the CPU.

For each covered OpInfo (see OP_NAMES) and each of float32, bfloat16, float16, int64, int32 and
bool that the OpInfo supports on the CPU, the tests are:

  test_forward          every sample run on the CPU and on neuron (tensors moved with their
                        strides); results equal within per-dtype tolerances, outputs on neuron.
                        Random samples (dropout, attention dropout) are checked for shape,
                        dtype, device and their statistics instead. The _foreach_* ops also run
                        their in-place form (what torch.optim calls). Where a floating
                        result differs from the CPU's, the op run on the CPU over the inputs
                        widened to float64 decides (the CPU rounds too: _agrees_in_float64).
  test_out              ops with `supports_out`: `out=` preallocated neuron tensors.
  test_gradients        float32, ops with `supports_autograd`: the input gradients for seeded
                        random grad_outputs (first GRAD_SAMPLES deterministic samples).
  test_error_inputs     every ErrorInput that raises on the CPU raises the same exception type
                        on neuron (one test per op).
  test_native           the forward samples ran without the CPU fallback
                        (torch_neuronx.get_fallback_ops() is empty).
  test_native_backward  the same for the backward pass of test_gradients.

Known gaps live in tests/opinfo_gaps.py: {(kind, op, dtype or '*'): reason}; each is a strict
xfail, so a gap that closes fails its test until the entry goes. Regenerate the list from a run
(by default the whole sweep, `-m ''`; extra arguments go to pytest, and only the tests that ran
have their entries replaced):

    .venv/bin/python tests/test_ops_opinfo.py --regen-gaps            # the whole sweep
    .venv/bin/python tests/test_ops_opinfo.py --regen-gaps -k native  # just the native tests
    .venv/bin/python tests/test_ops_opinfo.py --report                # gaps grouped by cause

CI runs float32, bfloat16 and the integer/bool dtypes with every sample (pytest's default
`-m 'not slow'`, about 1.5 minutes on 2 cores); float16 and the _foreach_ ops with PyTorch's
full tensor-list lengths (ids `_foreach_add[long]-float32` ...) are marked slow (`-m slow` runs
only them, `-m ''` everything, about 2 minutes). OPINFO_IGNORE_GAPS=1 turns the xfails off.

Names asked for but not in op_db (skipped): nn.functional.softmax and nn.functional.log_softmax
(op_db has them as softmax / log_softmax), index (advanced indexing is __getitem__ and
index_put). The _foreach_* ops are not in op_db itself but in its sibling lists
foreach_{unary,binary,pointwise,reduce,other}_op_db, taken from there.
"""
import functools
import json
import math
import os
import re
import sys
import zlib

import pytest
import torch
import torch_neuronx
from torch.testing._internal import common_methods_invocations as cmi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opinfo_gaps import GAPS  # noqa: E402

DEVICE = "neuron"

OP_NAMES = [
    # elementwise
    "add", "sub", "mul", "div", "true_divide", "pow", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
    "tanh", "sigmoid", "nn.functional.silu", "nn.functional.gelu", "nn.functional.relu", "neg",
    "abs", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "where", "clamp", "masked_fill", "lerp", "addcmul", "addcdiv",
    "log2", "log10", "exp2", "expm1", "log1p", "xlogy", "remainder", "fmod", "floor_divide",
    "erf", "erfinv", "sign", "round", "frac", "atan", "asin", "acos", "tan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "atan2", "copysign", "hypot",
    # reductions, scans, softmax, sorting
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "var", "std",
    "var_mean", "std_mean", "norm", "linalg.vector_norm", "all", "any", "cumsum", "logsumexp",
    "softmax", "log_softmax", "topk", "sort", "nansum", "rsub",
    # activations Transformers' ACT2FN offers besides gelu/silu/relu
    "nn.functional.hardtanh", "nn.functional.relu6", "nn.functional.leaky_relu", "nn.functional.elu",
    "nn.functional.mish", "nn.functional.hardswish", "nn.functional.hardsigmoid",
    "nn.functional.softplus", "nn.functional.logsigmoid", "roll",
    # matrix products and nn
    "mm", "bmm", "addmm", "baddbmm", "matmul", "nn.functional.linear",
    "nn.functional.layer_norm", "nn.functional.rms_norm",
    "nn.functional.scaled_dot_product_attention", "nn.functional.embedding",
    "nn.functional.one_hot", "nn.functional.nll_loss", "nn.functional.cross_entropy",
    "nn.functional.dropout",
    # matrix norms and singular values (the nuclear and 2-norms take the SVD)
    "linalg.svdvals", "linalg.matrix_norm",
    # indexing, shapes, factories
    "index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "index_put", "__getitem__",
    "cat", "stack", "split", "arange", "linspace", "full", "zeros", "ones", "triu", "tril", "nonzero",
    "masked_select",
    # speech models' training loss; CNN backbones' pooling and normalisation
    "nn.functional.ctc_loss", "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
    "nn.functional.batch_norm",
    "nn.functional.group_norm", "nn.functional.instance_norm",
    # convolutions, transposed ones included (DPT's and SAM's necks, Qwen2-VL's 3-D patches)
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d",
    "nn.functional.unfold",  # im2col; its backward is col2im (F.fold)
    # F.interpolate (its 1-D, 3-D, bicubic and area modes are listed as known fallback gaps)
    "nn.functional.interpolate", "nn.functional.upsample_nearest", "nn.functional.upsample_bilinear",
    # casts
    "to", "float", "half", "bfloat16", "double", "int", "long", "bool",
    # what torch.optim's AdamW / SGD (foreach) and clip_grad_norm_ call
    "_foreach_add", "_foreach_mul", "_foreach_addcmul", "_foreach_addcdiv", "_foreach_sqrt",
    "_foreach_div", "_foreach_lerp", "_foreach_norm", "_foreach_maximum",
    # the other _foreach_ ops neuron launches once per list
    "_foreach_sub", "_foreach_exp", "_foreach_neg", "_foreach_abs", "_foreach_reciprocal",
    "_foreach_sigmoid", "_foreach_tanh", "_foreach_minimum", "_foreach_clamp_min", "_foreach_clamp_max",
    "_foreach_expm1", "_foreach_log", "_foreach_log1p", "_foreach_log2", "_foreach_log10",
    "_foreach_rsqrt", "_foreach_sin", "_foreach_cos",
    "_foreach_erf", "_foreach_floor", "_foreach_ceil", "_foreach_round", "_foreach_trunc", "_foreach_sign",
    "_foreach_pow", "_foreach_zero", "_foreach_copy",
]

TEST_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool]
CI_DTYPES = {torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool}
GRAD_SAMPLES = 4                   # deterministic samples per op in the gradient tests
FOREACH_CI_LENGTHS = [5]           # tensor-list lengths of the _foreach_ samples in CI
FOREACH_FULL_LENGTHS = [20, 23]    # PyTorch's own (slow parametrizations)

# Results that accumulate (sums, products, norms) differ from the CPU's by rounding order.
ACCUMULATING = {
    "sum", "mean", "prod", "var", "std", "var_mean", "std_mean", "norm", "linalg.vector_norm",
    "cumsum", "logsumexp", "softmax", "log_softmax", "mm", "bmm", "addmm", "baddbmm", "matmul",
    "nn.functional.linear", "nn.functional.layer_norm", "nn.functional.rms_norm",
    "nn.functional.scaled_dot_product_attention", "nn.functional.nll_loss",
    "nn.functional.cross_entropy", "_foreach_norm", "linalg.svdvals", "linalg.matrix_norm",
    "scatter_reduce", "nn.functional.ctc_loss", "nn.functional.batch_norm", "nn.functional.group_norm",
    "nn.functional.instance_norm", "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d",
}
TOL = {torch.float32: (1.3e-6, 1e-5), torch.bfloat16: (1.6e-2, 1e-2),
       torch.float16: (1e-3, 1e-3), torch.float64: (1e-7, 1e-7)}
ACC_TOL = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (3.2e-2, 3e-2),
           torch.float16: (2e-3, 2e-3), torch.float64: (1e-7, 1e-7)}
GRAD_TOL = (1e-4, 1e-4)

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16",
               torch.int64: "int64", torch.int32: "int32", torch.bool: "bool"}
SHORT = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int64: "i64",
         torch.int32: "i32", torch.bool: "b8", torch.float64: "f64", torch.uint8: "u8",
         torch.int8: "i8", torch.int16: "i16"}


def _collect_ops():
    dbs = [cmi.op_db, cmi.foreach_unary_op_db, cmi.foreach_binary_op_db,
           cmi.foreach_pointwise_op_db, cmi.foreach_reduce_op_db, cmi.foreach_other_op_db]
    wanted = set(OP_NAMES)
    ops = {}
    for db in dbs:
        for op in db:
            if op.name not in wanted:
                continue
            full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
            if full in ops or not _dtypes(op):
                continue            # e.g. nn.functional.silu.complex: no dtype of ours
            ops[full] = op
    order = {n: i for i, n in enumerate(OP_NAMES)}
    return dict(sorted(ops.items(), key=lambda kv: (order[kv[1].name], kv[0])))


def _cached_per_op(fn):
    """Memoizes fn(op) by the OpInfo's identity (OpInfos are not hashable)."""
    cache = {}

    @functools.wraps(fn)
    def wrapper(op):
        if id(op) not in cache:
            cache[id(op)] = fn(op)
        return cache[id(op)]
    return wrapper


@_cached_per_op
def _dtypes(op):
    supported = op.supported_dtypes("cpu")
    dts = [d for d in TEST_DTYPES if d in supported]
    if isinstance(op, cmi.ForeachFuncInfo):
        # the _foreach_ OpInfos claim every dtype; keep those with a sample the CPU runs
        dts = [d for d in dts if _cpu_runs_a_sample(op, d)]
    return dts


def _cpu_runs_a_sample(op, dtype):
    for sample in op.sample_inputs("cpu", dtype, num_input_tensors=[2]):
        try:
            op(sample.input, *sample.args,
               **{k: v for k, v in sample.kwargs.items() if k != "disable_fastpath"})
            return True
        except Exception:
            pass
    return False


@_cached_per_op
def _has_cpu_error_inputs(op):
    """Whether the op has ErrorInputs for the CPU at all (some only have CUDA ones)."""
    if op.error_inputs_func is None:
        return False
    return next(iter(op.error_inputs("cpu")), None) is not None


OPS = _collect_ops()


def _is_foreach(op):
    return isinstance(op, cmi.ForeachFuncInfo)


@_cached_per_op
def _grad_ok(op):
    ok = (op.supports_autograd and torch.float32 in op.supported_dtypes("cpu")
          and torch.float32 in op.supported_backward_dtypes("cpu"))
    if ok and _is_foreach(op):
        ok = _cpu_backward_runs(op)     # claimed for all; _foreach_addcdiv's fails on the CPU
    return ok


def _cpu_backward_runs(op):
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=True,
                                   num_input_tensors=[2]):
        try:
            out = _call(op, sample)
            outs = [t for t in _tensors(out) if t.requires_grad]
            inputs = [t for t in _sample_tensors(sample) if t.requires_grad]
            torch.autograd.grad(outs, inputs, [torch.ones_like(t) for t in outs],
                                allow_unused=True)
            return True
        except Exception:
            pass
    return False


# ------------------------------------------------------------------------------------------
# parametrization, known gaps, result recording for --regen-gaps

def _gap_reason(kind, name, dtype):
    if os.environ.get("OPINFO_IGNORE_GAPS") == "1":
        return None
    dname = DTYPE_NAMES.get(dtype, "*") if dtype is not None else "*"
    return GAPS.get((kind, name, dname)) or GAPS.get((kind, name, "*"))


def _cases(kind):
    """(op name, dtype or None) pairs of a test kind, in a stable order."""
    for name, op in OPS.items():
        if kind in ("forward", "native"):
            dts = _dtypes(op)
        elif kind == "out":
            dts = _dtypes(op) if op.supports_out and not _is_foreach(op) else []
        elif kind in ("gradients", "native_backward"):
            dts = [torch.float32] if _grad_ok(op) else []
        elif kind == "error_inputs":
            dts = [None] if _has_cpu_error_inputs(op) else []
        else:
            raise ValueError(kind)
        for dt in dts:
            yield name, dt


def _slow(name, dtype):
    return dtype is not None and dtype not in CI_DTYPES


def _params(kind):
    params = []
    for name, dt in _cases(kind):
        marks = [pytest.mark.slow] if _slow(name, dt) else []
        reason = _gap_reason(kind, name, dt)
        if reason:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        if dt is None:
            params.append(pytest.param(name, id=name, marks=marks))
        else:
            params.append(pytest.param(name, dt, id=f"{name}-{DTYPE_NAMES[dt]}", marks=marks))
        if name.startswith("_foreach_") and kind in ("forward", "native"):
            # the same with PyTorch's long tensor lists, slow
            marks = [pytest.mark.slow]
            reason = _gap_reason(kind, name + "[long]", dt)
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            params.append(pytest.param(name + "[long]", dt, id=f"{name}[long]-{DTYPE_NAMES[dt]}",
                                       marks=marks))
    return params


class Gap(AssertionError):
    """A test failure whose message is the short reason recorded in the gap list."""


def _short(e, limit=160):
    msg = str(e).strip().splitlines()
    msg = msg[0] if msg else ""
    msg = re.sub(r"\s+", " ", msg)
    if len(msg) > limit:
        msg = msg[:limit - 3] + "..."
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def _record(kind, name, dtype, outcome, reason=None, harness=False):
    path = os.environ.get("OPINFO_RESULTS")
    if not path:
        return
    row = {"kind": kind, "op": name, "dtype": DTYPE_NAMES[dtype] if dtype is not None else "*",
           "outcome": outcome, "reason": reason, "harness": harness}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def _recorded(kind):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(name, dtype=None):
            try:
                fn(name, dtype) if dtype is not None else fn(name)
            except Exception as e:
                gap = isinstance(e, Gap)
                _record(kind, name, dtype, "failed", str(e) if gap else _short(e), not gap)
                raise
            except BaseException as e:
                if isinstance(e, pytest.skip.Exception):
                    _record(kind, name, dtype, "skipped")
                raise
            else:
                _record(kind, name, dtype, "passed")
        return wrapper
    return deco


# ------------------------------------------------------------------------------------------
# samples: generation, description, moving to neuron, calling

def _resolve(name):
    """'op' or 'op[long]' -> (OpInfo, sample_inputs kwargs)."""
    long = name.endswith("[long]")
    op = OPS[name[:-len("[long]")] if long else name]
    kwargs = {}
    if _is_foreach(op):
        kwargs["num_input_tensors"] = FOREACH_FULL_LENGTHS if long else FOREACH_CI_LENGTHS
    return op, kwargs


def _samples(name, dtype, requires_grad=False):
    op, kwargs = _resolve(name)
    torch.manual_seed(zlib.crc32(name.encode()))
    return list(op.sample_inputs("cpu", dtype, requires_grad=requires_grad, **kwargs))


def _describe(sample, limit=150):
    def d(x):
        if isinstance(x, torch.Tensor):
            s = f"{SHORT.get(x.dtype, str(x.dtype)[6:])}{list(x.shape)}"
            if x.numel() > 1 and not x.is_contiguous():
                s += "(strided)"
            return s
        if isinstance(x, (list, tuple)):
            inner = ",".join(d(v) for v in x[:4]) + (",..." if len(x) > 4 else "")
            return f"[{inner}]" if isinstance(x, list) else f"({inner})"
        if isinstance(x, float) and math.isfinite(x):
            return f"{x:.4g}"
        return repr(x)
    parts = [d(sample.input)] + [d(a) for a in sample.args]
    parts += [f"{k}={d(v)}" for k, v in sample.kwargs.items() if k != "disable_fastpath"]
    s = ", ".join(parts)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _tensor_to_neuron(t, storages):
    """A neuron copy of `t` with the same sizes, strides and storage offset, made as a view of
    a neuron copy of its whole CPU storage: non-contiguous and overlapping (expanded) inputs
    reach the kernels as they are, and tensors that share memory on the CPU (an out= that is
    a view of an input) share it on neuron. requires_grad carries over, as a leaf."""
    src = t.detach()
    st = src.untyped_storage()
    if st.nbytes() == 0 or src.layout != torch.strided:
        d = torch.empty_strided(src.size(), src.stride(), dtype=src.dtype, device=DEVICE)
    else:
        key = (st.data_ptr(), src.dtype)
        if key not in storages:
            whole = torch.empty(0, dtype=src.dtype).set_(
                st, 0, (st.nbytes() // src.element_size(),), (1,))
            storages[key] = whole.to(DEVICE)
        d = storages[key].as_strided(src.size(), src.stride(), src.storage_offset())
    if t.requires_grad:
        d.requires_grad_()
    return d


def _map_leaves(x, leaf):
    """x with every leaf (anything but a list, tuple, named tuple or dict) replaced by leaf(v)."""
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_map_leaves(v, leaf) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_map_leaves(v, leaf) for v in x)
    if isinstance(x, dict):
        return {k: _map_leaves(v, leaf) for k, v in x.items()}
    return leaf(x)


def _to_neuron(x, memo):
    """x with its tensors moved to neuron (memo: the objects and storages moved so far) and
    CPU device arguments turned into neuron ones."""
    def leaf(v):
        if isinstance(v, torch.Tensor):
            if id(v) not in memo:
                memo[id(v)] = _tensor_to_neuron(v, memo.setdefault("storages", {}))
            return memo[id(v)]
        if isinstance(v, torch.device):
            return torch.device(DEVICE) if v.type == "cpu" else v
        if isinstance(v, str) and v == "cpu":       # a device argument ('to', factories)
            return DEVICE
        return v
    return _map_leaves(x, leaf)


class _Sample:
    """The parts of a SampleInput a call needs."""

    def __init__(self, input, args, kwargs):
        self.input, self.args, self.kwargs = input, args, kwargs


FACTORIES = {"arange", "linspace", "full", "zeros", "ones"}


def _moved(sample, name=None):
    """The sample on neuron. Factory ops get device='neuron' where the sample leaves the device
    to the default."""
    memo = {}
    kwargs = _to_neuron(dict(sample.kwargs), memo)
    if name is not None and name.split(".")[0] in FACTORIES and "device" not in kwargs:
        kwargs["device"] = DEVICE
    return _Sample(_to_neuron(sample.input, memo), _to_neuron(tuple(sample.args), memo), kwargs)


def _clone(x):
    return _map_leaves(x, lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v)


def _cloned(sample):
    return _Sample(_clone(sample.input), _clone(tuple(sample.args)), _clone(dict(sample.kwargs)))


def _call(fn, sample, **extra):
    kwargs = {k: v for k, v in sample.kwargs.items() if k != "disable_fastpath"}
    kwargs.update(extra)
    return fn(sample.input, *sample.args, **kwargs)


def _tensors(x):
    """The tensors in a (nested) structure, in order."""
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def _sample_tensors(sample):
    return list(_tensors([sample.input, list(sample.args), dict(sample.kwargs)]))


# ------------------------------------------------------------------------------------------
# comparison

def _tol(name, dtype):
    """(rtol, atol) for a result of `dtype` from op `name`; exact for integers and bool."""
    table = ACC_TOL if _resolve(name)[0].name in ACCUMULATING else TOL
    return table.get(dtype, (0.0, 0.0))


def _fmt(x):
    return f"{x:.3g}"


def _diff_summary(actual, expected, rtol, atol):
    """What differs between two same-shape tensors: max abs diff and how many elements."""
    if expected.dtype.is_floating_point:
        a, e = actual.double(), expected.double()
        close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        nbad = int((~close).sum())
        nan_bad = int((a.isnan() != e.isnan()).sum())
        finite = ~close & a.isfinite() & e.isfinite()
        parts = []
        if finite.any():
            d = (a - e).abs()[finite]
            rel = d / e.abs()[finite].clamp_min(1e-30)
            parts.append(f"max abs diff {_fmt(d.max().item())} (rel {_fmt(rel.max().item())})")
        if nan_bad:
            parts.append(f"{nan_bad} NaN mismatches")
        inf_bad = nbad - int(finite.sum()) - nan_bad
        if inf_bad > 0:
            parts.append(f"{inf_bad} inf mismatches")
        return f"{', '.join(parts)}; {nbad}/{e.numel()} elements"
    ne = actual != expected
    nbad = int(ne.sum())
    idx = ne.flatten().nonzero()[0].item()
    return (f"{nbad}/{expected.numel()} elements differ, first at flat index {idx}: "
            f"{actual.flatten()[idx].item()} vs {expected.flatten()[idx].item()}")


def _compare(actual, expected, name, where, check_device=True):
    """Problems (strings) between a neuron result and the CPU's."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return [f"{where}: neuron returned {type(actual).__name__}, CPU a tensor"]
        if check_device and actual.device.type != DEVICE:
            return [f"{where}: output on {actual.device}, not on neuron"]
        if actual.dtype != expected.dtype:
            return [f"{where}: wrong dtype {actual.dtype} (CPU {expected.dtype})"]
        if actual.shape != expected.shape:
            return [f"{where}: wrong shape {list(actual.shape)} (CPU {list(expected.shape)})"]
        got = actual.detach().cpu()
        exp = expected.detach()
        rtol, atol = _tol(name, exp.dtype)
        try:
            torch.testing.assert_close(got, exp, rtol=rtol, atol=atol, equal_nan=True,
                                       check_device=False)
        except AssertionError:
            return [f"{where}: neuron result differs: {_diff_summary(got, exp, rtol, atol)}"]
        return []
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return [f"{where}: neuron returned {type(actual).__name__} "
                    f"of {len(actual) if hasattr(actual, '__len__') else '?'}, CPU "
                    f"{type(expected).__name__} of {len(expected)}"]
        problems = []
        for i, (a, e) in enumerate(zip(actual, expected)):
            problems += _compare(a, e, name, f"{where}[{i}]", check_device)
        return problems
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        if math.isnan(expected) and math.isnan(actual):
            return []
        rtol, atol = _tol(name, torch.float64)
        if not math.isclose(actual, expected, rel_tol=max(rtol, 1e-6), abs_tol=atol):
            return [f"{where}: neuron returned {actual!r}, CPU {expected!r}"]
        return []
    if actual != expected:
        return [f"{where}: neuron returned {actual!r}, CPU {expected!r}"]
    return []


def _widened(x, dtype, memo):
    """x with its floating tensors of `dtype` copied to float64 (leaves keep requires_grad);
    tensors shared in x stay shared."""
    def leaf(v):
        if not isinstance(v, torch.Tensor):
            return v
        if id(v) not in memo:
            w = v.detach().to(torch.float64) if v.dtype == dtype else v.detach().clone()
            memo[id(v)] = w.requires_grad_() if v.requires_grad else w
        return memo[id(v)]
    return _map_leaves(x, leaf)


def _widened_sample(sample, dtype):
    """A float64 copy of a `dtype` sample. A float `alpha` is first rounded to `dtype`, since
    add and sub round it to the tensors' dtype on every CPU path. A factory's `dtype=` becomes
    float64, its float number arguments rounded to `dtype` first (linspace takes its ends in
    the result's dtype)."""
    memo = {}
    kwargs = _widened(dict(sample.kwargs), dtype, memo)
    if isinstance(kwargs.get("alpha"), float):
        kwargs["alpha"] = torch.tensor(kwargs["alpha"], dtype=dtype).item()
    args = _widened(tuple(sample.args), dtype, memo)
    inp = _widened(sample.input, dtype, memo)
    if kwargs.get("dtype") == dtype:
        kwargs["dtype"] = torch.float64
        round_ = lambda v: torch.tensor(v, dtype=dtype).item() if isinstance(v, float) else v  # noqa: E731
        inp, args = round_(inp), tuple(round_(a) for a in args)
    return _Sample(inp, args, kwargs)


def _rounded_like(x, like):
    """The float64 reference x rounded to the dtypes of the CPU result `like`."""
    if isinstance(x, torch.Tensor) and isinstance(like, torch.Tensor):
        return x.detach().to(like.dtype)
    if isinstance(x, (list, tuple)) and isinstance(like, (list, tuple)) and len(x) == len(like):
        return type(like)(_rounded_like(a, b) for a, b in zip(x, like))
    return x


def _agrees_in_float64(problems, result, expected, reference_fn, dtype, name, where):
    """The tie-break when neuron's floating result and the CPU's differ: the CPU's result is
    rounded too (its vector loops fuse a multiply-add that its scalar tail rounds twice; its
    layer norm backward leaves a residue where the exact gradient is 0). The same op run on
    the CPU over the inputs widened to float64 (`reference_fn()`), then rounded to the
    result's dtype, decides: neuron passes if it agrees with that within the same tolerance.
    Scalar arguments stay as given. Returns the problems that remain."""
    if not problems or not dtype.is_floating_point or dtype == torch.float64:
        return problems
    if not all("neuron result differs" in p or "neuron gradient differs" in p for p in problems):
        return problems
    try:
        reference = _rounded_like(reference_fn(), expected)
    except Exception:
        return problems
    return problems if _compare(result, reference, name, where) else []


def _arg(sample, pos, key, default):
    """Argument `pos` (0 = first after the input) or keyword `key` of a sample."""
    if len(sample.args) > pos:
        return sample.args[pos]
    return sample.kwargs.get(key, default)


def _compare_sorting(name, sample, result, expected, where):
    """topk / sort: values as on the CPU; the indices of equal values may differ (PyTorch
    leaves their order unspecified unless stable=True), so they must pick the values out of
    the input and be distinct along the dimension instead."""
    x = sample.input.detach()
    if name == "topk":
        dim, is_sorted = _arg(sample, 1, "dim", -1), _arg(sample, 3, "sorted", True)
    else:
        dim, is_sorted = _arg(sample, 0, "dim", -1), True
        if _arg(sample, 2, "stable", False):
            return _compare(result, expected, name, where)
    if x.dim() == 0 or not isinstance(result, tuple) or len(result) != 2:
        return _compare(result, expected, name, where)
    values, indices = result
    probs = _compare_meta(values, expected[0], f"{where}[0]")
    probs += _compare_meta(indices, expected[1], f"{where}[1]")
    if probs:
        return probs
    v, i = values.cpu(), indices.cpu()
    ev = expected[0]
    if is_sorted:
        probs = _compare(v, ev, name, f"{where}[0]", check_device=False)
    else:
        probs = _compare(v.sort(dim).values, ev.sort(dim).values, name, f"{where}[0] (as sets)",
                         check_device=False)
    if probs:
        return probs
    n = x.size(dim)
    if i.numel() and (i.min() < 0 or i.max() >= n):
        return [f"{where}[1]: indices out of range"]
    if i.numel():
        picked = x.gather(dim, i)
        if not torch.equal(picked.isnan(), v.isnan()) or not torch.equal(
                picked[~picked.isnan()], v[~v.isnan()]):
            return [f"{where}[1]: indices do not point at the returned values"]
        si = i.sort(dim).values
        if si.size(dim) > 1 and (si.narrow(dim, 1, si.size(dim) - 1)
                                 == si.narrow(dim, 0, si.size(dim) - 1)).any():
            return [f"{where}[1]: repeated indices"]
    return []


def _random_kind(name, sample):
    """'dropout' / 'attention' for samples whose result is random, else None."""
    base = name.replace("[long]", "")
    if base == "nn.functional.dropout":
        p = sample.kwargs.get("p", 0.5)
        if sample.kwargs.get("training", True) and 0 < p < 1:
            return "dropout"
    if base == "nn.functional.scaled_dot_product_attention" and sample.kwargs.get("dropout_p", 0):
        return "attention"
    return None


def _check_dropout(x, y, p, where):
    """Dropout output y of x (CPU copies): every element is 0 or x/(1-p), with a zero
    fraction near p."""
    if y.shape != x.shape or y.dtype != x.dtype:
        return [f"{where}: wrong shape/dtype {list(y.shape)} {y.dtype}"]
    rtol, atol = TOL[x.dtype]
    scaled = x.double() / (1 - p)
    yd = y.double()
    kept = yd != 0
    if not torch.allclose(yd[kept], scaled[kept], rtol=rtol, atol=atol):
        return [f"{where}: dropout kept elements not scaled by 1/(1-p)"]
    zero_frac = float((~kept).double().mean()) if x.numel() else 0.0
    n = x.numel()
    if n >= 20:
        bound = 4.5 * math.sqrt(p * (1 - p) / n) + 1.0 / n
        if abs(zero_frac - p) > bound:
            return [f"{where}: dropout zeroed {zero_frac:.3f} of {n} elements (p={p})"]
    return []


def _check_random(kind, sample, cpu_result, result, where):
    if kind == "dropout":
        x = sample.input.detach()
        return _check_dropout(x, result.detach().cpu(), sample.kwargs.get("p", 0.5), where)
    # attention with dropout: only the shape, dtype, device and finiteness
    probs = _compare_meta(result, cpu_result, where)
    if not probs and not torch.isfinite(result.detach().cpu()).all():
        probs.append(f"{where}: attention with dropout gave non-finite values")
    return probs


def _compare_meta(actual, expected, where):
    if actual.device.type != DEVICE:
        return [f"{where}: output on {actual.device}, not on neuron"]
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return [f"{where}: {actual.dtype}{list(actual.shape)} vs CPU "
                f"{expected.dtype}{list(expected.shape)}"]
    return []


# ------------------------------------------------------------------------------------------
# the runs (cached, so that the native tests reuse what the forward / gradient tests did)

_FORWARD_RUNS = {}
_GRAD_RUNS = {}


class _Run:
    def __init__(self):
        self.problems = []
        self.fallbacks = {}     # aten op -> [sample indices where it ran on the CPU]
        self.described = {}     # sample index -> description
        self.ran = set()        # samples run on neuron
        self.failed = set()     # samples with problems
        self.checked = 0        # samples compared
        self.skipped = 0        # samples that raise on the CPU

    def note(self, i, problems):
        self.ran.add(i)
        if problems:
            self.problems += problems
            self.failed.add(i)

    def fail(self, what="samples"):
        """Raises a Gap naming the first problem (usually they all have the same cause)."""
        __tracebackhide__ = True
        if self.problems:
            n = len(self.failed)
            more = f" [{n} of {len(self.ran)} {what} fail]" if n > 1 else ""
            raise Gap(self.problems[0] + more)

    def add_fallbacks(self, i, sample):
        """Takes the fallback counts since the last clear as sample i's."""
        torch.neuron.synchronize()
        self.ran.add(i)
        for k in torch_neuronx.get_fallback_ops():
            idx = self.fallbacks.setdefault(k, [])
            if i not in idx:
                idx.append(i)
            self.described.setdefault(i, _describe(sample, 90))
        torch_neuronx.clear_op_tracking()

    def fallback_reason(self):
        """'falls back: aten::x (2/5 samples, e.g. sample 3: ...); aten::y (...)'."""
        n = len(self.ran)
        parts = []
        for k in sorted(self.fallbacks):
            idx = self.fallbacks[k]
            if len(idx) >= n:
                parts.append(f"{k} (all {n} samples)")
            else:
                parts.append(f"{k} ({len(idx)}/{n} samples, e.g. {idx[0]}: "
                             f"{self.described[idx[0]]})")
        return "falls back: " + "; ".join(parts)


def _neuron_raised(e, i, sample):
    return f"sample {i} ({_describe(sample)}): neuron raised {_short(e)} (the CPU did not)"


def _forward_run(name, dtype):
    key = (name, dtype)
    if key in _FORWARD_RUNS:
        return _FORWARD_RUNS[key]
    op, _ = _resolve(name)
    run = _Run()
    torch_neuronx.clear_op_tracking()
    for i, sample in enumerate(_samples(name, dtype)):
        where = f"sample {i} ({_describe(sample)})"
        moved = _moved(sample, name)        # before the CPU run, which could change the sample
        widened = _widened_sample(sample, dtype) if dtype.is_floating_point else None
        try:
            expected = _call(op, sample)
        except Exception:
            run.skipped += 1
            continue
        torch_neuronx.clear_op_tracking()
        try:
            result = _call(op, moved)
            torch.neuron.synchronize()
        except Exception as e:
            run.add_fallbacks(i, sample)
            run.note(i, [_neuron_raised(e, i, sample)])
            continue
        run.add_fallbacks(i, sample)
        run.checked += 1
        rkind = _random_kind(name, sample)
        if rkind:
            run.note(i, _check_random(rkind, sample, expected, result, where))
        elif name in ("topk", "sort"):
            run.note(i, _compare_sorting(name, sample, result, expected, where))
        else:
            problems = _compare(result, expected, name, where)
            run.note(i, _agrees_in_float64(problems, result, expected, lambda: _call(op, widened),
                                           dtype, name, where))
        if _is_foreach(op) and op.inplace_variant is not None:
            run.note(i, _inplace_check(op, name, sample, dtype, i, run))
    _FORWARD_RUNS[key] = run
    return run


def _inplace_check(op, name, sample, dtype, i, run):
    """The in-place form (_foreach_add_ and so on): mutated inputs equal the CPU's."""
    dev = _moved(sample, name)
    cpu = _cloned(sample)
    try:
        _call(op.inplace_variant, cpu)
    except Exception:
        return []
    torch_neuronx.clear_op_tracking()
    try:
        _call(op.inplace_variant, dev)
        torch.neuron.synchronize()
    except Exception as e:
        run.add_fallbacks(i, sample)
        return [f"in-place {op.name}_: " + _neuron_raised(e, i, sample)]
    run.add_fallbacks(i, sample)
    where = f"in-place {op.name}_ sample {i} ({_describe(sample)})"

    def reference():
        widened = _widened_sample(sample, dtype)
        _call(op.inplace_variant, widened)
        return widened.input

    return _agrees_in_float64(_compare(dev.input, cpu.input, name, where), dev.input, cpu.input,
                              reference, dtype, name, where)


def _grad_run(name):
    key = name
    if key in _GRAD_RUNS:
        return _GRAD_RUNS[key]
    op, _ = _resolve(name)
    run = _Run()
    for i, sample in enumerate(_samples(name, torch.float32, requires_grad=True)):
        if run.checked >= GRAD_SAMPLES:
            break
        if _random_kind(name, sample) == "attention":
            continue
        where = f"sample {i} ({_describe(sample)})"
        inputs = [t for t in _sample_tensors(sample) if t.requires_grad]
        if not inputs:
            continue
        moved = _moved(sample, name)
        widened = _widened_sample(sample, torch.float32)
        try:
            out = sample.output_process_fn_grad(_call(op, sample))
            outs = [t for t in _tensors(out) if t.requires_grad]
            if not outs:
                continue
            gen = torch.Generator().manual_seed(1000 + i)
            gos = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in outs]
            expected = torch.autograd.grad(outs, inputs, gos, allow_unused=True)
        except Exception:
            run.skipped += 1
            continue
        dinputs = [t for t in _sample_tensors(moved) if t.requires_grad]
        try:
            dout = sample.output_process_fn_grad(_call(op, moved))
            douts = [t for t in _tensors(dout) if t.requires_grad]
            if len(douts) != len(outs):
                raise RuntimeError(f"{len(douts)} of the neuron outputs require grad, "
                                   f"{len(outs)} on the CPU")
            torch.neuron.synchronize()
            torch_neuronx.clear_op_tracking()
            got = torch.autograd.grad(douts, dinputs, [g.to(DEVICE) for g in gos],
                                      allow_unused=True)
            torch.neuron.synchronize()
        except Exception as e:
            run.add_fallbacks(i, sample)
            run.note(i, [_neuron_raised(e, i, sample)])
            continue
        run.add_fallbacks(i, sample)
        run.checked += 1
        if _random_kind(name, sample) == "dropout":
            run.note(i, _check_dropout_grad(sample, dout, got, gos, where))
            continue
        for j, (g, e) in enumerate(zip(got, expected)):
            w = f"{where} grad of input {j}"
            if (g is None) != (e is None):
                run.note(i, [f"{w}: {'no' if g is None else 'a'} gradient on neuron, "
                             f"{'one' if g is None else 'none'} on the CPU"])
                continue
            if g is None:
                continue
            probs = _compare(g, e, name, w)
            if probs and probs[0].find("neuron result differs") >= 0:
                rtol, atol = GRAD_TOL
                try:
                    torch.testing.assert_close(g.cpu(), e, rtol=rtol, atol=atol, equal_nan=True)
                    probs = []
                except AssertionError:
                    probs = [f"{w}: neuron gradient differs: "
                             f"{_diff_summary(g.cpu(), e, rtol, atol)}"]
                    probs = _agrees_in_float64(probs, g, e, lambda: _grad_float64(op, sample, widened, gos)[j],
                                               torch.float32, name, w)
            run.note(i, probs)
    _GRAD_RUNS[key] = run
    return run


def _grad_float64(op, sample, widened, gos):
    """The input gradients of `op` over the float64 copy of a float32 sample."""
    out = sample.output_process_fn_grad(_call(op, widened))
    outs = [t for t in _tensors(out) if t.requires_grad]
    inputs = [t for t in _sample_tensors(widened) if t.requires_grad]
    return torch.autograd.grad(outs, inputs, [g.to(t.dtype) for g, t in zip(gos, outs)], allow_unused=True)


def _check_dropout_grad(sample, dout, got, gos, where):
    """d(dropout)/dx = go/(1-p) where the element was kept, 0 where dropped."""
    p = sample.kwargs.get("p", 0.5)
    y = dout.detach().cpu()
    x = sample.input.detach()
    g = got[0].cpu()
    expect = torch.where(y != 0, gos[0] / (1 - p), torch.zeros_like(gos[0]))
    known = x != 0            # where x is 0 the mask cannot be read from y
    if not torch.allclose(g[known], expect[known], rtol=GRAD_TOL[0], atol=GRAD_TOL[1]):
        return [f"{where}: dropout gradient is not go/(1-p) on kept elements and 0 elsewhere"]
    return []


def _out_run(name, dtype):
    op, _ = _resolve(name)
    run = _Run()

    def alloc(expected, device):
        if isinstance(expected, torch.Tensor):
            return torch.empty_like(expected, device=device)
        return tuple(torch.empty_like(t, device=device) for t in expected)

    for i, sample in enumerate(_samples(name, dtype)):
        where = f"sample {i} ({_describe(sample)}) out="
        moved = _moved(sample, name)
        try:
            expected = _call(op, sample)
            if not (isinstance(expected, torch.Tensor) or (
                    isinstance(expected, tuple)
                    and all(isinstance(t, torch.Tensor) for t in expected))):
                continue
            cpu_out = alloc(expected, "cpu")
            _call(op, sample, out=cpu_out)
        except Exception:
            run.skipped += 1
            continue
        out = alloc(expected, DEVICE)
        try:
            ret = _call(op, moved, out=out)
            torch.neuron.synchronize()
        except Exception as e:
            run.note(i, [_neuron_raised(e, i, sample)])
            continue
        run.checked += 1
        rkind = _random_kind(name, sample)
        if rkind:
            run.note(i, _check_random(rkind, sample, cpu_out, out, where))
            continue
        if name in ("topk", "sort"):
            probs = _compare_sorting(name, sample, tuple(out), tuple(cpu_out), where)
        else:
            probs = _agrees_in_float64(_compare(out, cpu_out, name, where), out, cpu_out,
                                       lambda: _call(op, _widened_sample(sample, dtype)), dtype, name, where)
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        rets = [ret] if isinstance(ret, torch.Tensor) else list(ret)
        if not probs and (len(rets) != len(outs) or any(
                r.data_ptr() != o.data_ptr() for r, o in zip(rets, outs))):
            probs.append(f"{where}: returned tensors are not the out= tensors")
        run.note(i, probs)
    return run


# ------------------------------------------------------------------------------------------
# the tests

pytestmark = [
    pytest.mark.usefixtures("quiet_fallback"),
    # what some samples legitimately trigger (on the CPU as on neuron)
    pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning"),
    pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter:UserWarning"),
    pytest.mark.filterwarnings("ignore:An output with one or more elements was resized"),
]


def _need_samples(run, what="sample"):
    if not run.checked and not run.problems:
        pytest.skip(f"no {what} runs on the CPU ({run.skipped} raise there)")


@pytest.mark.parametrize("name, dtype", _params("forward"))
@_recorded("forward")
def test_forward(name, dtype):
    run = _forward_run(name, dtype)
    _need_samples(run)
    run.fail()


@pytest.mark.parametrize("name, dtype", _params("out"))
@_recorded("out")
def test_out(name, dtype):
    run = _out_run(name, dtype)
    _need_samples(run, "out= sample")
    run.fail()


@pytest.mark.parametrize("name, dtype", _params("gradients"))
@_recorded("gradients")
def test_gradients(name, dtype):
    run = _grad_run(name)
    _need_samples(run, "differentiable sample")
    run.fail()


@pytest.mark.parametrize("name", _params("error_inputs"))
@_recorded("error_inputs")
def test_error_inputs(name):
    op, _ = _resolve(name)
    run = _Run()
    torch.manual_seed(zlib.crc32(name.encode()))
    for i, err in enumerate(op.error_inputs("cpu")):
        sample = err.sample_input
        where = f"error input {i} ({_describe(sample)})"
        moved = _moved(sample, name)
        try:
            _call(op, sample)
        except Exception as e:
            cpu_error = e
        else:
            continue            # does not raise on this CPU build: nothing to match
        problems = []
        try:
            with pytest.raises(type(cpu_error)):
                _call(op, moved)
                torch.neuron.synchronize()
        except pytest.fail.Exception:
            problems.append(f"{where}: no error raised on neuron (CPU: {_short(cpu_error, 100)})")
        except Exception as e:
            problems.append(f"{where}: neuron raised {_short(e, 100)} "
                            f"(CPU: {_short(cpu_error, 100)})")
        run.note(i, problems)
    if not run.ran:
        pytest.skip("no error input raises on the CPU")
    run.fail("error inputs")


@pytest.mark.parametrize("name, dtype", _params("native"))
@_recorded("native")
def test_native(name, dtype):
    run = _forward_run(name, dtype)
    _need_samples(run)
    if run.fallbacks:
        raise Gap(run.fallback_reason())


@pytest.mark.parametrize("name, dtype", _params("native_backward"))
@_recorded("native_backward")
def test_native_backward(name, dtype):
    run = _grad_run(name)
    _need_samples(run, "differentiable sample")
    if run.fallbacks:
        raise Gap(run.fallback_reason())


def test_float64_tie_break():
    """A neuron result the CPU disagrees with passes only when the float64 reference agrees
    with it: the CPU's scalar tail computes a + round(alpha * b) where its vector loop (and
    neuron) fuse the multiply-add; here the rounded product -35.33 -> -35.25 leaves 0, not
    -0.082."""
    a = torch.tensor([35.25], dtype=torch.bfloat16)
    b = torch.tensor([-11.25], dtype=torch.bfloat16)
    cpu = a + (3.140625 * b)                      # rounded product, then the sum
    fused = (a.double() + 3.140625 * b.double()).to(torch.bfloat16)
    assert cpu.item() != fused.item()
    sample = _Sample(a, (b,), {"alpha": 3.14})

    def check(result):
        problems = _compare(result.to(DEVICE), cpu, "add", "tie")
        assert problems, "the case must differ from the CPU's result"
        return _agrees_in_float64(problems, result.to(DEVICE), cpu,
                                  lambda: _call(torch.add, _widened_sample(sample, torch.bfloat16)),
                                  torch.bfloat16, "add", "tie")

    assert check(fused) == []
    assert check(fused + 0.125) != []             # wrong for the CPU and for float64 alike


# ------------------------------------------------------------------------------------------
# --regen-gaps / --report

KINDS = ["forward", "out", "gradients", "error_inputs", "native", "native_backward"]


def _all_keys():
    """Every (kind, op, dtype name) test the module parametrizes."""
    keys = []
    for kind in KINDS:
        for p in _params(kind):
            name = p.values[0]
            dt = p.values[1] if len(p.values) > 1 else None
            keys.append((kind, name, DTYPE_NAMES[dt] if dt is not None else "*"))
    return keys


def _by_op(all_keys):
    """{(kind, op): [its (kind, op, dtype) keys]}"""
    by_op = {}
    for k in all_keys:
        by_op.setdefault(k[:2], []).append(k)
    return by_op


def _expand(gaps, all_keys):
    by_op = _by_op(all_keys)
    out = {}
    for (kind, name, dt), reason in gaps.items():
        if dt == "*":
            for k in by_op.get((kind, name), []):
                out[k] = reason
        else:
            out[(kind, name, dt)] = reason
    return out


def _compact(gaps, all_keys):
    """Per-dtype entries of an op that fail in every dtype for the same reason -> '*'."""
    by_op = _by_op(all_keys)
    out = {}
    for kop, keys in by_op.items():
        reasons = {gaps.get(k) for k in keys}
        if len(keys) > 1 and len(reasons) == 1 and None not in reasons:
            out[(kop[0], kop[1], "*")] = reasons.pop()
        else:
            for k in keys:
                if k in gaps:
                    out[k] = gaps[k]
    return out


def _write_gaps(gaps, path):
    order = {k: i for i, k in enumerate(KINDS)}
    opord = {n: i for i, n in enumerate(OPS)}
    dtord = {n: i for i, n in enumerate(["*"] + list(DTYPE_NAMES.values()))}

    def sort_key(k):
        base = k[1].replace("[long]", "")
        return (order[k[0]], opord.get(base, 1e9), k[1], dtord.get(k[2], 99))

    lines = [
        '"""Known gaps of the OpInfo sweep (tests/test_ops_opinfo.py): {(test kind, op[.variant],',
        "dtype or '*'): reason}. Each is a strict xfail: a gap that closes fails its test until",
        "the entry is removed.",
        "",
        "Generated by `.venv/bin/python tests/test_ops_opinfo.py --regen-gaps` (add pytest",
        "arguments to regenerate part of it, e.g. `-k native`); `--report` groups it by cause.",
        '"""',
        "",
        "GAPS = {",
    ]
    kind = None
    for k in sorted(gaps, key=sort_key):
        if k[0] != kind:
            kind = k[0]
            lines.append(f"    # --- {kind}")
        lines.append(f"    {k!r}:")
        lines.append(f"        {gaps[k]!r},")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _regen(pytest_args):
    import subprocess
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "results.jsonl")
        env = dict(os.environ, OPINFO_IGNORE_GAPS="1", OPINFO_RESULTS=results)
        args = list(pytest_args)
        if not any(a == "-m" or a.startswith("-m") for a in args):
            args = ["-m", ""] + args
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rN", "--tb=no",
               os.path.abspath(__file__)] + args
        print("running:", " ".join(repr(a) if not a or " " in a else a for a in cmd), flush=True)
        subprocess.run(cmd, cwd=root, env=env)
        rows = []
        if os.path.exists(results):
            with open(results) as f:
                rows = [json.loads(line) for line in f]
    if not rows:
        print("no test results recorded; the gap list is unchanged")
        return 1
    all_keys = _all_keys()
    gaps = _expand(GAPS, all_keys)
    known = set(all_keys)
    gaps = {k: v for k, v in gaps.items() if k in known}     # ops or dtypes no longer swept
    ran = 0
    for r in rows:
        k = (r["kind"], r["op"], r["dtype"])
        gaps.pop(k, None)
        ran += 1
        if r["outcome"] == "failed":
            gaps[k] = r["reason"]
    gaps = _compact(gaps, all_keys)
    path = os.path.join(here, "opinfo_gaps.py")
    _write_gaps(gaps, path)
    nfail = sum(r["outcome"] == "failed" for r in rows)
    odd = [r for r in rows if r.get("harness")]
    if odd:
        print(f"WARNING: {len(odd)} failures came from the test code, not from a check of a "
              "neuron result (look at them before committing the list):")
        for r in odd[:20]:
            print(f"  {r['kind']} {r['op']} {r['dtype']}: {r['reason']}")
    print(f"{ran} tests ran, {nfail} failed; {len(gaps)} entries written to {path}")
    return 0


def _report():
    """The gap list grouped by cause: fallback aten ops with the OpInfo ops they affect,
    then every other failure."""
    fallback = {}
    other = {}
    for (kind, name, dt), reason in GAPS.items():
        if reason.startswith("falls back: "):
            for part in reason[len("falls back: "):].split("; "):
                aten, _, detail = part.partition(" ")
                fallback.setdefault((kind, aten), set()).add(
                    f"{name}[{dt}]" + (" partly" if "/" in detail.split(",")[0] else ""))
        else:
            other.setdefault(kind, []).append((name, dt, reason))
    for kind in ("native", "native_backward"):
        items = sorted(((a, ops) for (k, a), ops in fallback.items() if k == kind),
                       key=lambda kv: (-len({o.split('[')[0] for o in kv[1]}), kv[0]))
        print(f"== {kind}: {len(items)} aten ops fall back to the CPU")
        for aten, ops in items:
            names = sorted({o.split("[")[0] for o in ops})
            print(f"  {aten}  ({len(names)} OpInfo ops): " + ", ".join(sorted(ops)))
    for kind in KINDS:
        if kind in other:
            print(f"== {kind}: {len(other[kind])} failures")
            for name, dt, reason in sorted(other[kind]):
                print(f"  {name}[{dt}]: {reason}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--regen-gaps":
        sys.exit(_regen(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "--report":
        sys.exit(_report())
    print(__doc__)
    sys.exit(2)
