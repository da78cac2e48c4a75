"""torch.distributed collectives on the "neuron" process-group backend, each result compared with
its definition computed on the CPU from the per-rank inputs (which every rank regenerates from a
seed, so any rank can compute the expected value of every other).

Process start-up is slow (seconds), so each test function is one spawned run of 2 ranks (4 for
the `slow` ones) that loops over many sizes, dtypes and ops. The harness (tests/dist_harness.py)
switches backend with TN_DIST_TEST_BACKEND: "neuron" (default) or "gloo" (CPU tensors), which
validates these tests without the device:

    TN_DIST_TEST_BACKEND=gloo TORCH_DEVICE_BACKEND_AUTOLOAD=0 \
        .venv/bin/python -m pytest -q tests/test_distributed_collectives.py -m 'not slow or slow'

What gloo cannot do is skipped under gloo only, each with its reason (see GLOO_SKIPS).
"""
import glob
import os
import re
import signal
import time

import pytest
import torch
import torch.distributed as dist

from dist_harness import BACKEND, DEVICE, init, run_ranks

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
    pytest.mark.skipif(BACKEND == "gloo" and not dist.is_gloo_available(),
                       reason="this torch has no gloo backend"),
]

GLOO = BACKEND == "gloo"
GLOO_SKIPS = {
    "premul_sum": "gloo refuses ReduceOp.PREMUL_SUM ('Cannot use ReduceOp.PREMUL_SUM with Gloo')",
    "strided": "gloo all_reduce of a view with gaps (x[::2]) reduces the first numel() elements "
               "of its storage instead of the view's elements (wrong result, checked on 2.13)",
    "split_group": "split_group needs an accelerator (or torchcomms); on CPU-only torch it raises "
                   "'No device associated with the default pg'",
    "mismatch_dtype": "gloo compares only byte counts, so float32 vs int32 of the same numel is "
                      "not detected",
    "shm": "only the neuron backend has /dev/shm/tn_ccl* segments",
    "start_end_coalescing": "gloo does not implement startCoalescing (the old-style "
                            "_coalescing_manager(device=...)); the fast path is tested",
    # Sub-checks left out under gloo inside a run that otherwise runs (not separate tests):
    "stacked_output": "gloo refuses the documented stacked (world, n) output form of "
                      "all_gather_into_tensor ('invalid tensor size at index 0 (expected (1), "
                      "got (1, 1))'); the flat form is tested",
}


def gloo_skip(what):
    return pytest.mark.skipif(GLOO, reason=f"under gloo: {GLOO_SKIPS[what]}")


FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]
DTYPES = FLOATS + INTS + [torch.bool]
SIZES = [0, 1, 7, 1000, 300_000, 2**20 + 3]  # the last two are > 1 MiB in every dtype but bool/int8
R = dist.ReduceOp
FAULT_TIMEOUT = 5.0  # process-group timeout of the fault tests, seconds
FAULT_SLACK = 15.0   # how much later than that timeout the error may come


# ----------------------------------------------------------------------------------------------
# Inputs and definitions (pure CPU, run in the ranks)

