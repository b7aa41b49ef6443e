// GEMM: oneDNN, OpenBLAS or BLIS for fp32; oneDNN's matmul primitive for native bf16; the fp32
// GEMM on widened (bf16) or rounded (fp16) operands elsewhere. See gemm.h.
//
//   C(M, N) = op(A) · op(B) + beta · C      A: (M, K) or (K, M) if trans_a
//                                          B: (K, N) or (N, K) if trans_b
//
// fp32: dnnl_sgemm by default (oneDNN's BLAS-style GEMM, "gemm:jit", OpenMP threads; on the
//   project's AVX-512 machines it beats oneDNN's matmul primitive by 5-35% on the model's shapes),
//   or OpenBLAS / BLIS (OpenMP builds, cpu/blas_libraries.h) where `fluxtrain bench-peak` measured
//   them faster on this CPU, ISA and thread count (recorded in the peak file), or as
//   FLUXTRAIN_GEMM says. The choice is resolved once per OpenMP thread count.
// bf16 native: the matmul primitive ("brg:avx512_core_amx_bf16" on AMX). A primitive costs far
//   more to create (~10-20 ms on AMX) than a small GEMM, so primitives are cached per (M, N, K,
//   trans_a, trans_b, beta, precision, OpenMP threads) in a process-wide, mutex-guarded map.
//   Transposes are memory-descriptor strides (nothing is copied); beta != 0 is the "sum" post-op.
//   Primitives use a user-provided scratchpad, so any thread may execute any cached primitive.
// bf16 emulated (no bf16 instructions in oneDNN's ISA): both operands widened to fp32 — exact, so
//   the numerics are the native ones: bf16 products, fp32 accumulation — then the fp32 GEMM.
//   Whole operands, converted in parallel (memory-bound: ~1-3% of a model GEMM's time).
// fp16: both operands rounded through fp16 (F16C), then the fp32 GEMM.
// The scratchpad and the conversion buffers belong to the calling thread, grow-only, allocated
// through mem_alloc(kWorkspace).
#include "backends/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/cpu/blas_libraries.h"
#include "backends/cpu/peak.h"
#include "backends/cpu/simd.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "tensor/memory.h"
#include "util/cpu_info.h"
#include "util/error.h"
#include "util/log.h"

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
    mix(static_cast<size_t>(k.trans_a) | static_cast<size_t>(k.trans_b) << 1 | static_cast<size_t>(k.precision) << 2);
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
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(plan->a_md, plan->b_md, plan->c_md), attr, cpu_engine());
    plan->pad_md = pd.scratchpad_desc();
    plan->scratch_bytes = plan->pad_md.get_size();
    plan->impl = pd.impl_info_str();
    plan->prim = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw Error(fmt::format("matmul M={} N={} K={} trans_a={} trans_b={} {}: oneDNN cannot create it on {}: {}", k.M,
                            k.N, k.K, k.trans_a, k.trans_b, k.precision == Precision::kBF16 ? "bf16" : "f32",
                            onednn_isa_name(), e.what()),
                "oneDNN's bf16 matmul needs AVX-512; ops::matmul_bf16 emulates bf16 elsewhere");
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
  ~Scratch() { mem_free(Device::kCPU, p_, bytes_, MemCategory::kWorkspace); }
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      mem_free(Device::kCPU, p_, bytes_, MemCategory::kWorkspace);
      p_ = nullptr;
      bytes_ = 0;
      p_ = mem_alloc(Device::kCPU, bytes, MemCategory::kWorkspace);
      bytes_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// What one calling thread needs: its stream, oneDNN's scratchpad, bf16 copies of A and B (native
