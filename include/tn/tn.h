/* TorchNeuron C runtime: the whole public API. */
#ifndef TN_TN_H
#define TN_TN_H

#include "tn/status.h"
#include "tn/dtype.h"
#include "tn/tensor.h"
#include "tn/runtime.h"
#include "tn/device_interface.h"
#include "tn/stream.h"
#include "tn/memory.h"
#include "tn/capture.h"
#include "tn/copy.h"
#include "tn/random.h"
#include "tn/kernels.h"
#include "tn/usage.h"
#include "tn/elementwise.h"
#include "tn/isa.h"
#include "tn/parallel.h"
#include "tn/gemm.h"
#include "tn/reduce.h"
#include "tn/index.h"
#include "tn/norm.h"
#include "tn/sequence.h"
#include "tn/sort.h"
#include "tn/optim.h"
#include "tn/foreach.h"
#include "tn/attention.h"
#include "tn/linalg.h"
#include "tn/ctc.h"
#include "tn/pool.h"
#include "tn/graph.h"

#endif
