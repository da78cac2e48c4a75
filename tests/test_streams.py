"""Streams and events: asynchronous, ordered, and errors surface at synchronisation."""
import pytest
import torch
import torch_neuronx

from conftest import run_python

N = 1 << 24  # 64 MiB of float32: a fill takes long enough to race without ordering


def test_launch_returns_before_the_work_is_done():
    x = torch.empty(N, device="neuron")
    s = torch.neuron.current_stream()
    x.fill_(1.0)
    x.fill_(2.0)
    pending = not s.query()
    torch.neuron.synchronize()
    assert s.query()
    assert pending  # two 64 MiB fills cannot have finished when the second launch returned


def two_streams_ordered_by_event():
    torch.neuron.synchronize()
    producer, consumer = torch.neuron.Stream(), torch.neuron.Stream()
    assert producer.stream_id != consumer.stream_id
    x = torch.zeros(N, device="neuron")
    torch.neuron.synchronize()
    done = torch.neuron.Event()
    with torch.neuron.stream(producer):
        x.fill_(3.0)
        done.record(producer)
    with torch.neuron.stream(consumer):
        consumer.wait_event(done)
        y = x.to(torch.float64)   # allocated and copied on the consumer stream
        total = y[-1:].cpu()
    x.record_stream(consumer)
    return total.item(), y.cpu()


def test_two_streams_ordered_by_an_event():
    last, y = two_streams_ordered_by_event()
    assert last == 3.0
    assert bool((y == 3.0).all())


def test_blocking_mode():
    r = run_python("""
        import torch, sys
        torch.neuron.init()   # reads NEURON_LAUNCH_BLOCKING before conftest clears it
        sys.path.insert(0, %r)
        import test_streams
        assert torch.neuron._C._launch_blocking()
        last, y = test_streams.two_streams_ordered_by_event()
        assert last == 3.0 and bool((y == 3.0).all())
        s = torch.neuron.current_stream()
        torch.empty(1 << 22, device="neuron").fill_(1.0)
        assert s.query()   # blocking: the work finished before the launch returned
        print("ok")
    """ % __import__("os").path.dirname(__file__), env={"NEURON_LAUNCH_BLOCKING": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_stream_api():
    s = torch.neuron.Stream(priority=-1)
    assert s.device == torch.device("neuron", 0)
    assert torch.neuron.current_stream().stream_id == 0
    assert torch.neuron.default_stream().stream_id == 0
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
    assert torch.neuron.current_stream().stream_id == 0
    s1 = torch.neuron.Stream(device=1)
    assert s1.device == torch.device("neuron", 1)
    ev = s.record_event()
    ev.synchronize()
    assert ev.query()
    s.synchronize()
    torch.neuron.current_stream().wait_stream(s)


def test_event_timing():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    assert isinstance(start, torch.neuron.Event)
    x = torch.empty(N, device="neuron")
    start.record()
    x.fill_(1.0)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 0.0 < ms < 10_000.0
    plain = torch.neuron.Event()
    plain.record()
    with pytest.raises(ValueError, match="enable_timing"):
        start.elapsed_time(plain)


def test_kernel_error_raised_at_next_synchronisation():
    torch_neuronx._C._inject_stream_error(0, "aten::index_select")
    x = torch.ones(4, device="neuron")
    x.fill_(2.0)   # later work is accepted
    with pytest.raises(RuntimeError, match="aten::index_select failed"):
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # reported once
    torch_neuronx._C._inject_stream_error(0, "aten::gather")
    with pytest.raises(RuntimeError, match="aten::gather failed"):
        x.cpu()   # a copy to the host is a synchronisation point too
    assert x.cpu().tolist() == [2.0] * 4


def test_kernel_error_in_blocking_mode_raises_at_launch():
    r = run_python("""
        import torch, torch_neuronx
        try:
            torch_neuronx._C._inject_stream_error(0, "aten::embedding")
            print("no error")
        except RuntimeError as e:
            print(e)
    """, env={"NEURON_LAUNCH_BLOCKING": "1"})
    assert r.returncode == 0, r.stderr
    assert "aten::embedding failed" in r.stdout
