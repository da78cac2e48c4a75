// torch_neuronx._C.Capture: a recording of the launches a compiled graph makes on the current
// stream, replayed as one task (tn/capture.h) with the graph's inputs wherever they are and its
// outputs in fresh memory. torch_neuronx/compiler/replay.py decides when a graph is recorded
// and replayed; this file owns the C object and the relocation of inputs and outputs.
#include <torch/extension.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/GraphOrder.h"
#include "runtime/Functions.h"
#include "tn/capture.h"

namespace torch_neuronx {
namespace {

// A relocated range: an input's storage, or the pool block of an output's storage.
struct Range {
  uintptr_t start = 0;
  uint64_t bytes = 0;
};

// An input or output as the recording saw it: a value that is not a tensor, a host tensor
// (its value), or a device tensor's dtype, shape, strides and storage offset.
struct Seen {
  py::object value;
  at::Tensor host;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

// What a call's input must look like for the recording to replay on it (a host tensor's value,
// read when its op was launched, must stay the recorded one).
struct Input : Seen {
  int range = -1;  // index in ranges_ (-1: no storage bytes)
};

// How a replay makes an output: a view of a fresh block or of an input's storage, the recorded
// host tensor (made from values fixed for a replay), or a value that is not a tensor.
struct Output : Seen {
  int range = -1;  // the output block or input storage it views (index in ranges_; -1: no bytes)
};

// Fills `seen` from x; returns x's device tensor, or nullptr when x is not one.
const at::Tensor* see(py::handle x, Seen& seen) {
  if (!THPVariable_Check(x.ptr())) {
    seen.value = py::reinterpret_borrow<py::object>(x);
    return nullptr;
  }
  const at::Tensor& t = THPVariable_Unpack(x.ptr());
  seen.dtype = t.scalar_type();
  seen.sizes = t.sizes().vec();
  seen.strides = t.strides().vec();
  seen.offset = t.storage_offset();
  if (t.device().is_cpu()) {
    seen.host = t.clone();
    return nullptr;
  }
  return &t;
}

// What `seen` was, as Python values a plan's state pickles: ("value", v), ("host", tensor) or
// ("tensor", dtype, sizes, strides, storage offset, range).
py::tuple describe(const Seen& seen, int range) {
  if (seen.value) return py::make_tuple("value", seen.value);
  if (seen.host.defined()) return py::make_tuple("host", py::reinterpret_steal<py::object>(THPVariable_Wrap(seen.host)));
  return py::make_tuple("tensor", static_cast<int>(seen.dtype), seen.sizes, seen.strides, seen.offset, range);
}

// The inverse of describe(); returns the range.
int restore(const py::tuple& d, Seen& seen) {
  std::string kind = d[0].cast<std::string>();
  if (kind == "value") {
    seen.value = d[1];
    return -1;
  }
  if (kind == "host") {
    seen.host = THPVariable_Unpack(d[1].ptr()).clone();
    seen.dtype = seen.host.scalar_type();
    return -1;
  }
  TORCH_CHECK(kind == "tensor" && d.size() == 6, "a replay plan's state names an unknown kind of value: ", kind);
  seen.dtype = static_cast<at::ScalarType>(d[1].cast<int>());
  seen.sizes = d[2].cast<std::vector<int64_t>>();
  seen.strides = d[3].cast<std::vector<int64_t>>();
  seen.offset = d[4].cast<int64_t>();
  return d[5].cast<int>();
}

class Capture {
 public:
  // Starts recording the calling thread's launches on the current stream of `device`.
  explicit Capture(int device) {
    stream_ = current_stream(static_cast<c10::DeviceIndex>(device));
    device_ = static_cast<c10::DeviceIndex>(device);
    order_graph_after_collectives(stream_, true);
    check(tn_capture_begin(stream_, &capture_));
  }
  // A recording loaded from a plan (save() in another process) that replays on the current
  // stream of `device`.
  Capture(int device, const py::bytes& plan, const py::tuple& state) {
    stream_ = current_stream(static_cast<c10::DeviceIndex>(device));
    device_ = static_cast<c10::DeviceIndex>(device);
    TORCH_CHECK(state.size() == 4, "a replay plan's state has ", state.size(), " parts, not 4");
    for (py::handle d : state[0].cast<py::list>()) {
      inputs_.emplace_back();
      inputs_.back().range = restore(d.cast<py::tuple>(), inputs_.back());
    }
    for (py::handle d : state[1].cast<py::list>()) {
      outputs_.emplace_back();
      outputs_.back().range = restore(d.cast<py::tuple>(), outputs_.back());
    }
    for (py::handle bytes : state[2].cast<py::list>()) ranges_.push_back(Range{0, bytes.cast<uint64_t>()});
    input_ranges_ = state[3].cast<size_t>();
    std::string_view data = plan;
    check(tn_capture_load(stream_, data.data(), data.size(), &capture_));
  }
  ~Capture() { tn_capture_destroy(capture_); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  void end() { check(tn_capture_end(capture_)); }
  bool replayable() const { return tn_capture_replayable(capture_) != 0; }
  std::string reason() const { return tn_capture_reason(capture_); }
  int64_t launches() const { return tn_capture_launches(capture_); }
  int64_t relocated_words() const { return words_; }

  // Before the graph runs (its boxed call may clear the list): what each input is. Inputs
  // sharing a storage share one range.
  void bind_inputs(const py::list& inputs) {
    inputs_.assign(inputs.size(), Input{});
    ranges_.clear();
    for (size_t i = 0; i < inputs.size(); i++) {
      const at::Tensor* t = see(inputs[i], inputs_[i]);
      if (!t) continue;
      TORCH_CHECK(t->device().type() == c10::DeviceType::PrivateUse1, "capture input ", i, " is on ", t->device());
      const c10::Storage& s = t->storage();
      if (s.nbytes() == 0) continue;
      uintptr_t start = reinterpret_cast<uintptr_t>(s.data());
      inputs_[i].range = find_range(start);
      if (inputs_[i].range < 0) inputs_[i].range = add_range(start, s.nbytes());
    }
    input_ranges_ = ranges_.size();
  }

  // After end(): relocates the inputs' storages and the pool blocks of the outputs. Returns
  // "" when the recording now replays with any inputs that match(), else why it cannot.
  std::string relocate(const py::list& outputs) {
    ranges_.resize(input_ranges_);
    outputs_.assign(outputs.size(), Output{});
    for (size_t i = 0; i < outputs.size(); i++) {
      Output& out = outputs_[i];
      const at::Tensor* t = see(outputs[i], out);
      if (!t) continue;
      const c10::Storage& s = t->storage();
      if (s.nbytes() == 0) continue;
      uintptr_t start = reinterpret_cast<uintptr_t>(s.data());
      out.range = find_range(start);  // an input's storage, or a block an earlier output views
      if (out.range >= 0) continue;
      uint64_t block = tn_capture_block_bytes(capture_, s.data());
      if (block == 0) return "output " + std::to_string(i) + " is neither computed by the graph nor an input";
      out.range = add_range(start, block);
    }
    std::vector<uintptr_t> start;
    std::vector<uint64_t> bytes;
    for (const Range& r : ranges_) start.push_back(r.start), bytes.push_back(r.bytes);
    tn_status st = tn_capture_relocate(capture_, static_cast<int32_t>(ranges_.size()), start.data(),
                                       bytes.data(), &words_);
    return st == TN_STATUS_OK ? "" : tn_last_error();
  }

  // After relocate(): (the plan, its state) for Capture(device, plan, state) in another
  // process; raises NotImplementedError naming the launch when the recording cannot be saved.
  py::tuple save() const {
    void* bytes = nullptr;
    uint64_t size = 0;
    check(tn_capture_save(capture_, &bytes, &size));
    py::bytes plan(static_cast<const char*>(bytes), size);
    free(bytes);
    py::list inputs, outputs, ranges;
    for (const Input& in : inputs_) inputs.append(describe(in, in.range));
    for (const Output& out : outputs_) outputs.append(describe(out, out.range));
    for (const Range& r : ranges_) ranges.append(r.bytes);
    return py::make_tuple(plan, py::make_tuple(inputs, outputs, ranges, input_ranges_));
  }

  // True if `inputs` match the recording's (values, dtypes, shapes, strides, storage offsets,
  // which inputs share a storage, storages at least as large; a host tensor's values) on the
  // recorded stream.
  bool matches(const py::list& inputs) const {
    if (inputs.size() != inputs_.size() || current_stream(device_) != stream_) return false;
    std::vector<uintptr_t> start(input_ranges_, 0);
    for (size_t i = 0; i < inputs.size(); i++) {
      const Input& e = inputs_[i];
      py::handle x = inputs[i];
      if (e.value) {
        if (THPVariable_Check(x.ptr()) || !e.value.equal(x)) return false;
        continue;
      }
      if (!THPVariable_Check(x.ptr())) return false;
      const at::Tensor& t = THPVariable_Unpack(x.ptr());
      if (e.host.defined()) {
        if (!t.device().is_cpu() || t.scalar_type() != e.dtype || t.sizes() != e.host.sizes() || !at::equal(t, e.host))
          return false;
        continue;
      }
      if (t.device() != c10::Device(c10::DeviceType::PrivateUse1, device_) || t.scalar_type() != e.dtype ||
          t.sizes() != c10::IntArrayRef(e.sizes) || t.strides() != c10::IntArrayRef(e.strides) ||
          t.storage_offset() != e.offset)
        return false;
      if (e.range < 0) continue;
      const c10::Storage& s = t.storage();
      uintptr_t p = reinterpret_cast<uintptr_t>(s.data());
      if (s.nbytes() < ranges_[e.range].bytes || p == 0) return false;
      if (start[e.range] == 0) start[e.range] = p;
      else if (start[e.range] != p) return false;  // inputs that shared a storage no longer do
    }
    return true;
  }

  // Enqueues the recording with the inputs where they are now and the output blocks freshly
  // allocated; returns the outputs. The inputs must match().
  py::list replay(const py::list& inputs) {
    std::vector<uintptr_t> start(ranges_.size(), 0);
    std::vector<c10::Storage> storages(ranges_.size());
    for (size_t i = 0; i < inputs_.size(); i++)
      if (inputs_[i].range >= 0)
        storages[inputs_[i].range] = THPVariable_Unpack(py::handle(inputs[i]).ptr()).storage();
    at::TensorOptions bytes_on_device = at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device_);
    for (size_t r = input_ranges_; r < ranges_.size(); r++)
      storages[r] = at::empty({static_cast<int64_t>(ranges_[r].bytes)}, bytes_on_device).storage();
    for (size_t r = 0; r < ranges_.size(); r++) start[r] = reinterpret_cast<uintptr_t>(storages[r].data());
    order_graph_after_collectives(stream_, false);
    check(tn_capture_replay_at(capture_, static_cast<int32_t>(start.size()), start.data()));
    py::list result;
    for (const Output& out : outputs_) {
      if (out.value) {
        result.append(out.value);
        continue;
      }
      if (out.host.defined()) {
        result.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(out.host.clone())));
        continue;
      }
      at::TensorOptions options = at::TensorOptions().dtype(out.dtype).device(c10::DeviceType::PrivateUse1, device_);
      at::Tensor t;
      if (out.range < 0)
        t = at::empty_strided(out.sizes, out.strides, options);
      else
        t = at::empty({0}, options).set_(storages[out.range], out.offset, out.sizes, out.strides);
      result.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(t)));
    }
    return result;
  }

 private:
  // The index of the range starting at `start`, or -1.
  int find_range(uintptr_t start) const {
    for (size_t r = 0; r < ranges_.size(); r++)
      if (ranges_[r].start == start) return static_cast<int>(r);
    return -1;
  }

  int add_range(uintptr_t start, uint64_t bytes) {
    ranges_.push_back(Range{start, bytes});
    return static_cast<int>(ranges_.size() - 1);
  }

  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  std::vector<Range> ranges_;  // the inputs' storages, then the outputs' blocks
  size_t input_ranges_ = 0;
  int64_t words_ = 0;
  tn_stream_t stream_ = nullptr;
  c10::DeviceIndex device_ = 0;
  tn_capture_t capture_ = nullptr;
};

}  // namespace

void register_capture(py::module& m) {
  py::class_<Capture>(m, "Capture")
      .def(py::init<int>())
      .def(py::init<int, const py::bytes&, const py::tuple&>())
      .def("save", &Capture::save)
      .def("end", &Capture::end)
      .def("bind_inputs", &Capture::bind_inputs)
      .def("relocate", &Capture::relocate)
      .def("matches", &Capture::matches)
      .def("replay", &Capture::replay)
      .def_property_readonly("replayable", &Capture::replayable)
      .def_property_readonly("reason", &Capture::reason)
      .def_property_readonly("launches", &Capture::launches)
      .def_property_readonly("relocated_words", &Capture::relocated_words);
}

}  // namespace torch_neuronx
