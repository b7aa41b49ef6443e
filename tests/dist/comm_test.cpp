// The communicator's collectives against exact expectations, on real MPI ranks. Built twice: over
// MpiComm (comm_test) and, with FT_COMM_TEST_NCCL, over NcclComm on the host stand-in of CUDA and
// NCCL (nccl_comm_test, tests/ncclsim): heap buffers are "device" memory there and go over NCCL,
// stack scalars over MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "parallel/comm/mpi_comm.h"
#ifdef FT_COMM_TEST_NCCL
#include "backends/cuda/nccl_comm.h"
#endif
#include "parallel/mesh.h"
#include "tensor/dtype.h"
#include "util/clock.h"

namespace ft {
namespace {

std::shared_ptr<Communicator> make_world() {
  std::shared_ptr<Communicator> mpi = mpi_world("test", CommOptions{60, "", false});
#ifdef FT_COMM_TEST_NCCL
  return make_nccl_comm(mpi, cpu_context(), CommOptions{60, "", false});
#else
  return mpi;
#endif
}

struct World {
  std::shared_ptr<Communicator> c = make_world();
  int r = c->rank(), P = c->size();
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
    w.c->all_reduce(x.data(), n);
    float ranks_sum = static_cast<float>(w.P * (w.P + 1) / 2);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(x[i], ranks_sum * static_cast<float>((i % 97) - 40)) << "n " << n << " i " << i;
  }
}

TEST(Comm, AllReduceMaxAndDouble) {
  World w;
  std::vector<float> x = {static_cast<float>(w.r), -static_cast<float>(w.r), 5};
  w.c->all_reduce(x.data(), 3, ReduceOp::kMax);
  EXPECT_EQ(x[0], w.P - 1);
  EXPECT_EQ(x[1], 0);
  EXPECT_EQ(x[2], 5);
  double d[2] = {0.5 * w.r, 1.0};
  w.c->all_reduce(d, 2);
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
  auto [x, exact] = sines_and_their_sum(w, n);
  w.c->all_reduce(x.data(), n, ReduceOp::kSum, Wire::kBF16);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[i], exact[i], 0.02 * w.P) << i;
  std::vector<float> all(static_cast<size_t>(n * w.P));
  w.c->all_gather(all.data(), x.data(), n * 4);
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
  std::vector<float> h = x, b = x;
  w.c->all_reduce(h.data(), n, ReduceOp::kSum, Wire::kF16);
  w.c->all_reduce(b.data(), n, ReduceOp::kSum, Wire::kBF16);
  double worst16 = 0, worst_bf16 = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(h[i], exact[i], w.P * w.P * std::ldexp(1.0, -11)) << i;
    worst16 = std::max(worst16, static_cast<double>(std::fabs(h[i] - exact[i])));
    worst_bf16 = std::max(worst_bf16, static_cast<double>(std::fabs(b[i] - exact[i])));
  }
  EXPECT_LT(worst16, worst_bf16 / 4) << "fp16's 10 mantissa bits against bf16's 7";
  std::vector<float> all(static_cast<size_t>(n * w.P));
  w.c->all_gather(all.data(), h.data(), n * 4);
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
  w.c->all_reduce(x.data(), n, ReduceOp::kSum, Wire::kF16);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], s * static_cast<float>((i % 97) - 40)) << i;
  std::vector<float> in(static_cast<size_t>(n * w.P)), out(n);
  for (int64_t i = 0; i < n * w.P; ++i) in[i] = value(w.r, i);
  w.c->reduce_scatter(out.data(), in.data(), n, Wire::kF16);
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
  w.c->all_reduce(x.data(), n, ReduceOp::kSum, Wire::kF16);
  EXPECT_EQ(x[0], INFINITY);
  EXPECT_EQ(x[1], -INFINITY);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_TRUE(std::isfinite(x[3])) << x[3];
  EXPECT_NEAR(x[3], 60000.0f, 60000.0f * w.P * std::ldexp(1.0, -11));
  for (int64_t i = 4; i < n; ++i) ASSERT_EQ(x[i], static_cast<float>(i * w.P)) << i;

  std::vector<float> in(static_cast<size_t>(n * w.P)), out(n);
  for (int q = 0; q < w.P; ++q) fill(in.data() + q * n);
  w.c->reduce_scatter(out.data(), in.data(), n, Wire::kF16);
  EXPECT_EQ(out[0], INFINITY);
  EXPECT_EQ(out[1], -INFINITY);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_TRUE(std::isfinite(out[3])) << out[3];
  for (int64_t i = 4; i < n; ++i) ASSERT_EQ(out[i], static_cast<float>(i * w.P)) << i;
}

