// Causal grouped-query attention in fp32, flash-attention style (no (T, T) matrix anywhere),
// mirroring backends/cpu/attention.cpp: scores in the log2 domain (scaled by log2 e / sqrt(D)),
// online softmax in the forward, P recomputed from the saved log-sum-exp in the backward.
// Also the KV-cache write and decoding, which reuse the forward kernel.
//
// Simplest correct version first (launch.h has the geometry):
//   forward, dQ  a warp per query row, kAttnWarps rows of one head per block; key/value tiles of
//                R rows in shared memory, lane j scoring key j of the tile (its own dot product
//                over D), then every lane updating the output dimensions it owns;
//   dK, dV       a warp per key row of one kv head; query/dO tiles of R rows, lane i scoring
//                query i; the group's query heads are visited in order, so each kv row's
//                gradients are summed by one warp in a fixed order: no atomics, deterministic.
// Backward: D_i = rowsum(dO ∘ O); P = exp2(S − lse·log2 e); dV = Pᵀ dO; dS = P ∘ (dO Vᵀ − D_i) ·
// scale; dQ = dS K; dK = dSᵀ Q.
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/attention_tiles.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/store.cuh"

namespace ft::cuda {

namespace {

// Where the forward kernel reads and writes: query (b, t, h) at q + b q_batch + t q_tok + h D;
// key/value j of (b, kh) at k/v + b kv_batch + kh kv_head + j kv_tok; out (b, t, h) at
// out + b o_batch + t o_tok + h D; lse (B, H, Tq) or null. Query t sees keys j <= t + offset.
struct FwdArgs {
  const float* q;
  int64_t q_batch, q_tok;
  const float* k;
  const float* v;
  int64_t kv_batch, kv_head, kv_tok;
  float* out;
  int64_t o_batch, o_tok;
  float* lse;
  int64_t B, Tq, Tk, H, Hkv, D, offset;
};

__global__ void __launch_bounds__(kWarp* kAttnWarps, 2) attention_fwd_kernel(FwdArgs a) {
  FT_DYN_SHARED(float, smem);
  const int64_t D = a.D, R = attention_tile_rows(D), ld = D + 1;
  float* Ks = smem;
  float* Vs = Ks + R * ld;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  float* q_s = Vs + R * ld + warp * D;
  const float scale_log2 = math::attention_scale_log2(D);
  const int64_t nqb = ceil_div(a.Tq, kAttnWarps), group = a.H / a.Hkv;
  const int64_t tasks = a.B * a.H * nqb;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t qb = nqb - 1 - task % nqb;  // a head's last query blocks (most keys) first
    const int64_t h = (task / nqb) % a.H, b = task / (nqb * a.H), kh = h / group;
    const int64_t t = qb * kAttnWarps + warp;
    const bool valid = t < a.Tq;
    __syncwarp();
    if (valid)
      for (int64_t d = lane; d < D; d += kWarp) q_s[d] = a.q[b * a.q_batch + t * a.q_tok + h * D + d];
    const int64_t last_t = min64(a.Tq - 1, qb * kAttnWarps + kAttnWarps - 1);
    const int64_t n_keys = min64(a.Tk, last_t + a.offset + 1);
    const int64_t my_last = t + a.offset;
    const float* kb = a.k + b * a.kv_batch + kh * a.kv_head;
    const float* vb = a.v + b * a.kv_batch + kh * a.kv_head;
    float m = -INFINITY, l = 0.0f, o[kAttnMaxDPerLane];
#pragma unroll
    for (int k = 0; k < kAttnMaxDPerLane; ++k) o[k] = 0.0f;
    for (int64_t j0 = 0; j0 < n_keys; j0 += R) {
      const int64_t rows = min64(R, n_keys - j0);
      __syncthreads();
      load_tile(Ks, ld, kb + j0 * a.kv_tok, a.kv_tok, rows, R, D);
      load_tile(Vs, ld, vb + j0 * a.kv_tok, a.kv_tok, rows, R, D);
#if defined(FT_VGPU_FAULTS)  // tests/vgpu: this barrier removed must be reported as a race
      if (!::vgpu::fault_enabled("attention_fwd_no_sync"))
#endif
        __syncthreads();
      if (!valid || j0 > my_last) continue;  // warp-uniform
      float s = -INFINITY;
      if (lane < rows && j0 + lane <= my_last) s = dot_row(q_s, Ks + lane * ld, D) * scale_log2;
      const float m_new = fmaxf(m, warp_max(s));
      const float p = s == -INFINITY ? 0.0f : exp2f(s - m_new);
      const float alpha = exp2f(m - m_new);  // 0 on the first tile (m = −inf)
      l = l * alpha + warp_sum(p);
#pragma unroll
      for (int k = 0; k < kAttnMaxDPerLane; ++k) o[k] *= alpha;
      for (int64_t r = 0; r < rows; ++r) {
        const float pr = __shfl_sync(kFullMask, p, static_cast<int>(r));
#pragma unroll
        for (int k = 0; k < kAttnMaxDPerLane; ++k) {
          const int64_t d = lane + k * kWarp;
          if (d < D) o[k] += pr * Vs[r * ld + d];
        }
      }
      m = m_new;
    }
    if (valid) {
      float* out = a.out + b * a.o_batch + t * a.o_tok + h * D;
      const float inv = 1.0f / l;
#pragma unroll
      for (int k = 0; k < kAttnMaxDPerLane; ++k) {
        const int64_t d = lane + k * kWarp;
        if (d < D) out[d] = o[k] * inv;
      }
      if (a.lse && lane == 0) a.lse[(b * a.H + h) * a.Tq + t] = math::attention_lse(m, l);
    }
  }
}

// delta (B, H, T) = rowsum(dO ∘ O): a warp per (b, t, h) row.
template <typename In>
__global__ void attention_delta_kernel(float* delta, const In* dout, const In* out, int64_t B, int64_t T, int64_t H,
                                       int64_t D) {
  const int lane = threadIdx.x % kWarp;
  const int64_t rows = B * T * H, warps = static_cast<int64_t>(gridDim.x) * kAttnWarps;
  for (int64_t r = blockIdx.x * kAttnWarps + threadIdx.x / kWarp; r < rows; r += warps) {
    float acc = 0.0f;
    for (int64_t d = lane; d < D; d += kWarp) acc += load_f32(dout[r * D + d]) * load_f32(out[r * D + d]);
    acc = warp_sum(acc);
    const int64_t h = r % H, t = (r / H) % T, b = r / (T * H);
    if (lane == 0) delta[(b * H + h) * T + t] = acc;
  }
}

struct BwdArgs {
  float* dqkv;
  const float* dout;
  const float* qkv;
  const float* lse;
  const float* delta;
  int64_t B, T, H, Hkv, D;
};

// dQ: the forward's task structure; dQ rows written (not accumulated) into dqkv.
__global__ void __launch_bounds__(kWarp* kAttnWarps, 2) attention_dq_kernel(BwdArgs a) {
  FT_DYN_SHARED(float, smem);
  const int64_t D = a.D, R = attention_tile_rows(D), ld = D + 1, row = (a.H + 2 * a.Hkv) * D;
  float* Ks = smem;
  float* Vs = Ks + R * ld;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  float* q_s = Vs + R * ld + warp * D;
  float* do_s = Vs + R * ld + kAttnWarps * D + warp * D;
  const float scale_log2 = math::attention_scale_log2(D),
              scale = static_cast<float>(1.0 / sqrt(static_cast<double>(D)));
  const int64_t nqb = ceil_div(a.T, kAttnWarps), group = a.H / a.Hkv;
  const int64_t tasks = a.B * a.H * nqb;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t qb = nqb - 1 - task % nqb;
    const int64_t h = (task / nqb) % a.H, b = task / (nqb * a.H), kh = h / group;
    const int64_t t = qb * kAttnWarps + warp;
    const bool valid = t < a.T;
    __syncwarp();
    float lse2 = 0.0f, delta = 0.0f;
    if (valid) {
      for (int64_t d = lane; d < D; d += kWarp) {
        q_s[d] = a.qkv[(b * a.T + t) * row + h * D + d];
        do_s[d] = a.dout[(b * a.T + t) * a.H * D + h * D + d];
      }
      lse2 = a.lse[(b * a.H + h) * a.T + t] * math::kLog2e;
      delta = a.delta[(b * a.H + h) * a.T + t];
    }
    const int64_t n_keys = min64(a.T, qb * kAttnWarps + kAttnWarps);
    const float* kb = a.qkv + b * a.T * row + (a.H + kh) * D;
    const float* vb = kb + a.Hkv * D;
    float dq[kAttnMaxDPerLane];
#pragma unroll
    for (int k = 0; k < kAttnMaxDPerLane; ++k) dq[k] = 0.0f;
    for (int64_t j0 = 0; j0 < n_keys; j0 += R) {
      const int64_t rows = min64(R, n_keys - j0);
      __syncthreads();
      load_tile(Ks, ld, kb + j0 * row, row, rows, R, D);
      load_tile(Vs, ld, vb + j0 * row, row, rows, R, D);
      __syncthreads();
      if (!valid || j0 > t) continue;
      float ds = 0.0f;
      if (lane < rows && j0 + lane <= t) {
        const float p = exp2f(dot_row(q_s, Ks + lane * ld, D) * scale_log2 - lse2);
        ds = p * (dot_row(do_s, Vs + lane * ld, D) - delta) * scale;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float dsr = __shfl_sync(kFullMask, ds, static_cast<int>(r));
#pragma unroll
        for (int k = 0; k < kAttnMaxDPerLane; ++k) {
          const int64_t d = lane + k * kWarp;
          if (d < D) dq[k] += dsr * Ks[r * ld + d];
        }
      }
    }
    if (valid) {
      float* dst = a.dqkv + (b * a.T + t) * row + h * D;
#pragma unroll
      for (int k = 0; k < kAttnMaxDPerLane; ++k) {
        const int64_t d = lane + k * kWarp;
        if (d < D) dst[d] = dq[k];
      }
    }
  }
}