// path), fp32 copies of widened or rounded operands (emulated paths), the fp32 C of a GEMM whose
// output is rounded to bf16.
struct ThreadState {
  dnnl::stream stream{cpu_engine()};
  Scratch pad, a16, b16, a32, b32, c32;
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
    for (int64_t i = 0; i < M * N; ++i) C[i] *= beta;  // element by element: the bits of any vector form
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

// ---- operand conversion for the emulated paths ---------------------------------------------

// y(n) = f(x(n)) in 16-lane blocks, in parallel over blocks of 16 Ki elements.
template <typename Src, typename F>
void convert_parallel(float* y, const Src* x, int64_t n, F f) {
  constexpr int64_t kBlock = 1 << 14;
#pragma omp parallel for schedule(static) if (n > 2 * kBlock)
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    for (int64_t i = b; i < e; i += simd::kLanes) {
      const int w = simd::width(e - i);
      simd::store(y + i, f(x + i, w), w);
    }
  }
}
void widen_bf16(float* y, const uint16_t* x, int64_t n) {
  convert_parallel(y, x, n, [](const uint16_t* p, int w) { return simd::load_bf16(p, w); });
}
void round_through_bf16(float* y, const float* x, int64_t n) {
  convert_parallel(y, x, n, [](const float* p, int w) {
    uint16_t h[simd::kLanes];
    simd::store_bf16(h, simd::load(p, w), w);
    return simd::load_bf16(h, w);
  });
}
void round_through_f16(float* y, const float* x, int64_t n) {
  convert_parallel(y, x, n, [](const float* p, int w) { return simd::round_f16(simd::load(p, w)); });
}

// ---- which path runs ----------------------------------------------------------------------

enum class Bf16Path : uint8_t {
  kNative,   // the matmul primitive on bf16 instructions
  kWidened,  // operands widened to fp32, the fp32 GEMM
};

Bf16Path bf16_path() {
  static const Bf16Path p = onednn_has_native_bf16() ? Bf16Path::kNative : Bf16Path::kWidened;
  return p;
}

void warn_bf16_emulated_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    log_warn(
        "bf16 GEMMs are emulated ({}): operands widened to fp32 and the fp32 GEMM run, same numerics as "
        "native bf16 but slower than fp32 itself",
        bf16_emulation_reason());
  });
}

// The f32 library per OpenMP thread count, resolved on first use.
class LibraryChoice {
 public:
  GemmLibrary get(int threads) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [t, lib] : chosen_)
      if (t == threads) return lib;
    GemmLibrary lib = resolve(threads);
    chosen_.emplace_back(threads, lib);
    return lib;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    chosen_.clear();
  }

 private:
  static GemmLibrary resolve(int threads) {
    if (const char* env = std::getenv("FLUXTRAIN_GEMM"); env && *env) {
      auto lib = gemm_library_from_name(env);
      if (!lib)
        throw Error(fmt::format("FLUXTRAIN_GEMM={} is not a GEMM library", env), "expected onednn, openblas or blis");
      GemmLibraryStatus st = gemm_library_status(*lib);
      if (!st.available)
        throw Error(fmt::format("FLUXTRAIN_GEMM={}: the library cannot run here: {}", env, st.note),
                    "unset FLUXTRAIN_GEMM to use the recorded or default library");
      return *lib;
    }
    std::optional<std::string> name;
    try {
      name = recorded_gemm_library(onednn_isa_name(), threads);
    } catch (const Error& e) {
      log_warn("GEMM library: cannot read the peak file ({}); using onednn", e.what());
    }
    if (!name) return GemmLibrary::kOneDnn;
    auto lib = gemm_library_from_name(*name);
    if (lib && gemm_library_status(*lib).available) return *lib;
    log_warn("the peak file names fp32 GEMM library '{}' for {} thread(s), which cannot run here ({}); using onednn",
             *name, threads, lib ? gemm_library_status(*lib).note : "unknown name");
    return GemmLibrary::kOneDnn;
  }

  std::mutex mu_;
  std::vector<std::pair<int, GemmLibrary>> chosen_;
};

LibraryChoice& library_choice() {
  static LibraryChoice c;
  return c;
}

void sgemm_onednn(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
                  float beta) {
  // Row-major; the leading dimension is the stored row length of each operand.
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.0f, A, trans_a ? M : K, B,
                                trans_b ? K : N, beta, C, N);
  FT_CHECK(st == dnnl_success, "dnnl_sgemm M={} N={} K={} failed with status {}", M, N, K, static_cast<int>(st));
}

const BlasLibrary& blas_of(GemmLibrary lib) {
  return lib == GemmLibrary::kOpenBlas ? openblas_library() : blis_library();
}

}  // namespace

