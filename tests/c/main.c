/* Runs every C unit test (or those whose name contains argv[1]); prints "N passed, N failed"
 * and exits non-zero on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tn/tn.h"

int tn_test_failures;

#define TN_TESTS(X)              \
    X(test_status_strings)       \
    X(test_parse_core_list)      \
    X(test_parse_bytes)          \
    X(test_ptrmap)               \
    X(test_half_conversions)     \
    X(test_bf16_rounding)        \
    X(test_copy_kernel)          \
    X(test_copy_transposed)      \
    X(test_fill_kernel)          \
    X(test_nontemporal_stores)   \
    X(test_philox_known_answers) \
    X(test_random_kernels)       \
    X(test_dropout_typed_rows_match_the_element_path) \
    X(test_adam_kernel)          \
    X(test_amp_update_scale)     \
    X(test_sgd_kernel)           \
    X(test_stream_order)         \
    X(test_stream_task_sizes)    \
    X(test_task_ring)            \
    X(test_stream_many_launchers) \
    X(test_stream_sleeping_waiters) \
    X(test_event_ordering)       \
    X(test_event_timing)         \
    X(test_kernel_error_kept)    \
    X(test_allocator_reuse)      \
    X(test_allocator_oom)        \
    X(test_allocator_record_stream) \
    X(test_pinned_memory)        \
    X(test_copy_async_staging)   \
    X(test_copy_many)            \
    X(test_capture_replay)       \
    X(test_capture_relocation)   \
    X(test_capture_plan)         \
    X(test_capture_plan_arena)   \
    X(test_capture_refusals)     \
    X(test_device_checks)        \
    X(test_unary_rows_every_isa) \
    X(test_math_ulp_every_isa) \
    X(test_exp_ulp_every_isa) \
    X(test_binary_rows_every_isa) \
    X(test_half_and_generic_paths) \
    X(test_integer_division_rows) \
    X(test_f16_rows_every_isa) \
    X(test_bf16_rows_match_float32_rows_every_isa) \
    X(test_bf16_gelu_every_isa) \
    X(test_convert_rows_every_isa) \
    X(test_typed_rows_every_isa) \
    X(test_integer_semantics)    \
    X(test_parallel_pool)        \
    X(test_elementwise_launch)   \
    X(test_gemm_every_isa)       \
    X(test_gemm_fma_peak)        \
    X(test_gemm_launch_bf16_output) \
    X(test_gemm_launch_split_k)  \
    X(test_gemm_integer)         \
    X(test_reductions)           \
    X(test_var_kernel)           \
    X(test_reduce_rows_every_isa) \
    X(test_reduce_paths)         \
    X(test_quotient_rows_exact_every_isa) \
    X(test_histc_kernel)         \
    X(test_solve_triangular_kernel) \
    X(test_svd_kernel)           \
    X(test_ctc_kernels)          \
    X(test_channel_norm_kernels) \
    X(test_channel_norm_rows_every_isa) \
    X(test_upsample_kernels)     \
    X(test_fold_kernels)         \
    X(test_pool_kernels)         \
    X(test_ternary_kernel)       \
    X(test_ternary_rows_every_isa) \
    X(test_foreach_launch)       \
    X(test_foreach_fill_copy_unscale) \
    X(test_adam_rows_every_isa)  \
    X(test_attention_kernel)     \
    X(test_softmax_kernels)      \
    X(test_index_select_and_where) \
    X(test_layer_norm_kernel)    \
    X(test_layer_norm_rows_every_isa) \
    X(test_sequence_kernels)     \
    X(test_index_add_rows)       \
    X(test_sort_kernel)          \
    X(test_gather_nd_kernel)     \
    X(test_index_put_and_nonzero_kernels) \
    X(test_gather_kernel)        \
    X(test_graph_fused_region)   \
    X(test_graph_rejects_bad_regions) \
    X(test_graph_row_sums)       \
    X(test_graph_channels_last)  \
    X(test_graph_plan_keeps_its_kernel_loaded) \
    X(test_ccl_collectives)      \
    X(test_ccl_run_now)          \
    X(test_ccl_point_to_point)   \
    X(test_ccl_failures)          \
    X(test_ccl_across_hosts)

#define DECLARE(name) void name(void);
TN_TESTS(DECLARE)

int main(int argc, char **argv) {
    /* Four small devices so the allocator tests hit their capacity quickly. */
    tn_runtime_desc desc = {.num_cores = 4, .memory_per_core = 64ull << 20};
    if (tn_runtime_init(&desc) != TN_STATUS_OK) {
        fprintf(stderr, "runtime init failed: %s\n", tn_last_error());
        return 1;
    }
    int passed = 0, failed = 0;
#define RUN(name)                                         \
    do {                                                  \
        if (argc > 1 && !strstr(#name, argv[1])) break;   \
        int before = tn_test_failures;                    \
        name();                                           \
        if (tn_test_failures == before) {                 \
            passed++;                                     \
        } else {                                          \
            failed++;                                     \
            fprintf(stderr, "FAILED: %s\n", #name);       \
        }                                                 \
    } while (0);
    TN_TESTS(RUN)
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
