"""Shared helpers of the benchmarks."""
import time


def best(fn, repeat):
    """The fastest of `repeat` timed calls of fn (after one warm-up call), in seconds."""
    fn()
    t_best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best


def best_pair(fn_a, fn_b, repeat, settle=0.02):
    """The fastest of `repeat` timed calls of each of two functions, called alternately (after
    one warm-up call each), in seconds: on a machine whose memory bandwidth drifts, both sides
    then see the same conditions and their ratio is steadier than from two separate runs.

    Each timed call starts after `settle` seconds of sleep, so that neither side's idle threads
    are still spinning on the cores when the other side starts: PyTorch's OpenMP workers spin
    for milliseconds after a parallel region (libgomp's GOMP_SPINCOUNT), which took a core from
    the first launches of a neuron block that followed a CPU block."""
    fn_a()
    fn_b()
    t_a = t_b = float("inf")
    for _ in range(repeat):
        time.sleep(settle)
        t = time.perf_counter()
        fn_a()
        t_a = min(t_a, time.perf_counter() - t)
        time.sleep(settle)
        t = time.perf_counter()
        fn_b()
        t_b = min(t_b, time.perf_counter() - t)
    return t_a, t_b


def copy_bandwidth(repeat=10, mib=256):
    """Bytes read + written per second by a large CPU tensor copy (best of `repeat`): the
    machine's memory bandwidth, the ceiling of memory-bound work on a software device."""
    import torch
    src = torch.ones(mib * 2**20, dtype=torch.uint8)
    dst = torch.empty_like(src)
    return 2 * src.numel() / best(lambda: dst.copy_(src), repeat)


def per_call_pair(run_neuron, run_cpu, calls, repeat):
    """Seconds per call of run_neuron and run_cpu: each timed as a block of `calls` calls (the
    neuron block ends with one synchronize, so it is timed as a device), the two blocks
    alternating (best_pair)."""
    import torch

    def block_neuron():
        for _ in range(calls):
            run_neuron()
        torch.neuron.synchronize()

    def block_cpu():
        for _ in range(calls):
            run_cpu()

    t_n, t_c = best_pair(block_neuron, block_cpu, repeat)
    return t_n / calls, t_c / calls


def passes_pair(fn_cpu, fn_neuron, x, grad, calls, repeat):
    """(pass, neuron seconds, CPU seconds) per call of fn on x, for the forward alone ("fwd")
    and the forward with its backward from `grad` ("fwd+bwd"), timed with per_call_pair; x and
    grad are CPU tensors, copied to neuron here."""
    import torch

    xc, xn, gn = x.clone().requires_grad_(), x.to("neuron").requires_grad_(), grad.to("neuron")
    t_n, t_c = per_call_pair(lambda: fn_neuron(xn.detach()), lambda: fn_cpu(x), calls, repeat)
    yield "fwd", t_n, t_c
    with torch.enable_grad():
        t_n, t_c = per_call_pair(lambda: fn_neuron(xn).backward(gn), lambda: fn_cpu(xc).backward(grad), calls, repeat)
    yield "fwd+bwd", t_n, t_c


def module_rows(cases, calls, repeat):
    """For each (name, make, input shape) of `cases`: the module make() on the CPU and a copy on
    neuron, timed by passes_pair on a random input and output gradient; yields (name, shape,
    pass, neuron seconds, CPU seconds)."""
    import copy

    import torch

    torch.manual_seed(0)
    for name, make, shape in cases:
        mod_c = make()
        mod_n = copy.deepcopy(mod_c).to("neuron")
        x = torch.randn(*shape)
        g = torch.randn(*mod_c(x).shape)
        for kind, t_n, t_c in passes_pair(mod_c, mod_n, x, g, calls, repeat):
            yield name, shape, kind, t_n, t_c