// dK, dV: a warp per key row j of kv head kh, over the group's query heads and queries i >= j.
__global__ void __launch_bounds__(kWarp* kAttnWarps, 2) attention_dkv_kernel(BwdArgs a) {
  FT_DYN_SHARED(float, smem);
  const int64_t D = a.D, R = attention_tile_rows(D), ld = D + 1, row = (a.H + 2 * a.Hkv) * D;
  float* Qt = smem;
  float* dOt = Qt + R * ld;
  float* lse2_t = dOt + R * ld;
  float* delta_t = lse2_t + R;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  float* k_s = delta_t + R + warp * D;
  float* v_s = delta_t + R + kAttnWarps * D + warp * D;
  const float scale_log2 = math::attention_scale_log2(D),
              scale = static_cast<float>(1.0 / sqrt(static_cast<double>(D)));
  const int64_t nkb = ceil_div(a.T, kAttnWarps), group = a.H / a.Hkv;
  const int64_t tasks = a.B * a.Hkv * nkb;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t kb = task % nkb;  // a head's first key blocks (most queries) first
    const int64_t kh = (task / nkb) % a.Hkv, b = task / (nkb * a.Hkv);
    const int64_t j = kb * kAttnWarps + warp;
    const bool valid = j < a.T;
    __syncwarp();
    if (valid)
      for (int64_t d = lane; d < D; d += kWarp) {
        k_s[d] = a.qkv[(b * a.T + j) * row + (a.H + kh) * D + d];
        v_s[d] = a.qkv[(b * a.T + j) * row + (a.H + a.Hkv + kh) * D + d];
      }
    float dk[kAttnMaxDPerLane], dv[kAttnMaxDPerLane];
#pragma unroll
    for (int k = 0; k < kAttnMaxDPerLane; ++k) dk[k] = dv[k] = 0.0f;
    const int64_t i_first = kb * kAttnWarps;  // the block's first key: earlier queries see none
    for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
      for (int64_t i0 = i_first; i0 < a.T; i0 += R) {
        const int64_t rows = min64(R, a.T - i0);
        __syncthreads();
        load_tile(Qt, ld, a.qkv + (b * a.T + i0) * row + h * D, row, rows, R, D);
        load_tile(dOt, ld, a.dout + (b * a.T + i0) * a.H * D + h * D, a.H * D, rows, R, D);
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
          lse2_t[r] = r < rows ? a.lse[(b * a.H + h) * a.T + i0 + r] * math::kLog2e : 0.0f;
          delta_t[r] = r < rows ? a.delta[(b * a.H + h) * a.T + i0 + r] : 0.0f;
        }
        __syncthreads();
        if (!valid || i0 + rows - 1 < j) continue;
        float p = 0.0f, ds = 0.0f;
        if (lane < rows && i0 + lane >= j) {
          p = exp2f(dot_row(Qt + lane * ld, k_s, D) * scale_log2 - lse2_t[lane]);
          ds = p * (dot_row(dOt + lane * ld, v_s, D) - delta_t[lane]) * scale;
        }
        for (int64_t r = 0; r < rows; ++r) {
          const float pr = __shfl_sync(kFullMask, p, static_cast<int>(r));
          const float dsr = __shfl_sync(kFullMask, ds, static_cast<int>(r));
#pragma unroll
          for (int k = 0; k < kAttnMaxDPerLane; ++k) {
            const int64_t d = lane + k * kWarp;
            if (d < D) {
              dv[k] += pr * dOt[r * ld + d];
              dk[k] += dsr * Qt[r * ld + d];
            }
          }
        }
      }
    }
    if (valid) {
      float* dst = a.dqkv + (b * a.T + j) * row + (a.H + kh) * D;
#pragma unroll
      for (int k = 0; k < kAttnMaxDPerLane; ++k) {
        const int64_t d = lane + k * kWarp;
        if (d < D) {
          dst[d] = dk[k];
          dst[a.Hkv * D + d] = dv[k];
        }
      }
    }
  }
}

