// Embedding lookup and its deterministic backward.
//
// Backward without atomics: the token positions are sorted by table row with a stable radix sort
// (cub), so each row's positions are a contiguous run in token order; one block per run adds the
// run's gradient rows to the table row, column by column, in token order — the reference's order
// of additions, so the result is bit-identical to ft::ref::embedding_backward.
#include <cub/device/device_radix_sort.cuh>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/reduce.cuh"

namespace ft::cuda {

namespace {

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C,
                                         int64_t v0, int64_t V) {
  const int64_t n_all = N * C;
  for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n_all;
       i += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t row = static_cast<int64_t>(tokens[i / C]) - v0;
    out[i] = (row >= 0 && row < V) ? table[row * C + i % C] : 0.0f;
  }
}

// keys[n] = the table row of token n, or V for tokens of other shards; vals[n] = n.
__global__ void embedding_keys_kernel(uint32_t* keys, uint32_t* vals, const int32_t* tokens, int64_t N, int64_t v0,
                                      int64_t V) {
  for (int64_t n = first_index(blockIdx.x, blockDim.x, threadIdx.x); n < N; n += grid_stride(gridDim.x, blockDim.x)) {
    const int64_t row = static_cast<int64_t>(tokens[n]) - v0;
    keys[n] = static_cast<uint32_t>((row >= 0 && row < V) ? row : V);
    vals[n] = static_cast<uint32_t>(n);
  }
}

// One block per run of equal keys (found at its first position), threads over columns.
__global__ void embedding_backward_kernel(float* dtable, const float* dout, const uint32_t* keys, const uint32_t* vals,
                                          int64_t N, int64_t C, int64_t V) {
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const uint32_t key = keys[i];
    if (key >= V || (i > 0 && keys[i - 1] == key)) continue;
    int64_t end = i + 1;
    while (end < N && keys[end] == key) ++end;
    float* dst = dtable + static_cast<int64_t>(key) * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      float acc = dst[c];
      for (int64_t j = i; j < end; ++j) acc += dout[static_cast<int64_t>(vals[j]) * C + c];
      dst[c] = acc;
    }
  }
}

int bits_for(int64_t max_value) {  // bits to hold 0..max_value
  int b = 1;
  while (b < 32 && (int64_t{1} << b) <= max_value) ++b;
  return b;
}

size_t align256(size_t x) {
  return (x + 255) / 256 * 256;
}

}  // namespace

void embedding_forward(CudaContext& ctx, float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C,
                       int64_t v0, int64_t V) {
  require(N >= 0 && C >= 0 && V >= 0, "embedding_forward", "negative size", {{"N", N}, {"C", C}, {"V", V}});
  if (N * C == 0) return;
  const LaunchShape l = elementwise_launch(N * C);
  FT_LAUNCH(embedding_forward_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())
  (out, tokens, table, N, C, v0, V);
  FT_CUDA_CHECK_LAUNCH(ctx, "embedding_forward", {"N", N}, {"C", C}, {"v0", v0}, {"V", V});
}

void embedding_backward(CudaContext& ctx, float* dtable, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                        int64_t v0, int64_t V) {
  const char* op = "embedding_backward";
  require(N >= 0 && C >= 0 && V >= 0, op, "negative size", {{"N", N}, {"C", C}, {"V", V}});
  require(N < (int64_t{1} << 31) && V < (int64_t{1} << 31) - 1, op, "more than 2^31 tokens or table rows",
          {{"N", N}, {"V", V}});
  if (N == 0 || C == 0) return;
  const int n = static_cast<int>(N), end_bit = bits_for(V);
  size_t sort_bytes = 0;
  FT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr),
                                                static_cast<uint32_t*>(nullptr), static_cast<const uint32_t*>(nullptr),
                                                static_cast<uint32_t*>(nullptr), n, 0, end_bit, ctx.stream()),
                op, {"N", N}, {"V", V});
  const size_t arr = align256(static_cast<size_t>(N) * sizeof(uint32_t));
  char* s = static_cast<char*>(ctx.scratch(4 * arr + sort_bytes, op));
  auto* keys = reinterpret_cast<uint32_t*>(s);
  auto* vals = reinterpret_cast<uint32_t*>(s + arr);
  auto* keys_sorted = reinterpret_cast<uint32_t*>(s + 2 * arr);
  auto* vals_sorted = reinterpret_cast<uint32_t*>(s + 3 * arr);
  const LaunchShape lk = elementwise_launch(N);
  FT_LAUNCH(embedding_keys_kernel, to_dim3(lk.grid), to_dim3(lk.block), 0, ctx.stream())(keys, vals, tokens, N, v0, V);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N}, {"C", C}, {"v0", v0}, {"V", V});
  FT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s + 4 * arr, sort_bytes, keys, keys_sorted, vals, vals_sorted, n, 0,
                                                end_bit, ctx.stream()),
                op, {"N", N}, {"V", V});
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N}, {"C", C}, {"v0", v0}, {"V", V});
  const LaunchShape l = embedding_backward_launch(N);
  FT_LAUNCH(embedding_backward_kernel, to_dim3(l.grid), to_dim3(l.block), 0, ctx.stream())
  (dtable, dout, keys_sorted, vals_sorted, N, C, V);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"N", N}, {"C", C}, {"v0", v0}, {"V", V});
}

}  // namespace ft::cuda
