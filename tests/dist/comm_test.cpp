// The communicator's collectives against exact expectations, on real MPI ranks. Built twice: over
// MpiComm (comm_test, host buffers) and, with FT_COMM_TEST_NCCL, over NcclComm on the host-emulated
// GPU's device buffers with the host stand-in of CUDA and NCCL behind it (nccl_comm_test,
// tests/ncclemu): each test's data is uploaded into device memory (Buf) and read back after the
// call; stack scalars stay on the host and go over MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "parallel/comm/mpi_comm.h"
#ifdef FT_COMM_TEST_NCCL
#include "backends/cuda/nccl_comm.h"
#endif
#include "parallel/mesh.h"
#include "tensor/device_runtime.h"
#include "tensor/dtype.h"
#include "tensor/memory.h"
#include "util/clock.h"

namespace ft {
namespace {

#ifdef FT_COMM_TEST_NCCL
constexpr Device kDevice = Device::kCUDA;  // the emulated GPU (tests/ncclemu/bridge.cpp)
#else
constexpr Device kDevice = Device::kCPU;
#endif

// The context the communicator's buffers belong to: the rank's compute context.
const ExecContext& compute() {
  static const ExecContext ctx = make_exec_context(kDevice, 0);
  return ctx;
}

std::shared_ptr<Communicator> make_world() {
  std::shared_ptr<Communicator> mpi = mpi_world("test", CommOptions{60, "", false});
#ifdef FT_COMM_TEST_NCCL
  return make_nccl_comm(mpi, compute(), CommOptions{60, "", false});
#else
  return mpi;
#endif
}

struct World {
  std::shared_ptr<Communicator> c = make_world();
  int r = c->rank(), P = c->size();
};

// A buffer in the memory the communicator moves (kDevice's), holding `init`; host() reads it back.
template <class T>
class Buf {
 public:
  explicit Buf(const std::vector<T>& init) : n_(init.size()) {
    if (kDevice == Device::kCPU) {
      host_ = init;
      p_ = host_.data();
      return;
    }
    p_ = static_cast<T*>(mem_alloc(kDevice, bytes(), MemCategory::kOther));
    if (n_ > 0) mem_copy(compute(), p_, kDevice, init.data(), Device::kCPU, n_ * sizeof(T));
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() {
    if (kDevice != Device::kCPU) mem_free(kDevice, p_, bytes(), MemCategory::kOther);
  }
  T* data() { return p_; }
  std::vector<T> host() const {
    if (kDevice == Device::kCPU) return host_;
    std::vector<T> out(n_);
    if (n_ > 0) mem_copy(compute(), out.data(), Device::kCPU, p_, kDevice, n_ * sizeof(T));
    return out;
  }

 private:
  size_t bytes() const { return std::max<size_t>(n_, 1) * sizeof(T); }
  size_t n_;
  std::vector<T> host_;
  T* p_ = nullptr;
};

// Integer-valued data so sums are exact in fp32 whatever the order.
float value(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * ((i % 97) - 40));
}

TEST(Comm, AllReduceSumIsExactForManySizes) {
  World w;
  for (int64_t n : {0, 1, 3, 7, 1000, 100003}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = value(w.r, i);
    Buf<float> b(x);
    w.c->all_reduce(b.data(), n);
    x = b.host();
    float ranks_sum = static_cast<float>(w.P * (w.P + 1) / 2);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(x[i], ranks_sum * static_cast<float>((i % 97) - 40)) << "n " << n << " i " << i;
  }
}

TEST(Comm, AllReduceMaxAndDouble) {
  World w;
  Buf<float> b({static_cast<float>(w.r), -static_cast<float>(w.r), 5});
  w.c->all_reduce(b.data(), 3, ReduceOp::kMax);
  const std::vector<float> x = b.host();
  EXPECT_EQ(x[0], w.P - 1);
  EXPECT_EQ(x[1], 0);
  EXPECT_EQ(x[2], 5);
  double d[2] = {0.5 * w.r, 1.0};  // on the stack: the host's
  w.c->all_reduce(d, 2);
  EXPECT_DOUBLE_EQ(d[0], 0.5 * w.P * (w.P - 1) / 2);
  EXPECT_DOUBLE_EQ(d[1], w.P);
  Buf<double> dd({0.5 * w.r, 1.0});
  w.c->all_reduce(dd.data(), 2);
  std::copy_n(dd.host().begin(), 2, d);
  EXPECT_DOUBLE_EQ(d[0], 0.5 * w.P * (w.P - 1) / 2);
  EXPECT_DOUBLE_EQ(d[1], w.P);
}

// Rank r's x[i] = sin(0.37 i + r), and the sum of every rank's, in fp32: a 16-bit wire's input.
std::pair<std::vector<float>, std::vector<float>> sines_and_their_sum(const World& w, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n)), exact(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(w.r));
    for (int q = 0; q < w.P; ++q) exact[i] += std::sin(0.37f * static_cast<float>(i) + static_cast<float>(q));
  }
  return {x, exact};
}

