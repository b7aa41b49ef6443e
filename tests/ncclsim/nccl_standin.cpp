// The host stand-in of the NCCL functions NcclComm calls — linked only into tests, never into
// fluxtrain. Collectives run on a GPU stand-in's device buffers (the host-emulated GPU's,
// tests/ncclemu; the virtual GPU's, tests/vgpu), over MPI, on the stream they are enqueued on
// (cuda_standin.cpp: a worker thread per stream), with nonblocking MPI polled against the
// communicator's abort flag so that ncclCommAbort ends a hung one. Reductions add the ranks'
// contributions in rank order (bf16 and fp16 in fp32, rounded once), so every rank holds the same
// bits. Point-to-point transfers are synchronous sends (a send completes only once its
// receive is posted, NCCL's worst case), matched in posting order: a schedule that posts them in a
// different order on the two ends deadlocks here as it would on NCCL. The user's buffers are read
// and written only inside ncclsim::touch_memory, copied to and from the host buffers MPI moves
// (standin.h: the host-emulated GPU's arena is open only there).
//
// It tests our host logic; it is not evidence that NCCL works, and it has none of NCCL's
// algorithms, protocols or performance.
//
// Bootstrap: the unique id names its maker's world rank and a counter; ncclCommInitRank(Config)
// sends each member's world rank to that root over MPI_COMM_WORLD, which answers with the member
// list, and the members create their MPI communicator with MPI_Comm_create_group (collective over
// them only). With ncclConfig_t::blocking = 0 a thread does it while ncclCommGetAsyncError reports
// ncclInProgress; its waits end on ncclCommAbort (a member that never arrives).
//
// Test hooks (the stand-in is test code; production code reads no such variable):
//   FT_NCCLSIM_STOP=R:K         world rank R stops itself (SIGSTOP) on entering its K-th collective
//   FT_NCCLSIM_STOP_P2P=R:K     world rank R stops itself on entering its K-th send or receive
//   FT_NCCLSIM_STOP_INIT=R:K    world rank R stops itself on entering its K-th communicator
//                               initialisation (ncclCommInitRank or ncclCommInitRankConfig)
//   FT_NCCLSIM_ASYNC_ERROR=R:K  world rank R's K-th collective fails as a broken link does: the
//                               communicator reports ncclSystemError, the operation never finishes
//                               (until ncclCommAbort)
#include <mpi.h>
#include <nccl.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "standin.h"
#include "tensor/dtype.h"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::atomic<bool> aborted{false};
  std::atomic<int> async{ncclSuccess};
  std::string last_error;
  bool finalized = false;  // ncclCommFinalize was called
};