// A 2-D grid: (x) V-wide groups of a token's Hkv·D key (and value) elements, a 32-bit in-token
// index; (y) the tokens b·T + t, grid-stride, (b, t) stepped with the stride (no 64-bit / or % per
// element). V = 4 (float4) when D % 4 = 0 and the pointers are 16-byte aligned, else 1.
template <int V>
__global__ void kv_cache_write_kernel(float* k_cache, float* v_cache, const float* qkv, int64_t B, int64_t T, int32_t H,
                                      int32_t Hkv, int32_t D, int64_t pos0, int64_t max_T) {
  const int32_t e =
      (static_cast<int32_t>(blockIdx.x) * static_cast<int32_t>(blockDim.x) + static_cast<int32_t>(threadIdx.x)) * V;
  if (e >= Hkv * D) return;
  const int32_t kh = e / D, d = e - kh * D;
  const int64_t row = static_cast<int64_t>(H + 2 * Hkv) * D, stride = gridDim.y;
  const int64_t step_b = stride / T, step_t = stride % T;
  int64_t b = blockIdx.y / T, t = blockIdx.y % T;
  for (int64_t bt = blockIdx.y; bt < B * T; bt += stride) {
    const int64_t dst = ((b * Hkv + kh) * max_T + pos0 + t) * D + d;
    const float* src = qkv + bt * row + static_cast<int64_t>(H + kh) * D + d;
    float k[V], v[V];
    load_vec<V>(src, k);
    load_vec<V>(src + static_cast<int64_t>(Hkv) * D, v);
    store_vec<V>(k_cache + dst, k);
    store_vec<V>(v_cache + dst, v);
    b += step_b;
    t += step_t;
    if (t >= T) {
      t -= T;
      ++b;
    }
  }
}