TEST(Comm, Bf16WireIsCloseAndIdenticalOnEveryRank) {
  World w;
  const int64_t n = 4099;
  auto [x0, exact] = sines_and_their_sum(w, n);
  Buf<float> bx(x0);
  w.c->all_reduce(bx.data(), n, ReduceOp::kSum, Wire::kBF16);
  const std::vector<float> x = bx.host();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[i], exact[i], 0.02 * w.P) << i;
  Buf<float> ball{std::vector<float>(static_cast<size_t>(n * w.P))};
  w.c->all_gather(ball.data(), bx.data(), n * 4);
  const std::vector<float> all = ball.host();
  for (int q = 0; q < w.P; ++q)
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(all[q * n + i], x[i]) << "rank " << q << " differs at " << i;
}

// fp16 keeps 3 more mantissa bits than bf16: the same sums, several times closer, and identical on
// every rank. Bound: each of the ≤ P roundings of a partial sum (|partial| ≤ P) is off by at most
// P · 2^-11.
TEST(Comm, Fp16WireIsCloserThanBf16AndIdenticalOnEveryRank) {
  World w;
  const int64_t n = 4099;
  auto [x, exact] = sines_and_their_sum(w, n);
  Buf<float> bh(x), bb(x);
  w.c->all_reduce(bh.data(), n, ReduceOp::kSum, Wire::kF16);
  w.c->all_reduce(bb.data(), n, ReduceOp::kSum, Wire::kBF16);
  const std::vector<float> h = bh.host(), b = bb.host();
  double worst16 = 0, worst_bf16 = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(h[i], exact[i], w.P * w.P * std::ldexp(1.0, -11)) << i;
    worst16 = std::max(worst16, static_cast<double>(std::fabs(h[i] - exact[i])));
    worst_bf16 = std::max(worst_bf16, static_cast<double>(std::fabs(b[i] - exact[i])));
  }
  EXPECT_LT(worst16, worst_bf16 / 4) << "fp16's 10 mantissa bits against bf16's 7";
  Buf<float> ball{std::vector<float>(static_cast<size_t>(n * w.P))};
  w.c->all_gather(ball.data(), bh.data(), n * 4);
  const std::vector<float> all = ball.host();
  for (int q = 0; q < w.P; ++q)
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(all[q * n + i], h[i]) << "rank " << q << " differs at " << i;
}

// Integers below 2048 are exact in fp16: the fp16 wire's all-reduce and reduce-scatter sum them
// exactly, whatever the ring's order.
TEST(Comm, Fp16WireSumsSmallIntegersExactly) {
  World w;
  const int64_t n = 1001;
  const float s = static_cast<float>(w.P * (w.P + 1) / 2);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = value(w.r, i);
  Buf<float> bx(x);
  w.c->all_reduce(bx.data(), n, ReduceOp::kSum, Wire::kF16);
  x = bx.host();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], s * static_cast<float>((i % 97) - 40)) << i;
  std::vector<float> in(static_cast<size_t>(n * w.P));
  for (int64_t i = 0; i < n * w.P; ++i) in[i] = value(w.r, i);
  Buf<float> bin(in), bout{std::vector<float>(n)};
  w.c->reduce_scatter(bout.data(), bin.data(), n, Wire::kF16);
  const std::vector<float> out = bout.host();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], s * static_cast<float>(((w.r * n + i) % 97) - 40)) << i;
}

