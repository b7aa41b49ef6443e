// Launch geometry of every CUDA kernel, as constexpr functions of the op's sizes: the kernels'
// launchers call them, and tests/cuda/cuda_launch_test.cpp checks them for the sizes of every
// model preset up to llama2-70b (grids within the hardware limits, every element covered,
// index arithmetic in int64 past 2^31 elements) without a GPU.
//
//   LaunchShape l = ft::cuda::elementwise_launch(n);      // grid-stride over n elements
//   FT_LAUNCH(kernel, to_dim3(l.grid), to_dim3(l.block), l.smem, stream)(...);  // simt.h
//
// Index convention inside every kernel: 64-bit, grid-stride where the work can exceed the grid:
//   for (int64_t i = first_index(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += stride(...))
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backends/cuda/hd.h"
#include "backends/cuda/simt.h"

namespace ft::cuda {

// Hardware limits (compute capability 8.0 and later).
inline constexpr int64_t kMaxGridX = 2147483647;
inline constexpr int64_t kMaxGridYZ = 65535;
inline constexpr int64_t kMaxBlockThreads = 1024;
inline constexpr int64_t kDefaultSmemBytes = 48 * 1024;  // without cudaFuncSetAttribute
inline constexpr int64_t kOptInSmemBytes = 99 * 1024;    // opt-in maximum on every sm_8x/sm_9x
inline constexpr int kWarp = 32;

struct Extent {
  int64_t x = 1, y = 1, z = 1;
};

struct LaunchShape {
  Extent grid;
  Extent block;
  int64_t smem = 0;  // dynamic shared memory, bytes
};

FT_HD constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
FT_HD constexpr int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
FT_HD constexpr int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// The first global index of a thread and the grid-stride, in int64 (a 32-bit product of
// blockIdx.x and blockDim.x overflows past 2^31 elements).
FT_HD constexpr int64_t first_index(int64_t block, int64_t block_dim, int64_t thread) {
  return block * block_dim + thread;
}
FT_HD constexpr int64_t grid_stride(int64_t grid_dim, int64_t block_dim) {
  return grid_dim * block_dim;
}

// Whether a launch is legal: grid and block within the hardware limits, shared memory within
// the opt-in maximum (kernels above 48 KiB raise their limit with cudaFuncSetAttribute).
constexpr bool within_limits(const LaunchShape& l) {
  const Extent& g = l.grid;
  const Extent& b = l.block;
  return g.x >= 1 && g.x <= kMaxGridX && g.y >= 1 && g.y <= kMaxGridYZ && g.z >= 1 && g.z <= kMaxGridYZ && b.x >= 1 &&
         b.y >= 1 && b.z >= 1 && b.x * b.y * b.z <= kMaxBlockThreads && b.z <= 64 && l.smem >= 0 &&
         l.smem <= kOptInSmemBytes;
}

// ---- elementwise: one thread per element, grid-stride ---------------------------------------

inline constexpr int64_t kElementwiseThreads = 256;
inline constexpr int64_t kMaxStrideBlocks = 1 << 16;  // 16.7M threads; more elements loop

constexpr LaunchShape elementwise_launch(int64_t n) {
  return {{max64(1, min64(ceil_div(n, kElementwiseThreads), kMaxStrideBlocks))}, {kElementwiseThreads}, 0};
}

// ---- rows of 16-byte vectors: (x) the row's vectors, a 32-bit in-row index; (y) the rows,
// grid-stride past kMaxGridYZ. The host picks the vector width (vector_width). --------------

inline constexpr int64_t kMaxRowElems = int64_t{1} << 30;  // in-row indices (and 2 × a row) fit int32

constexpr LaunchShape row_vector_launch(int64_t rows, int64_t vectors_per_row) {
  return {{max64(1, ceil_div(vectors_per_row, kElementwiseThreads)), max64(1, min64(rows, kMaxGridYZ))},
          {kElementwiseThreads},
          0};
}

// Whether every pointer (nullptr counts as aligned) is 16-byte aligned.
template <typename... Ptr>
inline bool aligned16(const Ptr*... ptrs) {
  for (uintptr_t p : {reinterpret_cast<uintptr_t>(ptrs)...})
    if (p % 16 != 0) return false;
  return true;
}

// Elements per access: `wide` (16 bytes of the type) when the row length is a multiple of it and
// every pointer is 16-byte aligned; else 1.
template <typename... Ptr>
inline int vector_width(int wide, int64_t row_elems, const Ptr*... ptrs) {
  return row_elems % wide == 0 && aligned16(ptrs...) ? wide : 1;
}

// ---- rows: one block per row, grid-stride over rows, threads stride over the row ----------

inline constexpr int64_t kRowThreads = 256;  // a power of two: block reductions are trees

constexpr LaunchShape row_launch(int64_t rows) {
  return {{max64(1, min64(rows, kMaxStrideBlocks))}, {kRowThreads}, 0};
}

// ---- sum of squares: a grid that depends on n alone, so the partial sums (and the result) never
// depend on the device; partials are then added in index order by one block. Up to
// kSumSquaresBlocks a block per kRowThreads elements: each element then has the thread (block
// i / kRowThreads, thread i % kRowThreads) it has in the full grid, and the blocks left out would
// only add partial sums of +0.0, so the bits are those of the full grid (which a 64-element
// tensor would otherwise launch: 1,024 blocks, all but one with nothing to add) -------------

inline constexpr int64_t kSumSquaresBlocks = 1024;
constexpr LaunchShape sum_squares_launch(int64_t n) {
  return {{max64(1, min64(kSumSquaresBlocks, (n + kRowThreads - 1) / kRowThreads))}, {kRowThreads}, 0};
}

// ---- RMSNorm dweight: partial sums over chunks of rows (x) for blocks of columns (y), then
// the chunks added in order per column. At most kRmsChunks chunks bound the scratch. ----------

inline constexpr int64_t kRmsChunks = 1024;  // a block per chunk in the one-pass backward: ~8 per SM
inline constexpr int64_t kRmsMinChunkRows = 16;

constexpr int64_t rms_chunk_rows(int64_t N) {
  return max64(kRmsMinChunkRows, ceil_div(N, kRmsChunks));
}
constexpr int64_t rms_chunks(int64_t N) {
  return max64(1, ceil_div(N, rms_chunk_rows(N)));
}
constexpr LaunchShape rms_dweight_launch(int64_t N, int64_t C) {
  return {{rms_chunks(N), ceil_div(C, kRowThreads)}, {kRowThreads}, 0};
}
// scratch: rms_chunks(N) · C doubles
// The one-pass backward (dx and the chunk's dweight partial, x and dout read once): a block per
// chunk, the partial of its C columns in shared memory — while that fits the default 48 KiB.
constexpr bool rms_one_pass(int64_t C) {
  return C * 8 <= kDefaultSmemBytes;
}
constexpr LaunchShape rms_backward_launch(int64_t N, int64_t C) {
  return {{rms_chunks(N)}, {kRowThreads}, C * 8};
}

// ---- embedding backward: one block per sorted token position (grid-stride) ----------------

// Columns are strided by the block's threads inside the kernel (one block per segment start),
// so C has no grid limit.
constexpr LaunchShape embedding_backward_launch(int64_t N) {
  return {{max64(1, min64(N, kMaxStrideBlocks))}, {kRowThreads}, 0};
}

// ---- RoPE: one thread per rotated pair, grid-stride -----------------------------------------

FT_HD constexpr int64_t rope_pairs(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  return B * T * (H + Hkv) * (D / 2);
}

// ---- attention (fp32, backends/cuda/attention.cu) --------------------------------------------
//
// One warp per query row (forward, dQ) or key row (dK, dV); kAttnWarps rows of one head per
// block share tiles of the other side in shared memory: rows of D floats padded to D + 1
// (conflict-free column reads by the 32 lanes). A lane owns head dimensions lane, lane + 32, ...

inline constexpr int64_t kAttnWarps = 8;
inline constexpr int64_t kAttnMaxD = 256;  // 8 dimensions per lane
inline constexpr int64_t kAttnMaxDPerLane = kAttnMaxD / kWarp;

// Rows of the shared tile (keys in forward and dQ, queries in dK/dV): a lane each.
FT_HD constexpr int64_t attention_tile_rows(int64_t D) {
  return D <= 128 ? 32 : 16;
}

constexpr bool attention_head_dim_ok(int64_t D) {
  return D >= 1 && D <= kAttnMaxD;
}

// Forward and dQ: a task is (b, h, block of kAttnWarps queries), flattened into x; blocks loop
// over tasks (grid-stride) past the grid limit.
// Shared: two tiles (K, V or K, V again) + a q (and dO) row per warp.
constexpr int64_t attention_fwd_smem(int64_t D) {
  return (2 * attention_tile_rows(D) * (D + 1) + 2 * kAttnWarps * D) * 4;
}
constexpr int64_t attention_fwd_tasks(int64_t B, int64_t Tq, int64_t H) {
  return B * H * ceil_div(Tq, kAttnWarps);
}
constexpr LaunchShape attention_fwd_launch(int64_t B, int64_t Tq, int64_t H, int64_t D) {
  return {{max64(1, min64(attention_fwd_tasks(B, Tq, H), kMaxGridX))}, {kWarp * kAttnWarps}, attention_fwd_smem(D)};
}

// dK, dV: block (b, kv head, block of kAttnWarps keys), flattened into x.
// Shared: Q and dO tiles + lse and delta of the tile rows + a k and v row per warp.
constexpr int64_t attention_dkv_smem(int64_t D) {
  return (2 * attention_tile_rows(D) * (D + 1) + 2 * attention_tile_rows(D) + 2 * kAttnWarps * D) * 4;
}
constexpr int64_t attention_dkv_tasks(int64_t B, int64_t T, int64_t Hkv) {
  return B * Hkv * ceil_div(T, kAttnWarps);
}
constexpr LaunchShape attention_dkv_launch(int64_t B, int64_t T, int64_t Hkv, int64_t D) {
  return {{max64(1, min64(attention_dkv_tasks(B, T, Hkv), kMaxGridX))}, {kWarp * kAttnWarps}, attention_dkv_smem(D)};
}

// delta = rowsum(dO ∘ O): one warp per (b, t, h).
constexpr LaunchShape attention_delta_launch(int64_t B, int64_t T, int64_t H) {
  return {{max64(1, min64(ceil_div(B * T * H, kAttnWarps), kMaxStrideBlocks))}, {kWarp * kAttnWarps}, 0};
}

// Block attention (attention_block.cu, context parallelism): the forward/dQ and dK/dV geometry
// above over Tq queries and Tk keys, the shared memory plus the tile's R positions (int32).
constexpr LaunchShape attention_block_fwd_launch(int64_t B, int64_t Tq, int64_t H, int64_t D) {
  LaunchShape l = attention_fwd_launch(B, Tq, H, D);
  l.smem += attention_tile_rows(D) * 4;
  return l;
}
constexpr LaunchShape attention_block_dkv_launch(int64_t B, int64_t Tk, int64_t Hkv, int64_t D) {
  LaunchShape l = attention_dkv_launch(B, Tk, Hkv, D);
  l.smem += attention_tile_rows(D) * 4;
  return l;
}

}  // namespace ft::cuda
