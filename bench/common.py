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
