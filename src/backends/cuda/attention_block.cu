// Block attention in fp32 and bf16 (kernels/op_decls.inc, "Block attention"): context parallelism's ring
// attends a rank's queries to one key/value block at a time, causal by true position. The kernels
// of attention.cu with two changes: the mask compares positions (query i sees key j iff
// pos_k[j] <= pos_q[i], the tile's positions staged in shared memory beside its rows), and the
// results are merged into (forward: out, lse by their log-sum-exp) or added to (backward: dq, dk,
// dv) what the buffers hold, as backends/cpu/attention_block.cpp does.
//   forward, dQ  a warp per query row, kAttnWarps rows of one head per block; the keys the
//                block's last query sees (a prefix: positions ascend) found by binary search;
//   dK, dV       a warp per key row of one kv head, over the group's query heads and the queries
//                from the first that sees the block's first key; no atomics, deterministic.
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/attention_tiles.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/op_math.h"
#include "backends/cuda/reduce.cuh"

namespace ft::cuda {

namespace {

// In: the element type of qkv, kv, dout and out (float, or uint16_t: bf16, widened on load); Acc:
// of dkv (the backward's dk, dv are added in fp32 and stored as Acc: bf16 rounded once per call).
template <typename In, typename Acc>
struct BlockArgs {
  float* out;  // forward: out (B, Tq, H D), lse (B, H, Tq)
  float* lse_out;
  float* dqkv;  // backward: dq into (B, Tq, (H + 2 Hkv) D), dk, dv into (B, Tk, 2 Hkv D)
  Acc* dkv;
  const In* dout;
  const In* qkv;
  const In* kv;
  const float* lse;
  const float* delta;
  const int32_t* pos_q;
  const int32_t* pos_k;
  int64_t B, Tq, Tk, H, Hkv, D;
  bool accumulate;
};

// The number of entries of pos (ascending, n) that are <= p, and the first index whose entry is >= p.
__device__ __forceinline__ int64_t count_le(const int32_t* pos, int64_t n, int32_t p) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (pos[mid] <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}
__device__ __forceinline__ int64_t first_ge(const int32_t* pos, int64_t n, int32_t p) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (pos[mid] < p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// An fp32 value stored as Acc (bf16: rounded to nearest even).
__device__ __forceinline__ void store_as(float* p, float x) {
  *p = x;
}
__device__ __forceinline__ void store_as(uint16_t* p, float x) {
  *p = math::to_bf16(x);
}

// Positions [r0, r0 + rows) of pos into the tile (rows past `rows`: INT32_MAX, never seen).
__device__ __forceinline__ void load_positions(int32_t* tile, const int32_t* pos, int64_t rows, int64_t R) {
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) tile[r] = r < rows ? pos[r] : 0x7fffffff;
}

template <typename In, typename Acc>
__global__ void __launch_bounds__(kWarp* kAttnWarps, 2) attention_block_fwd_kernel(BlockArgs<In, Acc> a) {
  FT_DYN_SHARED(float, smem);
  const int64_t D = a.D, R = attention_tile_rows(D), ld = D + 1, row = (a.H + 2 * a.Hkv) * D, kv_row = 2 * a.Hkv * D;
  float* Ks = smem;
  float* Vs = Ks + R * ld;
  int32_t* pos_s = reinterpret_cast<int32_t*>(Vs + R * ld + 2 * kAttnWarps * D);
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
      for (int64_t d = lane; d < D; d += kWarp) q_s[d] = load_f32(a.qkv[(b * a.Tq + t) * row + h * D + d]);
    const int64_t last_t = min64(a.Tq - 1, qb * kAttnWarps + kAttnWarps - 1);
    const int64_t n_keys = count_le(a.pos_k, a.Tk, a.pos_q[last_t]);
    const int32_t my_pos = valid ? a.pos_q[t] : -1;
    const In* kb = a.kv + b * a.Tk * kv_row + kh * D;
    const In* vb = kb + a.Hkv * D;
    float m = -INFINITY, l = 0.0f, o[kAttnMaxDPerLane];
#pragma unroll
    for (int k = 0; k < kAttnMaxDPerLane; ++k) o[k] = 0.0f;
    for (int64_t j0 = 0; j0 < n_keys; j0 += R) {
      const int64_t rows = min64(R, n_keys - j0);
      __syncthreads();
      load_tile(Ks, ld, kb + j0 * kv_row, kv_row, rows, R, D);
      load_tile(Vs, ld, vb + j0 * kv_row, kv_row, rows, R, D);
      load_positions(pos_s, a.pos_k + j0, rows, R);
      __syncthreads();
      if (!valid || pos_s[0] > my_pos) continue;  // warp-uniform: no key of the tile is visible
      float s = -INFINITY;
      if (lane < rows && pos_s[lane] <= my_pos) s = dot_row(q_s, Ks + lane * ld, D) * scale_log2;
      const float m_new = fmaxf(m, warp_max(s));
      const float p = s == -INFINITY ? 0.0f : exp2f(s - m_new);
      const float alpha = exp2f(m - m_new);  // 0 on the first visible tile (m = −inf)
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
    if (!valid) continue;
    float* out = a.out + (b * a.Tq + t) * a.H * D + h * D;
    float* lse = a.lse_out + (b * a.H + h) * a.Tq + t;
    if (l == 0.0f) {  // no key of the block is visible: written empty, or left as it was
      if (!a.accumulate) {
        for (int64_t d = lane; d < D; d += kWarp) out[d] = 0.0f;
        if (lane == 0) *lse = -INFINITY;
      }
      continue;
    }
    // Merge: weights a_w of what the buffers hold, c_w of this block (a_w = 0 when nothing is held).
    const float l_blk = math::attention_lse(m, l);
    const float held = a.accumulate ? *lse : -INFINITY;
    __syncwarp();  // every lane has read lse before lane 0 writes it
    const float mx = fmaxf(held, l_blk), a_w = expf(held - mx), c_w = expf(l_blk - mx), inv = 1.0f / l;
    const float norm = 1.0f / (a_w + c_w);
#pragma unroll
    for (int k = 0; k < kAttnMaxDPerLane; ++k) {
      const int64_t d = lane + k * kWarp;
      if (d < D) {
        const float prev = a_w > 0.0f ? out[d] : 0.0f;
        out[d] = (a_w * prev + c_w * o[k] * inv) * norm;
      }
    }
    if (lane == 0) *lse = mx + logf(a_w + c_w);
  }
}

// dQ: the forward's task structure; dQ rows added into the query heads of dqkv.
template <typename In, typename Acc>
__global__ void __launch_bounds__(kWarp* kAttnWarps, 2) attention_block_dq_kernel(BlockArgs<In, Acc> a) {
  FT_DYN_SHARED(float, smem);
  const int64_t D = a.D, R = attention_tile_rows(D), ld = D + 1, row = (a.H + 2 * a.Hkv) * D, kv_row = 2 * a.Hkv * D;
  float* Ks = smem;
  float* Vs = Ks + R * ld;
  int32_t* pos_s = reinterpret_cast<int32_t*>(Vs + R * ld + 2 * kAttnWarps * D);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  float* q_s = Vs + R * ld + warp * D;
  float* do_s = Vs + R * ld + kAttnWarps * D + warp * D;
  const float scale_log2 = math::attention_scale_log2(D),
              scale = static_cast<float>(1.0 / sqrt(static_cast<double>(D)));
  const int64_t nqb = ceil_div(a.Tq, kAttnWarps), group = a.H / a.Hkv;
  const int64_t tasks = a.B * a.H * nqb;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t qb = nqb - 1 - task % nqb;
    const int64_t h = (task / nqb) % a.H, b = task / (nqb * a.H), kh = h / group;
    const int64_t t = qb * kAttnWarps + warp;
    const bool valid = t < a.Tq;
    __syncwarp();
    float lse2 = 0.0f, delta = 0.0f;
    if (valid) {
      for (int64_t d = lane; d < D; d += kWarp) {
        q_s[d] = load_f32(a.qkv[(b * a.Tq + t) * row + h * D + d]);
        do_s[d] = load_f32(a.dout[(b * a.Tq + t) * a.H * D + h * D + d]);
      }
      lse2 = a.lse[(b * a.H + h) * a.Tq + t] * math::kLog2e;
      delta = a.delta[(b * a.H + h) * a.Tq + t];
    }
    const int64_t last_t = min64(a.Tq - 1, qb * kAttnWarps + kAttnWarps - 1);
    const int64_t n_keys = count_le(a.pos_k, a.Tk, a.pos_q[last_t]);
    const int32_t my_pos = valid ? a.pos_q[t] : -1;
    const In* kb = a.kv + b * a.Tk * kv_row + kh * D;
    const In* vb = kb + a.Hkv * D;
    float dq[kAttnMaxDPerLane];
#pragma unroll
    for (int k = 0; k < kAttnMaxDPerLane; ++k) dq[k] = 0.0f;
    for (int64_t j0 = 0; j0 < n_keys; j0 += R) {
      const int64_t rows = min64(R, n_keys - j0);
      __syncthreads();
      load_tile(Ks, ld, kb + j0 * kv_row, kv_row, rows, R, D);
      load_tile(Vs, ld, vb + j0 * kv_row, kv_row, rows, R, D);
      load_positions(pos_s, a.pos_k + j0, rows, R);
      __syncthreads();
      if (!valid || pos_s[0] > my_pos) continue;
      float ds = 0.0f;
      if (lane < rows && pos_s[lane] <= my_pos) {
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
      float* dst = a.dqkv + (b * a.Tq + t) * row + h * D;
#pragma unroll
      for (int k = 0; k < kAttnMaxDPerLane; ++k) {
        const int64_t d = lane + k * kWarp;
        if (d < D) dst[d] += dq[k];
      }
    }
  }
}

// dK, dV: a warp per key row j of kv head kh, over the group's query heads and the queries that
// see it (positions >= pos_k[j]); added into dkv.
template <typename In, typename Acc>
__global__ void __launch_bounds__(kWarp* kAttnWarps, 2) attention_block_dkv_kernel(BlockArgs<In, Acc> a) {
  FT_DYN_SHARED(float, smem);
  const int64_t D = a.D, R = attention_tile_rows(D), ld = D + 1, row = (a.H + 2 * a.Hkv) * D, kv_row = 2 * a.Hkv * D;
  float* Qt = smem;
  float* dOt = Qt + R * ld;
  float* lse2_t = dOt + R * ld;
  float* delta_t = lse2_t + R;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  float* k_s = delta_t + R + warp * D;
  float* v_s = delta_t + R + kAttnWarps * D + warp * D;
  int32_t* pos_s = reinterpret_cast<int32_t*>(delta_t + R + 2 * kAttnWarps * D);
  const float scale_log2 = math::attention_scale_log2(D),
              scale = static_cast<float>(1.0 / sqrt(static_cast<double>(D)));
  const int64_t nkb = ceil_div(a.Tk, kAttnWarps), group = a.H / a.Hkv;
  const int64_t tasks = a.B * a.Hkv * nkb;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t kb = task % nkb;
    const int64_t kh = (task / nkb) % a.Hkv, b = task / (nkb * a.Hkv);
    const int64_t j = kb * kAttnWarps + warp;
    const bool valid = j < a.Tk;
    __syncwarp();
    if (valid)
      for (int64_t d = lane; d < D; d += kWarp) {
        k_s[d] = load_f32(a.kv[(b * a.Tk + j) * kv_row + kh * D + d]);
        v_s[d] = load_f32(a.kv[(b * a.Tk + j) * kv_row + (a.Hkv + kh) * D + d]);
      }
    const int32_t my_pos = valid ? a.pos_k[j] : 0x7fffffff;
    // The first query that sees the block's first key: earlier queries see none of its keys.
    const int64_t i_first = first_ge(a.pos_q, a.Tq, a.pos_k[kb * kAttnWarps]);
    float dk[kAttnMaxDPerLane], dv[kAttnMaxDPerLane];
#pragma unroll
    for (int k = 0; k < kAttnMaxDPerLane; ++k) dk[k] = dv[k] = 0.0f;
    for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
      for (int64_t i0 = i_first; i0 < a.Tq; i0 += R) {
        const int64_t rows = min64(R, a.Tq - i0);
        __syncthreads();
        load_tile(Qt, ld, a.qkv + (b * a.Tq + i0) * row + h * D, row, rows, R, D);
        load_tile(dOt, ld, a.dout + (b * a.Tq + i0) * a.H * D + h * D, a.H * D, rows, R, D);
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
          lse2_t[r] = r < rows ? a.lse[(b * a.H + h) * a.Tq + i0 + r] * math::kLog2e : 0.0f;
          delta_t[r] = r < rows ? a.delta[(b * a.H + h) * a.Tq + i0 + r] : 0.0f;
          pos_s[r] = r < rows ? a.pos_q[i0 + r] : -1;
        }
        __syncthreads();
        if (!valid || pos_s[rows - 1] < my_pos) continue;  // warp-uniform: no query of the tile sees key j
        float p = 0.0f, ds = 0.0f;
        if (lane < rows && pos_s[lane] >= my_pos) {
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
      Acc* dst = a.dkv + (b * a.Tk + j) * kv_row + kh * D;
#pragma unroll
      for (int k = 0; k < kAttnMaxDPerLane; ++k) {
        const int64_t d = lane + k * kWarp;
        if (d < D) {
          store_as(dst + d, load_f32(dst[d]) + dk[k]);
          store_as(dst + a.Hkv * D + d, load_f32(dst[a.Hkv * D + d]) + dv[k]);
        }
      }
    }
  }
}

template <typename Kernel, typename In, typename Acc>
void launch(CudaContext& ctx, Kernel kernel, const LaunchShape& l, const BlockArgs<In, Acc>& a, const char* op) {
  // The sizes as plain values: the checks' braced lists do not take members of a dependent type.
  const int64_t B = a.B, Tq = a.Tq, Tk = a.Tk, H = a.H, Hkv = a.Hkv, D = a.D, smem = l.smem;
  if (smem > kDefaultSmemBytes)
    FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), op,
                  {"D", D}, {"smem", smem});
  FT_LAUNCH(kernel, to_dim3(l.grid), to_dim3(l.block), static_cast<size_t>(smem), ctx.stream())(a);
  FT_CUDA_CHECK_LAUNCH(ctx, op, {"B", B}, {"Tq", Tq}, {"Tk", Tk}, {"H", H}, {"Hkv", Hkv}, {"D", D});
}

