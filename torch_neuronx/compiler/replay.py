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
   (a small input that views a larger storage, such as a diffusion scheduler's timestep, is
   copied into a buffer of the graph's and back, so that its storage offset does not matter)
   with each input read where it is now and each output written to a block allocated for
   this call. Parameters, a static KV cache, token ids, a training forward's activations
   passed to its backward: none is copied, and results are never overwritten by a later call.

Plans: a graph kept in the graph cache (graph_cache.py) also keeps its relocated recording
there, as a plan (tn_capture_save): every address in it is named by what it points into (an
input, an output, the graph's own constants, its intermediates, or the code of the runtime or
of a generated kernel, found by build ID). A new process loading that graph loads the plan
and replays from the first call, with nothing recorded. A plan saved by another build, for
another kernel variant or thread count, or whose inputs do not match, is not used, and the
graph records as above (replacing the plan).

Inputs that no longer match are recorded again, at most MAX_RECORDINGS times, after which the
graph keeps running as compiled. A small host tensor input (its value is read when its op is
launched) matches while its value is the recording's; a host tensor output is the recorded
one, copied. Collectives (a tensor-parallel graph's) are recorded and replayed with the rest:
before recording or replaying, the stream waits for the collectives that process groups
launched on their own streams, so that each rank runs its group's collectives in the order its
program called them. Graphs whose work cannot replay (random numbers, host reads, copies from host
memory: the C runtime refuses them and says why), graphs with a large host tensor input and
outputs that are neither an input's storage nor computed by the graph run as compiled.
TORCH_NEURONX_GRAPH_REPLAY=0 turns replay off.
"""
import hashlib
import os
import pickle
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

    def __init__(self, forward, count, constants=()):
        self.forward = forward  # boxed: takes the list of inputs
        self.count = count      # count(metric, n): the backend's counters
        # device tensors the graph reads besides its inputs (folded constants): a plan names
        # them as inputs
        self.constants = [c for c in constants if isinstance(c, torch.Tensor) and c.device.type == "neuron"]
        self.plan = None        # where this graph's plan is kept (graph_cache sets it), or None
        self.plan_refused = ""  # why the last recording could not be saved as a plan
        self.calls = 0
        self.capture = None
        self.recordings = 0
        self.refused = ""       # why this graph no longer records
        self.busy = threading.Lock()  # one thread at a time records or replays
        self.staged = None      # {input index: the graph's own buffer for that small view}

    def __call__(self, args):
        if self.refused or not enabled() or not self.busy.acquire(blocking=False):
            return self.forward(args)
        try:
            return self._call(args)
        finally:
            self.busy.release()

    def _call(self, args):
        if self.staged is None:
            self.staged = _small_views(args)
        if self.calls == 0 and self.capture is None and self.plan:
            self.capture = load_plan(self.plan, args)
            if self.capture is not None:
                self.count("plans_loaded")
        if self.capture is not None:
            swapped = self._stage(args)
            inputs = [*args, *self.constants] if self.constants else args
            if self.capture.matches(inputs):
                outputs = self.capture.replay(inputs)
                args.clear()
                self._copy_back(swapped)
                self.count("replays")
                return outputs
            self._restore(args, swapped)
        self.calls += 1
        if self.calls == 1:
            return self.forward(args)
        self.staged = _small_views(args)
        swapped = self._stage(args)
        inputs = [*args, *self.constants] if self.constants else args
        try:
            return self._record(args, inputs, swapped)
        finally:
            self._copy_back(swapped)

    # A small input that is a view into a larger storage (a scheduler's timestep, a new element
    # of its timesteps tensor each denoising step) would match no recording: recordings match
    # inputs by storage offset. Such inputs are copied into a buffer of the graph's own, which
    # the graph reads instead, and copied back after it (the graph may write into its input).
    # An expanded view (a timestep broadcast over the batch: stride 0) is staged through its
    # elements: the buffer is expanded the same way.
    def _stage(self, args):
        swapped = []
        for i, buf in self.staged.items():
            x = args[i] if i < len(args) else None
            if (isinstance(x, torch.Tensor) and x.device == buf.device and x.dtype == buf.dtype
                    and x.shape == buf.shape and _expanded_dims(x) == _expanded_dims(buf) and not x.requires_grad):
                _elements(buf).copy_(_elements(x))
                args[i] = buf
                swapped.append((i, x))
        return swapped

    def _restore(self, args, swapped):
        for i, x in swapped:
            args[i] = x

    def _copy_back(self, swapped):
        for i, x in swapped:
            _elements(x).copy_(_elements(self.staged[i]))

    def _refuse(self, why):
        self.refused = why
        self.capture = None
        self.count("replay_refusals")

    def _record(self, args, inputs, swapped=()):
        self.capture = None
        if self.recordings >= MAX_RECORDINGS:
            self._refuse(f"its inputs changed after {MAX_RECORDINGS} recordings")
            return self.forward(args)
        device = _device_of(args)
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
        capture.bind_inputs(inputs)  # before the graph may clear the list
        try:
            outputs = self.forward(args)
        finally:
            capture.end()
        if not capture.replayable:
            self._refuse(capture.reason)
            return outputs
        buffers = {self.staged[i].untyped_storage().data_ptr() for i, _ in swapped}
        if any(isinstance(o, torch.Tensor) and o.device.type == "neuron" and o.untyped_storage().data_ptr() in buffers
               for o in outputs):
            self._refuse("an output is a view of a small input that was a view itself")
            return outputs
        why = capture.relocate(list(outputs))
        if why:
            self._refuse(why)
            return outputs
        # the recorded outputs are the caller's: replays write theirs into new blocks
        self.capture = self._planned(capture, device)
        self.count("recordings")
        self.count("packed_weights", capture.packed_weights)
        return outputs

    def _planned(self, capture, device):
        """The recording as a plan, loaded back: its intermediates then share one arena planned
        by their lifetimes, and the recording's pool goes back to the allocator (once the
        recorded call has run). The plan is kept on disk when the graph is in the graph cache.
        A recording the plan cannot name replays as recorded."""
        try:
            plan, state = capture.save()
        except NotImplementedError as e:  # an address the plan cannot name
            self.plan_refused = str(e)
            return capture
        self.plan_refused = ""
        if self.plan:
            self._save_plan(plan, state)
        return _C.Capture(device.index or 0, plan, state)

    def _save_plan(self, plan, state):
        os.makedirs(os.path.dirname(self.plan), exist_ok=True)
        payload = pickle.dumps((plan_environment(), plan, state), protocol=pickle.HIGHEST_PROTOCOL)
        tmp = f"{self.plan}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(PLAN_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, self.plan)  # readers never see half a plan
        self.count("plans_saved")


# A plan file: this, the SHA-256 of the rest, then the pickled (environment, C plan, state).
PLAN_MAGIC = b"neuron replay plan 2\n"


MAX_STAGED = 16  # elements


def _expanded_dims(x):
    return [stride == 0 and size > 1 for size, stride in zip(x.shape, x.stride())]


def _elements(x):
    """x without its expanded dimensions (narrowed to one element): the memory it reads."""
    for d, expanded in enumerate(_expanded_dims(x)):
        if expanded:
            x = x.narrow(d, 0, 1)
    return x


def _small_views(args):
    """{index: buffer} for the inputs that _stage copies: neuron tensors of at most MAX_STAGED
    elements, contiguous but for expanded dimensions, not requiring gradients, that view a
    larger storage or start inside one, and share it with no other input."""
    shared = [x.untyped_storage().data_ptr() if isinstance(x, torch.Tensor) else None for x in args]
    out = {}
    for i, x in enumerate(args):
        if not (isinstance(x, torch.Tensor) and x.device.type == "neuron" and 0 < x.numel() <= MAX_STAGED
                and not x.requires_grad and shared.count(shared[i]) == 1):
            continue
        elements = _elements(x)
        if elements.is_contiguous() and (x.storage_offset() != 0 or
                                         x.untyped_storage().nbytes() != elements.numel() * x.element_size()):
            out[i] = torch.empty_like(elements, memory_format=torch.contiguous_format).expand(x.shape)
    return out


def _device_of(args):
    """The device of the first neuron tensor among a graph's inputs, or None."""
    return next((x.device for x in args if isinstance(x, torch.Tensor) and x.device.type == "neuron"), None)


def plan_path(root, program):
    """Where the plan of the graph whose cached program is the bytes `program` is kept."""
    return os.path.join(root, "plans", hashlib.sha256(program).hexdigest()[:32] + ".plan")


def plan_environment():
    """What a plan's launches depend on beyond the build (which the plan checks itself): the
    torch version, the kernel variant and the kernels' threads and settings."""
    names = ("TN_ISA", "TN_AMX", "TN_NUM_THREADS", "TORCH_NEURONX_PACKED_WEIGHTS_MB")
    return (torch.__version__, _C._isa(), os.cpu_count(), *(os.environ.get(n) for n in names))


def load_plan(path, args):
    """The capture saved at `path` for a graph called with `args`, or None when there is no
    usable plan there (missing, damaged, saved by another build or environment)."""
    device = _device_of(args)
    if device is None or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
        payload = data[len(PLAN_MAGIC) + 32:]
        if data[:len(PLAN_MAGIC)] != PLAN_MAGIC or data[len(PLAN_MAGIC):len(PLAN_MAGIC) + 32] != hashlib.sha256(payload).digest():
            return None  # damaged (the C plan inside checks itself too)
        environment, plan, state = pickle.loads(payload)
        if environment != plan_environment():
            return None
        return _C.Capture(device.index or 0, plan, state)
    except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError, RuntimeError, NotImplementedError):
        return None
