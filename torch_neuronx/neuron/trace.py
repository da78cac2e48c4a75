"""The device trace: which tasks ran on the neuron streams, and for how long on the device's
clock. Each stream task is an event, and so is each launch inside a replayed graph (depth 1,
within its "replay" event).

    from torch_neuronx.neuron.trace import DeviceTrace
    with DeviceTrace() as trace:
        model(x)
    print(trace.table())          # per kernel: calls, total and mean device time

Leaving the block waits for the devices, so every task launched inside it is recorded.
"""
from collections import namedtuple

from .. import _C

TraceEvent = namedtuple("TraceEvent", "name device stream depth start_ns end_ns")


class DeviceTrace:
    def __init__(self, capacity=1_000_000):
        self.capacity = capacity
        self.events = []
        self.dropped = 0

    def __enter__(self):
        import torch

        torch.neuron.synchronize()
        _C._trace_take()  # a previous trace's leftovers are not ours
        _C._trace_start(self.capacity)
        return self

    def __exit__(self, *exc):
        import torch

        try:
            for d in range(torch.neuron.device_count()):
                torch.neuron.synchronize(d)
        finally:
            _C._trace_stop()
            self.dropped = _C._trace_dropped()
            self.events = [TraceEvent(*e) for e in _C._trace_take()]
        return False

    def kernels(self):
        """The events that did work: stream tasks and the launches inside replays, without the
        replay tasks that contain them."""
        return [e for e in self.events if not (e.depth == 0 and e.name == "replay")]

    def totals(self):
        """{name: (calls, total ns)}, largest total first."""
        out = {}
        for e in self.kernels():
            calls, ns = out.get(e.name, (0, 0))
            out[e.name] = (calls + 1, ns + e.end_ns - e.start_ns)
        return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))

    def total_ns(self):
        return sum(e.end_ns - e.start_ns for e in self.kernels())

    def table(self, row_limit=25):
        totals = self.totals()
        whole = max(self.total_ns(), 1)
        lines = [f"{'kernel':<44} {'calls':>7} {'total ms':>10} {'mean us':>9} {'share':>6}"]
        for name, (calls, ns) in list(totals.items())[:row_limit]:
            lines.append(f"{name[:44]:<44} {calls:>7} {ns / 1e6:>10.3f} {ns / calls / 1e3:>9.1f} {ns / whole:>6.1%}")
        lines.append(f"{'all ' + str(len(totals)) + ' kernels':<44} {sum(c for c, _ in totals.values()):>7} "
                     f"{whole / 1e6:>10.3f}")
        if self.dropped:
            lines.append(f"({self.dropped} events dropped: raise capacity)")
        return "\n".join(lines)
