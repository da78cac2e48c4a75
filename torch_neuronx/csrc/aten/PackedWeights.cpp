// B operands packed once for the GEMM micro-kernel (see PackedWeights.h).
#include "aten/PackedWeights.h"

#include <ATen/ops/empty.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/Functions.h"
#include "tn/capture.h"

namespace torch_neuronx::ops {
namespace {

// What identifies an operand: its storage, where the view starts, its shape and strides, and
// the operand dtypes (they pick the packed layout).
struct Key {
  const c10::StorageImpl* storage;
  int64_t offset;
  std::vector<int64_t> sizes, strides;
  int a_dtype, b_dtype;
  bool operator==(const Key& o) const {
    return storage == o.storage && offset == o.offset && sizes == o.sizes && strides == o.strides &&
           a_dtype == o.a_dtype && b_dtype == o.b_dtype;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = std::hash<const void*>()(k.storage) ^ (std::hash<int64_t>()(k.offset) * 31);
    for (int64_t v : k.sizes) h = h * 1000003 ^ std::hash<int64_t>()(v);
    for (int64_t v : k.strides) h = h * 1000003 ^ std::hash<int64_t>()(v);
    return h ^ (size_t)(k.a_dtype * 7 + k.b_dtype);
  }
};

struct Entry {
  explicit Entry(c10::weak_intrusive_ptr<c10::StorageImpl> s) : storage(std::move(s)) {}
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // expired: the key's address was reused
  int64_t version = 0;
  at::Tensor packed;  // undefined until the operand is seen a second time unchanged
  tn_stream_t stream = nullptr;
  uint64_t last_use = 0;
};

constexpr size_t kMaxEntries = 8192;  // seen-once operands included

struct Cache {
  std::mutex lock;
  std::unordered_map<Key, Entry, KeyHash> entries;
  int64_t packed_bytes = 0;
  uint64_t clock = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: device tensors must not outlive the runtime
  return *c;
}

int64_t budget_bytes() {
  static const int64_t bytes = [] {
    const char* v = std::getenv("TORCH_NEURONX_PACKED_WEIGHTS_MB");
    int64_t mb = v && *v ? std::strtoll(v, nullptr, 10) : 2048;
    return mb > 0 ? mb << 20 : 0;
  }();
  return bytes;
}

void drop_packed(Cache& c, Entry& e) {
  if (e.packed.defined()) c.packed_bytes -= e.packed.numel();
  e.packed = at::Tensor();
}

// Drops the entries whose operand's storage is gone, with their packed copies. An entry is
// otherwise only found stale when its key's address comes back: in training, the activations
// a step uses twice as B (packed on the second use) each left their packed copy in the cache
// until the LRU budget ran out, 20 MB a step for a small Llama, every step's copies on fresh
// pages. Called with the lock held.
void sweep_expired(Cache& c) {
  for (auto it = c.entries.begin(); it != c.entries.end();) {
    if (!it->second.storage.expired()) {
      ++it;
      continue;
    }
    drop_packed(c, it->second);
    it = c.entries.erase(it);
  }
}

// Evicts the least recently used entries until `need` more packed bytes fit and the table has
// room for one more entry (dead operands first). Called with the lock held.
void make_room(Cache& c, int64_t need) {
  if (c.packed_bytes + need > budget_bytes() || c.entries.size() >= kMaxEntries) sweep_expired(c);
  while (c.packed_bytes + need > budget_bytes() || c.entries.size() >= kMaxEntries) {
    auto victim = c.entries.end();
    for (auto it = c.entries.begin(); it != c.entries.end(); ++it)
      if (victim == c.entries.end() || it->second.last_use < victim->second.last_use) victim = it;
    if (victim == c.entries.end()) return;
    drop_packed(c, victim->second);
    c.entries.erase(victim);
  }
}

thread_local RecordingPacks* recording = nullptr;

// Resumes the paused recording when it goes out of scope, exception or not.
struct Paused {
  tn_capture_t capture = tn_capture_suspend();
  ~Paused() { tn_capture_resume(capture); }
};

// The packed B of a recorded GEMM (see RecordedPack), or nullptr to pack on the fly.
const void* recorded_pack(const at::Tensor& b, const tn_gemm& g, tn_stream_t stream, int64_t bytes, Key& key) {
  RecordingPacks* r = recording;
  if (!r) return nullptr;
  auto in = std::find_if(r->inputs.begin(), r->inputs.end(), [&](const at::Tensor& t) {
    return t.defined() && t.storage().unsafeGetStorageImpl() == key.storage;
  });
  if (in == r->inputs.end()) return nullptr;  // computed by the graph: it changes every replay
  size_t input = static_cast<size_t>(in - r->inputs.begin());
  uint64_t b_offset = static_cast<uint64_t>(static_cast<const char*>(b.const_data_ptr()) -
                                            static_cast<const char*>(b.storage().data()));
  for (const RecordedPack& p : r->packs)
    if (p.input == input && p.b_offset == b_offset && p.sizes == key.sizes && p.strides == key.strides &&
        p.g.a.dtype == g.a.dtype && p.g.b.dtype == g.b.dtype)
      return p.packed.const_data_ptr();
  {
    Cache& c = cache();  // the eager copy of this weight is not needed beside the recording's
    std::lock_guard<std::mutex> guard(c.lock);
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      drop_packed(c, it->second);
      c.entries.erase(it);
    }
  }
  RecordedPack p;
  p.g = g;
  p.input = input;
  p.b_offset = b_offset;
  p.packed_from = reinterpret_cast<uintptr_t>(b.const_data_ptr());
  p.version = in->_version();
  p.sizes = key.sizes;
  p.strides = key.strides;
  {
    Paused paused;  // allocated and packed once, outside the recording
    p.packed = at::empty({bytes}, b.options().dtype(at::kByte));
    check(tn_gemm_pack_b_async(stream, &g, p.packed.mutable_data_ptr()));
  }
  r->packs.push_back(std::move(p));
  return r->packs.back().packed.const_data_ptr();
}

}  // namespace