// Out of fp16's range: a sum past 65504 is ±inf on every rank, for the all-reduce (ZeRO 0) and the
// reduce-scatter (ZeRO 1-3) alike, on MPI as on NCCL — so the loss scaler sees it and skips the
// step. A sum below half the smallest subnormal (2^-25) is 0 everywhere.
TEST(Comm, Fp16WireOverflowIsInfAndUnderflowZeroOnEveryRank) {
  World w;
  const int64_t n = 64;
  auto fill = [&](float* v) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);  // small, in range
    v[0] = 40000.0f;                                               // × P ≥ 2: past 65504
    v[1] = -40000.0f;
    v[2] = 1e-9f;                               // × P ≤ 8e-9 < 2^-25
    v[3] = 60000.0f / static_cast<float>(w.P);  // sums to 60000: in range
  };
  std::vector<float> x(n);
  fill(x.data());
  Buf<float> bx(x);
  w.c->all_reduce(bx.data(), n, ReduceOp::kSum, Wire::kF16);
  x = bx.host();
  EXPECT_EQ(x[0], INFINITY);
  EXPECT_EQ(x[1], -INFINITY);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_TRUE(std::isfinite(x[3])) << x[3];
  EXPECT_NEAR(x[3], 60000.0f, 60000.0f * w.P * std::ldexp(1.0, -11));
  for (int64_t i = 4; i < n; ++i) ASSERT_EQ(x[i], static_cast<float>(i * w.P)) << i;

  std::vector<float> in(static_cast<size_t>(n * w.P));
  for (int q = 0; q < w.P; ++q) fill(in.data() + q * n);
  Buf<float> bin(in), bout{std::vector<float>(n)};
  w.c->reduce_scatter(bout.data(), bin.data(), n, Wire::kF16);
  const std::vector<float> out = bout.host();
  EXPECT_EQ(out[0], INFINITY);
  EXPECT_EQ(out[1], -INFINITY);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_TRUE(std::isfinite(out[3])) << out[3];
  for (int64_t i = 4; i < n; ++i) ASSERT_EQ(out[i], static_cast<float>(i * w.P)) << i;
}

TEST(Comm, ReduceScatterAndAllGather) {
  World w;
  const int64_t n = 1001;
  std::vector<float> in0(static_cast<size_t>(n * w.P));
  for (int64_t i = 0; i < n * w.P; ++i) in0[i] = value(w.r, i);
  Buf<float> bin(in0), bout{std::vector<float>(n)};
  w.c->reduce_scatter(bout.data(), bin.data(), n);
  const std::vector<float> out = bout.host(), in = bin.host();
  float s = static_cast<float>(w.P * (w.P + 1) / 2);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], s * static_cast<float>(((w.r * n + i) % 97) - 40)) << i;
  EXPECT_EQ(in[5], value(w.r, 5)) << "reduce_scatter must not modify its input";

  Buf<int32_t> mine{std::vector<int32_t>(3, w.r)}, ball{std::vector<int32_t>(static_cast<size_t>(3 * w.P))};
  w.c->all_gather(ball.data(), mine.data(), 3 * 4);
  const std::vector<int32_t> all = ball.host();
  for (int q = 0; q < w.P; ++q)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(all[q * 3 + k], q);
}

TEST(Comm, BroadcastFromEveryRoot) {
  World w;
  for (int root = 0; root < w.P; ++root) {
    Buf<int64_t> x{std::vector<int64_t>(257, w.r == root ? 1000 + root : -1)};
    w.c->broadcast(x.data(), 257 * 8, root);
    for (auto v : x.host()) ASSERT_EQ(v, 1000 + root);
  }
}

TEST(Comm, SendRecvRing) {
  World w;
  int right = (w.r + 1) % w.P, left = (w.r - 1 + w.P) % w.P;
  Buf<float> out{std::vector<float>(100, static_cast<float>(w.r))}, in{std::vector<float>(100, -1.0f)};
  WorkPtr rx, tx;
#ifdef FT_COMM_TEST_NCCL
  // NCCL matches transfers in posting order, without tags: even ranks send first, odd ranks
  // receive first (both first receiving would deadlock on NCCL, and does on the stand-in).
  if (w.r % 2 == 0) tx = w.c->send_async(out.data(), 400, right, 7);
#endif
  rx = w.c->recv_async(in.data(), 400, left, 7);
  if (!tx) tx = w.c->send_async(out.data(), 400, right, 7);
  tx->wait();
  rx->wait();
  EXPECT_EQ(in.host()[99], static_cast<float>(left));
}

