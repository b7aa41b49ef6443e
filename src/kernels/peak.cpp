// GEMM peak: measurement, the peak file, and the OpenBLAS peer. See peak.h.
#include "kernels/peak.h"

#include <dlfcn.h>
#include <omp.h>

#include <dnnl.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "tensor/dtype.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {

namespace {

constexpr const char* kFormat = "fluxtrain-gemm-peak";
constexpr int kVersion = 1;

using Clock = std::chrono::steady_clock;

// Sets the OpenMP thread count for a scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedThreads() { omp_set_num_threads(prev_); }

 private:
  int prev_;
};

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// Values in [-1, 1), never zero, reproducible.
void fill(std::vector<float>& v, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;
  }
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Runs fn until min_seconds have passed (and at least 3 times, after one warm-up call);
// returns the shortest run in seconds (wall, or process CPU time / threads).
template <typename Fn>
double best_seconds(Fn&& fn, const PeakOptions& opt, int threads) {
  fn();  // warm-up: primitive creation, first touch of the buffers
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 3 || (total < opt.min_seconds && rep < 10000); ++rep) {
    auto t0 = Clock::now();
    double c0 = process_cpu_seconds();
    fn();
    double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    double s = opt.cpu_clock ? (process_cpu_seconds() - c0) / threads : wall;
    best = std::min(best, s);
    total += wall;
  }
  return best;
}


std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

Precision precision_from_name(const std::string& path, const std::string& name) {
  if (name == "f32") return Precision::kF32;
  if (name == "bf16") return Precision::kBF16;
  if (name == "f16") return Precision::kF16;
  throw Error(fmt::format("{}: unknown precision '{}'", path, name), "expected f32, bf16 or f16");
}

// Parses the whole file; a missing file is an empty list.
std::vector<PeakRecord> load_records(const std::string& path) {
  std::vector<PeakRecord> out;
  if (!std::filesystem::exists(path)) return out;
  const std::string hint = fmt::format("delete {} (it is a cache) and measure again with `fluxtrain bench-peak`", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", path, e.what()), hint);
  }
  if (!j.is_object() || j.value("format", "") != kFormat) {
    throw Error(fmt::format("{}: not a GEMM peak file (expected \"format\": \"{}\")", path, kFormat), hint);
  }
  if (j.value("version", 0) != kVersion) {
    throw Error(fmt::format("{}: peak file version {} is not the supported version {}", path,
                            j.value("version", 0), kVersion),
                hint);
  }
  try {
    for (const auto& e : j.at("entries")) {
      PeakRecord r;
      r.cpu = e.at("cpu").get<std::string>();
      r.threads = e.at("threads").get<int>();
      r.precision = precision_from_name(path, e.at("precision").get<std::string>());
      r.gflops = e.at("gflops").get<double>();
      r.size = e.value("size", int64_t{0});
      r.library = e.value("library", "");
      r.impl = e.value("impl", "");
      r.measured_at = e.value("measured_at", "");
      if (!(r.gflops > 0) || r.threads <= 0) {
        throw Error(fmt::format("{}: entry for '{}' has gflops = {} and threads = {}; both must be positive",
                                path, r.cpu, r.gflops, r.threads),
                    hint);
      }
      out.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed entry: {}", path, e.what()), hint);
  }
  return out;
}

}  // namespace

const char* precision_name(Precision p) {
  return p == Precision::kBF16 ? "bf16" : p == Precision::kF16 ? "f16" : "f32";
}

std::string peak_file_path() {
  if (const char* p = std::getenv("FLUXTRAIN_PEAK_FILE"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/fluxtrain/peak.json";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/fluxtrain/peak.json";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (starts_with(line, "model name")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return std::string(trim(std::string_view(line).substr(colon + 1)));
    }
  }
  return "unknown cpu";
}

std::optional<PeakRecord> read_peak(const std::string& path, const std::string& cpu, int threads,
                                    Precision precision) {
  for (auto& r : load_records(path)) {
    if (r.cpu == cpu && r.threads == threads && r.precision == precision) return r;
  }
  return std::nullopt;
}

void record_peak(const std::string& path, const PeakRecord& record) {
  auto records = load_records(path);
  std::erase_if(records, [&](const PeakRecord& r) {
    return r.cpu == record.cpu && r.threads == record.threads && r.precision == record.precision;
  });
  records.push_back(record);
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& r : records) {
    entries.push_back({{"cpu", r.cpu},
                       {"threads", r.threads},
                       {"precision", precision_name(r.precision)},
                       {"gflops", r.gflops},
                       {"size", r.size},
                       {"library", r.library},
                       {"impl", r.impl},
                       {"measured_at", r.measured_at}});
  }
  nlohmann::json j = {{"format", kFormat}, {"version", kVersion}, {"entries", entries}};
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(fmt::format("cannot create directory {}: {}", dir.string(), ec.message()),
                        "set FLUXTRAIN_PEAK_FILE to a writable path");
  }
  write_file_atomic(path, j.dump(2) + "\n");
}