void set_recording_packs(RecordingPacks* packs) { recording = packs; }
RecordingPacks* recording_packs() { return recording; }

const void* packed_b(const at::Tensor& b, const tn_gemm& g, tn_stream_t stream) {
  if (g.m <= 4 || budget_bytes() == 0 || b.is_inference()) return nullptr;
  int64_t bytes = tn_gemm_packed_b_bytes(&g);
  if (bytes == 0 || bytes > budget_bytes()) return nullptr;
  Key key{b.storage().unsafeGetStorageImpl(), b.storage_offset(), b.sizes().vec(), b.strides().vec(),
          static_cast<int>(g.a.dtype), static_cast<int>(g.b.dtype)};
  // A recording (tn/capture.h) replays its launches later: the cache's copy could be evicted
  // or go stale by then, so a recorded GEMM reads a copy the recording owns, or B itself.
  if (tn_capture_active()) return recorded_pack(b, g, stream, bytes, key);
  int64_t version = b._version();
  Cache& c = cache();
  std::lock_guard<std::mutex> guard(c.lock);
  auto it = c.entries.find(key);
  if (it != c.entries.end() && it->second.storage.expired()) {
    drop_packed(c, it->second);
    c.entries.erase(it);
    it = c.entries.end();
  }
  if (it == c.entries.end()) {  // first sighting: remember it, pack nothing yet
    make_room(c, 0);
    Entry e(b.storage().getWeakStorageImpl());
    e.version = version;
    e.last_use = ++c.clock;
    c.entries.emplace(std::move(key), std::move(e));
    return nullptr;
  }
  Entry& e = it->second;
  e.last_use = ++c.clock;
  if (e.version != version || (e.packed.defined() && e.stream != stream)) {  // changed: start over
    drop_packed(c, e);
    e.version = version;
    return nullptr;
  }
  if (!e.packed.defined()) {  // seen twice unchanged: pack it
    sweep_expired(c);  // a pack is rare (once per weight; in training, per activation used twice)
    make_room(c, bytes);
    it = c.entries.find(key);  // make_room may have evicted it
    if (it == c.entries.end()) return nullptr;
    Entry& kept = it->second;
    kept.packed = at::empty({bytes}, b.options().dtype(at::kByte));
    check(tn_gemm_pack_b_async(stream, &g, kept.packed.mutable_data_ptr()));
    kept.stream = stream;
    c.packed_bytes += bytes;
    return kept.packed.const_data_ptr();
  }
  return e.packed.const_data_ptr();
}

PackedWeightsStats packed_weights_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> guard(c.lock);
  PackedWeightsStats s{static_cast<int64_t>(c.entries.size()), 0, c.packed_bytes};
  for (const auto& kv : c.entries) s.packed += kv.second.packed.defined();
  return s;
}

void clear_packed_weights() {
  Cache& c = cache();
  std::lock_guard<std::mutex> guard(c.lock);
  c.entries.clear();
  c.packed_bytes = 0;
}

}  // namespace torch_neuronx::ops
