#include "runtime/Storage.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "runtime/Functions.h"

namespace torch_neuronx {

void resize_storage_bytes(c10::StorageImpl& storage, size_t new_nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  if (new_nbytes == storage.nbytes()) return;
  c10::DeviceGuard guard(storage.device());
  c10::DataPtr fresh = storage.allocator()->allocate(new_nbytes);
  size_t keep = std::min(new_nbytes, storage.nbytes());
  tn_stream_t stream = current_stream(storage.device().index());
  if (keep > 0) {
    check(tn_memcpy_async(stream, fresh.get(), storage.data_ptr().get(), keep));
    // The old block goes back to the pool of the stream that allocated it: make that pool
    // wait for this copy before handing it out again.
    check(tn_memory_record_stream(storage.mutable_data_ptr().get(), stream));
  }
  c10::DataPtr old = storage.set_data_ptr(std::move(fresh));
  storage.set_nbytes(new_nbytes);
}

} // namespace torch_neuronx
