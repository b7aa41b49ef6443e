// The emulated cuBLASLt GEMM as a kernel of the virtual GPU (vgpu/lt_gemm.h). Built like the .cu
// files (-fsanitize=thread hooks into the executor), so its global loads and stores are checked:
// the inner product's k reads of A and of B as one range each (vgpu::range_access: every element
// between the first and the last inside one allocation), the reads of C and the stores of D as
// one range per column of the tile; the loops themselves are left uninstrumented — a hook per
// multiply-add made the GEMMs most of a training step's time.
#include <algorithm>
#include <cstring>

#include "vgpu/lt_gemm.h"

namespace vgpu {
namespace {

// cudaDataType_t values (shim/cublasLt.h), repeated so that this file needs no cuBLASLt header.
constexpr int kF32 = 0, kF16 = 2, kBF16 = 14;

int64_t bytes_of(int type) {
  return type == kF32 ? 4 : 2;
}

__attribute__((no_sanitize_thread)) float load(const void* p, int type, int64_t i) {
  if (type == kF32) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  if (type == kBF16) {
    const uint32_t u = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  _Float16 v;  // IEEE binary16: its widening is exact
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

__attribute__((no_sanitize_thread)) void store(void* p, int type, int64_t i, float v) {
  if (type == kF32) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  uint16_t h;
  if (type == kBF16) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      h = static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN (quiet)
    else
      h = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
  } else {
    const _Float16 f = static_cast<_Float16>(v);  // round to nearest even, as the GPU's cvt.rn
    std::memcpy(&h, &f, 2);
  }
  static_cast<uint16_t*>(p)[i] = h;
}

// One CUDA thread per tile of D: kTileRows rows (two 8-float vectors) x kTileCols columns. The
// thread copies op(A)'s rows and op(B)'s columns, kChunk values of k at a time, widened to fp32 into
// two small arrays on its stack (packed: k outermost), so that the multiply-adds run on contiguous
// fp32 vectors whatever the operands' types, transposes and leading dimensions; they run kMicroCols
// columns at a time (eight accumulators in registers), each element's in ascending k — the same
// FMAs in the same order as one element at a time, so the result is that of a plain loop, bit for
// bit, and never depends on the tiling. (One thread per 16 rows of one column, reading A through
// its leading dimension, cost ~1 GFLOP/s: most of a llama-20m step on the executor.)
constexpr int64_t kTileRows = 16, kTileCols = 32, kChunk = 64, kMicroCols = 4;
typedef float v8 __attribute__((vector_size(32)));  // GCC vector extension: AVX's ymm where built for it

template <int kType>
__attribute__((no_sanitize_thread, always_inline)) inline float load_as(const void* p, int64_t i) {
  if constexpr (kType == kF32) {
    return static_cast<const float*>(p)[i];
  } else {
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    if constexpr (kType == kBF16) {
      const uint32_t u = uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    } else {
      _Float16 v;  // IEEE binary16: its widening is exact
      std::memcpy(&v, &h, 2);
      return static_cast<float>(v);
    }
  }
}

// pa[q][r] = op(A)(i0 + r, p0 + q) and pb[q][c] = op(B)(p0 + q, j0 + c) for q < kc; rows beyond `rows`
// and columns beyond `cols` are 0 (their sums are computed and dropped).
template <int kType>
__attribute__((no_sanitize_thread)) void pack(const LtGemm& g, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                                              int64_t p0, int64_t kc, float (*pa)[kTileRows], float (*pb)[kTileCols]) {
  for (int64_t q = 0; q < kc; ++q) {
    for (int64_t r = rows; r < kTileRows; ++r) pa[q][r] = 0.0f;
    for (int64_t c = cols; c < kTileCols; ++c) pb[q][c] = 0.0f;
  }
  if (g.trans_a) {  // op(A)(i, p) = A[i * lda + p]: contiguous in p
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t q = 0; q < kc; ++q) pa[q][r] = load_as<kType>(g.A, (i0 + r) * g.lda + p0 + q);
  } else {  // A[i + p * lda]: contiguous in i
    for (int64_t q = 0; q < kc; ++q)
      for (int64_t r = 0; r < rows; ++r) pa[q][r] = load_as<kType>(g.A, i0 + r + (p0 + q) * g.lda);
  }
  if (g.trans_b) {  // op(B)(p, j) = B[p * ldb + j]: contiguous in j
    for (int64_t q = 0; q < kc; ++q)
      for (int64_t c = 0; c < cols; ++c) pb[q][c] = load_as<kType>(g.B, (p0 + q) * g.ldb + j0 + c);
  } else {  // B[p + j * ldb]: contiguous in p
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t q = 0; q < kc; ++q) pb[q][c] = load_as<kType>(g.B, p0 + q + (j0 + c) * g.ldb);
  }
}

// acc[c][r] += pa[q][r] * pb[q][c] for q in ascending order, fused (the kernel files are built with
// -ffp-contract=fast, so v8's a * b + c is one FMA per lane where the target has FMA).
__attribute__((no_sanitize_thread)) void multiply_add(const float (*pa)[kTileRows], const float (*pb)[kTileCols],
                                                      int64_t kc, v8 (*acc)[2]) {
  for (int64_t c0 = 0; c0 < kTileCols; c0 += kMicroCols) {
    v8 a0[kMicroCols], a1[kMicroCols];  // unrolled, so that they live in registers
#pragma GCC unroll 8
    for (int64_t c = 0; c < kMicroCols; ++c) a0[c] = acc[c0 + c][0], a1[c] = acc[c0 + c][1];
    for (int64_t q = 0; q < kc; ++q) {
      v8 x0, x1;
      std::memcpy(&x0, &pa[q][0], sizeof x0);
      std::memcpy(&x1, &pa[q][8], sizeof x1);
#pragma GCC unroll 8
      for (int64_t c = 0; c < kMicroCols; ++c) {
        const float b = pb[q][c0 + c];
        a0[c] = x0 * b + a0[c];
        a1[c] = x1 * b + a1[c];
      }
    }
#pragma GCC unroll 8
    for (int64_t c = 0; c < kMicroCols; ++c) acc[c0 + c][0] = a0[c], acc[c0 + c][1] = a1[c];
  }
}

// acc = op(A)(i0 .. i0+kTileRows-1, ·) · op(B)(·, j0 .. j0+kTileCols-1), column c's rows in acc[c].
// Not instrumented: lt_gemm_thread checks the ranges it reads.
__attribute__((no_sanitize_thread)) void dot_tile(const LtGemm& g, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                                                  v8 (*acc)[2]) {
  for (int64_t c = 0; c < kTileCols; ++c) acc[c][0] = acc[c][1] = v8{};
  alignas(32) float pa[kChunk][kTileRows];
  alignas(32) float pb[kChunk][kTileCols];
  for (int64_t p0 = 0; p0 < g.k; p0 += kChunk) {
    const int64_t kc = std::min(kChunk, g.k - p0);
    if (g.a_type == kF32)
      pack<kF32>(g, i0, rows, j0, cols, p0, kc, pa, pb);
    else if (g.a_type == kBF16)
      pack<kBF16>(g, i0, rows, j0, cols, p0, kc, pa, pb);
    else
      pack<kF16>(g, i0, rows, j0, cols, p0, kc, pa, pb);
    multiply_add(pa, pb, kc, acc);
  }
}

// D(i0 .. i0+rows-1, j) = alpha · acc + beta · C(·, j) for the tile's columns j, C not read when
// beta is 0. Not instrumented (a hook per element and per read of g's fields cost a tenth of a
// training step): each column's rows of C and of D, contiguous, are checked as one range each
// (vgpu::range_access), C's before D's as the elements' reads come before their writes.
__attribute__((no_sanitize_thread)) void write_tile(const LtGemm& g, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                                                    const v8 (*acc)[2]) {
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t j = j0 + c;
    float sums[kTileRows];
    std::memcpy(sums, acc[c], sizeof sums);
    if (g.beta != 0.0f)
      range_access(static_cast<const char*>(g.C) + (i0 + j * g.ldc) * bytes_of(g.c_type),
                   static_cast<size_t>(rows * bytes_of(g.c_type)), false);
    range_access(static_cast<char*>(g.D) + (i0 + j * g.ldd) * bytes_of(g.d_type),
                 static_cast<size_t>(rows * bytes_of(g.d_type)), true);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      float d = g.alpha * sums[r];
      if (g.beta != 0.0f) d += g.beta * load(g.C, g.c_type, i + j * g.ldc);
      store(g.D, g.d_type, i + j * g.ldd, d);
    }
  }
}