#ifdef FT_COMM_TEST_NCCL
// The pipeline's pattern over per-link channels: every rank first receives from both neighbours,
// then sends to both, activations (even tags) and gradients (odd) interleaved. On one NCCL stream
// this deadlocks; with a channel per link direction and kind it completes.
TEST(Comm, TransfersOverChannelsNeverWaitBehindTheOtherDirection) {
  auto c = make_nccl_comm(mpi_world("pp", CommOptions{60, "", true}), compute(), CommOptions{60, "", true});
  const int r = c->rank(), P = c->size(), right = (r + 1) % P, left = (r - 1 + P) % P;
  std::vector<std::unique_ptr<Buf<float>>> in, out;
  for (int k = 0; k < 4; ++k) {
    in.push_back(std::make_unique<Buf<float>>(std::vector<float>(64, -1.0f)));
    out.push_back(std::make_unique<Buf<float>>(std::vector<float>(64, static_cast<float>(100 * r + k))));
  }
  std::vector<WorkPtr> works;
  for (int k = 0; k < 2; ++k) {  // two rounds: an activation from the left, a gradient from the right
    works.push_back(c->recv_async(in[2 * k]->data(), 256, left, 2 * k));
    works.push_back(c->recv_async(in[2 * k + 1]->data(), 256, right, 2 * k + 1));
  }
  for (int k = 0; k < 2; ++k) {
    works.push_back(c->send_async(out[2 * k + 1]->data(), 256, left, 2 * k + 1));
    works.push_back(c->send_async(out[2 * k]->data(), 256, right, 2 * k));
  }
  for (auto& w : works) w->wait();
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(in[2 * k]->host()[5], static_cast<float>(100 * left + 2 * k));
    EXPECT_EQ(in[2 * k + 1]->host()[5], static_cast<float>(100 * right + 2 * k + 1));
  }
}
#endif

TEST(Comm, BytesOnTheWireMatchTheRingAlgorithm) {
  World w;
  const int64_t n = 1 << 16;
  Buf<float> x{std::vector<float>(n, 1.0f)};
  CommStats before = w.c->stats();
  w.c->all_reduce(x.data(), n);
  w.c->all_reduce(x.data(), n, ReduceOp::kSum, Wire::kBF16);
  w.c->all_reduce(x.data(), n, ReduceOp::kSum, Wire::kF16);
  CommStats d = w.c->stats() - before;
  int64_t ar = static_cast<int64_t>(CollKind::kAllReduce);
  EXPECT_EQ(d.calls[ar], 3);
  // fp32: 2 (P - 1) / P · 4n bytes; bf16 and fp16: half of it. Chunks differ by at most one element
  // when P does not divide n, so a rank's count is within 2 (P - 1) elements of the mean.
  double theory = 2.0 * (w.P - 1) * n * 4 / w.P + 2 * (2.0 * (w.P - 1) * n * 2 / w.P);
  EXPECT_NEAR(static_cast<double>(d.bytes_sent[ar]), theory, 2.0 * (w.P - 1) * 8);

  // A reduce-scatter sends (P - 1) blocks: 4 bytes an element in fp32, 2 in fp16.
  Buf<float> in{std::vector<float>(static_cast<size_t>(n * w.P), 1.0f)}, out{std::vector<float>(n)};
  const int64_t rs = static_cast<int64_t>(CollKind::kReduceScatter);
  before = w.c->stats();
  w.c->reduce_scatter(out.data(), in.data(), n);
  const int64_t f32_bytes = (w.c->stats() - before).bytes_sent[rs];
  before = w.c->stats();
  w.c->reduce_scatter(out.data(), in.data(), n, Wire::kF16);
  const int64_t f16_bytes = (w.c->stats() - before).bytes_sent[rs];
  EXPECT_EQ(f32_bytes, (w.P - 1) * n * 4);
  EXPECT_EQ(f16_bytes, f32_bytes / 2);
}

// Every kind's time is counted where it ran (MPI: on the communication thread; NCCL: between the
// timing events around it on its stream), for operations waited on the host, only stream-waited,
// or never waited for (it ran before one that was). One thread or stream runs them in order, so
// their sum cannot exceed the wall time around them.
TEST(Comm, SecondsAreCountedPerKindHoweverTheOperationIsWaitedFor) {
  World w;
  const int64_t n = 1 << 18;
  Buf<float> a{std::vector<float>(static_cast<size_t>(n * w.P), 1.0f)}, b{std::vector<float>(n * w.P)};
  const CommStats before = w.c->stats();
  const double t0 = now_seconds();
  w.c->all_reduce(a.data(), n);
  w.c->reduce_scatter_async(b.data(), a.data(), n)->stream_wait(compute());
  w.c->all_gather_async(b.data(), a.data(), n * 4);  // its Work dropped at once
  w.c->broadcast(a.data(), n * 4, 0);
  const double wall = now_seconds() - t0;
  const CommStats d = w.c->stats() - before;
  double sum = 0;
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather, CollKind::kBroadcast}) {
    const auto i = static_cast<size_t>(k);
    EXPECT_EQ(d.calls[i], 1) << coll_kind_name(k);
    EXPECT_GT(d.seconds[i], 0) << coll_kind_name(k);
    sum += d.seconds[i];
  }
  EXPECT_LE(sum, wall);
}