void check_block(const char* op, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D) {
  check_attention(op, B, Tq, H, Hkv, D);
  require(Tk >= 0, op, "the key block has a negative length", {{"Tk", Tk}}, "pass the block's token count");
  require(attention_head_dim_ok(D), op, "the fp32 CUDA attention supports head dimensions 1..256", {{"D", D}},
          "use a model with dim / n_heads <= 256");
}

template <typename In, typename Acc>
void block_forward(CudaContext& ctx, const char* op, float* out, float* lse, const In* qkv, const In* kv,
                   const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                   int64_t Hkv, int64_t D, bool accumulate) {
  check_block(op, B, Tq, Tk, H, Hkv, D);
  if (B == 0 || Tq == 0) return;
  BlockArgs<In, Acc> a{};
  a.out = out, a.lse_out = lse, a.qkv = qkv, a.kv = kv, a.pos_q = pos_q, a.pos_k = pos_k;
  a.B = B, a.Tq = Tq, a.Tk = Tk, a.H = H, a.Hkv = Hkv, a.D = D, a.accumulate = accumulate;
  launch(ctx, attention_block_fwd_kernel<In, Acc>, attention_block_fwd_launch(B, Tq, H, D), a, op);
}

template <typename In, typename Acc>
void block_backward(CudaContext& ctx, const char* op, float* dqkv, Acc* dkv, const In* dout, const In* qkv,
                    const In* kv, const In* out, const float* lse, const int32_t* pos_q, const int32_t* pos_k,
                    int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D) {
  check_block(op, B, Tq, Tk, H, Hkv, D);
  if (B == 0 || Tq == 0 || Tk == 0) return;
  auto* delta = static_cast<float*>(ctx.scratch(static_cast<size_t>(B * H * Tq) * sizeof(float), op));
  attention_delta(ctx, delta, dout, out, B, Tq, H, D, op);
  BlockArgs<In, Acc> a{};
  a.dqkv = dqkv, a.dkv = dkv, a.dout = dout, a.qkv = qkv, a.kv = kv, a.lse = lse, a.delta = delta;
  a.pos_q = pos_q, a.pos_k = pos_k, a.B = B, a.Tq = Tq, a.Tk = Tk, a.H = H, a.Hkv = Hkv, a.D = D;
  launch(ctx, attention_block_dq_kernel<In, Acc>, attention_block_fwd_launch(B, Tq, H, D), a, op);
  launch(ctx, attention_block_dkv_kernel<In, Acc>, attention_block_dkv_launch(B, Tk, Hkv, D), a, op);
}

}  // namespace