namespace {

constexpr uint32_t kMagic = 0x5cc151a0;
struct IdData {
  uint32_t magic;
  int32_t root;  // world rank of the id's maker (the group's rank 0)
  uint32_t counter;
};
static_assert(sizeof(IdData) <= NCCL_UNIQUE_ID_BYTES);

int world_rank() {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

bool hook_matches(const char* var, int64_t k) {
  const char* spec = std::getenv(var);
  int r = -1;
  long long at = -1;
  return spec && std::sscanf(spec, "%d:%lld", &r, &at) == 2 && r == world_rank() && k == at;
}

// Counts this process's collectives; applies the hooks. Returns whether this one is to fail.
bool enter_collective() {
  static std::atomic<int64_t> calls{0};
  const int64_t k = ++calls;
  if (hook_matches("FT_NCCLSIM_STOP", k)) ::raise(SIGSTOP);
  return hook_matches("FT_NCCLSIM_ASYNC_ERROR", k);
}

// Counts this process's sends and receives; applies the stop hook.
void enter_transfer() {
  static std::atomic<int64_t> calls{0};
  if (hook_matches("FT_NCCLSIM_STOP_P2P", ++calls)) ::raise(SIGSTOP);
}

size_t elem_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

// Waits for MPI requests, giving up when the communicator is aborted (the requests are left: the
// process is about to end).
ncclResult_t complete(ncclComm* c, std::vector<MPI_Request>& reqs) {
  int spins = 0;
  while (true) {
    int flag = 0;
    if (MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      c->last_error = "MPI transfer failed (host stand-in)";
      c->async = ncclSystemError;
      return ncclSystemError;
    }
    if (flag) return ncclSuccess;
    if (c->aborted) return ncclInternalError;
    if (++spins > 64) {
      timespec ts{0, 20000};
      nanosleep(&ts, nullptr);
    }
  }
}

bool usable(ncclComm* c) {
  return !c->aborted && c->async == ncclSuccess;
}

// Adds the P blocks of `all` (each n elements of t, rank order) into out, or takes their maximum.
void reduce_blocks(void* out, const char* all, size_t n, int P, ncclDataType_t t, ncclRedOp_t op) {
  const size_t es = elem_size(t);
  auto as_double = [&](const char* p, size_t i) -> double {
    switch (t) {
      case ncclFloat32:
        return reinterpret_cast<const float*>(p)[i];
      case ncclFloat64:
        return reinterpret_cast<const double*>(p)[i];
      case ncclBfloat16:
        return ft::bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      case ncclFloat16:
        return ft::f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      default:
        return 0;
    }
  };
  for (size_t i = 0; i < n; ++i) {
    if (t == ncclFloat64) {
      double a = as_double(all, i);
      for (int q = 1; q < P; ++q) {
        double b = as_double(all + q * n * es, i);
        a = op == ncclMax ? std::max(a, b) : a + b;
      }
      reinterpret_cast<double*>(out)[i] = a;
      continue;
    }
    float a = static_cast<float>(as_double(all, i));  // fp32 accumulation, as NCCL's fp32 and
    for (int q = 1; q < P; ++q) {                     // (per step) bf16/fp16 reductions
      float b = static_cast<float>(as_double(all + q * n * es, i));
      a = op == ncclMax ? std::max(a, b) : a + b;
    }
    if (t == ncclFloat32) reinterpret_cast<float*>(out)[i] = a;
    if (t == ncclBfloat16) reinterpret_cast<uint16_t*>(out)[i] = ft::f32_to_bf16(a);
    if (t == ncclFloat16) reinterpret_cast<uint16_t*>(out)[i] = ft::f32_to_f16(a);
  }
}

// Runs body on the stream (the stream stand-in's worker thread) unless the communicator failed;
// `broken`: instead, the communicator reports an error and the operation hangs until aborted.
ncclResult_t enqueue(ncclComm* c, cudaStream_t s, std::function<ncclResult_t()> body, bool broken = false);

}  // namespace

// cudaLaunchHostFunc is the stand-in's way onto a stream.
namespace {

// The buffers of an operation about to be enqueued on s, which thereby becomes a worker stream:
// each must be usable there (standin.h: stream-ordered allocation; checked beside the emulated GPU).
// Each buffer with the bytes the operation touches there.
using Buffer = std::pair<const void*, size_t>;
void check_buffers(cudaStream_t s, const char* call, std::initializer_list<Buffer> reads,
                   std::initializer_list<Buffer> writes) {
  ncclsim::adopt_stream(s);
  for (const auto& [p, n] : reads) ncclsim::check_ordered(s, p, call, false, n);
  for (const auto& [p, n] : writes) ncclsim::check_ordered(s, p, call, true, n);
}

ncclResult_t enqueue(ncclComm* c, cudaStream_t s, std::function<ncclResult_t()> body, bool broken) {
  if (!c) return ncclInvalidArgument;
  ncclsim::adopt_stream(s);  // a foreign stream carrying NCCL work is a communication stream
  auto* f = new std::function<void()>([c, body = std::move(body), broken] {
    if (!usable(c)) return;
    if (!broken) {
      body();
      return;
    }
    c->last_error = "link broken (injected by FT_NCCLSIM_ASYNC_ERROR)";
    c->async = ncclSystemError;
    while (!c->aborted) {
      timespec ts{0, 1000000};
      nanosleep(&ts, nullptr);
    }
  });
  cudaLaunchHostFunc(
      s,
      [](void* p) {
        auto* g = static_cast<std::function<void()>*>(p);
        (*g)();
        delete g;
      },
      f);
  return ncclSuccess;
}

// Point-to-point operations collected between ncclGroupStart and ncclGroupEnd.
struct P2p {
  bool send;
  void* buf;
  size_t bytes;
  int peer;
  ncclComm* comm;
  cudaStream_t stream;
};
thread_local int t_group_depth = 0;
thread_local std::vector<P2p> t_group;

ncclResult_t post_p2p(std::vector<P2p> ops) {
  if (ops.empty()) return ncclSuccess;
  ncclComm* c = ops.front().comm;
  for (const P2p& o : ops) {
    if (o.send)
      check_buffers(o.stream, "ncclSend", {{o.buf, o.bytes}}, {});
    else
      check_buffers(o.stream, "ncclRecv", {}, {{o.buf, o.bytes}});
  }
  return enqueue(c, ops.front().stream, [c, ops] {
    std::vector<std::vector<char>> host(ops.size());  // what MPI moves
    ncclsim::touch_memory([&] {
      for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].send) host[i].assign(static_cast<char*>(ops[i].buf), static_cast<char*>(ops[i].buf) + ops[i].bytes);
    });
    std::vector<MPI_Request> reqs(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const P2p& o = ops[i];
      host[i].resize(o.bytes);
      int rc = o.send ? MPI_Issend(host[i].data(), static_cast<int>(o.bytes), MPI_BYTE, o.peer, 0, c->mpi, &reqs[i])
                      : MPI_Irecv(host[i].data(), static_cast<int>(o.bytes), MPI_BYTE, o.peer, 0, c->mpi, &reqs[i]);
      if (rc != MPI_SUCCESS) {
        c->async = ncclSystemError;
        return ncclSystemError;
      }
    }
    if (ncclResult_t e = complete(c, reqs); e != ncclSuccess) return e;
    ncclsim::touch_memory([&] {
      for (size_t i = 0; i < ops.size(); ++i)
        if (!ops[i].send && ops[i].bytes > 0) std::memcpy(ops[i].buf, host[i].data(), ops[i].bytes);
    });
    return ncclSuccess;
  });
}

