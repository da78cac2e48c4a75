"""The device trace (torch_neuronx.neuron.trace): each stream task, and each launch inside a
replayed graph, with its name, stream and device-clock times."""
import torch
import torch_neuronx  # noqa: F401
from torch_neuronx import _C
from torch_neuronx.neuron.trace import DeviceTrace


def test_tasks_are_recorded_in_order_with_their_names_and_times():
    x = torch.randn(256, 256).to("neuron")
    torch.neuron.synchronize()
    before = _C._trace_now_ns()
    with DeviceTrace() as trace:
        y = (x @ x).relu()
        z = y.sum()
    after = _C._trace_now_ns()
    torch.testing.assert_close(z.cpu(), (x.cpu() @ x.cpu()).relu().sum(), rtol=1e-4, atol=1e-2)
    names = [e.name for e in trace.events]
    assert any("mm" in n for n in names) and any("relu" in n for n in names) and any("sum" in n for n in names), names
    mm = next(i for i, n in enumerate(names) if "mm" in n)
    assert mm < next(i for i, n in enumerate(names) if "relu" in n)  # one stream: in launch order
    for e in trace.events:
        assert before <= e.start_ns <= e.end_ns <= after and e.device == 0 and e.stream == 0 and e.depth == 0
    for a, b in zip(trace.events, trace.events[1:]):
        assert a.end_ns <= b.start_ns
    calls, ns = trace.totals()[names[mm]]
    assert calls == 1 and ns > 0
    assert "calls" in trace.table() and names[mm][:40] in trace.table()


def test_nothing_is_recorded_when_off():
    x = torch.randn(64).to("neuron")
    with DeviceTrace():
        pass
    assert not _C._trace_enabled()
    (x * 2).sum().cpu()
    assert _C._trace_take() == []


def test_launches_inside_a_replay_are_events_of_depth_one():
    lin = torch.nn.Linear(32, 32).to("neuron")
    run = torch.compile(lin, backend="neuron", fullgraph=True, dynamic=False)
    x = torch.randn(8, 32).to("neuron")
    with torch.no_grad():
        for _ in range(3):
            run(x)
        with DeviceTrace() as trace:
            run(x)
    replay = [e for e in trace.events if e.depth == 0 and e.name == "replay"]
    inside = [e for e in trace.events if e.depth == 1]
    assert len(replay) == 1 and inside, trace.events
    for e in inside:
        assert replay[0].start_ns <= e.start_ns <= e.end_ns <= replay[0].end_ns
    assert replay[0] not in trace.kernels() and set(inside) <= set(trace.kernels())


def test_a_full_trace_counts_what_it_dropped():
    x = torch.randn(16).to("neuron")
    with DeviceTrace(capacity=3) as trace:
        for _ in range(10):
            x.add_(1)
    assert len(trace.events) == 3 and trace.dropped == 7
    assert "dropped" in trace.table()