// ---- fp32 libraries -----------------------------------------------------------------------

const char* gemm_library_name(GemmLibrary lib) {
  return lib == GemmLibrary::kOpenBlas ? "openblas" : lib == GemmLibrary::kBlis ? "blis" : "onednn";
}

std::optional<GemmLibrary> gemm_library_from_name(std::string_view name) {
  for (GemmLibrary lib : kGemmLibraries)
    if (name == gemm_library_name(lib)) return lib;
  return std::nullopt;
}

GemmLibraryStatus gemm_library_status(GemmLibrary lib) {
  GemmLibraryStatus st;
  if (lib == GemmLibrary::kOneDnn) {
    const dnnl_version_t* v = dnnl_version();
    st.available = true;
    st.detail = fmt::format("oneDNN {}.{}.{} sgemm (gemm:jit, {})", v->major, v->minor, v->patch, onednn_isa_name());
    return st;
  }
  const BlasLibrary& b = blas_of(lib);
  st.available = b.sgemm != nullptr && b.openmp;
  if (b.sgemm) st.detail = fmt::format("{} ({}) {}", b.version, b.openmp ? "OpenMP" : "pthread", b.kernels);
  st.note = b.note;
  if (!b.env.empty()) st.note += (st.note.empty() ? "" : "; ") + b.env;
  return st;
}

void matmul_f32_with(GemmLibrary lib, float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, float beta) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  if (lib == GemmLibrary::kOneDnn) return sgemm_onednn(C, A, B, M, N, K, trans_a, trans_b, beta);
  const BlasLibrary& b = blas_of(lib);
  if (!b.sgemm) throw Error(fmt::format("{} is not available: {}", gemm_library_name(lib), b.note));
  b.gemm(C, A, B, M, N, K, trans_a, trans_b, beta);
}

GemmLibrary f32_gemm_library() {
  return library_choice().get(omp_get_max_threads());
}

void reset_f32_gemm_library() {
  library_choice().reset();
}

// ---- what runs ----------------------------------------------------------------------------

std::string bf16_emulation_reason() {
  if (onednn_has_native_bf16()) return "";
  const CpuInfo& cpu = cpu_info();
  if (!cpu.avx512_bf16 && !cpu.amx_bf16) return "this CPU has neither AVX512-BF16 nor AMX-BF16";
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!cap) cap = std::getenv("DNNL_MAX_CPU_ISA");
  return fmt::format("{}oneDNN runs {} without bf16 instructions",
                     cap ? fmt::format("ONEDNN_MAX_CPU_ISA={}: ", cap) : "", onednn_isa_name());
}

std::string gemm_backend_summary() {
  const GemmLibrary lib = f32_gemm_library();
  std::string f32 = gemm_library_status(lib).detail;
  std::string bf16 =
      onednn_has_native_bf16()
          ? fmt::format("oneDNN {} (native)", gemm_primitive_impl_name(256, 256, 256, false, false, Precision::kBF16))
          : fmt::format("emulated: widened to fp32, fp32 GEMM ({})", bf16_emulation_reason());
  return fmt::format("fp32: {}; bf16: {}; fp16: emulated: rounded to fp16, fp32 GEMM", f32, bf16);
}

void matmul_bf16(const ExecContext&, float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K,
                 bool trans_a, bool trans_b, float beta) {
  if (bf16_path() == Bf16Path::kNative) return matmul_bf16_onednn(C, A, B, M, N, K, trans_a, trans_b, beta);
  warn_bf16_emulated_once();
  matmul_bf16_widened(C, A, B, M, N, K, trans_a, trans_b, beta);
}

// D = op(A)·op(B) + R: the GEMM into D, then R added to the GEMM's fp32 result — bit for bit a
// separate add_inplace (a sum post-op may add C before the last block of K).
void matmul_bf16_add(const ExecContext& ctx, float* D, const float* R, const uint16_t* A, const uint16_t* B, int64_t M,
                     int64_t N, int64_t K, bool trans_a, bool trans_b) {
  if (D == R) return matmul_bf16(ctx, D, A, B, M, N, K, trans_a, trans_b, 1.0f);
  matmul_bf16(ctx, D, A, B, M, N, K, trans_a, trans_b, 0.0f);
  add_inplace(ctx, D, R, M * N);
}