ncclResult_t p2p(bool send, const void* buf, size_t count, ncclDataType_t t, int peer, ncclComm* c, cudaStream_t s) {
  enter_transfer();
  if (!c || peer < 0 || peer >= c->size || elem_size(t) == 0) return ncclInvalidArgument;
  P2p op{send, const_cast<void*>(buf), count * elem_size(t), peer, c, s};
  if (t_group_depth > 0) {
    t_group.push_back(op);
    return ncclSuccess;
  }
  return post_p2p({op});
}

// blocks (size × bytes, host memory) = one block of `bytes` from every rank, in rank order: each
// rank's send (an all-gather), or with to_all rank k's k-th block of send (an all-to-all: send
// holds a block per rank). send is the user's buffer: copied to the host first (touch_memory).
// Nonblocking MPI, so ncclCommAbort can end the wait.
ncclResult_t exchange_blocks(ncclComm_t c, const void* send, char* blocks, size_t bytes, bool to_all) {
  std::vector<char> mine(to_all ? bytes * static_cast<size_t>(c->size) : bytes);
  if (bytes == 0) return ncclSuccess;
  ncclsim::touch_memory([&] { std::memcpy(mine.data(), send, mine.size()); });
  if (c->size == 1) {
    std::memcpy(blocks, mine.data(), bytes);
    return ncclSuccess;
  }
  std::vector<MPI_Request> r(1);
  const int n = static_cast<int>(bytes);
  if (to_all)
    MPI_Ialltoall(mine.data(), n, MPI_BYTE, blocks, n, MPI_BYTE, c->mpi, &r[0]);
  else
    MPI_Iallgather(mine.data(), n, MPI_BYTE, blocks, n, MPI_BYTE, c->mpi, &r[0]);
  return complete(c, r);
}

