/* Sorting along the last dimension (callers permute the dimension there): full stable sorts
 * and top-k. Values keep their dtype; indices are int64 positions along the dimension. NaN
 * counts as larger than every number (last when ascending, first when descending), as in
 * PyTorch. Equal values keep their original order (stable). `k` of a row are written: the
 * smallest first when ascending, the largest first when descending. */
#ifndef TN_SORT_H
#define TN_SORT_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* values and indices have the input's sizes except the last, which is k (<= the input's). */
tn_status tn_sort_async(tn_stream_t stream, const char *name, const tn_tensor *values,
                        const tn_tensor *indices, const tn_tensor *in, int32_t descending);
/* scratch: 2 * (length of the input's last dimension) entries of 16 bytes. */
void tn_kernel_sort(const tn_tensor *values, const tn_tensor *indices, const tn_tensor *in,
                    int32_t descending, void *scratch, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
