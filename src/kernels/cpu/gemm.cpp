// GEMM through oneDNN.
//
//   C(M, N) = op(A) · op(B) + beta · C      A: (M, K) or (K, M) if trans_a
//                                          B: (K, N) or (N, K) if trans_b
//
// fp32: dnnl_sgemm, oneDNN's BLAS-style GEMM (its "gemm:jit" AVX-512 kernels, OpenMP threads).
//   Measured here it beats oneDNN's matmul primitive ("brg:avx512_core") by 5-35% on the model's
//   shapes and matches OpenBLAS SkylakeX, without OpenBLAS's second thread pool; see
//   bench/README.md, "GEMM peak". It needs no primitive, so nothing is cached.
// bf16: the matmul primitive, on AMX where the CPU has it ("brg:avx512_core_amx_bf16"). A
//   primitive costs far more to create (~10-20 ms on AMX) than a small GEMM, so primitives are
//   cached per (M, N, K, trans_a, trans_b, beta, precision, OpenMP threads) in a process-wide,
//   mutex-guarded map. Transposes are memory-descriptor strides (nothing is copied); beta != 0 is
//   the "sum" post-op. Primitives use a user-provided scratchpad, so any thread may execute any
//   cached primitive; the scratchpad and the bf16 conversion buffers belong to the calling
//   thread, grow-only, allocated through mem_alloc(kWorkspace).
#include <omp.h>

#include <dnnl.hpp>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft::cpu {

namespace {

using dnnl::memory;

struct GemmKey {
  int64_t M, N, K;
  bool trans_a, trans_b;
  float beta;
  Precision precision;
  int threads;
  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    size_t h = std::hash<int64_t>()(k.M);
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(std::hash<int64_t>()(k.N));
    mix(std::hash<int64_t>()(k.K));
    mix(static_cast<size_t>(k.trans_a) | static_cast<size_t>(k.trans_b) << 1 |
        static_cast<size_t>(k.precision) << 2);
    mix(std::hash<float>()(k.beta));
    mix(std::hash<int>()(k.threads));
    return h;
  }
};

struct GemmPlan {
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md, pad_md;
  size_t scratch_bytes = 0;
  std::string impl;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// Builds the primitive for one key. op(A) is described as a logical (M, K) matrix whose strides
// say where A actually stores element (i, k); the same for B.
std::unique_ptr<GemmPlan> make_plan(const GemmKey& k) {
  auto in_type = k.precision == Precision::kBF16 ? memory::data_type::bf16 : memory::data_type::f32;
  auto plan = std::make_unique<GemmPlan>();
  plan->a_md = memory::desc({k.M, k.K}, in_type, k.trans_a ? memory::dims{1, k.M} : memory::dims{k.K, 1});
  plan->b_md = memory::desc({k.K, k.N}, in_type, k.trans_b ? memory::dims{1, k.K} : memory::dims{k.N, 1});
  plan->c_md = memory::desc({k.M, k.N}, memory::data_type::f32, memory::dims{k.N, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(k.beta);  // C = A·B + beta · C_old
    attr.set_post_ops(po);
  }
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(plan->a_md, plan->b_md, plan->c_md), attr,
                                    cpu_engine());
    plan->pad_md = pd.scratchpad_desc();
    plan->scratch_bytes = plan->pad_md.get_size();
    plan->impl = pd.impl_info_str();
    plan->prim = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw Error(fmt::format("matmul M={} N={} K={} trans_a={} trans_b={} {}: oneDNN cannot create it: {}",
                            k.M, k.N, k.K, k.trans_a, k.trans_b,
                            k.precision == Precision::kBF16 ? "bf16" : "f32", e.what()),
                "bf16 needs a CPU with AVX512-BF16 or AMX; use precision f32 otherwise");
  }
  return plan;
}

class GemmCache {
 public:
  const GemmPlan& get(const GemmKey& k) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(k);
    if (it == plans_.end()) it = plans_.emplace(k, make_plan(k)).first;
    return *it->second;  // plans are never evicted: the reference stays valid
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return plans_.size();
  }

 private:
  std::mutex mu_;
  std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash> plans_;
};

GemmCache& gemm_cache() {
  static GemmCache c;
  return c;
}

// A grow-only buffer from the tracked allocator.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { mem_free(p_, bytes_, MemCategory::kWorkspace); }
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      mem_free(p_, bytes_, MemCategory::kWorkspace);
      p_ = nullptr;
      bytes_ = 0;
      p_ = mem_alloc(bytes, MemCategory::kWorkspace);
      bytes_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// What one calling thread needs: its stream, oneDNN's scratchpad, bf16 copies of A and B.
