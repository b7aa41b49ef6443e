// OpenBLAS and BLIS loaded at run time. See blas_libraries.h.
#include "backends/cpu/blas_libraries.h"

#include <dlfcn.h>
#include <omp.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <dnnl.hpp>
#include <limits>
#include <mutex>
#include <vector>

#include "util/error.h"

namespace ft::cpu {

namespace {

// Where Debian puts the builds (multiarch directory from CMake), then the loader's search path.
std::string libdir() {
#ifdef FT_LIBDIR
  return FT_LIBDIR;
#else
  return "";
#endif
}

// oneDNN limited below AVX-512 on a CPU that has it: the libraries should run AVX2 kernels too.
bool avx2_simulation() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return __builtin_cpu_supports("avx512f") && (isa == dnnl::cpu_isa::avx2 || isa == dnnl::cpu_isa::avx2_vnni ||
                                               isa == dnnl::cpu_isa::avx || isa == dnnl::cpu_isa::sse41);
}

bool avx512_effective() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
         isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// Sets name=value unless the user set it; describes the result for the report.
std::string default_env(const char* name, const std::string& value) {
  const char* cur = std::getenv(name);
  if (cur && *cur) return fmt::format("{}={}", name, cur);
  if (value.empty()) return "";
  setenv(name, value.c_str(), 0);
  return fmt::format("{}={} (set by fluxtrain)", name, value);
}

void* open_first(const std::vector<std::string>& names, std::string& path, std::string& tried) {
  for (const auto& name : names) {
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = name;
      return lib;
    }
    tried += (tried.empty() ? "" : ", ") + name;
  }
  return nullptr;
}

template <typename T>
T sym(void* lib, const char* name) {
  return reinterpret_cast<T>(dlsym(lib, name));
}

