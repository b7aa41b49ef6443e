// The emulated cuBLASLt GEMM as a kernel of the virtual GPU (vgpu/lt_gemm.h). Built like the .cu
// files (-fsanitize=thread hooks into the executor), so its global loads and stores are checked:
// the store of D and the read of C as any kernel's, and the inner product's k reads of A and of
// B as one range each (vgpu::range_access: every element between the first and the last inside
// one allocation), its loop left uninstrumented — a hook per multiply-add made the GEMMs most of
// a training step's time.
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

// op(A)(i, ·) · op(B)(·, j) in ascending k with fused multiply-adds; A and B column-major with
// their leading dimensions. Not instrumented: lt_gemm_thread checks the ranges it reads.
__attribute__((no_sanitize_thread)) float dot(const LtGemm& g, int64_t i, int64_t j) {
  const int64_t a0 = g.trans_a ? i * g.lda : i, a_step = g.trans_a ? 1 : g.lda;
  const int64_t b0 = g.trans_b ? j : j * g.ldb, b_step = g.trans_b ? g.ldb : 1;
  float acc = 0.0f;
  if (g.a_type == kF32 && g.b_type == kF32) {
    const auto* A = static_cast<const float*>(g.A);
    const auto* B = static_cast<const float*>(g.B);
    for (int64_t p = 0; p < g.k; ++p) acc = fmaf(A[a0 + p * a_step], B[b0 + p * b_step], acc);
    return acc;
  }
  for (int64_t p = 0; p < g.k; ++p)
    acc = fmaf(load(g.A, g.a_type, a0 + p * a_step), load(g.B, g.b_type, b0 + p * b_step), acc);
  return acc;
}

// One element of D per thread, consecutive threads down a column (D's contiguous direction).
void lt_gemm_thread(const LtGemm& g) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= g.m * g.n) return;
  const int64_t i = idx % g.m, j = idx / g.m;
  if (g.k > 0) {  // op(A)(i, 0 .. k-1) and op(B)(0 .. k-1, j): first to last element, as bytes
    const int64_t a_first = g.trans_a ? i * g.lda : i, a_last = g.trans_a ? a_first + g.k - 1 : i + (g.k - 1) * g.lda;
    const int64_t b_first = g.trans_b ? j : j * g.ldb, b_last = g.trans_b ? j + (g.k - 1) * g.ldb : b_first + g.k - 1;
    range_access(static_cast<const char*>(g.A) + a_first * bytes_of(g.a_type),
                 static_cast<size_t>((a_last - a_first + 1) * bytes_of(g.a_type)), false);
    range_access(static_cast<const char*>(g.B) + b_first * bytes_of(g.b_type),
                 static_cast<size_t>((b_last - b_first + 1) * bytes_of(g.b_type)), false);
  }
  float d = g.alpha * dot(g, i, j);
  if (g.beta != 0.0f) {  // beta = 0: C is not read
    const int64_t c = i + j * g.ldc;
    range_access(static_cast<const char*>(g.C) + c * bytes_of(g.c_type), static_cast<size_t>(bytes_of(g.c_type)),
                 false);
    d += g.beta * load(g.C, g.c_type, c);
  }
  store(g.D, g.d_type, i + j * g.ldd, d);
}

}  // namespace

void lt_gemm_launch(const LtGemm& g, const char* name, cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  const int64_t blocks = (g.m * g.n + kBlock - 1) / kBlock;
  launcher(
      name, __FILE__, __LINE__, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, stream,
      [](const LtGemm& a) { lt_gemm_thread(a); }, nullptr)(g);
}

}  // namespace vgpu