TEST(Comm, AsyncOperationsCompleteInOrderWhileTheCallerWorks) {
  World w;
  std::vector<std::unique_ptr<Buf<float>>> bufs;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    bufs.push_back(std::make_unique<Buf<float>>(std::vector<float>(50000, static_cast<float>(k + w.r))));
    works.push_back(w.c->all_reduce_async(bufs[k]->data(), 50000));
  }
  double busy = 0;
  for (int i = 0; i < 1000000; ++i) busy += std::sqrt(static_cast<double>(i));  // overlap
  EXPECT_GT(busy, 0);
  for (auto& wk : works) wk->wait();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(bufs[k]->host()[123], static_cast<float>(k * w.P + w.P * (w.P - 1) / 2));
}

TEST(Mesh, GroupsFollowTpInnermostThenDpThenPp) {
  World w;
  if (w.P != 8) GTEST_SKIP() << "needs 8 ranks";
  ParallelConfig p;
  p.dp = 2;
  p.tp = 2;
  p.pp = 2;
  Mesh m = Mesh::create_mpi(p, w.r, w.P, "");
  MeshCoord c = m.coord();
  EXPECT_EQ(w.r, (c.pp * 2 + c.dp) * 2 + c.tp);
  EXPECT_EQ(m.tp().size(), 2);
  EXPECT_EQ(m.tp().world_rank_of(0), w.r - c.tp);
  EXPECT_EQ(m.dp().world_rank_of(1), (c.pp * 2 + 1) * 2 + c.tp);
  EXPECT_EQ(m.pp().world_rank_of(1), (1 * 2 + c.dp) * 2 + c.tp);
  double x = 1;
  m.tp().all_reduce(&x, 1);
  EXPECT_EQ(x, 2);
}

// The fifth axis: pp × dp × cp × tp, tp innermost, then cp, then dp, then pp; the gradient group
// dp × cp orders its ranks dp_index · cp + cp_index; the dry run's Mesh::create_with builds the
// same groups as the MPI mesh.
TEST(Mesh, CpSitsBetweenTpAndDp) {
  World w;
  if (w.P != 8) GTEST_SKIP() << "needs 8 ranks";
  ParallelConfig p;
  p.dp = 2;
  p.cp = 2;
  p.tp = 2;
  Mesh m = Mesh::create_mpi(p, w.r, w.P, "");
  MeshCoord c = m.coord();
  EXPECT_EQ(w.r, (c.dp * 2 + c.cp) * 2 + c.tp);
  auto rank_of = [](int64_t dp, int64_t cp, int64_t tp) { return static_cast<int>((dp * 2 + cp) * 2 + tp); };
  EXPECT_EQ(m.cp().size(), 2);
  EXPECT_EQ(m.cp().rank(), c.cp);
  EXPECT_EQ(m.cp().world_rank_of(1), rank_of(c.dp, 1, c.tp));
  EXPECT_EQ(m.tp().world_rank_of(1), rank_of(c.dp, c.cp, 1));
  EXPECT_EQ(m.dp().world_rank_of(1), rank_of(1, c.cp, c.tp));
  EXPECT_EQ(m.dp_cp().size(), 4);
  EXPECT_EQ(m.dp_cp().rank(), c.dp * 2 + c.cp);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(m.dp_cp().world_rank_of(i), rank_of(i / 2, i % 2, c.tp));
  // The dry run's groups: the same members in the same order.
  std::map<std::string, std::pair<std::vector<int>, int>> made;
  Mesh::create_with(p, w.r, [&](const std::string& name, const std::vector<int>& members, int index) {
    made[name] = {members, index};
    return std::shared_ptr<Communicator>(make_self_communicator(name, w.r));
  });
  for (auto [name, g] : std::vector<std::pair<std::string, Communicator*>>{
           {"tp", &m.tp()}, {"cp", &m.cp()}, {"dp", &m.dp()}, {"pp", &m.pp()}, {"dp_cp", &m.dp_cp()}}) {
    ASSERT_EQ(made.count(name), 1u) << name;
    std::vector<int> mpi;
    for (int i = 0; i < g->size(); ++i) mpi.push_back(g->world_rank_of(i));
    EXPECT_EQ(made[name].first, mpi) << name;
    EXPECT_EQ(made[name].second, g->rank()) << name;
  }
  double x = 1;
  m.dp_cp().all_reduce(&x, 1);
  EXPECT_EQ(x, 4);
}

}  // namespace
}  // namespace ft