// c's MPI communicator: each member sends its world rank to the id's maker (d.root), which answers
// with the member list; then the members create it, collective over them only. The waits are
// nonblocking MPI polled against c's abort flag; on an abort their buffers are left to MPI (the
// process is about to end).
ncclResult_t bootstrap(ncclComm* c, IdData d) {
  const int nranks = c->size;
  if (nranks == 1) return ncclSuccess;
  const int tag = 20000 + static_cast<int>(d.counter % 5000);
  const int me = world_rank();
  auto* members = new std::vector<int>(static_cast<size_t>(nranks), -1);
  auto* msgs = new std::vector<int>(static_cast<size_t>(2 * nranks), -1);  // (group rank, world rank)
  std::vector<MPI_Request> reqs;
  ncclResult_t r = ncclSuccess;
  if (c->rank == 0) {
    (*members)[0] = me;
    reqs.resize(static_cast<size_t>(nranks - 1));
    for (int k = 1; k < nranks; ++k)
      MPI_Irecv(msgs->data() + 2 * k, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                &reqs[static_cast<size_t>(k - 1)]);
    r = complete(c, reqs);
    if (r == ncclSuccess) {
      for (int k = 1; k < nranks; ++k) (*members)[static_cast<size_t>((*msgs)[2 * k])] = (*msgs)[2 * k + 1];
      for (int k = 1; k < nranks; ++k)
        MPI_Isend(members->data(), nranks, MPI_INT, (*members)[static_cast<size_t>(k)], tag, MPI_COMM_WORLD,
                  &reqs[static_cast<size_t>(k - 1)]);
      r = complete(c, reqs);
    }
  } else {
    (*msgs)[0] = c->rank;
    (*msgs)[1] = me;
    reqs.resize(2);
    MPI_Isend(msgs->data(), 2, MPI_INT, d.root, tag, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(members->data(), nranks, MPI_INT, d.root, tag, MPI_COMM_WORLD, &reqs[1]);
    r = complete(c, reqs);
  }
  if (r != ncclSuccess) {
    c->last_error = c->aborted ? "initialisation aborted (host stand-in)" : "bootstrap failed (host stand-in)";
    return r;
  }
  MPI_Group world, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, nranks, members->data(), &group);
  const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &c->mpi);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  delete members;
  delete msgs;
  if (rc != MPI_SUCCESS) return ncclSystemError;
  MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
  return ncclSuccess;
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error (host stand-in)";
    case ncclSystemError:
      return "unhandled system error (host stand-in)";
    case ncclInternalError:
      return "internal error (host stand-in)";
    case ncclInvalidArgument:
      return "invalid argument (host stand-in)";
    case ncclInvalidUsage:
      return "invalid usage (host stand-in)";
    default:
      return "error (host stand-in)";
  }
}

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetLastError(ncclComm_t c) {
  return c ? c->last_error.c_str() : "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<uint32_t> counter{0};
  std::memset(id, 0, sizeof *id);
  IdData d{kMagic, world_rank(), counter++};
  std::memcpy(id->internal, &d, sizeof d);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  static std::atomic<int64_t> inits{0};
  if (hook_matches("FT_NCCLSIM_STOP_INIT", ++inits)) ::raise(SIGSTOP);
  IdData d;
  std::memcpy(&d, id.internal, sizeof d);
  if (!out || d.magic != kMagic || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto* c = new ncclComm;
  c->rank = rank;
  c->size = nranks;
  if (!config || config->blocking != 0) {  // NCCL's default: blocking
    if (ncclResult_t r = bootstrap(c, d); r != ncclSuccess) {
      delete c;
      return r;
    }
    *out = c;
    return ncclSuccess;
  }
  c->async = ncclInProgress;
  *out = c;
  std::thread([c, d] { c->async = bootstrap(c, d); }).detach();  // c outlives it: abort never frees
  return ncclInProgress;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(out, nranks, id, rank, nullptr);
}

// A nonblocking communicator answers ncclInProgress; done once ncclCommGetAsyncError says so.
ncclResult_t ncclCommFinalize(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  c->finalized = true;
  return ncclInProgress;
}

// Dies unless finalised first: NcclComm finalises every communicator it destroys.
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  if (!c->finalized) {
    std::fprintf(stderr, "nccl stand-in: ncclCommDestroy of a communicator not finalised (ncclCommFinalize)\n");
    std::abort();
  }
  if (c->mpi != MPI_COMM_NULL) MPI_Comm_free(&c->mpi);
  delete c;
  return ncclSuccess;
}