void attention_block_forward(CudaContext& ctx, float* out, float* lse, const float* qkv, const float* kv,
                             const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                             int64_t Hkv, int64_t D, bool accumulate) {
  block_forward<float, float>(ctx, "attention_block_forward", out, lse, qkv, kv, pos_q, pos_k, B, Tq, Tk, H, Hkv, D,
                              accumulate);
}

void attention_block_backward(CudaContext& ctx, float* dqkv, float* dkv, const float* dout, const float* qkv,
                              const float* kv, const float* out, const float* lse, const int32_t* pos_q,
                              const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv,
                              int64_t D) {
  block_backward<float, float>(ctx, "attention_block_backward", dqkv, dkv, dout, qkv, kv, out, lse, pos_q, pos_k, B, Tq,
                               Tk, H, Hkv, D);
}

// bf16 (the ring's blocks in bf16): the same kernels reading bf16, dk and dv added into bf16 dkv.
void attention_block_forward_bf16(CudaContext& ctx, float* out, float* lse, const uint16_t* qkv, const uint16_t* kv,
                                  const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk,
                                  int64_t H, int64_t Hkv, int64_t D, bool accumulate) {
  block_forward<uint16_t, uint16_t>(ctx, "attention_block_forward_bf16", out, lse, qkv, kv, pos_q, pos_k, B, Tq, Tk, H,
                                    Hkv, D, accumulate);
}

void attention_block_backward_bf16(CudaContext& ctx, float* dqkv, uint16_t* dkv, const uint16_t* dout,
                                   const uint16_t* qkv, const uint16_t* kv, const uint16_t* out, const float* lse,
                                   const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk,
                                   int64_t H, int64_t Hkv, int64_t D) {
  block_backward<uint16_t, uint16_t>(ctx, "attention_block_backward_bf16", dqkv, dkv, dout, qkv, kv, out, lse, pos_q,
                                     pos_k, B, Tq, Tk, H, Hkv, D);
}

}  // namespace ft::cuda
