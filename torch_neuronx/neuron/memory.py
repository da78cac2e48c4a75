"""Memory of the neuron device: statistics from the C caching allocator, as torch.cuda has them."""
import torch

from .. import _C


def _idx(device):
    from . import _index

    return _index(device)


def memory_stats(device=None):
    """Allocator statistics as a flat dict ("allocated_bytes.all.current", ...)."""
    from . import _lazy_init

    _lazy_init()
    stats = torch.accelerator.memory_stats(_idx(device))
    return dict(sorted(stats.items()))


def memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    torch.accelerator.reset_peak_memory_stats(_idx(device))


def reset_accumulated_memory_stats(device=None):
    torch.accelerator.reset_accumulated_memory_stats(_idx(device))


def mem_get_info(device=None):
    """(free, total) bytes of the device's capacity."""
    return torch.accelerator.get_memory_info(_idx(device))


def empty_cache():
    """Returns the cached, unused blocks of every device to the system."""
    from . import _lazy_init, device_count

    _lazy_init()
    for d in range(device_count()):
        _C._empty_cache(d)


def _fmt(n):
    for unit in ("B ", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:7.0f} {unit}" if unit == "B " else f"{n:7.2f} {unit}"
        n /= 1024


def memory_summary(device=None, abbreviated=False):
    """A printable table of the allocator's statistics for one device."""
    idx = _idx(device)
    s = memory_stats(idx)
    props = _C._device_properties(idx)
    lines = [
        "=" * 79,
        f" neuron:{idx} memory summary ({props['name']}, physical core {props['physical_core']}, "
        f"capacity {_fmt(props['total_memory']).strip()})",
        "-" * 79,
        f" {'Metric':<26}{'Cur Usage':>13}{'Peak Usage':>13}{'Tot Alloc':>13}{'Tot Freed':>13}",
        "-" * 79,
    ]
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Device reserved segments", "segment", False),
    ]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    for title, key, is_bytes in rows:
        for pool in pools:
            vals = [s.get(f"{key}.{pool}.{f}", 0) for f in ("current", "peak", "allocated", "freed")]
            cells = [_fmt(v) if is_bytes else f"{v:11d}" for v in vals]
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            lines.append(f" {label:<26}" + "".join(f"{c:>13}" for c in cells))
        if not abbreviated:
            lines.append("-" * 79)
    lines += [
        f" Allocation retries: {s.get('num_alloc_retries', 0)}    Out-of-memory errors: "
        f"{s.get('num_ooms', 0)}    Device allocs/frees: {s.get('num_device_alloc', 0)}/"
        f"{s.get('num_device_free', 0)}",
        "=" * 79,
    ]
    return "\n".join(lines) + "\n"
