"""Replaying a compiled graph's launches as one task (the C side is tn/capture.h).

With static shapes a graph launches the same kernels with the same arguments every call; the
host time spent making those launches one by one (views, dispatch, argument checks: about
9 ms for a SmolLM2 decode step) is what the replay removes. On a 2-core machine it also gives
the device threads the core that the host thread took.

A graph's calls go:
1. The first call runs as compiled.
2. The second call is recorded: the C runtime keeps every launch it makes, and its
   intermediates come from the recording's own memory pool. The recording is then relocated:
   every address in the recorded arguments that points into an input's storage, or into the
   pool block of an output, is noted (tn_capture_relocate).
3. Later calls whose inputs match the recording (dtypes, shapes, strides, storage offsets,
   which inputs share a storage, the values of non-tensor inputs) replay it as one launch,
   with each input read where it is now and each output written to a block allocated for
   this call. Parameters, a static KV cache, token ids, a training forward's activations
   passed to its backward: none is copied, and results are never overwritten by a later call.

Inputs that no longer match are recorded again, at most MAX_RECORDINGS times, after which the
graph keeps running as compiled. A small host tensor input (its value is read when its op is
launched) matches while its value is the recording's; a host tensor output is the recorded
one, copied. Graphs whose work cannot replay (random numbers, host reads, copies from host
memory: the C runtime refuses them and says why), graphs with a large host tensor input and
outputs that are neither an input's storage nor computed by the graph run as compiled.
TORCH_NEURONX_GRAPH_REPLAY=0 turns replay off.
"""
import os
import threading

import torch

from .. import _C

MAX_RECORDINGS = 4
# Host tensors up to this many elements may be inputs (an attention's seed and offset): a
# replay compares their values with the recording's.
MAX_HOST_INPUT = 64


def enabled():
    return os.environ.get("TORCH_NEURONX_GRAPH_REPLAY", "1") != "0"


class Replayer:
    """The boxed callable AOTAutograd gets for a graph (see the module docstring)."""

    _boxed_call = True

    def __init__(self, forward, count):
        self.forward = forward  # boxed: takes the list of inputs
        self.count = count      # count(metric, n): the backend's counters
        self.calls = 0
        self.capture = None
        self.recordings = 0
        self.refused = ""       # why this graph no longer records
        self.busy = threading.Lock()  # one thread at a time records or replays

    def __call__(self, args):
        if self.refused or not enabled() or not self.busy.acquire(blocking=False):
            return self.forward(args)
        try:
            return self._call(args)
        finally:
            self.busy.release()

    def _call(self, args):
        if self.capture is not None and self.capture.matches(args):
            outputs = self.capture.replay(args)
            args.clear()
            self.count("replays")
            return outputs
        self.calls += 1
        if self.calls == 1:
            return self.forward(args)
        return self._record(args)

    def _refuse(self, why):
        self.refused = why
        self.capture = None
        self.count("replay_refusals")

    def _record(self, args):
        self.capture = None
        if self.recordings >= MAX_RECORDINGS:
            self._refuse(f"its inputs changed after {MAX_RECORDINGS} recordings")
            return self.forward(args)
        device = next((x.device for x in args if isinstance(x, torch.Tensor) and x.device.type == "neuron"), None)
        other = next((x for x in args if isinstance(x, torch.Tensor) and x.device.type != "neuron"
                      and (x.device.type != "cpu" or x.numel() > MAX_HOST_INPUT)), None)
        if device is None or other is not None:
            # a host tensor's value is read when its op is launched: a replay checks that it
            # did not change, which only small ones are worth
            self._refuse("no input is on neuron" if device is None else
                         f"an input is on {other.device} with {other.numel()} elements")
            return self.forward(args)
        self.recordings += 1
        capture = _C.Capture(device.index or 0)
        capture.bind_inputs(args)  # before the graph may clear the list
        try:
            outputs = self.forward(args)
        finally:
            capture.end()
        if not capture.replayable:
            self._refuse(capture.reason)
            return outputs
        why = capture.relocate(list(outputs))
        if why:
            self._refuse(why)
            return outputs
        # the recorded outputs are the caller's: replays write theirs into new blocks
        self.capture = capture
        self.count("recordings")
        return outputs