// C = bf16(op(A)·op(B)): the fp32 GEMM into this thread's buffer, then one rounding pass.
void matmul_bf16_rounded(const ExecContext& ctx, uint16_t* C, const uint16_t* A, const uint16_t* B, int64_t M,
                         int64_t N, int64_t K, bool trans_a, bool trans_b) {
  auto* c = static_cast<float*>(thread_state().c32.get(static_cast<size_t>(M * N) * sizeof(float)));
  matmul_bf16(ctx, c, A, B, M, N, K, trans_a, trans_b, 0.0f);
  to_bf16(ctx, C, c, M * N);
}

void matmul_bf16_onednn(float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                        bool trans_b, float beta) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  run_plan(gemm_cache().get(key_of(M, N, K, trans_a, trans_b, beta, Precision::kBF16)), C, A, B);
}

void matmul_bf16_widened(float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                         bool trans_b, float beta) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  ThreadState& ts = thread_state();
  auto* a = static_cast<float*>(ts.a32.get(static_cast<size_t>(M * K) * sizeof(float)));
  auto* b = static_cast<float*>(ts.b32.get(static_cast<size_t>(K * N) * sizeof(float)));
  widen_bf16(a, A, M * K);
  widen_bf16(b, B, K * N);
  matmul(cpu_context(), C, a, b, M, N, K, trans_a, trans_b, beta, Precision::kF32);
}

void matmul(const ExecContext& ctx, float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K,
            bool trans_a, bool trans_b, float beta, Precision precision) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  if (precision == Precision::kF32)
    return matmul_f32_with(f32_gemm_library(), C, A, B, M, N, K, trans_a, trans_b, beta);
  ThreadState& ts = thread_state();
  if (precision == Precision::kBF16 && bf16_path() == Bf16Path::kNative) {
    // Round A and B into this thread's bf16 buffers for the primitive.
    auto* a16 = static_cast<uint16_t*>(ts.a16.get(static_cast<size_t>(M * K) * sizeof(uint16_t)));
    auto* b16 = static_cast<uint16_t*>(ts.b16.get(static_cast<size_t>(K * N) * sizeof(uint16_t)));
    to_bf16(ctx, a16, A, M * K);
    to_bf16(ctx, b16, B, K * N);
    return matmul_bf16_onednn(C, a16, b16, M, N, K, trans_a, trans_b, beta);
  }
  // Emulated: A and B rounded to bf16 / fp16 and widened back (exact) in one pass, then fp32.
  if (precision == Precision::kBF16) warn_bf16_emulated_once();
  auto* a = static_cast<float*>(ts.a32.get(static_cast<size_t>(M * K) * sizeof(float)));
  auto* b = static_cast<float*>(ts.b32.get(static_cast<size_t>(K * N) * sizeof(float)));
  auto round = precision == Precision::kBF16 ? round_through_bf16 : round_through_f16;
  round(a, A, M * K);
  round(b, B, K * N);
  matmul_f32_with(f32_gemm_library(), C, a, b, M, N, K, trans_a, trans_b, beta);
}

void matmul_f32_primitive(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                          bool trans_b, float beta) {
  if (trivial_gemm(C, M, N, K, beta)) return;
  run_plan(gemm_cache().get(key_of(M, N, K, trans_a, trans_b, beta, Precision::kF32)), C, A, B);
}

std::string gemm_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, Precision precision) {
  const std::string f32 = gemm_library_status(f32_gemm_library()).detail;
  if (precision == Precision::kF16) return "fp16 rounded, fp32 " + f32;
  if (precision == Precision::kBF16 && !onednn_has_native_bf16()) return "bf16 widened, fp32 " + f32;
  if (precision == Precision::kF32) return f32;
  return gemm_cache().get(key_of(M, N, K, trans_a, trans_b, 0.0f, precision)).impl;
}

std::string gemm_primitive_impl_name(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, Precision precision) {
  return gemm_cache().get(key_of(M, N, K, trans_a, trans_b, 0.0f, precision)).impl;
}

size_t gemm_cache_size() {
  return gemm_cache().size();
}

}  // namespace ft::cpu
