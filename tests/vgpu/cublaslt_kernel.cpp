// The emulated cuBLASLt GEMM as a kernel of the virtual GPU (vgpu/lt_gemm.h). Built like the .cu
// files (-fsanitize=thread hooks into the executor), so its global loads and stores are checked:
// the store of D and the read of C as any kernel's, and the inner product's k reads of A and of
// B as one range each (vgpu::range_access: every element between the first and the last inside
// one allocation), its loop left uninstrumented — a hook per multiply-add made the GEMMs most of
// a training step's time.
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

void store(void* p, int type, int64_t i, float v) {
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

// Rows of D per thread: reading a column-major A down a column, kTileRows at a time, costs a cache
// line where a row of A (one element of D) would cost one per element.
constexpr int64_t kTileRows = 16;

// acc[r] = op(A)(i0 + r, ·) · op(B)(·, j) for r < rows, each in ascending k with fused
// multiply-adds (the bits of one element at a time); A and B column-major with their leading
// dimensions. Not instrumented: lt_gemm_thread checks the ranges it reads.
__attribute__((no_sanitize_thread)) void dot_tile(const LtGemm& g, int64_t i0, int64_t rows, int64_t j, float* acc) {
  const int64_t a_row = g.trans_a ? g.lda : 1, a_step = g.trans_a ? 1 : g.lda;  // A's strides in i and in k
  const int64_t b0 = g.trans_b ? j : j * g.ldb, b_step = g.trans_b ? g.ldb : 1;
  for (int64_t r = 0; r < rows; ++r) acc[r] = 0.0f;
  if (g.a_type == kF32 && g.b_type == kF32) {
    const auto* A = static_cast<const float*>(g.A) + i0 * a_row;
    const auto* B = static_cast<const float*>(g.B) + b0;
    for (int64_t p = 0; p < g.k; ++p) {
      const float b = B[p * b_step];
      const float* a = A + p * a_step;
      for (int64_t r = 0; r < rows; ++r) acc[r] = fmaf(a[r * a_row], b, acc[r]);
    }
    return;
  }
  for (int64_t p = 0; p < g.k; ++p) {
    const float b = load(g.B, g.b_type, b0 + p * b_step);
    for (int64_t r = 0; r < rows; ++r) acc[r] = fmaf(load(g.A, g.a_type, (i0 + r) * a_row + p * a_step), b, acc[r]);
  }
}

// Up to kTileRows consecutive rows of one column of D per thread, consecutive threads down a
// column (D's contiguous direction).
void lt_gemm_thread(const LtGemm& g) {
  const int64_t tiles = (g.m + kTileRows - 1) / kTileRows;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= tiles * g.n) return;
  const int64_t i0 = idx % tiles * kTileRows, j = idx / tiles, rows = std::min(kTileRows, g.m - i0);
  if (g.k > 0) {  // op(A)(i0 .. i0+rows-1, 0 .. k-1) and op(B)(0 .. k-1, j): first to last element
    const int64_t i1 = i0 + rows - 1;
    const int64_t a_first = g.trans_a ? i0 * g.lda : i0,
                  a_last = g.trans_a ? i1 * g.lda + g.k - 1 : i1 + (g.k - 1) * g.lda;
    const int64_t b_first = g.trans_b ? j : j * g.ldb, b_last = g.trans_b ? j + (g.k - 1) * g.ldb : b_first + g.k - 1;
    range_access(static_cast<const char*>(g.A) + a_first * bytes_of(g.a_type),
                 static_cast<size_t>((a_last - a_first + 1) * bytes_of(g.a_type)), false);
    range_access(static_cast<const char*>(g.B) + b_first * bytes_of(g.b_type),
                 static_cast<size_t>((b_last - b_first + 1) * bytes_of(g.b_type)), false);
  }
  float acc[kTileRows];
  dot_tile(g, i0, rows, j, acc);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    float d = g.alpha * acc[r];
    if (g.beta != 0.0f) {  // beta = 0: C is not read
      const int64_t c = i + j * g.ldc;
      range_access(static_cast<const char*>(g.C) + c * bytes_of(g.c_type), static_cast<size_t>(bytes_of(g.c_type)),
                   false);
      d += g.beta * load(g.C, g.c_type, c);
    }
    store(g.D, g.d_type, i + j * g.ldd, d);
  }
}

}  // namespace

void lt_gemm_launch(const LtGemm& g, const char* name, cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  const int64_t blocks = ((g.m + kTileRows - 1) / kTileRows * g.n + kBlock - 1) / kBlock;
  launcher(
      name, __FILE__, __LINE__, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream,
      [](const LtGemm& a) { lt_gemm_thread(a); }, nullptr)(g);
}

}  // namespace vgpu
