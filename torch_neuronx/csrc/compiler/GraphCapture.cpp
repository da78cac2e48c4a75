// torch_neuronx._C.Capture: a recording of the launches a compiled graph makes on the current
// stream, replayed as one task (tn/capture.h) with the graph's inputs wherever they are and its
// outputs in fresh memory. torch_neuronx/compiler/replay.py decides when a graph is recorded
// and replayed; this file owns the C object and the relocation of inputs and outputs.
#include <torch/extension.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "aten/PackedWeights.h"
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
    ops::set_recording_packs(&packs_);
  }
  // A recording loaded from a plan (save() in another process) that replays on the current
  // stream of `device`.
  Capture(int device, const py::bytes& plan, const py::tuple& state) {
    stream_ = current_stream(static_cast<c10::DeviceIndex>(device));
    device_ = static_cast<c10::DeviceIndex>(device);
    TORCH_CHECK(state.size() == 5, "a replay plan's state has ", state.size(), " parts, not 5");
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
    output_ranges_ = ranges_.size();
    for (py::handle d : state[4].cast<py::list>()) {  // packed anew before the first replay
      py::tuple t = d.cast<py::tuple>();
      ops::RecordedPack p;
      std::string g = t[0].cast<std::string>();
      TORCH_CHECK(g.size() == sizeof(tn_gemm), "a replay plan's packed weight has ", g.size(), " bytes, not ", sizeof(tn_gemm));
      std::memcpy(&p.g, g.data(), sizeof(tn_gemm));
      p.input = t[1].cast<size_t>();
      p.b_offset = t[2].cast<uint64_t>();
      int64_t bytes = t[3].cast<int64_t>();
      TORCH_CHECK(p.input < inputs_.size() && inputs_[p.input].range >= 0 && bytes > 0,
                  "a replay plan's packed weight names no input storage");
      p.packed = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device_));
      ranges_.push_back(Range{0, static_cast<uint64_t>(bytes)});
      packs_.packs.push_back(std::move(p));
    }
    std::string_view data = plan;
    check(tn_capture_load(stream_, data.data(), data.size(), &capture_));
  }
  ~Capture() {
    if (ops::recording_packs() == &packs_) ops::set_recording_packs(nullptr);
    tn_capture_destroy(capture_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  void end() {
    if (ops::recording_packs() == &packs_) ops::set_recording_packs(nullptr);
    for (const ops::RecordedPack& p : packs_.packs)
      if (packs_.inputs[p.input]._version() != packs_.versions[p.input]) {
        // packed before the replay, B would miss the graph's own write
        std::string why = "a GEMM read a packed copy of input " + std::to_string(p.input) + ", which the graph writes";
        tn_capture_refuse(why.c_str());
        break;
      }
    check(tn_capture_end(capture_));
  }
  bool replayable() const { return tn_capture_replayable(capture_) != 0; }
  std::string reason() const { return tn_capture_reason(capture_); }
  int64_t launches() const { return tn_capture_launches(capture_); }
  int64_t relocated_words() const { return words_; }
  int64_t packed_weights() const { return static_cast<int64_t>(packs_.packs.size()); }

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
    packs_.inputs.assign(inputs.size(), at::Tensor());
    packs_.versions.assign(inputs.size(), 0);
    for (size_t i = 0; i < inputs.size(); i++)
      if (inputs_[i].range >= 0) {
        const at::Tensor& t = THPVariable_Unpack(inputs[i].ptr());
        if (t.is_inference()) continue;  // no version counter: its GEMMs pack on the fly
        packs_.inputs[i] = t;
        packs_.versions[i] = t._version();
      }
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
    output_ranges_ = ranges_.size();
    for (const ops::RecordedPack& p : packs_.packs)  // so that a plan names them
      add_range(reinterpret_cast<uintptr_t>(p.packed.const_data_ptr()), static_cast<uint64_t>(p.packed.numel()));
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
    py::list inputs, outputs, ranges, packs;
    for (const Input& in : inputs_) inputs.append(describe(in, in.range));
    for (const Output& out : outputs_) outputs.append(describe(out, out.range));
    for (size_t r = 0; r < output_ranges_; r++) ranges.append(ranges_[r].bytes);
    for (const ops::RecordedPack& p : packs_.packs)
      packs.append(py::make_tuple(py::bytes(reinterpret_cast<const char*>(&p.g), sizeof(tn_gemm)), p.input,
                                  p.b_offset, p.packed.numel()));
    return py::make_tuple(plan, py::make_tuple(inputs, outputs, ranges, input_ranges_, packs));
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
    for (size_t r = input_ranges_; r < output_ranges_; r++)
      storages[r] = at::empty({static_cast<int64_t>(ranges_[r].bytes)}, bytes_on_device).storage();
    for (size_t k = 0; k < packs_.packs.size(); k++) storages[output_ranges_ + k] = packs_.packs[k].packed.storage();
    for (size_t r = 0; r < ranges_.size(); r++) start[r] = reinterpret_cast<uintptr_t>(storages[r].data());
    repack_moved_or_changed(inputs, start);
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
  // The recording's packed weights whose input now lies elsewhere or was written since they
  // were packed are packed again, on the stream before the replay.
  void repack_moved_or_changed(const py::list& inputs, const std::vector<uintptr_t>& start) {
    for (ops::RecordedPack& p : packs_.packs) {
      const at::Tensor& t = THPVariable_Unpack(py::handle(inputs[p.input]).ptr());
      uintptr_t from = start[inputs_[p.input].range] + p.b_offset;
      // an inference tensor has no version counter: pack it for every replay
      uint32_t version = t.is_inference() ? p.version + 1 : t._version();
      if (from == p.packed_from && version == p.version) continue;
      tn_gemm g = p.g;
      g.b.data = reinterpret_cast<void*>(from);
      check(tn_gemm_pack_b_async(stream_, &g, p.packed.mutable_data_ptr()));
      p.packed_from = from;
      p.version = version;
    }
  }

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
  std::vector<Range> ranges_;  // the inputs' storages, the outputs' blocks, the packed weights
  size_t input_ranges_ = 0;
  size_t output_ranges_ = 0;  // then the packed weights' buffers
  int64_t words_ = 0;
  tn_stream_t stream_ = nullptr;
  c10::DeviceIndex device_ = 0;
  tn_capture_t capture_ = nullptr;
  ops::RecordingPacks packs_;
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
      .def_property_readonly("relocated_words", &Capture::relocated_words)
      .def_property_readonly("packed_weights", &Capture::packed_weights);
}

}  // namespace torch_neuronx
