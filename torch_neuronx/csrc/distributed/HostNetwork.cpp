// tn_comm_net over Gloo groups (see HostNetwork.h). Each callback runs on the stream worker that
// runs the collective and blocks until Gloo is done; Gloo's errors come back as messages.
#include "distributed/HostNetwork.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace torch_neuronx {

namespace {

GlooFactory& factory() {
  static GlooFactory f;
  return f;
}

struct Network {
  c10::intrusive_ptr<c10d::Backend> cross;  // local index l on every host; rank = host
  c10::intrusive_ptr<c10d::Backend> world;  // every rank
};

Network& net_of(void* ctx) { return *static_cast<Network*>(ctx); }

at::ScalarType scalar_type(tn_dtype d) {
  switch (d) {
    case TN_DTYPE_BOOL: return at::kBool;
    case TN_DTYPE_U8: return at::kByte;
    case TN_DTYPE_I8: return at::kChar;
    case TN_DTYPE_I16: return at::kShort;
    case TN_DTYPE_I32: return at::kInt;
    case TN_DTYPE_I64: return at::kLong;
    case TN_DTYPE_F16: return at::kHalf;
    case TN_DTYPE_BF16: return at::kBFloat16;
    case TN_DTYPE_F32: return at::kFloat;
    case TN_DTYPE_F64: return at::kDouble;
    default: TORCH_CHECK(false, "dtype ", tn_dtype_name(d), " does not cross hosts");
  }
}

// A CPU tensor over `bytes` bytes of device (host) memory.
at::Tensor bytes_at(const void* p, uint64_t bytes) {
  return at::from_blob(const_cast<void*>(p), {static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
}

c10d::ReduceOp reduce_op(tn_comm_op op, bool is_bool) {
  // bool travels as uint8 0/1: or is max, and is min
  switch (op) {
    case TN_COMM_OP_SUM: return is_bool ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    case TN_COMM_OP_PROD: return is_bool ? c10d::ReduceOp::MIN : c10d::ReduceOp::PRODUCT;
    case TN_COMM_OP_MIN: return c10d::ReduceOp::MIN;
    case TN_COMM_OP_MAX: return c10d::ReduceOp::MAX;
    case TN_COMM_OP_BAND: return is_bool ? c10d::ReduceOp::MIN : c10d::ReduceOp::BAND;
    case TN_COMM_OP_BOR: return is_bool ? c10d::ReduceOp::MAX : c10d::ReduceOp::BOR;
    case TN_COMM_OP_BXOR: return c10d::ReduceOp::BXOR;
    default: TORCH_CHECK(false, "reduction ", static_cast<int>(op), " does not cross hosts");
  }
}

// Runs `body`, turning its exception into `error`.
template <class F>
int guarded(char* error, F&& body) {
  try {
    body();
    return 0;
  } catch (const c10::Error& e) {
    std::snprintf(error, TN_COMM_ERROR_MAX, "%s", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::snprintf(error, TN_COMM_ERROR_MAX, "%s", e.what());
  }
  return -1;
}

int all_reduce(void* ctx, void* buf, uint64_t count, tn_dtype dtype, tn_comm_op op, char* error) {
  return guarded(error, [&] {
    if (!count) return;
    bool is_bool = dtype == TN_DTYPE_BOOL;
    at::Tensor t = at::from_blob(buf, {static_cast<int64_t>(count)},
                                 at::TensorOptions().dtype(is_bool ? at::kByte : scalar_type(dtype)));
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = reduce_op(op, is_bool);
    net_of(ctx).cross->allreduce(v, o)->wait();
  });
}

int broadcast(void* ctx, void* buf, uint64_t bytes, int32_t root_host, char* error) {
  return guarded(error, [&] {
    if (!bytes) return;
    std::vector<at::Tensor> v{bytes_at(buf, bytes)};
    c10d::BroadcastOptions o;
    o.rootRank = root_host;
    net_of(ctx).cross->broadcast(v, o)->wait();
  });
}

int all_gather(void* ctx, const void* send, void* recv, uint64_t bytes, char* error) {
  return guarded(error, [&] {
    if (!bytes) return;
    Network& n = net_of(ctx);
    at::Tensor out = bytes_at(recv, bytes * n.cross->getSize());
    at::Tensor in = bytes_at(send, bytes).clone();  // send lies inside recv
    n.cross->_allgather_base(out, in)->wait();
  });
}

int world(void* ctx, const tn_coll* ops, int32_t count, char* error) {
  return guarded(error, [&] {
    auto& w = net_of(ctx).world;
    int size = w->getSize(), me = w->getRank();
    const tn_coll& op = ops[0];
    uint64_t es = static_cast<uint64_t>(tn_dtype_size(op.dtype));
    switch (op.kind) {
      case TN_COLL_KIND_BARRIER: {
        w->barrier()->wait();
        return;
      }
      case TN_COLL_KIND_GATHER: {
        std::vector<at::Tensor> in{bytes_at(op.send, op.count * es)};
        std::vector<std::vector<at::Tensor>> out;
        if (me == op.root)
          out.push_back(bytes_at(op.recv, size * op.count * es).view({size, static_cast<int64_t>(op.count * es)}).unbind(0));
        c10d::GatherOptions o;
        o.rootRank = op.root;
        w->gather(out, in, o)->wait();
        return;
      }
      case TN_COLL_KIND_SCATTER: {
        std::vector<at::Tensor> out{bytes_at(op.recv, op.count * es)};
        std::vector<std::vector<at::Tensor>> in;
        if (me == op.root)
          in.push_back(bytes_at(op.send, size * op.count * es).view({size, static_cast<int64_t>(op.count * es)}).unbind(0));
        c10d::ScatterOptions o;
        o.rootRank = op.root;
        w->scatter(out, in, o)->wait();
        return;
      }
      case TN_COLL_KIND_ALL_TO_ALL: {
        std::vector<int64_t> in_splits(size), out_splits(size);
        uint64_t in_total = 0, out_total = 0;
        for (int j = 0; j < size; j++) {
          TORCH_CHECK(op.send_offsets[j] == in_total / es && op.recv_offsets[j] == out_total / es,
                      "all_to_all across hosts takes blocks in rank order");
          in_splits[j] = static_cast<int64_t>(op.send_counts[j] * es);
          out_splits[j] = static_cast<int64_t>(op.recv_counts[j] * es);
          in_total += in_splits[j];
          out_total += out_splits[j];
        }
        at::Tensor in = bytes_at(op.send, in_total), out = bytes_at(op.recv, out_total);
        c10d::AllToAllOptions o;
        w->alltoall_base(out, in, out_splits, in_splits, o)->wait();
        return;
      }
      case TN_COLL_KIND_SEND:
      case TN_COLL_KIND_RECV: {
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (int32_t i = 0; i < count; i++) {
          std::vector<at::Tensor> v{ops[i].kind == TN_COLL_KIND_SEND ? bytes_at(ops[i].send, ops[i].count * es)
                                                                     : bytes_at(ops[i].recv, ops[i].count * es)};
          works.push_back(ops[i].kind == TN_COLL_KIND_SEND ? w->send(v, ops[i].peer, 0) : w->recv(v, ops[i].peer, 0));
        }
        for (auto& work : works) work->wait();
        return;
      }
      default:
        TORCH_CHECK(false, "operation ", static_cast<int>(op.kind), " does not run over the network");
    }
  });
}

void destroy(void* ctx) { delete static_cast<Network*>(ctx); }

}  // namespace

void set_gloo_factory(GlooFactory f) { factory() = std::move(f); }

tn_comm_net make_host_network(const c10::intrusive_ptr<c10d::Store>& store, int rank, int hosts, int local_size,
                              std::chrono::milliseconds timeout) {
  TORCH_CHECK(factory(), "the neuron backend needs torch.distributed's Gloo to span hosts");
  int host = rank / local_size, local = rank % local_size;
  auto net = std::make_unique<Network>();
  net->cross = factory()(c10::make_intrusive<c10d::PrefixStore>("tn_ccl/cross/" + std::to_string(local), store),
                         host, hosts, timeout);
  net->world = factory()(c10::make_intrusive<c10d::PrefixStore>("tn_ccl/world", store), rank, hosts * local_size,
                         timeout);
  tn_comm_net n{};
  n.hosts = hosts;
  n.host = host;
  n.all_reduce = all_reduce;
  n.broadcast = broadcast;
  n.all_gather = all_gather;
  n.world = world;
  n.destroy = destroy;
  n.ctx = net.release();
  return n;
}

}  // namespace torch_neuronx
