/* Status codes of the TorchNeuron C runtime.
 *
 * Every public function returns a tn_status. The list below is the single source: it
 * generates the enum and tn_status_string(). A failing call also leaves a human-readable
 * detail (figures, names) in tn_last_error(), which is thread-local and stays valid until the
 * next failing call on the same thread. */
#ifndef TN_STATUS_H
#define TN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#define TN_STATUS_LIST(X)                                                     \
    X(OK, "success")                                                          \
    X(INVALID_ARGUMENT, "invalid argument")                                   \
    X(INVALID_DEVICE, "invalid device id")                                    \
    X(OUT_OF_MEMORY, "out of device memory")                                  \
    X(NOT_READY, "work is still pending")                                     \
    X(KERNEL_FAILED, "a kernel failed on the device")                         \
    X(FORKED, "the runtime cannot be used in a forked child process")         \
    X(UNSUPPORTED, "unsupported operation")                                   \
    X(COMM_FAILED, "a collective failed: a peer is missing, late or disagrees") \
    X(INTERNAL, "internal error")

typedef enum tn_status {
#define TN_STATUS_ENUM_(name, msg) TN_STATUS_##name,
    TN_STATUS_LIST(TN_STATUS_ENUM_)
#undef TN_STATUS_ENUM_
    TN_STATUS_COUNT_
} tn_status;

/* Short fixed description of a status code. */
const char *tn_status_string(tn_status status);

/* Detail of the last failure on this thread ("" if none). */
const char *tn_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
