/* Copies between strided views, with dtype conversion, ordered on a stream.
 *
 * tn_copy_async covers host->device, device->host and device->device. Source memory on the
 * host that is not pinned is first copied (synchronously) into a staging buffer owned by the
 * launch, so the caller may free or change it as soon as the call returns, as with CUDA's
 * pageable copies (when the stream is idle the copy is simply done before returning). A
 * destination on the host is written by the stream; the caller synchronises
 * the stream before reading it unless it asked for a non-blocking copy into pinned memory. */
#ifndef TN_COPY_H
#define TN_COPY_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_copy_flags {
    TN_COPY_FLAGS_NONE = 0,
    TN_COPY_FLAGS_STAGE_SRC = 1, /* src is pageable host memory: stage it before returning */
    TN_COPY_FLAGS_BLOCKING = 2   /* the caller synchronises next: on an idle stream, copy on the
                                    calling thread instead of handing over to the worker */
} tn_copy_flags;

/* dst and src have the same sizes. */
tn_status tn_copy_async(tn_stream_t stream, const tn_tensor *dst, const tn_tensor *src,
                        uint32_t flags);
/* dst[i] <- src[i] for i < count, device views of equal sizes, in one launch (the inputs of a
 * concatenation into slices of its output); each copy may convert dtypes. */
tn_status tn_copy_many_async(tn_stream_t stream, const char *name, const tn_tensor *dst, const tn_tensor *src,
                             int32_t count);
/* Byte copy, e.g. when a storage grows. */
tn_status tn_memcpy_async(tn_stream_t stream, void *dst, const void *src, uint64_t size);
/* dst[...] = value converted to dst's dtype. */
tn_status tn_fill_async(tn_stream_t stream, const tn_tensor *dst, const tn_scalar *value);

#ifdef __cplusplus
}
#endif
#endif
