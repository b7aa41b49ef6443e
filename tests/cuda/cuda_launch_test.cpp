// Launch geometry of the CUDA kernels (backends/cuda/launch.h), without a GPU: for the sizes every
// model preset up to llama2-70b gives each op (at several batch sizes), every launch is within
// the hardware's limits (grid.x <= 2^31 - 1, grid.y/z <= 65535, 1024 threads, shared memory),
// the grid-stride loops reach every element with int64 indices past 2^31, and the small shapes'
// index maps visit each element exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cuda/launch.h"
#include "model/model_config.h"

namespace ft::cuda {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// The kernels index with first_index / grid_stride: both must be 64-bit.
static_assert(std::is_same_v<decltype(first_index(0, 0, 0)), int64_t>);
static_assert(std::is_same_v<decltype(grid_stride(0, 0)), int64_t>);
// The last thread of a maximal grid of 1024-thread blocks: far past 2^31, no overflow.
static_assert(first_index(kMaxGridX - 1, 1024, 1023) == int64_t{2147483646} * 1024 + 1023);

::testing::AssertionResult legal(const LaunchShape& l, const std::string& what) {
  if (within_limits(l)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": grid (" << l.grid.x << ", " << l.grid.y << ", " << l.grid.z
                                       << ") block (" << l.block.x << ", " << l.block.y << ", " << l.block.z
                                       << ") smem " << l.smem << " is outside the hardware limits";
}

// A grid-stride loop over n elements with this launch: the last thread's last index is inside
// [0, n) and no index computed on the way overflows int64.
::testing::AssertionResult covers(const LaunchShape& l, int64_t n, const std::string& what) {
  const int64_t threads = l.grid.x * l.block.x, stride = grid_stride(l.grid.x, l.block.x);
  if (threads < 1) return ::testing::AssertionFailure() << what << ": no threads";
  if (n > std::numeric_limits<int64_t>::max() - stride)
    return ::testing::AssertionFailure() << what << ": index + stride overflows int64";
  // Thread 0 takes indices 0, stride, 2 stride, ...; the union over threads is [0, n) exactly
  // when the first indices are 0..threads-1 (checked for small shapes below) — here the ends.
  const int64_t last_first = first_index(l.grid.x - 1, l.block.x, l.block.x - 1);
  if (last_first != threads - 1) return ::testing::AssertionFailure() << what << ": thread numbering";
  const int64_t iters = ceil_div(n, stride);
  if (iters * stride < n) return ::testing::AssertionFailure() << what << ": elements past the last iteration";
  return ::testing::AssertionSuccess();
}

// Sizes one training step gives the ops, for a preset at batch B (sequence max_seq_len).
struct StepSizes {
  std::string name;
  int64_t B, T, N, C, F, V, H, Hkv, D, params;
};

std::vector<StepSizes> all_step_sizes() {
  std::vector<StepSizes> out;
  for (const std::string& name : model_preset_names()) {
    const ModelConfig m = model_preset(name);
    for (int64_t B : {1, 8, 64}) {
      const int64_t T = m.max_seq_len;
      out.push_back({name + " B=" + std::to_string(B), B, T, B * T, m.dim, m.ffn_dim, m.vocab_size, m.n_heads,
                     m.n_kv_heads, m.head_dim(), m.num_params()});
    }
  }
  return out;
}

// The grid of sum_squares shrinks for small n only where the full grid's extra blocks would have
// had no element (so the bits stay the full grid's): each element keeps its thread.
TEST(CudaLaunch, SumSquaresGridGivesEveryElementItsFullGridThread) {
  const int64_t full = kSumSquaresBlocks * kRowThreads;
  for (int64_t n : {int64_t{1}, int64_t{64}, kRowThreads - 1, kRowThreads, kRowThreads + 1, full - 1, full, full + 1,
                    int64_t{20} << 20}) {
    const LaunchShape l = sum_squares_launch(n);
    EXPECT_TRUE(legal(l, "sum_squares n=" + std::to_string(n)));
    EXPECT_EQ(l.block.x, kRowThreads) << n;
    EXPECT_LE(l.grid.x, kSumSquaresBlocks) << n;
    EXPECT_GE(l.grid.x * kRowThreads, std::min(n, full)) << n;        // no element strides past the grid early
    EXPECT_LT((l.grid.x - 1) * kRowThreads, std::min(n, full)) << n;  // no block without an element
  }
}

TEST(CudaLaunch, EveryOpOfEveryPresetIsALegalLaunch) {
  int64_t beyond_int32 = 0;
  for (const StepSizes& s : all_step_sizes()) {
    SCOPED_TRACE(s.name);
    const int64_t qkv = s.N * (s.H + 2 * s.Hkv) * s.D;
    // elementwise ops over whole tensors
    const std::map<std::string, int64_t> flat = {
        {"embedding_forward (N C)", s.N * s.C},
        {"swiglu (N F)", s.N * s.F},
        {"to_bf16 of the MLP weights (C F)", s.C * s.F},
        {"kv_cache_write (N Hkv D)", s.N * s.Hkv * s.D},
        {"rope pairs", rope_pairs(s.B, s.T, s.H, s.Hkv, s.D)},
        {"adamw_step over the unsharded arena", s.params},
        {"qkv activations", qkv},
        {"vocab-parallel cross-entropy rows (N)", s.N},
        {"powersgd_error_feedback / add_inplace over the arena", s.params},
    };
    for (const auto& [what, n] : flat) {
      const LaunchShape l = elementwise_launch(n);
      EXPECT_TRUE(legal(l, what));
      EXPECT_TRUE(covers(l, n, what));
      if (n > kInt32Max) ++beyond_int32;
    }
    // 2-D grids of rows × 16-byte groups (32-bit in-row indices; rows grid-stride past 65535)
    const std::map<std::string, std::pair<int64_t, int64_t>> row_groups = {
        {"embedding_forward (N, C / 4)", {s.N, s.C / 4}},
        {"swiglu fp32 (N, F / 4)", {s.N, s.F / 4}},
        {"swiglu bf16 (N, F / 8)", {s.N, s.F / 8}},
        {"rope pairs (B T, (H + Hkv) D / 2)", {s.B * s.T, (s.H + s.Hkv) * s.D / 2}},
        {"rope values, kv_cache_write (B T, Hkv D)", {s.B * s.T, s.Hkv * s.D}},
    };
    for (const auto& [what, rv] : row_groups) {
      EXPECT_TRUE(legal(row_vector_launch(rv.first, rv.second), what));
      EXPECT_LE(rv.second, kMaxRowElems) << what;
      EXPECT_GE(row_vector_launch(rv.first, rv.second).grid.x * kElementwiseThreads, rv.second) << what;
    }
    // rows
    EXPECT_TRUE(legal(row_launch(s.N), "rmsnorm / xent rows"));
    EXPECT_TRUE(legal(embedding_backward_launch(s.N), "embedding_backward"));
    EXPECT_TRUE(legal(rms_dweight_launch(s.N, s.C), "rmsnorm dweight partials"));
    EXPECT_GE(rms_chunks(s.N) * rms_chunk_rows(s.N), s.N);
    EXPECT_LE(rms_chunks(s.N), kRmsChunks);
    EXPECT_TRUE(legal(sum_squares_launch(s.params), "sum_squares"));
    // attention
    EXPECT_TRUE(attention_head_dim_ok(s.D));
    const LaunchShape fwd = attention_fwd_launch(s.B, s.T, s.H, s.D);
    const LaunchShape dkv = attention_dkv_launch(s.B, s.T, s.Hkv, s.D);
    EXPECT_TRUE(legal(fwd, "attention forward / dQ"));
    EXPECT_TRUE(legal(dkv, "attention dK dV"));
    EXPECT_TRUE(legal(attention_delta_launch(s.B, s.T, s.H), "attention delta"));
    EXPECT_EQ(fwd.grid.x, attention_fwd_tasks(s.B, s.T, s.H)) << "one block per task at these sizes";
    EXPECT_EQ(dkv.grid.x, attention_dkv_tasks(s.B, s.T, s.Hkv));
  }
  // The presets do reach past 2^31 elements (llama2-7b's arena is 6.7e9 floats; 70b at B = 64
  // has 2.7e9 qkv activations): the checks above covered int64 indexing there.
  EXPECT_GT(beyond_int32, 0);
}

TEST(CudaLaunch, SharedMemoryFitsForEveryHeadDimension) {
  for (int64_t D = 1; D <= kAttnMaxD; ++D) {
    SCOPED_TRACE(D);
    EXPECT_TRUE(legal(attention_fwd_launch(3, 17, 4, D), "forward"));
    EXPECT_TRUE(legal(attention_dkv_launch(3, 17, 2, D), "dkv"));
  }
  // The presets' head dimensions need no opt-in (48 KiB default).
  for (int64_t D : {16, 64, 128}) {
    EXPECT_LE(attention_fwd_smem(D), kDefaultSmemBytes) << D;
    EXPECT_LE(attention_dkv_smem(D), kDefaultSmemBytes) << D;
  }
  EXPECT_FALSE(attention_head_dim_ok(kAttnMaxD + 1));
  EXPECT_FALSE(attention_head_dim_ok(0));
}

TEST(CudaLaunch, GridLimitsAreEnforcedByTheCheck) {
  EXPECT_FALSE(within_limits({{kMaxGridX + 1}, {256}, 0}));
  EXPECT_FALSE(within_limits({{1, kMaxGridYZ + 1}, {256}, 0}));
  EXPECT_FALSE(within_limits({{1}, {1025}, 0}));
  EXPECT_FALSE(within_limits({{1}, {256}, kOptInSmemBytes + 1}));
  EXPECT_TRUE(within_limits({{kMaxGridX, kMaxGridYZ, kMaxGridYZ}, {1024}, kOptInSmemBytes}));
  // The grid-stride launch stays at kMaxStrideBlocks however large n is.
  EXPECT_EQ(elementwise_launch(int64_t{1} << 40).grid.x, kMaxStrideBlocks);
  EXPECT_EQ(elementwise_launch(0).grid.x, 1);
}

// Small shapes: simulate the kernels' index maps and count visits.
TEST(CudaLaunch, GridStrideVisitsEachElementOnce) {
  for (int64_t n : {1, 255, 256, 257, 1000, 65537}) {
    LaunchShape l = elementwise_launch(n);
    l.grid.x = std::min<int64_t>(l.grid.x, 3);  // force several strides
    std::vector<int> seen(static_cast<size_t>(n), 0);
    for (int64_t b = 0; b < l.grid.x; ++b)
      for (int64_t t = 0; t < l.block.x; ++t)
        for (int64_t i = first_index(b, l.block.x, t); i < n; i += grid_stride(l.grid.x, l.block.x)) ++seen[i];
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n " << n << " index " << i;
  }
}

// The attention kernels' task decomposition (attention.cu): task → (b, h, query block), warp →
// query row; every (b, h, t) is computed by exactly one warp, also when blocks loop over tasks.
TEST(CudaLaunch, AttentionTasksCoverEveryRowOnce) {
  for (auto [B, T, H, grid] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {1, 1, 1, 1}, {2, 9, 3, 1000}, {3, 17, 4, 5}, {1, 64, 2, 7}}) {
    const int64_t nqb = ceil_div(T, kAttnWarps), tasks = B * H * nqb;
    std::vector<int> seen(static_cast<size_t>(B * H * T), 0);
    for (int64_t block = 0; block < std::min(grid, tasks); ++block)
      for (int64_t task = block; task < tasks; task += std::min(grid, tasks)) {
        const int64_t qb = nqb - 1 - task % nqb, h = (task / nqb) % H, b = task / (nqb * H);
        for (int64_t warp = 0; warp < kAttnWarps; ++warp) {
          const int64_t t = qb * kAttnWarps + warp;
          if (t < T) ++seen[static_cast<size_t>((b * H + h) * T + t)];
        }
      }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "B " << B << " T " << T << " H " << H;
  }
}

}  // namespace
}  // namespace ft::cuda
