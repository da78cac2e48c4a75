"""torch.neuron: the device module, shaped like torch.cuda."""
import threading

import torch

from .. import _C
from .memory import (  # noqa: F401
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .random import (  # noqa: F401
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (  # noqa: F401
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
    synchronize,
)

_initialized = False
_init_lock = threading.Lock()


def _is_in_bad_fork():
    return _C._is_in_bad_fork()


def _lazy_init():
    """Starts the runtime; raises a clear error in a forked child or for a bad environment."""
    global _initialized
    if _initialized and not _is_in_bad_fork():
        return
    with _init_lock:
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize the neuron device in a forked subprocess. To use neuron "
                "with multiprocessing, you must use the 'spawn' start method "
                "(multiprocessing.set_start_method('spawn') or torch.multiprocessing)."
            )
        _C._init()
        _initialized = True


def init():
    _lazy_init()


def is_initialized():
    return _initialized and not _is_in_bad_fork()


def is_available():
    """True when at least one logical NeuronCore is visible (never raises)."""
    try:
        return _C._device_count() > 0
    except RuntimeError:
        return False


def device_count():
    return _C._device_count()


def current_device():
    _lazy_init()
    return _C._current_device()


def _index(device, optional=True):
    if device is None:
        return current_device() if optional else 0
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return current_device() if device.index is None else device.index
    raise TypeError(f"Expected a neuron device (int, str or torch.device), got {device!r}")


def set_device(device):
    _lazy_init()
    idx = _index(device)
    if idx >= 0:
        _C._set_device(idx)


class device:
    """Context manager that makes `device` the current neuron device."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        _lazy_init()
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager selecting the device of a tensor (no-op for CPU tensors)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else -1)


class _DeviceProperties:
    def __init__(self, props):
        self.name = props["name"]
        self.index = props["index"]
        self.physical_core = props["physical_core"]
        self.total_memory = props["total_memory"]

    def __repr__(self):
        return (
            f"_NeuronDeviceProperties(name='{self.name}', index={self.index}, "
            f"physical_core={self.physical_core}, total_memory={self.total_memory // 2**20}MB)"
        )


def get_device_properties(device=None):
    _lazy_init()
    return _DeviceProperties(_C._device_properties(_index(device)))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    return (2, 0)  # NeuronCore-v2


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation=True):
    return True


__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]
