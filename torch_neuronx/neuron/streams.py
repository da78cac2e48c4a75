"""Streams and events of the neuron device, as torch.cuda has them (thin over torch.Stream /
torch.Event, which reach the C runtime through the device guard)."""
import torch

from .. import _C


def _device(device):
    from . import _index

    return torch.device("neuron", _index(device))


class Stream(torch.Stream):
    """An in-order queue of work on a neuron device. priority: 0 (normal) or negative (high)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)

    def __repr__(self):
        return f"<torch.neuron.Stream device={self.device} stream_id={self.stream_id}>"


class _NeuronEventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "neuron"


class Event(metaclass=_NeuronEventType):
    """A marker in a stream: record, wait, query, synchronize, elapsed_time.

    Instances are plain torch.Event objects on neuron (torch.Event's methods accept only that
    exact type), so isinstance(e, torch.neuron.Event) holds for any neuron event."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device="neuron", enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def current_stream(device=None):
    return torch.accelerator.current_stream(_device(device))


def default_stream(device=None):
    d = _device(device)
    type_id = torch.accelerator.current_stream(d).device_type  # c10's enum value for neuron
    return torch.Stream(stream_id=0, device_index=d.index, device_type=type_id)


def set_stream(stream):
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current on its device for the duration of a with-block."""

    def __init__(self, stream):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.prev = torch.accelerator.current_stream(self.stream.device)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            torch.accelerator.set_stream(self.prev)
        return False


def stream(stream):
    return StreamContext(stream)


def synchronize(device=None):
    """Waits for all work on the device; raises the first kernel error kept on its streams."""
    from . import _index, _lazy_init

    _lazy_init()
    _C._synchronize(_index(device))