TEST(Comm, ReduceScatterAndAllGather) {
  World w;
  const int64_t n = 1001;
  std::vector<float> in(static_cast<size_t>(n * w.P)), out(n);
  for (int64_t i = 0; i < n * w.P; ++i) in[i] = value(w.r, i);
  w.c->reduce_scatter(out.data(), in.data(), n);
  float s = static_cast<float>(w.P * (w.P + 1) / 2);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], s * static_cast<float>(((w.r * n + i) % 97) - 40)) << i;
  EXPECT_EQ(in[5], value(w.r, 5)) << "reduce_scatter must not modify its input";

  std::vector<int32_t> mine(3, w.r), all(static_cast<size_t>(3 * w.P));
  w.c->all_gather(all.data(), mine.data(), 3 * 4);
  for (int q = 0; q < w.P; ++q)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(all[q * 3 + k], q);
}

TEST(Comm, BroadcastFromEveryRoot) {
  World w;
  for (int root = 0; root < w.P; ++root) {
    std::vector<int64_t> x(257, w.r == root ? 1000 + root : -1);
    w.c->broadcast(x.data(), 257 * 8, root);
    for (auto v : x) ASSERT_EQ(v, 1000 + root);
  }
}

TEST(Comm, SendRecvRing) {
  World w;
  int right = (w.r + 1) % w.P, left = (w.r - 1 + w.P) % w.P;
  std::vector<float> out(100, static_cast<float>(w.r)), in(100, -1.0f);
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
  EXPECT_EQ(in[99], static_cast<float>(left));
}

#ifdef FT_COMM_TEST_NCCL
// The pipeline's pattern over per-link channels: every rank first receives from both neighbours,
// then sends to both, activations (even tags) and gradients (odd) interleaved. On one NCCL stream
// this deadlocks; with a channel per link direction and kind it completes.
TEST(Comm, TransfersOverChannelsNeverWaitBehindTheOtherDirection) {
  auto c = make_nccl_comm(mpi_world("pp", CommOptions{60, "", true}), cpu_context(), CommOptions{60, "", true});
  const int r = c->rank(), P = c->size(), right = (r + 1) % P, left = (r - 1 + P) % P;
  std::vector<std::vector<float>> in(4, std::vector<float>(64, -1.0f)), out(4, std::vector<float>(64));
  for (int k = 0; k < 4; ++k)
    for (auto& v : out[k]) v = static_cast<float>(100 * r + k);
  std::vector<WorkPtr> works;
  for (int k = 0; k < 2; ++k) {  // two rounds: an activation from the left, a gradient from the right
    works.push_back(c->recv_async(in[2 * k].data(), 256, left, 2 * k));
    works.push_back(c->recv_async(in[2 * k + 1].data(), 256, right, 2 * k + 1));
  }
  for (int k = 0; k < 2; ++k) {
    works.push_back(c->send_async(out[2 * k + 1].data(), 256, left, 2 * k + 1));
    works.push_back(c->send_async(out[2 * k].data(), 256, right, 2 * k));
  }
  for (auto& w : works) w->wait();
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(in[2 * k][5], static_cast<float>(100 * left + 2 * k));
    EXPECT_EQ(in[2 * k + 1][5], static_cast<float>(100 * right + 2 * k + 1));
  }
}
#endif

TEST(Comm, BytesOnTheWireMatchTheRingAlgorithm) {
  World w;
  const int64_t n = 1 << 16;
  std::vector<float> x(n, 1.0f);
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
  std::vector<float> in(static_cast<size_t>(n * w.P), 1.0f), out(n);
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
  std::vector<float> a(static_cast<size_t>(n * w.P), 1.0f), b(static_cast<size_t>(n * w.P));
  const CommStats before = w.c->stats();
  const double t0 = now_seconds();
  w.c->all_reduce(a.data(), n);
  w.c->reduce_scatter_async(b.data(), a.data(), n)->stream_wait(cpu_context());
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
  std::vector<std::vector<float>> bufs(4, std::vector<float>(50000));
  std::vector<WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    for (auto& v : bufs[k]) v = static_cast<float>(k + w.r);
    works.push_back(w.c->all_reduce_async(bufs[k].data(), 50000));
  }
  double busy = 0;
  for (int i = 0; i < 1000000; ++i) busy += std::sqrt(static_cast<double>(i));  // overlap
  EXPECT_GT(busy, 0);
  for (auto& wk : works) wk->wait();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(bufs[k][123], static_cast<float>(k * w.P + w.P * (w.P - 1) / 2));
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

}  // namespace
}  // namespace ft