// One tile of D per thread, consecutive threads down D's columns (its contiguous direction).
void lt_gemm_thread(const LtGemm& g) {
  const int64_t row_tiles = (g.m + kTileRows - 1) / kTileRows, col_tiles = (g.n + kTileCols - 1) / kTileCols;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= row_tiles * col_tiles) return;
  const int64_t i0 = idx % row_tiles * kTileRows, j0 = idx / row_tiles * kTileCols;
  const int64_t rows = std::min(kTileRows, g.m - i0), cols = std::min(kTileCols, g.n - j0);
  if (g.k > 0) {  // op(A)(i0 .. i1, 0 .. k-1) and op(B)(0 .. k-1, j0 .. j1): first to last element
    const int64_t i1 = i0 + rows - 1, j1 = j0 + cols - 1;
    const int64_t a_first = g.trans_a ? i0 * g.lda : i0,
                  a_last = g.trans_a ? i1 * g.lda + g.k - 1 : i1 + (g.k - 1) * g.lda;
    const int64_t b_first = g.trans_b ? j0 : j0 * g.ldb,
                  b_last = g.trans_b ? j1 + (g.k - 1) * g.ldb : j1 * g.ldb + g.k - 1;
    range_access(static_cast<const char*>(g.A) + a_first * bytes_of(g.a_type),
                 static_cast<size_t>((a_last - a_first + 1) * bytes_of(g.a_type)), false);
    range_access(static_cast<const char*>(g.B) + b_first * bytes_of(g.b_type),
                 static_cast<size_t>((b_last - b_first + 1) * bytes_of(g.b_type)), false);
  }
  v8 acc[kTileCols][2];
  dot_tile(g, i0, rows, j0, cols, acc);
  write_tile(g, i0, rows, j0, cols, acc);
}

}  // namespace

void lt_gemm_launch(const LtGemm& g, const char* name, cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  const int64_t tiles = (g.m + kTileRows - 1) / kTileRows * ((g.n + kTileCols - 1) / kTileCols);
  const int64_t blocks = (tiles + kBlock - 1) / kBlock;
  launcher(
      name, __FILE__, __LINE__, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream,
      [](const LtGemm& a) { lt_gemm_thread(a); }, nullptr)(g);
}

}  // namespace vgpu