struct ThreadState {
  dnnl::stream stream{cpu_engine()};
  Scratch pad, a16, b16;
};

ThreadState& thread_state() {
  thread_local ThreadState s;
  return s;
}

GemmKey key_of(int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta, Precision p) {
  return GemmKey{M, N, K, ta, tb, beta, p, omp_get_max_threads()};
}

// Degenerate shapes oneDNN need not see: nothing to do, or K = 0 (C = beta · C).
bool trivial_gemm(float* C, int64_t M, int64_t N, int64_t K, float beta) {
  if (M <= 0 || N <= 0) return true;
  if (K > 0) return false;
  if (beta == 0.0f) {
    std::fill(C, C + M * N, 0.0f);
  } else {
    scale_inplace(C, beta, M * N);
  }
  return true;
}

void run_plan(const GemmPlan& plan, float* C, const void* A, const void* B) {
  ThreadState& ts = thread_state();
  const auto& eng = cpu_engine();
  memory a(plan.a_md, eng, const_cast<void*>(A));
  memory b(plan.b_md, eng, const_cast<void*>(B));
  memory c(plan.c_md, eng, C);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (plan.scratch_bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(plan.pad_md, eng, ts.pad.get(plan.scratch_bytes)));
  }
  plan.prim.execute(ts.stream, args);
  ts.stream.wait();
}

// y = fp32(fp16(x)), round to nearest even, in blocks through a small stack buffer.
void round_through_f16(float* y, const float* x, int64_t n) {
  constexpr int64_t kBlock = 1024;
  uint16_t h[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const size_t m = static_cast<size_t>(std::min(kBlock, n - i));
    convert(h, DType::kF16, x + i, DType::kF32, m);
    convert(y + i, DType::kF32, h, DType::kF16, m);
  }
}

}  // namespace

void matmul_bf16(float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float beta) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  run_plan(gemm_cache().get(key_of(M, N, K, trans_a, trans_b, beta, Precision::kBF16)), C, A, B);
}

void matmul(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
            bool trans_b, float beta, Precision precision) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  if (precision == Precision::kF32) {
    // Row-major; the leading dimension is the stored row length of each operand.
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.0f, A, trans_a ? M : K, B,
                                  trans_b ? K : N, beta, C, N);
    FT_CHECK(st == dnnl_success, "dnnl_sgemm M={} N={} K={} failed with status {}", M, N, K, static_cast<int>(st));
    return;
  }
  ThreadState& ts = thread_state();
  if (precision == Precision::kF16) {
    // fp16 operands, fp32 accumulation: A and B rounded to fp16 and widened back (exact), then
    // the fp32 GEMM. No fp16 GEMM kernel is used: oneDNN 2.6 has one only for AVX512-FP16.
    auto* a = static_cast<float*>(ts.a16.get(static_cast<size_t>(M * K) * sizeof(float)));
    auto* b = static_cast<float*>(ts.b16.get(static_cast<size_t>(K * N) * sizeof(float)));
    round_through_f16(a, A, M * K);
    round_through_f16(b, B, K * N);
    return matmul(C, a, b, M, N, K, trans_a, trans_b, beta, Precision::kF32);
  }
  // bf16 from fp32 operands: round A and B into this thread's conversion buffers.
  auto* a16 = static_cast<uint16_t*>(ts.a16.get(static_cast<size_t>(M * K) * sizeof(uint16_t)));
  auto* b16 = static_cast<uint16_t*>(ts.b16.get(static_cast<size_t>(K * N) * sizeof(uint16_t)));
  to_bf16(a16, A, M * K);
  to_bf16(b16, B, K * N);
  matmul_bf16(C, a16, b16, M, N, K, trans_a, trans_b, beta);
}

void matmul_f32_primitive(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                          bool trans_b, float beta) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  run_plan(gemm_cache().get(key_of(M, N, K, trans_a, trans_b, beta, Precision::kF32)), C, A, B);
}

std::string gemm_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                           Precision precision) {
  if (precision == Precision::kF32) return "gemm:jit (dnnl_sgemm)";
  return gemm_cache().get(key_of(M, N, K, trans_a, trans_b, 0.0f, precision)).impl;
}

std::string gemm_primitive_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                                     Precision precision) {
  return gemm_cache().get(key_of(M, N, K, trans_a, trans_b, 0.0f, precision)).impl;
}

size_t gemm_cache_size() { return gemm_cache().size(); }

}  // namespace ft::cpu