void load_openblas(BlasLibrary& ob) {
  const bool amd = __builtin_cpu_is("amd");
  std::string core;
  if (avx2_simulation()) {
    core = amd ? "Zen" : "Haswell";
  } else if (avx512_effective()) {
    core = "SkylakeX";
  }
  ob.env = default_env("OPENBLAS_CORETYPE", core);
  std::string tried;
  const std::string dir = libdir();
  std::vector<std::string> names;
  if (!dir.empty()) names.push_back(dir + "/openblas-openmp/libopenblas.so.0");
  names.push_back("libopenblas.so.0");
  void* lib = open_first(names, ob.path, tried);
  if (!lib) {
    ob.note = "OpenBLAS not found (tried " + tried + "); install libopenblas0-openmp";
    return;
  }
  auto corename = sym<char* (*)()>(lib, "openblas_get_corename");
  auto config = sym<char* (*)()>(lib, "openblas_get_config");
  ob.set_num_threads = sym<void (*)(int)>(lib, "openblas_set_num_threads");
  ob.sgemm = sym<decltype(ob.sgemm)>(lib, "cblas_sgemm");
  if (!ob.sgemm || !ob.set_num_threads || !corename || !config) {
    ob.sgemm = nullptr;
    ob.note = ob.path + " is not OpenBLAS (no cblas_sgemm / openblas_* symbols)";
    return;
  }
  const std::string cfg = config();
  ob.version = cfg.substr(0, cfg.find(' ', cfg.find(' ') + 1));  // "OpenBLAS 0.3.21"
  ob.openmp = cfg.find("USE_OPENMP") != std::string::npos;
  ob.kernels = corename();
  if (!ob.openmp) ob.note = "pthread build: a second thread pool beside OpenMP's; install libopenblas0-openmp";
  if (const char* want = std::getenv("OPENBLAS_CORETYPE"); want && *want) {
    std::string a = want, b = ob.kernels;
    for (auto* s : {&a, &b})
      for (char& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (a != b)
      ob.note = fmt::format("OPENBLAS_CORETYPE={} did not take effect (OpenBLAS runs '{}'; was it loaded before?)",
                            want, ob.kernels);
  }
}

void load_blis(BlasLibrary& bl) {
  std::string tried;
  const std::string dir = libdir();
  std::vector<std::string> names;
  if (!dir.empty()) names.push_back(dir + "/blis-openmp/libblis.so.4");
  names.push_back("libblis.so.4");
  void* lib = open_first(names, bl.path, tried);
  if (!lib) {
    bl.note = "BLIS not found (tried " + tried + "); install libblis4-openmp";
    return;
  }
  auto arch_string = sym<const char* (*)(int)>(lib, "bli_arch_string");
  auto arch_id = sym<int (*)()>(lib, "bli_arch_query_id");
  auto version = sym<const char* (*)()>(lib, "bli_info_get_version_str");
  auto openmp = sym<int64_t (*)()>(lib, "bli_info_get_enable_openmp");
  auto set_threads = sym<void (*)(int64_t)>(lib, "bli_thread_set_num_threads");
  auto init = sym<void (*)()>(lib, "bli_init");
  bl.sgemm = sym<decltype(bl.sgemm)>(lib, "cblas_sgemm");
  if (!bl.sgemm || !arch_string || !arch_id || !version || !set_threads || !init) {
    bl.sgemm = nullptr;
    bl.note = bl.path + " is not BLIS with its CBLAS layer (no cblas_sgemm / bli_* symbols)";
    return;
  }
  // BLIS_ARCH_TYPE is a configuration number, read when BLIS initialises: look it up by name
  // (the x86 configurations are numbers 0-12 in BLIS 0.9), set it, then initialise.
  std::string want;
  if (avx2_simulation()) want = __builtin_cpu_is("amd") ? "zen3" : "haswell";
  std::string id;
  for (int i = 0; !want.empty() && i <= 12; ++i)
    if (const char* s = arch_string(i); s && want == s) id = std::to_string(i);
  bl.env = default_env("BLIS_ARCH_TYPE", id);
  init();  // registers the configurations, then reads BLIS_ARCH_TYPE
  bl.version = std::string("BLIS ") + version();
  bl.kernels = arch_string(arch_id());
  bl.openmp = openmp && openmp() != 0;
  if (!bl.openmp) bl.note = "not the OpenMP build: its threads would be a second pool; install libblis4-openmp";
  bl.set_num_threads = [set_threads](int n) { set_threads(n); };
  if (!want.empty() && bl.kernels != want)
    bl.note = fmt::format("BLIS runs '{}', not '{}' ({})", bl.kernels, want, bl.env);
}

}  // namespace

void BlasLibrary::gemm(float* C, const float* A, const float* B, int64_t M, int64_t N, int64_t K, bool trans_a,
                       bool trans_b, float beta) const {
  FT_CHECK(sgemm, "{} is not loaded: {}", version.empty() ? "BLAS library" : version, note);
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  FT_CHECK(M <= kMax && N <= kMax && K <= kMax && M * N <= kMax && M * K <= kMax && K * N <= kMax,
           "sgemm M={} N={} K={} exceeds the 32-bit indices of {}", M, N, K, version);
  // One thread count for the whole process: set it when the OpenMP count changes.
  static std::atomic<int> threads_openblas{0}, threads_blis{0};
  auto& threads = this == &openblas_library() ? threads_openblas : threads_blis;
  const int t = omp_get_max_threads();
  if (threads.exchange(t) != t) set_num_threads(t);
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
  sgemm(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, static_cast<int>(M), static_cast<int>(N),
        static_cast<int>(K), 1.0f, A, static_cast<int>(trans_a ? M : K), B, static_cast<int>(trans_b ? K : N), beta, C,
        static_cast<int>(N));
}

const BlasLibrary& openblas_library() {
  static BlasLibrary lib;
  static std::once_flag once;
  std::call_once(once, [] { load_openblas(lib); });
  return lib;
}

const BlasLibrary& blis_library() {
  static BlasLibrary lib;
  static std::once_flag once;
  std::call_once(once, [] { load_blis(lib); });
  return lib;
}

}  // namespace ft::cpu