// Pending operations stop; the object stays (queued work may still look at its flag).
ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  c->aborted = true;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* r) {
  if (!c) return ncclInvalidArgument;
  *r = static_cast<ncclResult_t>(c->async.load());
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s) {
  const bool broken = enter_collective();
  if (!c || elem_size(t) == 0 || (op != ncclSum && op != ncclMax) || t_group_depth > 0) return ncclInvalidArgument;
  const size_t bytes = count * elem_size(t);
  check_buffers(s, "ncclAllReduce", {{send, bytes}}, {{recv, bytes}});
  return enqueue(
      c, s,
      [=] {
        std::vector<char> all(bytes * static_cast<size_t>(c->size));
        if (ncclResult_t e = exchange_blocks(c, send, all.data(), bytes, /*to_all=*/false); e != ncclSuccess) return e;
        ncclsim::touch_memory([&] { reduce_blocks(recv, all.data(), count, c->size, t, op); });
        return ncclSuccess;
      },
      broken);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s) {
  const bool broken = enter_collective();
  if (!c || elem_size(t) == 0 || (op != ncclSum && op != ncclMax) || t_group_depth > 0) return ncclInvalidArgument;
  const size_t bytes = count * elem_size(t);
  check_buffers(s, "ncclReduceScatter", {{send, bytes * static_cast<size_t>(c->size)}}, {{recv, bytes}});
  return enqueue(
      c, s,
      [=] {
        std::vector<char> mine(bytes * static_cast<size_t>(c->size));  // every rank's block c->rank
        if (ncclResult_t e = exchange_blocks(c, send, mine.data(), bytes, /*to_all=*/true); e != ncclSuccess) return e;
        ncclsim::touch_memory([&] { reduce_blocks(recv, mine.data(), count, c->size, t, op); });
        return ncclSuccess;
      },
      broken);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t, ncclComm_t c, cudaStream_t s) {
  const bool broken = enter_collective();
  if (!c || elem_size(t) == 0 || t_group_depth > 0) return ncclInvalidArgument;
  const size_t bytes = count * elem_size(t);
  check_buffers(s, "ncclAllGather", {{send, bytes}}, {{recv, bytes * static_cast<size_t>(c->size)}});
  return enqueue(
      c, s,
      [=] {
        std::vector<char> all(bytes * static_cast<size_t>(c->size));  // send may lie inside recv
        if (ncclResult_t e = exchange_blocks(c, send, all.data(), bytes, /*to_all=*/false); e != ncclSuccess) return e;
        if (!all.empty()) ncclsim::touch_memory([&] { std::memcpy(recv, all.data(), all.size()); });
        return ncclSuccess;
      },
      broken);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
  const bool broken = enter_collective();
  if (!c || elem_size(t) == 0 || root < 0 || root >= c->size || t_group_depth > 0) return ncclInvalidArgument;
  const size_t bytes = count * elem_size(t);
  check_buffers(s, "ncclBroadcast", {{send, bytes}}, {{recv, bytes}});
  return enqueue(
      c, s,
      [=] {
        if (bytes == 0) return ncclSuccess;
        std::vector<char> host(bytes);
        if (c->rank == root) ncclsim::touch_memory([&] { std::memcpy(host.data(), send, bytes); });
        if (c->size > 1) {
          std::vector<MPI_Request> r(1);
          MPI_Ibcast(host.data(), static_cast<int>(bytes), MPI_BYTE, root, c->mpi, &r[0]);
          if (ncclResult_t e = complete(c, r); e != ncclSuccess) return e;
        }
        ncclsim::touch_memory([&] { std::memcpy(recv, host.data(), bytes); });
        return ncclSuccess;
      },
      broken);
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
  return p2p(true, buf, count, t, peer, c, s);
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
  return p2p(false, buf, count, t, peer, c, s);
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<P2p> ops;
  ops.swap(t_group);
  return post_p2p(std::move(ops));
}

}  // extern "C"