def rank_input(rank, shape, dtype, salt=0, kind="any"):
    """The deterministic input of `rank`. kind="prod": floats in [0.5, 1.5) so products neither
    overflow nor vanish; integers are small so sums and products stay exact."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    g = torch.Generator().manual_seed(1_000_003 * (rank + 1) + 7919 * salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        x = (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5 if kind == "prod"
             else torch.randn(shape, generator=g, dtype=torch.float64))
        return x.to(dtype)
    lo, hi = (0, 10) if dtype == torch.uint8 else (-5, 6)
    if kind == "prod":
        lo, hi = (1, 4) if dtype == torch.uint8 else (-3, 4)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def reduce_def(xs, op, factor=None):
    """The reduction of the CPU tensors `xs` computed in float64/int64, cast back. For bool this
    makes SUM/MAX/BOR an OR and PRODUCT/MIN/BAND an AND (NCCL's semantics)."""
    dtype = xs[0].dtype
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    w = torch.stack([x.to(wide) for x in xs])
    if op == "sum":
        out = w.sum(0)
    elif op == "avg":
        out = w.sum(0) / len(xs)
    elif op == "product":
        out = w.prod(0)
    elif op == "min":
        out = w.min(0).values
    elif op == "max":
        out = w.max(0).values
    elif op == "premul_sum":
        out = (w * factor).sum(0)
    elif op in ("band", "bor", "bxor"):
        fn = {"band": torch.bitwise_and, "bor": torch.bitwise_or, "bxor": torch.bitwise_xor}[op]
        out = w[0]
        for x in w[1:]:
            out = fn(out, x)
        if dtype == torch.bool:
            return out.bool()
    else:
        raise ValueError(op)
    return (out != 0) if dtype == torch.bool else out.to(dtype)


def red_op(name):
    return {"sum": R.SUM, "avg": R.AVG, "product": R.PRODUCT, "min": R.MIN, "max": R.MAX,
            "band": R.BAND, "bor": R.BOR, "bxor": R.BXOR}[name]


def ops_for(dtype):
    """The ops each dtype is checked with (AVG is not defined for integers and bool)."""
    if dtype.is_floating_point:
        return ["sum", "avg", "product", "min", "max"]
    return ["sum", "product", "min", "max", "band", "bor", "bxor"]


def check(actual, expected, what, world_size=2):
    """assert_close on the CPU; 16-bit floats get an absolute slack for the rounding of partial
    sums (the backend may accumulate in any order)."""
    actual = actual.cpu() if isinstance(actual, torch.Tensor) else actual
    kw = {}
    if expected.dtype == torch.bfloat16:
        kw = dict(rtol=1.6e-2, atol=2e-2 * world_size)
    elif expected.dtype == torch.float16:
        kw = dict(rtol=1e-3, atol=3e-3 * world_size)
    torch.testing.assert_close(actual, expected, msg=lambda m: f"{what}: {m}", **kw)


def dev(x):
    """A copy of CPU tensor x on the device (always a copy: the collectives write in place, and
    under gloo x.to("cpu") would alias the reference input)."""
    return x.to(DEVICE, copy=True)


def sync():
    if DEVICE != "cpu":
        torch.accelerator.synchronize()


def error_info(exc, started):
    return {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
            "backend_error": isinstance(exc, dist.DistBackendError), "msg": str(exc),
            "elapsed": time.monotonic() - started}


# ----------------------------------------------------------------------------------------------
# all_reduce

def _w_all_reduce(rank, ws):
    init(rank, ws)
    n_checks = 0
    for n in SIZES:
        for dtype in DTYPES:
            inputs = {kind: [rank_input(r, n, dtype, salt=n, kind=kind) for r in range(ws)]
                      for kind in ("any", "prod")}
            for op in ops_for(dtype):
                xs = inputs["prod" if op == "product" else "any"]
                t = dev(xs[rank])
                dist.all_reduce(t, op=red_op(op))
                check(t, reduce_def(xs, op), f"all_reduce {op} n={n} {dtype}", ws)
                n_checks += 1
    # Inputs made by a device kernel just before the collective (stream order), result read
    # by a kernel just after it.
    xs = [rank_input(r, 4099, torch.float32, salt=1) for r in range(ws)]
    t = dev(xs[rank]) * 3 + 1
    dist.all_reduce(t)
    check(t * 2, reduce_def([x * 3 + 1 for x in xs], "sum") * 2, "all_reduce after a kernel")
    # Non-contiguous but dense views: the result is written back into the view (its storage).
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        xs = [rank_input(r, (37, 129), dtype, salt=2) for r in range(ws)]
        base = dev(xs[rank].t().contiguous())  # (129, 37); base.t() is xs[rank], transposed
        view = base.t()
        assert not view.is_contiguous()
        dist.all_reduce(view, op=R.MAX)
        check(base.t(), reduce_def(xs, "max"), f"all_reduce of a transposed view {dtype}")
        n_checks += 1
    return n_checks


def test_all_reduce():
    """SUM/AVG/PRODUCT/MIN/MAX (+BAND/BOR/BXOR for integers and bool) over sizes 0..2^20+3
    and float32/bfloat16/float16/float64/int32/int64/uint8/int8/bool; a transposed view."""
    counts = run_ranks(_w_all_reduce, timeout=300)
    assert counts[0] == counts[1] > 300


def _w_premul_sum(rank, ws):
    init(rank, ws)
    for dtype in FLOATS:
        for n in (0, 1, 7, 1000, 300_000):
            xs = [rank_input(r, n, dtype, salt=3) for r in range(ws)]
            for factor in (0.5, 3.0):
                for as_tensor in (False, True):
                    f = torch.tensor(factor, dtype=dtype, device=DEVICE) if as_tensor else factor
                    t = dev(xs[rank])
                    dist.all_reduce(t, op=dist._make_nccl_premul_sum(f))
                    check(t, reduce_def(xs, "premul_sum", factor),
                          f"PREMUL_SUM({factor}, tensor={as_tensor}) n={n} {dtype}")


@gloo_skip("premul_sum")
def test_all_reduce_premul_sum():
    """PREMUL_SUM (dist._make_nccl_premul_sum with a float and with a 0-d tensor factor)."""
    run_ranks(_w_premul_sum)


def _w_strided(rank, ws):
    init(rank, ws)
    for dtype in (torch.float32, torch.float16, torch.int32, torch.bool):
        for n in (1, 7, 1000, 300_000):
            xs = [rank_input(r, n, dtype, salt=4) for r in range(ws)]
            base = dev(torch.zeros(2 * n, dtype=dtype))
            view = base[::2]
            view.copy_(dev(xs[rank]))
            dist.all_reduce(view, op=R.SUM)
            check(base[::2], reduce_def(xs, "sum"), f"all_reduce of x[::2] n={n} {dtype}")
            check(base[1::2], torch.zeros(n, dtype=dtype), f"gaps of x[::2] n={n} {dtype}")


@gloo_skip("strided")
def test_all_reduce_strided_view():
    """all_reduce of a view with gaps (x[::2]): the result lands in the view, the gaps keep
    their values."""
    run_ranks(_w_strided)


# ----------------------------------------------------------------------------------------------
# async_op and Work

def _w_async(rank, ws):
    init(rank, ws)
    xs_list = [[rank_input(r, n, torch.float32, salt=5 + i) for r in range(ws)]
               for i, n in enumerate((1, 1000, 300_000, 7, 2**20 + 3, 64, 5, 4096))]
    ts = [dev(xs[rank]) for xs in xs_list]
    works = [dist.all_reduce(t, async_op=True) for t in ts]  # all in flight at once
    assert all(isinstance(w, dist.Work) for w in works), [type(w) for w in works]
    for w, t, xs in zip(works, ts, xs_list):
        w.wait()
        check(t + 0, reduce_def(xs, "sum"), f"async all_reduce n={xs[0].numel()}")
    sync()
    deadline = time.monotonic() + 10
    while not all(w.is_completed() for w in works):
        assert time.monotonic() < deadline, "work.is_completed() still False 10 s after sync"
        time.sleep(0.01)
    # get_future (DDP's comm hooks use it): the future's value is the list of output tensors.
    xs = [rank_input(r, 999, torch.float32, salt=20) for r in range(ws)]
    t = dev(xs[rank])
    value = dist.all_reduce(t, op=R.MAX, async_op=True).get_future().wait()
    check(value[0], reduce_def(xs, "max"), "get_future().wait()[0]")
    check(t, reduce_def(xs, "max"), "get_future: the input tensor")
    # Other collectives asynchronously.
    b = dev(rank_input(rank, 5000, torch.bfloat16, salt=21))
    w1 = dist.broadcast(b, src=1, async_op=True)
    outs = [dev(torch.empty(300, dtype=torch.int64)) for _ in range(ws)]
    w2 = dist.all_gather(outs, dev(rank_input(rank, 300, torch.int64, salt=22)), async_op=True)
    w2.wait()
    w1.wait()
    check(b, rank_input(1, 5000, torch.bfloat16, salt=21), "async broadcast")
    for r in range(ws):
        check(outs[r], rank_input(r, 300, torch.int64, salt=22), f"async all_gather [{r}]")
    return True


def test_async_op_work():
    """async_op=True: a Work per call, 8 in flight, wait() then correct, is_completed() after
    synchronize, get_future(), async broadcast/all_gather."""
    run_ranks(_w_async)


# ----------------------------------------------------------------------------------------------
# broadcast, reduce, gather, scatter, all_gather, reduce_scatter

CASES = [(n, dtype) for n in (0, 1, 7, 1000, 300_000) for dtype in DTYPES] + \
        [(2**20 + 3, torch.float32), (2**20 + 3, torch.uint8)]


def _w_rooted(rank, ws):
    init(rank, ws)
    for n, dtype in CASES:
        for root in range(ws):
            # broadcast
            t = dev(rank_input(rank, n, dtype, salt=30))
            dist.broadcast(t, src=root)
            check(t, rank_input(root, n, dtype, salt=30), f"broadcast root={root} n={n} {dtype}")
            # reduce (non-root tensors are unspecified)
            for op in ("sum", "max", "min") if n <= 1000 or dtype == torch.float32 else ("sum",):
                xs = [rank_input(r, n, dtype, salt=31) for r in range(ws)]
                t = dev(xs[rank])
                dist.reduce(t, dst=root, op=red_op(op))
                if rank == root:
                    check(t, reduce_def(xs, op), f"reduce {op} root={root} n={n} {dtype}", ws)
            # gather
            mine = dev(rank_input(rank, n, dtype, salt=32))
            lst = [dev(torch.empty(n, dtype=dtype)) for _ in range(ws)] if rank == root else None
            dist.gather(mine, lst, dst=root)
            if rank == root:
                for r in range(ws):
                    check(lst[r], rank_input(r, n, dtype, salt=32),
                          f"gather root={root} [{r}] n={n} {dtype}")
            # scatter: root's list element i is rank_input(root, n, salt=33+i)
            out = dev(torch.empty(n, dtype=dtype))
            src = ([dev(rank_input(root, n, dtype, salt=33 + i)) for i in range(ws)]
                   if rank == root else None)
            dist.scatter(out, src, src=root)
            check(out, rank_input(root, n, dtype, salt=33 + rank),
                  f"scatter root={root} n={n} {dtype}")
    return True


def test_broadcast_reduce_gather_scatter():
    """broadcast / reduce (SUM, MAX, MIN) / gather / scatter from each root, sizes 0..2^20+3,
    every dtype."""
    run_ranks(_w_rooted, timeout=300)


def _w_gather_family(rank, ws):
    init(rank, ws)
    for n, dtype in CASES:
        xs = [rank_input(r, n, dtype, salt=40) for r in range(ws)]
        # all_gather (list)
        outs = [dev(torch.empty(n, dtype=dtype)) for _ in range(ws)]
        dist.all_gather(outs, dev(xs[rank]))
        for r in range(ws):
            check(outs[r], xs[r], f"all_gather [{r}] n={n} {dtype}")
        # all_gather_into_tensor, flat and stacked output
        flat = dev(torch.empty(ws * n, dtype=dtype))
        dist.all_gather_into_tensor(flat, dev(xs[rank]))
        check(flat, torch.cat(xs), f"all_gather_into_tensor n={n} {dtype}")
        if not GLOO:  # gloo: GLOO_SKIPS["stacked_output"]
            stacked = dev(torch.empty(ws, n, dtype=dtype))
            dist.all_gather_into_tensor(stacked, dev(xs[rank]))
            check(stacked, torch.stack(xs), f"all_gather_into_tensor (stacked) n={n} {dtype}")
        if hasattr(dist, "all_gather_single"):  # 2.13's name for all_gather_into_tensor
            flat = dev(torch.empty(ws * n, dtype=dtype))
            dist.all_gather_single(flat, dev(xs[rank]))
            check(flat, torch.cat(xs), f"all_gather_single n={n} {dtype}")
        # reduce_scatter (list) and reduce_scatter_tensor: rank r keeps chunk r of the reduction
        ys = [rank_input(r, ws * n, dtype, salt=41) for r in range(ws)]
        ops = ("sum", "max") if dtype == torch.bool or n > 1000 else ("sum", "max", "min",
                                                                      "product")
        for op in ops:
            yk = ys if op != "product" else [rank_input(r, ws * n, dtype, salt=42, kind="prod")
                                             for r in range(ws)]
            expected = reduce_def(yk, op).chunk(ws)[rank] if n else reduce_def(yk, op)
            out = dev(torch.empty(n, dtype=dtype))
            dist.reduce_scatter(out, [dev(c) for c in yk[rank].chunk(ws)] if n else
                                [dev(torch.empty(0, dtype=dtype)) for _ in range(ws)],
                                op=red_op(op))
            check(out, expected, f"reduce_scatter {op} n={n} {dtype}", ws)
            out = dev(torch.empty(n, dtype=dtype))
            dist.reduce_scatter_tensor(out, dev(yk[rank]), op=red_op(op))
            check(out, expected, f"reduce_scatter_tensor {op} n={n} {dtype}", ws)
            if hasattr(dist, "reduce_scatter_single"):  # 2.13's name for reduce_scatter_tensor
                out = dev(torch.empty(n, dtype=dtype))
                dist.reduce_scatter_single(out, dev(yk[rank]), op=red_op(op))
                check(out, expected, f"reduce_scatter_single {op} n={n} {dtype}", ws)
        if dtype.is_floating_point and n <= 1000:
            out = dev(torch.empty(n, dtype=dtype))
            dist.reduce_scatter_tensor(out, dev(ys[rank]), op=R.AVG)
            exp = reduce_def(ys, "avg").chunk(ws)[rank] if n else reduce_def(ys, "avg")
            check(out, exp, f"reduce_scatter_tensor avg n={n} {dtype}", ws)
    # 2-D: all_gather_into_tensor gathers along dim 0
    xs = [rank_input(r, (33, 5), torch.float32, salt=43) for r in range(ws)]
    out = dev(torch.empty(ws * 33, 5))
    dist.all_gather_into_tensor(out, dev(xs[rank]))
    check(out, torch.cat(xs), "all_gather_into_tensor 2-D")
    return True


def test_all_gather_reduce_scatter():
    """all_gather (list), all_gather_into_tensor (flat, stacked, 2-D), reduce_scatter (list),
    reduce_scatter_tensor with SUM/MAX/MIN/PRODUCT/AVG, sizes 0..2^20+3, every dtype."""
    run_ranks(_w_gather_family, timeout=300)


# ----------------------------------------------------------------------------------------------
# all_to_all

def split_sizes(src, dst, scale):
    """Elements rank `src` sends to rank `dst` in the uneven all_to_all (zeros included)."""
    return ((3 * src + 5 * dst + 1) % 4) * scale


def a2a_expected(rank, ws, scale, dtype, salt, width=()):
    """What `rank` receives in the uneven all_to_all_single: from each j, j's segment for rank."""
    parts = []
    for j in range(ws):
        sizes = [split_sizes(j, d, scale) for d in range(ws)]
        x = rank_input(j, (sum(sizes),) + width, dtype, salt=salt)
        parts.append(x.split(sizes)[rank])
    return torch.cat(parts)


def _w_all_to_all(rank, ws, check_list_form=True):
    init(rank, ws)
    dtypes = (torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool)
    for dtype in dtypes:
        for n in (0, 1, 7, 1000, 300_000):
            # list form: out[j] is rank j's in[rank]
            if check_list_form:
                ins = [dev(rank_input(rank, n, dtype, salt=50 + j)) for j in range(ws)]
                outs = [dev(torch.empty(n, dtype=dtype)) for _ in range(ws)]
                dist.all_to_all(outs, ins)
                for j in range(ws):
                    check(outs[j], rank_input(j, n, dtype, salt=50 + rank),
                          f"all_to_all [{j}] n={n} {dtype}")
            # single, even
            x = rank_input(rank, ws * n, dtype, salt=60)
            out = dev(torch.empty(ws * n, dtype=dtype))
            dist.all_to_all_single(out, dev(x))
            exp = torch.cat([rank_input(j, ws * n, dtype, salt=60).chunk(ws)[rank] if n else
                             torch.empty(0, dtype=dtype) for j in range(ws)])
            check(out, exp, f"all_to_all_single even n={n} {dtype}")
        # single, uneven splits (some zero), 1-D and 2-D (split along dim 0)
        for scale, width in ((1, ()), (333, ()), (100_000, ()), (7, (3,))):
            in_sizes = [split_sizes(rank, d, scale) for d in range(ws)]
            out_sizes = [split_sizes(j, rank, scale) for j in range(ws)]
            x = rank_input(rank, (sum(in_sizes),) + width, dtype, salt=61)
            out = dev(torch.empty((sum(out_sizes),) + width, dtype=dtype))
            dist.all_to_all_single(out, dev(x), output_split_sizes=out_sizes,
                                   input_split_sizes=in_sizes)
            check(out, a2a_expected(rank, ws, scale, dtype, 61, width),
                  f"all_to_all_single uneven scale={scale} width={width} {dtype}")
    return True


def test_all_to_all():
    """all_to_all (list) and all_to_all_single with even and uneven (zero-including) splits,
    1-D and 2-D, sizes up to > 1 MiB."""
    run_ranks(_w_all_to_all, timeout=300)


# ----------------------------------------------------------------------------------------------
# barrier and point-to-point

def _w_p2p(rank, ws):
    init(rank, ws)
    peer = 1 - rank
    # barrier waits for the slowest rank
    dist.barrier()
    if rank == 1:
        time.sleep(1.0)
    t0 = time.monotonic()
    dist.barrier()
    waited = time.monotonic() - t0
    if rank == 0:
        assert waited > 0.7, f"barrier returned after {waited:.2f} s while rank 1 slept 1 s"
    cases = [(1, torch.float32), (7, torch.int8), (1000, torch.bfloat16), (0, torch.float32),
             (300_000, torch.float64), (2**20 + 3, torch.float32), (1001, torch.bool)]
    for n, dtype in cases:
        # send/recv, 0 -> 1 then 1 -> 0
        for sender in (0, 1):
            if rank == sender:
                dist.send(dev(rank_input(rank, n, dtype, salt=70)), dst=peer)
            else:
                got = dev(torch.empty(n, dtype=dtype))
                dist.recv(got, src=peer)
                check(got, rank_input(peer, n, dtype, salt=70), f"recv n={n} {dtype}")
        # isend/irecv both ways at once (a blocking transport deadlocks on the large ones)
        got = dev(torch.empty(n, dtype=dtype))
        works = [dist.isend(dev(rank_input(rank, n, dtype, salt=71)), dst=peer),
                 dist.irecv(got, src=peer)]
        for w in works:
            w.wait()
        check(got, rank_input(peer, n, dtype, salt=71), f"irecv n={n} {dtype}")
    if BACKEND == "neuron":
        # like NCCL, the neuron backend needs the source rank and ignores tags (messages between
        # two ranks arrive in order): the checks below are Gloo features
        return True
    # recv from any source returns the sender
    if rank == 0:
        dist.send(dev(torch.arange(5)), dst=1)
    else:
        got = dev(torch.empty(5, dtype=torch.int64))
        assert dist.recv(got) == 0
        check(got, torch.arange(5), "recv from any source")
    # tags keep two messages apart
    if rank == 0:
        dist.send(dev(torch.full((3,), 1.0)), dst=1, tag=11)
        dist.send(dev(torch.full((3,), 2.0)), dst=1, tag=12)
    else:
        a, b = dev(torch.empty(3)), dev(torch.empty(3))
        wb = dist.irecv(b, src=0, tag=12)
        wa = dist.irecv(a, src=0, tag=11)
        wa.wait()
        wb.wait()
        check(a, torch.full((3,), 1.0), "tag 11")
        check(b, torch.full((3,), 2.0), "tag 12")
    return True


def _ring_exchange(rank, ws, salt):
    """batch_isend_irecv ring: every rank sends to rank+1 and receives from rank-1, small and
    > 1 MiB messages in one batch, both directions of the ring at once."""
    nxt, prv = (rank + 1) % ws, (rank - 1) % ws
    specs = [(5, torch.float32), (2**20 + 3, torch.float32), (300_000, torch.bfloat16),
             (77, torch.int64)]
    ops, checks = [], []
    for i, (n, dtype) in enumerate(specs):
        fwd, bwd = dev(torch.empty(n, dtype=dtype)), dev(torch.empty(n, dtype=dtype))
        ops += [dist.P2POp(dist.isend, dev(rank_input(rank, n, dtype, salt=salt + i)), nxt),
                dist.P2POp(dist.irecv, fwd, prv),
                dist.P2POp(dist.isend, dev(rank_input(rank, n, dtype, salt=salt + 50 + i)), prv),
                dist.P2POp(dist.irecv, bwd, nxt)]
        checks += [(fwd, rank_input(prv, n, dtype, salt=salt + i), f"ring fwd {n} {dtype}"),
                   (bwd, rank_input(nxt, n, dtype, salt=salt + 50 + i), f"ring bwd {n} {dtype}")]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for got, expected, what in checks:
        check(got, expected, what)


def _w_batch_p2p(rank, ws):
    init(rank, ws)
    for it in range(3):
        _ring_exchange(rank, ws, salt=100 + 10 * it)
    return True


def test_barrier_send_recv():
    """barrier (waits for a sleeping rank), send/recv, isend/irecv both ways at once (> 1 MiB
    too), recv from any source, tags."""
    run_ranks(_w_p2p, timeout=180)


def test_batch_isend_irecv_ring():
    """batch_isend_irecv ring exchange in both directions, small and > 1 MiB messages."""
    run_ranks(_w_batch_p2p)


# ----------------------------------------------------------------------------------------------
# coalesced collectives

def _w_coalesced(rank, ws, style):
    init(rank, ws)
    # "fast": the backend's *_coalesced entry points; "start_end": start/endCoalescing around
    # the individual calls (what _coalescing_manager does when given a device).
    device = torch.device(DEVICE, rank) if style == "start_end" else None
    sizes = (1, 7, 1000, 300_000)
    for async_ops in (False, True):
        xs = {n: [rank_input(r, n, torch.float32, salt=200 + n) for r in range(ws)]
              for n in sizes}
        gathered = [dev(torch.empty(ws * n)) for n in sizes]
        with dist._coalescing_manager(device=device, async_ops=async_ops) as cm:
            for out, n in zip(gathered, sizes):
                dist.all_gather_into_tensor(out, dev(xs[n][rank]))
        if async_ops:
            cm.wait()
        for out, n in zip(gathered, sizes):
            check(out, torch.cat(xs[n]), f"coalesced all_gather_into_tensor n={n}")
        reduced = [dev(xs[n][rank]) for n in sizes]
        with dist._coalescing_manager(device=device, async_ops=async_ops) as cm:
            for t in reduced:
                dist.all_reduce(t)
        if async_ops:
            cm.wait()
        for t, n in zip(reduced, sizes):
            check(t, reduce_def(xs[n], "sum"), f"coalesced all_reduce n={n}")
        ys = {n: [rank_input(r, ws * n, torch.bfloat16, salt=300 + n) for r in range(ws)]
              for n in sizes}
        scattered = [dev(torch.empty(n, dtype=torch.bfloat16)) for n in sizes]
        with dist._coalescing_manager(device=device, async_ops=async_ops) as cm:
            for out, n in zip(scattered, sizes):
                dist.reduce_scatter_tensor(out, dev(ys[n][rank]))
        if async_ops:
            cm.wait()
        for out, n in zip(scattered, sizes):
            check(out, reduce_def(ys[n], "sum").chunk(ws)[rank],
                  f"coalesced reduce_scatter_tensor n={n}")
    return True


@pytest.mark.skipif(not hasattr(dist, "_coalescing_manager"),
                    reason="this torch has no dist._coalescing_manager")
@pytest.mark.parametrize("style", ["fast", pytest.param("start_end",
                                                        marks=gloo_skip("start_end_coalescing"))])
def test_coalesced_collectives(style):
    """all_gather_into_tensor / all_reduce / reduce_scatter_tensor inside
    dist._coalescing_manager, synchronous and with async_ops=True + cm.wait(); through the
    backend's coalesced entry points ("fast") and through start/endCoalescing ("start_end")."""
    run_ranks(_w_coalesced, args=(style,))


# ----------------------------------------------------------------------------------------------
# object collectives

def rank_object(rank, salt=0):
    return {"rank": rank, "salt": salt, "name": f"r{rank}" * (rank + 1),
            "list": list(range(rank + salt % 5)), "tensor": torch.arange(3) + rank,
            "blob": bytes([rank % 256]) * (1_500_000 if salt == 1 else 10)}


def same_object(a, b):
    return (a.keys() == b.keys() and all(torch.equal(a[k], b[k]) if k == "tensor" else a[k] == b[k]
                                          for k in a))


def _w_objects(rank, ws):
    init(rank, ws)
    for salt in (0, 1):  # salt 1: > 1 MiB objects
        got = [None] * ws
        dist.all_gather_object(got, rank_object(rank, salt))
        assert all(same_object(got[r], rank_object(r, salt)) for r in range(ws)), got
        for root in range(ws):
            objs = [rank_object(rank, salt), "x" * rank, None] if rank == root else [None] * 3
            dist.broadcast_object_list(objs, src=root)
            assert same_object(objs[0], rank_object(root, salt)), objs[0]
            assert objs[1:] == ["x" * root, None], objs[1:]
            gathered = [None] * ws if rank == root else None
            dist.gather_object(rank_object(rank, salt), gathered, dst=root)
            if rank == root:
                assert all(same_object(gathered[r], rank_object(r, salt)) for r in range(ws))
            out = [None]
            src = [rank_object(100 + i, salt) for i in range(ws)] if rank == root else None
            dist.scatter_object_list(out, src, src=root)
            assert same_object(out[0], rank_object(100 + rank, salt)), out
    return True


def test_object_collectives():
    """all_gather_object, broadcast_object_list, gather_object, scatter_object_list from each
    root, small and > 1 MiB objects."""
    run_ranks(_w_objects)


# ----------------------------------------------------------------------------------------------
# groups

def _w_groups(rank, ws):
    init(rank, ws)
    sub = dist.new_group([1])  # every rank calls new_group; only rank 1 is in it
    full_a = dist.new_group([0, 1])
    full_b = dist.new_group([0, 1])
    if rank == 1:
        assert dist.get_world_size(sub) == 1 and dist.get_rank(sub) == 0
        t = dev(rank_input(1, 1000, torch.float32, salt=400))
        dist.all_reduce(t, group=sub)
        check(t, rank_input(1, 1000, torch.float32, salt=400), "all_reduce in a 1-rank group")
    else:
        assert dist.get_rank(sub) == -1
    assert dist.get_world_size(full_a) == ws and dist.get_rank(full_a) == rank
    # Interleave the two full groups and the default one, synchronously and with work in
    # flight on all three at once: each communicator keeps its own messages.
    for it in range(5):
        xs = [[rank_input(r, 300_000 if it == 2 else 999, torch.float32, salt=410 + 3 * it + g)
               for r in range(ws)] for g in range(3)]
        ts = [dev(xs[g][rank]) for g in range(3)]
        works = [dist.all_reduce(ts[0], group=full_a, async_op=True),
                 dist.all_reduce(ts[1], op=R.MAX, group=full_b, async_op=True),
                 dist.all_reduce(ts[2], op=R.MIN, async_op=True)]
        for w in works:
            w.wait()
        for g, op in enumerate(("sum", "max", "min")):
            check(ts[g], reduce_def(xs[g], op), f"interleaved groups it={it} group {g}")
    # Small collectives of the two groups launched in opposite orders by rank 0 and the others
    # (async, waited for afterwards; synchronous calls would order each group's stream after
    # the other's wait, a cycle on any backend): a rank that finds its streams idle waits only
    # ~20 us for its peers on the calling thread before it leaves the collective to its
    # stream, so both groups' collectives complete.
    for it in range(3):
        xs = [[rank_input(r, 7, torch.float32, salt=430 + 2 * it + g) for r in range(ws)] for g in range(2)]
        ts = [dev(xs[g][rank]) for g in range(2)]
        works = [dist.all_reduce(ts[g], group=(full_a, full_b)[g], async_op=True)
                 for g in ((0, 1) if rank == 0 else (1, 0))]
        for w in works:
            w.wait()
        for g in range(2):
            check(ts[g], reduce_def(xs[g], "sum"), f"groups in opposite orders it={it} group {g}")
    b = dev(rank_input(rank, 50, torch.int64, salt=420))
    dist.broadcast(b, src=1, group=full_b)  # src is a global rank
    check(b, rank_input(1, 50, torch.int64, salt=420), "broadcast in a new group")
    outs = [dev(torch.empty(10)) for _ in range(ws)]
    dist.all_gather(outs, dev(rank_input(rank, 10, torch.float32, salt=421)), group=full_a)
    for r in range(ws):
        check(outs[r], rank_input(r, 10, torch.float32, salt=421), f"all_gather group [{r}]")
    dist.destroy_process_group(sub)
    dist.destroy_process_group(full_a)
    t = dev(torch.ones(3))
    dist.all_reduce(t, group=full_b)  # the others' destruction leaves this one working
    check(t, torch.full((3,), float(ws)), "all_reduce after destroying sibling groups")
    return True


def test_new_group():
    """new_group of a subset ([1]) and of all ranks (twice): rank/size queries, collectives
    interleaved across three groups with async work in flight on all, two groups called in
    opposite orders by the ranks, destroying a group."""
    run_ranks(_w_groups)


def _w_split(rank, ws):
    init(rank, ws, device_id=torch.device(DEVICE, rank))
    own = dist.split_group(split_ranks=[[r] for r in range(ws)])
    both = dist.split_group(split_ranks=[list(range(ws))])
    assert dist.get_world_size(own) == 1 and dist.get_world_size(both) == ws
    x = rank_input(rank, 1000, torch.float32, salt=430)
    t = dev(x)
    dist.all_reduce(t, group=own)
    check(t, x, "all_reduce in a split 1-rank group")
    xs = [rank_input(r, 1000, torch.float32, salt=431) for r in range(ws)]
    t = dev(xs[rank])
    dist.all_reduce(t, group=both)
    check(t, reduce_def(xs, "sum"), "all_reduce in a split full group")
    return True


@gloo_skip("split_group")
@pytest.mark.skipif(not hasattr(dist, "split_group"), reason="this torch has no split_group")
def test_split_group():
    """dist.split_group(split_ranks=...) into 1-rank groups and one full group."""
    run_ranks(_w_split)


def _w_mesh_from_another_rank(rank, ws):
    import pickle

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    init(rank, ws)
    mesh = init_device_mesh(DEVICE, (ws,), mesh_dim_names=("tp",))
    hash(mesh)  # the mesh caches its hash, as any dict lookup makes it do
    blobs = [[pickle.dumps(mesh) if rank == r else None] for r in range(ws)]
    for r in range(ws):
        dist.broadcast_object_list(blobs[r], src=r)
    other = pickle.loads(blobs[(rank + 1) % ws][0])
    assert other == mesh and hash(other) == hash(mesh), "the unpickled mesh hashes differently"
    assert {mesh: "live"}.get(other) == "live"
    assert list(other.get_coordinate()) == list(mesh.get_coordinate()) == [rank], other.get_coordinate()
    assert other.get_local_rank() == rank
    x = torch.arange(4 * ws, dtype=torch.float32).reshape(2 * ws, 2)
    local = distribute_tensor(x.to(DEVICE), other, [Shard(0)]).to_local().cpu()
    torch.testing.assert_close(local, x.chunk(ws)[rank], rtol=0, atol=0)
    return True


@pytest.mark.skipif(GLOO, reason="the fix is torch_neuronx's (distributed.py), not torch's")
def test_device_mesh_pickled_on_another_rank():
    """A DeviceMesh pickled by rank r+1 (compiled DTensor graphs hold meshes in the cache entries
    every rank reads) unpickles on rank r as rank r's mesh: equal, same hash, rank r's
    coordinates, and a tensor distributed on it holds rank r's shard."""
    run_ranks(_w_mesh_from_another_rank)


# ----------------------------------------------------------------------------------------------
# functional collectives

def _w_functional(rank, ws):
    import torch.distributed._functional_collectives as fc

    init(rank, ws)
    group = dist.group.WORLD
    name = group.group_name
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for n in (1, 7, 1000, 300_000):
            xs = [rank_input(r, n, dtype, salt=500) for r in range(ws)]
            for op in ("sum", "max", "min") + (("avg",) if dtype.is_floating_point else ()):
                out = fc.all_reduce(dev(xs[rank]), op, group)
                check(fc.wait_tensor(out), reduce_def(xs, op), f"fc.all_reduce {op} {n} {dtype}")
                out = torch.ops._c10d_functional.all_reduce(dev(xs[rank]), op, name)
                out = torch.ops._c10d_functional.wait_tensor(out)
                check(out, reduce_def(xs, op), f"_c10d_functional.all_reduce {op} {n} {dtype}")
            ys = [rank_input(r, (n, 3), dtype, salt=501) for r in range(ws)]
            out = fc.all_gather_tensor(dev(ys[rank]), 0, group)
            check(fc.wait_tensor(out), torch.cat(ys, 0), f"fc.all_gather_tensor dim 0 {n}")
            out = fc.all_gather_tensor(dev(ys[rank]), 1, group)
            check(fc.wait_tensor(out), torch.cat(ys, 1), f"fc.all_gather_tensor dim 1 {n}")
            out = torch.ops._c10d_functional.all_gather_into_tensor(dev(ys[rank]), ws, name)
            check(torch.ops._c10d_functional.wait_tensor(out), torch.cat(ys, 0),
                  f"_c10d_functional.all_gather_into_tensor {n}")
            zs = [rank_input(r, (ws * n, 2), dtype, salt=502) for r in range(ws)]
            out = fc.reduce_scatter_tensor(dev(zs[rank]), "sum", 0, group)
            check(fc.wait_tensor(out), reduce_def(zs, "sum").chunk(ws)[rank],
                  f"fc.reduce_scatter_tensor {n} {dtype}", ws)
            out = torch.ops._c10d_functional.reduce_scatter_tensor(dev(zs[rank]), "sum", ws, name)
            check(torch.ops._c10d_functional.wait_tensor(out),
                  reduce_def(zs, "sum").chunk(ws)[rank],
                  f"_c10d_functional.reduce_scatter_tensor {n} {dtype}", ws)
            out = fc.all_to_all_single(dev(zs[rank]), None, None, group)
            exp = torch.cat([zs[j].chunk(ws)[rank] for j in range(ws)])
            check(fc.wait_tensor(out), exp, f"fc.all_to_all_single even {n} {dtype}")
        for scale in (1, 1000):
            in_sizes = [split_sizes(rank, d, scale) for d in range(ws)]
            out_sizes = [split_sizes(j, rank, scale) for j in range(ws)]
            x = rank_input(rank, sum(in_sizes), dtype, salt=503)
            out = fc.all_to_all_single(dev(x), out_sizes, in_sizes, group)
            check(fc.wait_tensor(out), a2a_expected(rank, ws, scale, dtype, 503),
                  f"fc.all_to_all_single uneven scale={scale} {dtype}")
    # The result used by a kernel right away (the AsyncCollectiveTensor waits by itself).
    xs = [rank_input(r, 100, torch.float32, salt=504) for r in range(ws)]
    out = fc.all_reduce(dev(xs[rank]), "sum", group) * 2
    check(out, reduce_def(xs, "sum") * 2, "fc.all_reduce result used by a kernel")
    return True


def test_functional_collectives():
    """_functional_collectives all_reduce (sum/max/min/avg), all_gather_tensor (dim 0 and 1),
    reduce_scatter_tensor, all_to_all_single (even, uneven) and the torch.ops._c10d_functional
    all_reduce / all_gather_into_tensor / reduce_scatter_tensor + wait_tensor."""
    run_ranks(_w_functional)


# ----------------------------------------------------------------------------------------------
# resource growth

def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def resources():
    r = {"rss": rss_bytes(), "fds": len(os.listdir("/proc/self/fd")),
         "shm": len(glob.glob("/dev/shm/tn_ccl*"))}
    if DEVICE != "cpu":
        sync()
        r["allocated"] = torch.neuron.memory_allocated()
    return r


def _w_loop(rank, ws):
    init(rank, ws)
    t = dev(torch.ones(16))

    def run(iters):
        for i in range(iters):
            if i % 2:
                dist.all_reduce(t, op=R.MAX)
            else:
                dist.all_reduce(t, op=R.MAX, async_op=True).wait()
            if i % 100 == 99:
                check(t, torch.ones(16), f"loop iteration {i}")

    run(100)
    before = resources()
    run(1000)
    after = resources()
    return before, after


def test_all_reduce_loop_does_not_grow():
    """1,000 small all_reduces (sync and async) after a 100-iteration warm-up: host RSS,
    open file descriptors, /dev/shm/tn_ccl* segments and (neuron) memory_allocated stay put."""
    for rank, (before, after) in enumerate(run_ranks(_w_loop, timeout=180)):
        grew = {k: after[k] - before[k] for k in before}
        assert grew["rss"] <= 8 << 20, f"rank {rank}: RSS grew by {grew['rss']} B: {grew}"
        assert grew["fds"] <= 2, f"rank {rank}: {grew['fds']} more open fds: {grew}"
        assert grew["shm"] <= 0, f"rank {rank}: {grew['shm']} more tn_ccl segments: {grew}"
        if "allocated" in grew:
            assert grew["allocated"] <= 64 << 10, f"rank {rank}: allocated grew: {grew}"


# ----------------------------------------------------------------------------------------------
# faults

def _w_peer_exits(rank, ws):
    init(rank, ws, timeout=FAULT_TIMEOUT)
    if rank == 1:
        os._exit(0)  # gone without calling the collective
    t = dev(torch.ones(10))
    started = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
    except Exception as e:  # noqa: BLE001
        return error_info(e, started)
    return {"type": None, "elapsed": time.monotonic() - started}


def test_fault_peer_exits():
    """Rank 1 leaves right after init; rank 0's all_reduce + t.cpu() raises within the timeout
    (neuron: DistBackendError naming the collective, its sequence number and rank 1)."""
    info = run_ranks(_w_peer_exits, timeout=FAULT_TIMEOUT + FAULT_SLACK + 60, may_die=(1,))[0]
    assert info["type"] is not None, f"all_reduce with a departed peer returned: {info}"
    assert info["elapsed"] < FAULT_TIMEOUT + FAULT_SLACK, info
    if not GLOO:
        msg = info["msg"]
        assert info["backend_error"], f"expected DistBackendError, got {info['mro']}: {msg}"
        assert re.search(r"all_?reduce", msg, re.I), f"no collective name in: {msg}"
        assert re.search(r"seq\w*\W{0,3}\d+", msg, re.I), f"no sequence number in: {msg}"
        assert re.search(r"rank\W{0,3}1\b", msg, re.I), f"rank 1 not named in: {msg}"


MISMATCHES = {"numel": ((10, torch.float32), (1000, torch.float32)),
              "dtype": ((10, torch.float32), (10, torch.int32))}


def _w_mismatch(rank, ws, case):
    init(rank, ws, timeout=FAULT_TIMEOUT)
    n, dtype = MISMATCHES[case][rank]
    x = rank_input(rank, n, dtype, salt=600)
    t = dev(x)
    started = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
    except Exception as e:  # noqa: BLE001
        info = error_info(e, started)
        try:
            info["unchanged"] = torch.equal(t.cpu(), x)
        except Exception as e2:  # noqa: BLE001
            info["unchanged"] = f"reading the tensor after the error raised {e2!r}"
        return info
    return {"type": None, "elapsed": time.monotonic() - started, "result": t.cpu()}


@pytest.mark.parametrize("case", ["numel",
                                  pytest.param("dtype", marks=gloo_skip("mismatch_dtype"))])
def test_fault_mismatched_collectives(case):
    """Rank 0 all_reduces 10 floats, rank 1 1000 floats (or int32 instead of float32): every
    rank raises a RuntimeError naming the mismatch, in time, its tensor left as it was. Under
    gloo (which aborts the process on a size mismatch) only: nobody hangs or returns."""
    results = run_ranks(_w_mismatch, args=(case,), timeout=FAULT_TIMEOUT + FAULT_SLACK + 60,
                        may_die=(0, 1) if GLOO else ())
    for rank, info in enumerate(results):
        if GLOO and info is None:
            continue  # gloo: this rank died (std::terminate) instead of raising
        assert info["type"] is not None, f"rank {rank}: mismatched all_reduce returned: {info}"
        assert info["elapsed"] < FAULT_TIMEOUT + FAULT_SLACK, (rank, info)
        assert "RuntimeError" in info["mro"], (rank, info)
        if not GLOO:
            assert re.search(r"mismatch|do(es)? not match|differ", info["msg"], re.I), \
                f"rank {rank}: the message does not name the mismatch: {info['msg']}"
            assert info["unchanged"] is True, f"rank {rank}: tensor after the error: {info}"


def shm_segments():
    return set(glob.glob("/dev/shm/tn_ccl*"))


def _w_shm_clean_exit(rank, ws):
    init(rank, ws)
    xs = [rank_input(r, 2**20 + 3, torch.float32, salt=700) for r in range(ws)]
    t = dev(xs[rank])
    dist.all_reduce(t)
    check(t, reduce_def(xs, "sum"), "all_reduce")
    _ring_exchange(rank, ws, salt=710)
    dist.destroy_process_group()
    return True


@gloo_skip("shm")
def test_fault_no_shm_left_after_destroy():
    """After collectives and p2p, destroy_process_group() and exit leave no /dev/shm/tn_ccl*."""
    before = shm_segments()
    run_ranks(_w_shm_clean_exit)
    left = shm_segments() - before
    assert not left, f"segments left after a clean run: {sorted(left)}"


def _w_killed(rank, ws):
    init(rank, ws, timeout=FAULT_TIMEOUT)
    t = dev(torch.ones(2**20 + 3))
    dist.all_reduce(t)  # the communicators and their segments exist now
    t.cpu()
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    started = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
    except Exception as e:  # noqa: BLE001
        return error_info(e, started)
    return {"type": None}


def _w_next_init(rank, ws):
    init(rank, ws)
    t = dev(torch.ones(10))
    dist.all_reduce(t)
    check(t, torch.full((10,), float(ws)), "all_reduce after a killed run")
    dist.destroy_process_group()
    return True


@gloo_skip("shm")
def test_fault_killed_rank_leaves_no_shm():
    """Rank 1 SIGKILLs itself mid-run: rank 0 raises DistBackendError in time, and the
    segments of that run are gone once the survivor exited or, at the latest, after the next
    init on this host."""
    before = shm_segments()
    info = run_ranks(_w_killed, timeout=FAULT_TIMEOUT + FAULT_SLACK + 60, may_die=(1,))[0]
    assert info["type"] is not None, f"all_reduce with a killed peer returned: {info}"
    assert info["elapsed"] < FAULT_TIMEOUT + FAULT_SLACK, info
    assert info["backend_error"], f"expected DistBackendError, got {info['mro']}: {info['msg']}"
    left = shm_segments() - before
    if left:
        run_ranks(_w_next_init)
        left &= shm_segments()
    assert not left, f"segments of the killed run still there after the next init: {left}"


# ----------------------------------------------------------------------------------------------
# 4 ranks

def _w_four(rank, ws):
    init(rank, ws)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        for n in (0, 7, 1000, 300_000):
            xs = [rank_input(r, n, dtype, salt=800) for r in range(ws)]
            for op in ("sum", "max", "min"):
                t = dev(xs[rank])
                dist.all_reduce(t, op=red_op(op))
                check(t, reduce_def(xs, op), f"4-rank all_reduce {op} n={n} {dtype}", ws)
            out = dev(torch.empty(ws * n, dtype=dtype))
            dist.all_gather_into_tensor(out, dev(xs[rank]))
            check(out, torch.cat(xs), f"4-rank all_gather_into_tensor n={n} {dtype}")
            ys = [rank_input(r, ws * n, dtype, salt=801) for r in range(ws)]
            out = dev(torch.empty(n, dtype=dtype))
            dist.reduce_scatter_tensor(out, dev(ys[rank]))
            exp = reduce_def(ys, "sum").chunk(ws)[rank] if n else reduce_def(ys, "sum")
            check(out, exp, f"4-rank reduce_scatter_tensor n={n} {dtype}", ws)
            for root in range(ws):
                b = dev(rank_input(rank, n, dtype, salt=802))
                dist.broadcast(b, src=root)
                check(b, rank_input(root, n, dtype, salt=802), f"4-rank broadcast {root}")
        for scale in (1, 1000, 100_000):
            in_sizes = [split_sizes(rank, d, scale) for d in range(ws)]
            out_sizes = [split_sizes(j, rank, scale) for j in range(ws)]
            out = dev(torch.empty(sum(out_sizes), dtype=dtype))
            dist.all_to_all_single(out, dev(rank_input(rank, sum(in_sizes), dtype, salt=803)),
                                   output_split_sizes=out_sizes, input_split_sizes=in_sizes)
            check(out, a2a_expected(rank, ws, scale, dtype, 803),
                  f"4-rank all_to_all_single uneven scale={scale} {dtype}")
    # two disjoint subgroups working at the same time
    groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    mine, members = groups[rank % 2], [rank % 2, rank % 2 + 2]
    xs = {r: rank_input(r, 300_000, torch.float32, salt=804) for r in members}
    t = dev(xs[rank])
    dist.all_reduce(t, group=mine)
    check(t, reduce_def([xs[r] for r in members], "sum"), "4-rank disjoint subgroup all_reduce")
    _ring_exchange(rank, ws, salt=810)
    return True


@pytest.mark.slow
def test_four_ranks():
    """4 ranks: all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast from each
    root, uneven all_to_all_single, two disjoint subgroups at once, a batch_isend_irecv ring."""
    run_ranks(_w_four, world_size=4, timeout=600)


@pytest.mark.slow
def test_four_ranks_all_to_all_and_objects():
    """4 ranks: the all_to_all and object-collective runs of the 2-rank tests."""
    run_ranks(_w_all_to_all, world_size=4, timeout=600, args=(False,))
    run_ranks(_w_objects, world_size=4, timeout=600)


# ----------------------------------------------------------------------------------------------
# functional collectives inside torch.compile(backend="neuron"), recorded and replayed

def _w_compiled_functional(rank, ws):
    import torch.distributed._functional_collectives as fc
    init(rank, ws)

    def step(x):
        y = fc.all_reduce(torch.relu(x) * 2, "sum", dist.group.WORLD)
        z = fc.all_gather_tensor(y + 1, 0, dist.group.WORLD)
        return z.view(ws, -1).sum(0)

    compiled = torch.compile(step, backend="neuron")
    for i in range(5):  # the third call on replays the recorded launches, collectives included
        x = dev(torch.arange(6, dtype=torch.float32) + rank + i)
        got = compiled(x)
        y = sum(torch.relu(torch.arange(6.0) + k + i) * 2 for k in range(ws))
        check(got, (y + 1) * ws, f"compiled functional collectives, call {i}")
    import torch_neuronx
    return torch_neuronx.get_dynamo_metrics()["replays"]


def _w_eager_then_replayed(rank, ws):
    """An eager all_reduce, slow and still queued on the group's stream, then a replayed graph
    with its own all_reduce: the graph's must run second on every rank (before the fix each rank
    ran them in the order its streams happened to reach them: "mismatched collectives")."""
    import torch.distributed._functional_collectives as fc
    init(rank, ws)
    compiled = torch.compile(lambda x: fc.all_reduce(x * 2, "sum", dist.group.WORLD) + 1, backend="neuron")
    big = dev(torch.ones(1 << 22))
    for i in range(12):
        work = dist.all_reduce(big, async_op=True)  # ~16 MB: takes a while on the group's stream
        x = dev(torch.full((3,), float(rank + i)))
        got = compiled(x)
        work.wait()
        check(got, torch.full((3,), 2.0 * sum(r + i for r in range(ws)) + 1), f"graph after eager, call {i}")
        check(big, torch.full((1 << 22,), float(ws ** (i + 1))), f"eager before graph, call {i}")
    import torch_neuronx
    return torch_neuronx.get_dynamo_metrics()["replays"]


@pytest.mark.skipif(BACKEND != "neuron", reason="torch.compile(backend='neuron') needs the device")
def test_replayed_graph_collectives_run_after_eager_ones():
    replays = run_ranks(_w_eager_then_replayed, timeout=300)
    assert all(r >= 8 for r in replays), replays


@pytest.mark.skipif(BACKEND != "neuron", reason="torch.compile(backend='neuron') needs the device")
def test_functional_collectives_compiled_and_replayed():
    replays = run_ranks(_w_compiled_functional, timeout=300)
    assert all(r >= 2 for r in replays), replays