namespace {
// One square GEMM path, timed: fp32 through ops::matmul (or the fp32 matmul primitive), bf16
// through ops::matmul_bf16.
PeakRecord measure_square(Precision precision, bool f32_primitive, int threads, const PeakOptions& options) {
  threads = resolve_threads(threads);
  ScopedThreads scope(threads);
  const int64_t n = options.size;
  if (n <= 0) throw Error(fmt::format("GEMM peak size {} must be positive", n));
  std::vector<float> A(n * n), B(n * n), C(n * n);
  fill(A, 1);
  fill(B, 2);
  double secs = 0;
  PeakRecord r;
  if (precision == Precision::kF32 && f32_primitive) {
    secs = best_seconds([&] { cpu::matmul_f32_primitive(C.data(), A.data(), B.data(), n, n, n, false, false, 0.0f); },
                        options, threads);
    r.impl = cpu::gemm_primitive_impl_name(n, n, n, false, false, precision);
  } else if (precision == Precision::kF32) {
    secs = best_seconds([&] { cpu::matmul(C.data(), A.data(), B.data(), n, n, n, false, false, 0.0f, precision); },
                        options, threads);
    r.impl = cpu::gemm_impl_name(n, n, n, false, false, precision);
  } else {
    std::vector<uint16_t> A16(n * n), B16(n * n);
    convert(A16.data(), DType::kBF16, A.data(), DType::kF32, A16.size());
    convert(B16.data(), DType::kBF16, B.data(), DType::kF32, B16.size());
    secs = best_seconds([&] { cpu::matmul_bf16(C.data(), A16.data(), B16.data(), n, n, n, false, false, 0.0f); },
                        options, threads);
    r.impl = cpu::gemm_impl_name(n, n, n, false, false, precision);
  }
  r.cpu = cpu_model_name();
  r.threads = threads;
  r.precision = precision;
  r.gflops = 2.0 * static_cast<double>(n) * n * n / secs * 1e-9;
  r.size = n;
  r.library = onednn_version();
  r.measured_at = utc_timestamp();
  return r;
}
}  // namespace

PeakRecord measure_gemm_peak(Precision precision, int threads, const PeakOptions& options) {
  return measure_square(precision, false, threads, options);
}

PeakRecord measure_matmul_primitive_f32(int threads, const PeakOptions& options) {
  return measure_square(Precision::kF32, true, threads, options);
}

double gemm_peak_gflops(Precision precision, int threads, const PeakOptions& options) {
  static std::mutex mu;  // one measurement at a time in this process
  std::lock_guard<std::mutex> lock(mu);
  threads = resolve_threads(threads);
  const std::string path = peak_file_path(), cpu = cpu_model_name();
  if (auto r = read_peak(path, cpu, threads, precision)) return r->gflops;
  log_info("measuring the {} GEMM peak on {} thread(s) (once per machine; recorded in {})",
           precision_name(precision), threads, path);
  PeakRecord r = measure_gemm_peak(precision, threads, options);
  try {
    record_peak(path, r);
  } catch (const Error& e) {
    log_warn("could not record the GEMM peak: {} ({})", e.what(), e.hint());
  }
  return r.gflops;
}

// ---- OpenBLAS, the peer --------------------------------------------------------------------

namespace {
OpenBlas load_openblas() {
  OpenBlas ob;
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  if ((!env || !*env) && __builtin_cpu_supports("avx512f")) {
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
    ob.env_set_by_us = true;
  }
  env = std::getenv("OPENBLAS_CORETYPE");
  ob.coretype_env = env ? env : "";

  void* lib = nullptr;
  std::string tried;
  for (const char* name : {
#ifdef FT_OPENBLAS_LIB
           FT_OPENBLAS_LIB,
#endif
           "libopenblas.so.0", "libopenblas.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    tried += std::string(tried.empty() ? "" : ", ") + name;
  }
  if (!lib) {
    ob.note = "OpenBLAS not found (tried " + tried + "); install libopenblas-dev";
    return ob;
  }
  auto corename = reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_corename"));
  ob.set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"));
  ob.sgemm = reinterpret_cast<decltype(ob.sgemm)>(dlsym(lib, "cblas_sgemm"));
  if (!ob.sgemm || !ob.set_num_threads || !corename) {
    ob.sgemm = nullptr;
    ob.note = "the loaded BLAS is not OpenBLAS (no cblas_sgemm / openblas_* symbols)";
    return ob;
  }
  ob.core = corename();
  if (!ob.coretype_env.empty() && lower(ob.core) != lower(ob.coretype_env)) {
    ob.note = fmt::format("OPENBLAS_CORETYPE={} did not take effect (OpenBLAS runs '{}'; was it loaded before?)",
                          ob.coretype_env, ob.core);
  }
  return ob;
}
}  // namespace

const OpenBlas& openblas() {
  static const OpenBlas ob = load_openblas();
  return ob;
}

BlasPeerResult measure_openblas_sgemm(int threads, const PeakOptions& options) {
  const OpenBlas& ob = openblas();
  BlasPeerResult res;
  res.core = ob.core;
  res.coretype_env = ob.coretype_env;
  res.env_set_by_us = ob.env_set_by_us;
  res.note = ob.note;
  if (!ob.sgemm) return res;
  threads = resolve_threads(threads);
  ob.set_num_threads(threads);
  const int n = static_cast<int>(options.size);
  std::vector<float> A(static_cast<size_t>(n) * n), B(A.size()), C(A.size());
  fill(A, 1);
  fill(B, 2);
  constexpr int kRowMajor = 101, kNoTrans = 111;
  double secs = best_seconds(
      [&] { ob.sgemm(kRowMajor, kNoTrans, kNoTrans, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n); },
      options, threads);
  res.gflops = 2.0 * static_cast<double>(n) * n * n / secs * 1e-9;
  res.available = true;
  return res;
}

}  // namespace ft