template <typename Kernel>
void prepare_smem(Kernel kernel, int64_t smem, const char* op, int64_t D) {
  if (smem > kDefaultSmemBytes)
    FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), op,
                  {"D", D}, {"smem", smem});
}

void launch_forward(CudaContext& ctx, const FwdArgs& a, const char* op) {
  const LaunchShape l = attention_fwd_launch(a.B, a.Tq, a.H, a.D);
  prepare_smem(attention_fwd_kernel, l.smem, op, a.D);
  FT_LAUNCH(attention_fwd_kernel, to_dim3(l.grid), to_dim3(l.block), static_cast<size_t>(l.smem), ctx.stream())(a);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", a.B}, {"Tq", a.Tq}, {"Tk", a.Tk}, {"H", a.H}, {"Hkv", a.Hkv}, {"D", a.D});
}

void require_head_dim(const char* op, int64_t D) {
  require(attention_head_dim_ok(D), op, "the fp32 CUDA attention supports head dimensions 1..256", {{"D", D}},
          "use a model with dim / n_heads <= 256");
}

}  // namespace

void attention_forward(CudaContext& ctx, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D) {
  check_attention("attention_forward", B, T, H, Hkv, D);
  require_head_dim("attention_forward", D);
  if (B == 0 || T == 0) return;
  const int64_t row = (H + 2 * Hkv) * D;
  const FwdArgs a{
      qkv, T * row, row, qkv + H * D, qkv + (H + Hkv) * D, T * row, D, row, out, T * H * D, H * D, lse, B, T, T, H,
      Hkv, D,       0};
  launch_forward(ctx, a, "attention_forward");
}

namespace {
template <typename In>
void launch_delta(CudaContext& ctx, float* delta, const In* dout, const In* out, int64_t B, int64_t T, int64_t H,
                  int64_t D, const char* op) {
  const LaunchShape ld = attention_delta_launch(B, T, H);
  FT_LAUNCH(attention_delta_kernel<In>, to_dim3(ld.grid), to_dim3(ld.block), 0, ctx.stream())
  (delta, dout, out, B, T, H, D);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", B}, {"T", T}, {"H", H}, {"D", D});
}
}  // namespace

