"""Replaying a compiled inference graph's launches as one task (the C side is tn/capture.h).

With static shapes a graph launches the same kernels with the same arguments every call; the
host time spent making those launches one by one (views, dispatch, argument checks: about
9 ms for a SmolLM2 decode step) is what the replay removes. On a 2-core machine it also gives
the device threads the core that the host thread took.

A graph's calls go:
1. The first call runs as compiled, and notes where each input lives.
2. The second call is recorded: the C runtime keeps every launch it makes, and its
   intermediates come from the recording's own memory pool. Inputs found at another address
   than on the first call ("moving" inputs: token ids, positions) are first copied into
   buffers of the graph's own, and the recording reads those.
3. Later calls copy the moving inputs into those buffers, replay the recording (one launch),
   and return copies of the outputs (the next replay overwrites the pool).

An input other than a moving one must be where it was recorded (parameters, a static KV
cache); when it is not, or a moving input is large or written by the graph, the graph is
recorded again, at most MAX_RECORDINGS times, after which it keeps running as compiled.
Graphs whose work cannot replay (random numbers, host reads, copies from host memory: the C
runtime refuses them and says why) and graphs returning a view of an input run as compiled.
TORCH_NEURONX_GRAPH_REPLAY=0 turns replay off.
"""
import os
import threading

import torch
from torch.fx import GraphModule

from .. import _C
from .passes import _written

MAX_RECORDINGS = 4
# Moving inputs up to this size are copied into the graph's buffers on every call.
MAX_MOVING_BYTES = 1 << 20


def enabled():
    return os.environ.get("TORCH_NEURONX_GRAPH_REPLAY", "1") != "0"


def written_inputs(gm: GraphModule):
    """Indices of the placeholders the graph writes (directly or through views), read from
    the ATen graph before the passes (bind_fast_calls turns copy_ and index_copy_ into Tensor
    methods, whose writes the schema no longer tells)."""
    index = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    written = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) \
                or not node.target._schema.is_mutable:
            continue
        for value in _written(node):
            while value.op == "call_function" and isinstance(value.target, torch._ops.OpOverload) \
                    and value.target.is_view:
                value = value.args[0]
            if value in index:
                written.add(index[value])
    return written


def _address(x):
    return x.data_ptr() if isinstance(x, torch.Tensor) else x


class Replayer:
    """The boxed callable AOTAutograd gets for an inference graph (see the module docstring)."""

    _boxed_call = True

    def __init__(self, forward, written, count):
        self.forward = forward  # boxed: takes the list of inputs
        self.written = written  # indices of the inputs the graph writes (written_inputs)
        self.count = count      # count(metric, n): the backend's counters
        self.addresses = None   # of the previous call's inputs
        self.moving = set()
        self.buffers = {}       # moving input index -> the graph's own copy
        self.capture = None
        self.outputs = None     # the recording's outputs (in its pool)
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
            return self._replay(args)
        addresses = [_address(x) for x in args]
        if self.addresses is not None:
            self.moving |= {i for i, (a, b) in enumerate(zip(addresses, self.addresses)) if a != b}
        first = self.addresses is None
        self.addresses = addresses
        if first:
            return self.forward(args)
        return self._record(args)

    def _refuse(self, why):
        self.refused = why
        self.capture = self.outputs = None
        self.buffers = {}
        self.count("replay_refusals")

    def _record(self, args):
        self.capture = self.outputs = None
        if self.recordings >= MAX_RECORDINGS:
            self._refuse(f"its inputs moved after {MAX_RECORDINGS} recordings")
            return self.forward(args)
        for i in self.moving:
            x = args[i]
            if not isinstance(x, torch.Tensor):
                self._refuse(f"input {i} is a {type(x).__name__} whose value changes between calls")
                return self.forward(args)
            if i in self.written or x.nbytes > MAX_MOVING_BYTES or x.device.type != "neuron":
                self._refuse(f"input {i} changes address and is large, written by the graph or not on neuron")
                return self.forward(args)
        device = next((x.device for x in args if isinstance(x, torch.Tensor) and x.device.type == "neuron"), None)
        host = next((i for i, x in enumerate(args) if isinstance(x, torch.Tensor) and x.device.type != "neuron"), None)
        if device is None or host is not None:
            # a host tensor's value is read when its op is launched: a replay would reuse it
            self._refuse("no input is on neuron" if device is None else f"input {host} is on {args[host].device}")
            return self.forward(args)
        self.buffers = {i: torch.empty_strided(args[i].size(), args[i].stride(), dtype=args[i].dtype,
                                               device=device) for i in self.moving}
        staged = list(args)
        for i, buffer in self.buffers.items():
            buffer.copy_(args[i])
            staged[i] = buffer
        self.recordings += 1
        capture = _C.Capture(device.index or 0)
        capture.expect(staged, sorted(self.buffers))  # before the graph may clear the list
        try:
            outputs = self.forward(staged)
        finally:
            capture.end()
        args.clear()
        if not capture.replayable:
            self._refuse(capture.reason)
            return outputs
        for out in outputs:
            if isinstance(out, torch.Tensor) and not capture.owns(out.untyped_storage().data_ptr()):
                self._refuse("an output is not computed by the graph (it views an input)")
                return outputs
        self.capture, self.outputs = capture, outputs
        self.count("recordings")
        return self._copies()

    def _replay(self, args):
        for i, buffer in self.buffers.items():
            buffer.copy_(args[i])
        args.clear()
        self.capture.replay()
        self.count("replays")
        return self._copies()

    def _copies(self):
        """The outputs, each storage copied once (outputs that share storage still do)."""
        fresh = {}
        result = []
        for out in self.outputs:
            if not isinstance(out, torch.Tensor):
                result.append(out)
                continue
            storage = out.untyped_storage()
            key = storage.data_ptr()
            if key not in fresh:
                fresh[key] = storage.clone()
            copy = torch.empty(0, dtype=out.dtype, device=out.device)
            copy.set_(fresh[key], out.storage_offset(), out.size(), out.stride())
            result.append(copy)
        return result
