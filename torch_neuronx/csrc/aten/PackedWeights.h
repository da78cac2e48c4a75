// B operands packed once for the GEMM micro-kernel (see tn_gemm_packed_b_bytes).
//
// A GEMM operand seen twice unchanged (same storage, offset, sizes, strides and version
// counter) is almost always a weight: the second time it is packed into a device buffer that
// later products with m > 4 read instead of packing B again. An in-place change (which bumps
// the version counter) or the storage's release makes the entry stale; the least recently
// used entries go when the packed bytes pass TORCH_NEURONX_PACKED_WEIGHTS_MB (default 2048,
// 0 turns packing off). Inference tensors have no version counter and are never packed.
// Writes that bypass the version counter (through `.data`) are caught on the stream: the
// packing keeps 64 sampled elements of B and the GEMM packs afresh when they differ; a
// change to other elements alone is not seen (set TORCH_NEURONX_PACKED_WEIGHTS_MB=0, or call
// torch.neuron.empty_cache() after such writes).
#pragma once

#include <ATen/core/Tensor.h>

#include "tn/gemm.h"

namespace torch_neuronx::ops {

// The packed B for g (whose B is `b`) on `stream`, launching the packing if needed; nullptr
// when b should be packed on the fly.
const void* packed_b(const at::Tensor& b, const tn_gemm& g, tn_stream_t stream);

// Weights packed for a recording (compiler/GraphCapture.cpp). A recorded GEMM whose B is a
// view of a graph input reads a packed copy that the recording owns (packed once, outside the
// recording); before each replay the capture packs it again if B moved to other memory or
// its version counter changed (an optimizer step). A B the graph computes is packed on the fly.
struct RecordedPack {
  at::Tensor packed;
  tn_gemm g;           // the GEMM's operands as recorded (B as it was packed)
  size_t input = 0;    // the graph input whose storage B views
  uint64_t b_offset = 0;  // bytes from that storage's start to B's data
  uintptr_t packed_from = 0;  // B's address when packed
  uint32_t version = 0;       // the input's version counter then
  std::vector<int64_t> sizes, strides;  // B's view of the input (b_offset says where it starts)
};

struct RecordingPacks {
  std::vector<at::Tensor> inputs;  // the graph's device inputs, by position (undefined: other)
  std::vector<uint32_t> versions;  // their version counters when the recording began
  std::vector<RecordedPack> packs;
};

// While GraphCapture records on this thread, the packs its GEMMs read (nullptr: not recording
// for a graph, GEMMs in a recording read B itself).
void set_recording_packs(RecordingPacks* packs);
RecordingPacks* recording_packs();

// Drops every packed operand (torch.neuron.empty_cache calls it first).
void clear_packed_weights();

struct PackedWeightsStats {
  int64_t tracked;  // operands seen (packed or not yet)
  int64_t packed;   // operands held packed
  int64_t bytes;    // their packed bytes on the device
};
PackedWeightsStats packed_weights_stats();

}  // namespace torch_neuronx::ops