void attention_delta(CudaContext& ctx, float* delta, const float* dout, const float* out, int64_t B, int64_t T,
                     int64_t H, int64_t D, const char* op) {
  launch_delta(ctx, delta, dout, out, B, T, H, D, op);
}
void attention_delta(CudaContext& ctx, float* delta, const uint16_t* dout, const uint16_t* out, int64_t B, int64_t T,
                     int64_t H, int64_t D, const char* op) {
  launch_delta(ctx, delta, dout, out, B, T, H, D, op);
}

void attention_backward_with_delta(CudaContext& ctx, float* delta, float* dqkv, const float* dout, const float* qkv,
                                   const float* out, const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                   int64_t D) {
  const char* op = "attention_backward";
  attention_delta(ctx, delta, dout, out, B, T, H, D, op);
  const BwdArgs a{dqkv, dout, qkv, lse, delta, B, T, H, Hkv, D};
  const LaunchShape lq = attention_fwd_launch(B, T, H, D);
  prepare_smem(attention_dq_kernel, lq.smem, op, D);
  FT_LAUNCH(attention_dq_kernel, to_dim3(lq.grid), to_dim3(lq.block), static_cast<size_t>(lq.smem), ctx.stream())(a);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D});
  const LaunchShape lkv = attention_dkv_launch(B, T, Hkv, D);
  prepare_smem(attention_dkv_kernel, lkv.smem, op, D);
  FT_LAUNCH(attention_dkv_kernel, to_dim3(lkv.grid), to_dim3(lkv.block), static_cast<size_t>(lkv.smem), ctx.stream())
  (a);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D});
}

void attention_backward(CudaContext& ctx, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  check_attention("attention_backward", B, T, H, Hkv, D);
  require_head_dim("attention_backward", D);
  if (B == 0 || T == 0) return;
  auto* delta = static_cast<float*>(ctx.scratch(static_cast<size_t>(B * H * T) * sizeof(float), "attention_backward"));
  attention_backward_with_delta(ctx, delta, dqkv, dout, qkv, out, lse, B, T, H, Hkv, D);
}

void kv_cache_write(CudaContext& ctx, float* k_cache, float* v_cache, const float* qkv, int64_t B, int64_t T, int64_t H,
                    int64_t Hkv, int64_t D, int64_t pos0, int64_t max_T) {
  check_decode("kv_cache_write", B, pos0, T, H, Hkv, D, max_T);
  require((H + 2 * Hkv) * D <= kMaxRowElems, "kv_cache_write", "a token's q, k and v exceed 2^30 elements",
          {{"H", H}, {"Hkv", Hkv}, {"D", D}});
  if (B * T * Hkv * D == 0) return;
  const bool wide = vector_width(4, D, k_cache, v_cache, qkv) == 4;
  const LaunchShape l = row_vector_launch(B * T, wide ? Hkv * D / 4 : Hkv * D);
  FT_LAUNCH((wide ? kv_cache_write_kernel<4> : kv_cache_write_kernel<1>), to_dim3(l.grid), to_dim3(l.block), 0,
            ctx.stream())
  (k_cache, v_cache, qkv, B, T, static_cast<int32_t>(H), static_cast<int32_t>(Hkv), static_cast<int32_t>(D), pos0,
   max_T);
  FT_CUDA_CHECK_LAUNCH(ctx, "kv_cache_write", {"B", B}, {"T", T}, {"Hkv", Hkv}, {"D", D}, {"pos0", pos0},
                       {"max_T", max_T});
}

void attention_decode(CudaContext& ctx, float* out, const float* qkv, const float* k_cache, const float* v_cache,
                      int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t max_T) {
  check_decode("attention_decode", B, Tk - Tq, Tq, H, Hkv, D, max_T);
  require_head_dim("attention_decode", D);
  if (B == 0 || Tq == 0) return;
  const int64_t row = (H + 2 * Hkv) * D;
  // Keys of (b, kh) are rows of the cache: ((b Hkv + kh) max_T + j) D.
  const FwdArgs a{
      qkv, Tq * row, row, k_cache, v_cache, Hkv * max_T * D, max_T * D, D, out, Tq * H * D, H * D, nullptr, B,
      Tq,  Tk,       H,   Hkv,     D,       Tk - Tq};
  launch_forward(ctx, a, "attention_decode");
}

}  // namespace ft::cuda
