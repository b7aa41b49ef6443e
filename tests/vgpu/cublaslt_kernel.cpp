// The emulated cuBLASLt GEMM as a kernel of the virtual GPU (vgpu/lt_gemm.h). Built like the .cu
// files (-fsanitize=thread hooks into the executor), so its global loads and stores are checked.
#include <cstring>

#include "vgpu/lt_gemm.h"

namespace vgpu {
namespace {

// cudaDataType_t values (shim/cublasLt.h), repeated so that this file needs no cuBLASLt header.
constexpr int kF32 = 0, kF16 = 2, kBF16 = 14;

float load(const void* p, int type, int64_t i) {
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

// One element of D per thread, consecutive threads down a column (D's contiguous direction).
void lt_gemm_thread(const LtGemm& g) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= g.m * g.n) return;
  const int64_t i = idx % g.m, j = idx / g.m;
  float acc = 0.0f;
  for (int64_t p = 0; p < g.k; ++p) {
    // op(A)(i, p) and op(B)(p, j), each stored column-major with its leading dimension.
    const float a = load(g.A, g.a_type, g.trans_a ? p + i * g.lda : i + p * g.lda);
    const float b = load(g.B, g.b_type, g.trans_b ? j + p * g.ldb : p + j * g.ldb);
    acc = fmaf(a, b, acc);
  }
  float d = g.alpha * acc;
  if (g.beta != 0.0f) d += g.beta * load(g.C, g.c_type, i + j * g.ldc);  // beta = 0: C is not read
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
