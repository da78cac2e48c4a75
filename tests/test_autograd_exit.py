"""Interpreter exit after a backward pass on neuron (torch_neuronx._drain_autograd_threads).

The backward of neuron tensors runs on PyTorch's autograd thread of the device; at exit the
package waits for that thread to finish its earlier work, so that it does not take the GIL
while Python finalizes (csrc/runtime/AutogradExit.cpp)."""
import os
import subprocess
import sys
import threading
import time

import torch

import torch_neuronx


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, done):
        ctx.done = done
        return x * 2

    @staticmethod
    def backward(ctx, g):
        time.sleep(0.5)
        ctx.done.set()
        return g * 2, None


def start_slow_backward():
    """A backward that holds the device's autograd thread for 0.5 s; its event is set at the end."""
    x = torch.ones(3, device="neuron", requires_grad=True)
    done = threading.Event()
    worker = threading.Thread(target=lambda: SlowBackward.apply(x, done).sum().backward())
    worker.start()
    time.sleep(0.1)  # the slow backward is running on the device's autograd thread
    assert not done.is_set()
    return x, done, worker


def test_drain_waits_for_the_device_threads_earlier_work():
    x, done, worker = start_slow_backward()
    torch_neuronx._drain_autograd_threads()
    assert done.is_set()  # it waited behind the slow backward
    worker.join()
    torch.testing.assert_close(x.grad.cpu(), torch.full((3,), 2.0))


def test_drain_gives_up_after_its_timeout():
    x, done, worker = start_slow_backward()
    t = time.perf_counter()
    torch_neuronx._C._drain_autograd_threads(timeout_seconds=0.05)
    assert time.perf_counter() - t < 0.3 and not done.is_set()
    worker.join()
    assert done.is_set()


SPY = ("import torch, torch_neuronx\n"
       "drain = torch_neuronx._C._drain_autograd_threads\n"
       "def spy(**kwargs):\n"
       "    print('drained', flush=True)\n"
       "    drain(**kwargs)\n"
       "torch_neuronx._C._drain_autograd_threads = spy\n"
       "x = torch.ones(4, device='neuron', requires_grad=True)\n")


def run(script):
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.split()


def test_exit_drains_only_after_a_backward_on_neuron():
    assert run(SPY + "(x * 3).sum().backward()\nprint(x.grad.cpu().tolist())") == ["[3.0,", "3.0,", "3.0,", "3.0]", "drained"]
    assert run(SPY + "print((x * 3).sum().item())") == ["12.0"]  # no autograd thread: nothing to wait for
