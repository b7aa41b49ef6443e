// GEMM peak: measurement, the peak file, the fp32 library measurements. See peak.h.
#include "backends/cpu/peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <dnnl.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "backends/cpu/gemm.h"
#include "tensor/dtype.h"
#include "util/clock.h"
#include "util/cpu_budget.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {

namespace {

constexpr const char* kFormat = "fluxtrain-gemm-peak";
constexpr int kVersion = 2;  // 1: no "isa", "emulated", "gemm", "shapes", "shape_gflops"

using Clock = std::chrono::steady_clock;

// Sets the OpenMP thread count for a scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedThreads() { omp_set_num_threads(prev_); }

 private:
  int prev_;
};

int resolve_threads(int threads) {
  return threads > 0 ? threads : omp_get_max_threads();
}

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

// Parses the whole file; a missing file is an empty list. A file a newer fluxtrain wrote (another
// build on this machine) is a cache this build cannot read: it reads as empty, `*newer` is set,
// and the file is left for the build that wrote it.
std::vector<PeakRecord> load_records(const std::string& path, bool* newer = nullptr) {
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
  const int version = j.value("version", 0);
  if (version > kVersion) {
    static std::once_flag once;
    std::call_once(once, [&] {
      log_warn("{}: peak file version {} is newer than this build reads ({}); measuring again without recording", path,
               version, kVersion);
    });
    if (newer) *newer = true;
    return out;
  }
  if (version != 1 && version != kVersion) {
    throw Error(fmt::format("{}: peak file version {} is not a supported version (1 or {})", path, version, kVersion),
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
      if (version >= 2) {
        r.isa = e.value("isa", "");
        r.emulated = e.value("emulated", false);
        r.gemm = e.value("gemm", "");
        r.shapes = e.value("shapes", "");
        if (e.contains("shape_gflops")) r.shape_gflops = e.at("shape_gflops").get<std::map<std::string, double>>();
      }
      if (!(r.gflops > 0) || r.threads <= 0) {
        throw Error(fmt::format("{}: entry for '{}' has gflops = {} and threads = {}; both must be positive", path,
                                r.cpu, r.gflops, r.threads),
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

namespace {
// A version-1 entry (no ISA) stands for the CPU's unlimited ISA.
bool unlimited_isa() {
  const char* a = std::getenv("ONEDNN_MAX_CPU_ISA");
  const char* b = std::getenv("DNNL_MAX_CPU_ISA");
  return !(a && *a) && !(b && *b);
}
bool same_key(const PeakRecord& r, const std::string& cpu, const std::string& isa, int threads, Precision p) {
  return r.cpu == cpu && r.threads == threads && r.precision == p &&
         (r.isa == isa || (r.isa.empty() && unlimited_isa()));
}
}  // namespace

void check_peak_file(const std::string& path) {
  load_records(path);
}

std::optional<PeakRecord> read_peak(const std::string& path, const std::string& cpu, const std::string& isa,
                                    int threads, Precision precision) {
  std::optional<PeakRecord> found;
  for (auto& r : load_records(path)) {
    if (!same_key(r, cpu, isa, threads, precision)) continue;
    if (!found || found->isa.empty()) found = std::move(r);  // an entry with the ISA wins over a version-1 one
  }
  return found;
}

void record_peak(const std::string& path, const PeakRecord& record) {
  bool newer = false;
  auto records = load_records(path, &newer);
  if (newer) return;  // another build's cache: kept as it is
  std::erase_if(records, [&](const PeakRecord& r) {
    return r.cpu == record.cpu && r.isa == record.isa && r.threads == record.threads && r.precision == record.precision;
  });
  records.push_back(record);
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json e = {{"cpu", r.cpu},
                        {"threads", r.threads},
                        {"precision", precision_name(r.precision)},
                        {"gflops", r.gflops},
                        {"size", r.size},
                        {"library", r.library},
                        {"impl", r.impl},
                        {"measured_at", r.measured_at}};
    if (!r.isa.empty()) e["isa"] = r.isa;
    if (r.emulated) e["emulated"] = true;
    if (!r.gemm.empty()) e["gemm"] = r.gemm;
    if (!r.shapes.empty()) e["shapes"] = r.shapes;
    if (!r.shape_gflops.empty()) e["shape_gflops"] = r.shape_gflops;
    entries.push_back(std::move(e));
  }
  nlohmann::json j = {{"format", kFormat}, {"version", kVersion}, {"entries", entries}};
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw Error(fmt::format("cannot create directory {}: {}", dir.string(), ec.message()),
                  "set FLUXTRAIN_PEAK_FILE to a writable path");
  }
  write_file_atomic(path, j.dump(2) + "\n");
}

std::optional<std::string> recorded_gemm_library(const std::string& isa, int threads) {
  auto r = read_peak(peak_file_path(), cpu_model_name(), isa, threads, Precision::kF32);
  if (!r || r->gemm.empty()) return std::nullopt;
  return r->gemm;
}

namespace {
// What runs one square GEMM: the op the model uses at a precision, one fp32 library, or one of
// oneDNN's matmul primitives.
enum class Path { kModelOp, kLibrary, kF32Primitive, kBf16OneDnn };

PeakRecord measure_square(Path path, Precision precision, cpu::GemmLibrary lib, int threads,
                          const PeakOptions& options) {
  threads = resolve_threads(threads);
  ScopedThreads scope(threads);
  const int64_t n = options.size;
  if (n <= 0) throw Error(fmt::format("GEMM peak size {} must be positive", n));
  std::vector<float> A(n * n), B(n * n), C(n * n);
  fill(A, 1);
  fill(B, 2);
  std::vector<uint16_t> A16, B16;
  if (precision == Precision::kBF16) {
    A16.resize(A.size());
    B16.resize(B.size());
    convert(A16.data(), DType::kBF16, A.data(), DType::kF32, A16.size());
    convert(B16.data(), DType::kBF16, B.data(), DType::kF32, B16.size());
  }
  PeakRecord r;
  r.library = cpu::gemm_library_status(path == Path::kLibrary ? lib : cpu::f32_gemm_library()).detail;
  std::function<void()> run;
  switch (path) {
    case Path::kModelOp:
      if (precision == Precision::kBF16) {
        run = [&] { cpu::matmul_bf16(cpu_context(), C.data(), A16.data(), B16.data(), n, n, n, false, false, 0.0f); };
        r.emulated = !cpu::onednn_has_native_bf16();
        if (!r.emulated) r.library = onednn_version();
      } else {
        run = [&] { cpu::matmul(cpu_context(), C.data(), A.data(), B.data(), n, n, n, false, false, 0.0f, precision); };
        r.emulated = precision == Precision::kF16;
      }
      r.impl = cpu::gemm_impl_name(n, n, n, false, false, precision);
      break;
    case Path::kLibrary:
      run = [&] { cpu::matmul_f32_with(lib, C.data(), A.data(), B.data(), n, n, n, false, false, 0.0f); };
      r.impl = std::string("sgemm (") + cpu::gemm_library_name(lib) + ")";
      break;
    case Path::kF32Primitive:
      run = [&] { cpu::matmul_f32_primitive(C.data(), A.data(), B.data(), n, n, n, false, false, 0.0f); };
      r.library = onednn_version();
      r.impl = cpu::gemm_primitive_impl_name(n, n, n, false, false, Precision::kF32);
      break;
    case Path::kBf16OneDnn:
      r.library = onednn_version();
      r.impl = cpu::gemm_primitive_impl_name(n, n, n, false, false, Precision::kBF16);  // throws if none
      run = [&] { cpu::matmul_bf16_onednn(C.data(), A16.data(), B16.data(), n, n, n, false, false, 0.0f); };
      r.emulated = !cpu::onednn_has_native_bf16();
      break;
  }
  const double secs = best_seconds(run, options, threads);
  r.cpu = cpu_model_name();
  r.isa = cpu::onednn_isa_name();
  r.threads = threads;
  r.precision = precision;
  r.gflops = 2.0 * static_cast<double>(n) * n * n / secs * 1e-9;
  r.size = n;
  r.measured_at = utc_timestamp();
  return r;
}
}  // namespace

PeakRecord measure_gemm_peak(Precision precision, int threads, const PeakOptions& options) {
  return measure_square(Path::kModelOp, precision, cpu::GemmLibrary::kOneDnn, threads, options);
}

PeakRecord measure_f32_library(cpu::GemmLibrary lib, int threads, const PeakOptions& options) {
  return measure_square(Path::kLibrary, Precision::kF32, lib, threads, options);
}

PeakRecord measure_matmul_primitive_f32(int threads, const PeakOptions& options) {
  return measure_square(Path::kF32Primitive, Precision::kF32, cpu::GemmLibrary::kOneDnn, threads, options);
}

PeakRecord measure_bf16_onednn(int threads, const PeakOptions& options) {
  return measure_square(Path::kBf16OneDnn, Precision::kBF16, cpu::GemmLibrary::kOneDnn, threads, options);
}

std::vector<GemmShape> llama_gemm_shapes(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t ffn_dim,
                                         int64_t vocab, int64_t tokens, int64_t head_rows) {
  std::vector<GemmShape> shapes;
  auto linear = [&](const char* name, int64_t rows, int64_t in, int64_t out) {
    // W (out, in), HF layout: y = x Wᵀ; dx = dy W; dW += dyᵀ x
    shapes.push_back({name, rows, out, in, false, true, 0.0f});
    shapes.push_back({name, rows, in, out, false, false, 0.0f});
    shapes.push_back({name, out, in, rows, true, false, 1.0f});
  };
  const int64_t head_dim = dim / n_heads;
  linear("qkv", tokens, dim, (n_heads + 2 * n_kv_heads) * head_dim);
  linear("o", tokens, n_heads * head_dim, dim);
  linear("gate_up", tokens, dim, 2 * ffn_dim);
  linear("down", tokens, ffn_dim, dim);
  linear("lm_head", head_rows, dim, vocab);
  return shapes;
}

double measure_shapes_gflops(cpu::GemmLibrary lib, const std::vector<GemmShape>& shapes, int threads,
                             const PeakOptions& options) {
  threads = resolve_threads(threads);
  ScopedThreads scope(threads);
  double flops = 0, secs = 0;
  for (const GemmShape& s : shapes) {
    std::vector<float> A(s.M * s.K), B(s.K * s.N), C(s.M * s.N, 0.0f);
    fill(A, 3);
    fill(B, 4);
    PeakOptions o = options;
    o.min_seconds = options.min_seconds / static_cast<double>(shapes.size());
    secs += best_seconds(
        [&] { cpu::matmul_f32_with(lib, C.data(), A.data(), B.data(), s.M, s.N, s.K, s.trans_a, s.trans_b, s.beta); },
        o, threads);
    flops += 2.0 * static_cast<double>(s.M) * s.N * s.K;
  }
  return flops / secs * 1e-9;
}

double gemm_peak_gflops(Precision precision, int threads, const PeakOptions& options) {
  static std::mutex mu;  // one measurement at a time in this process
  std::lock_guard<std::mutex> lock(mu);
  threads = resolve_threads(threads);
  const std::string path = peak_file_path(), cpu = cpu_model_name(), isa = cpu::onednn_isa_name();
  if (auto r = read_peak(path, cpu, isa, threads, precision)) return r->gflops;
  log_info("measuring the {} GEMM peak on {} thread(s), {} (once per machine; recorded in {})",
           precision_name(precision), threads, isa, path);
  PeakRecord r = measure_gemm_peak(precision, threads, options);
  // More threads than the CPUs this process may use measure contention, not the machine: such a
  // figure serves this run only, and never enters the file that later runs trust.
  if (const int usable = read_cpu_budget().usable(); threads > usable) {
    log_warn("the GEMM peak on {} threads is not recorded: more threads than the {} CPU(s) this process may use",
             threads, usable);
    return r.gflops;
  }
  try {
    record_peak(path, r);
  } catch (const Error& e) {
    log_warn("could not record the GEMM peak: {} ({})", e.what(), e.hint());
  }
  return r.gflops;
}

namespace cpu {

PrecisionChoice auto_precision(int threads) {
  std::string why;
  const std::string flags = native_bf16_flags(&why);
  if (flags.empty()) return {Precision::kF32, "auto: " + why};
  return choose_auto_precision(flags, gemm_peak_gflops(Precision::kBF16, threads),
                               gemm_peak_gflops(Precision::kF32, threads), threads);
}

FastestPeak fastest_gemm_peak(int threads) {
  std::string why;
  const bool native_bf16 = !native_bf16_flags(&why).empty();
  FastestPeak f{Precision::kF32, gemm_peak_gflops(Precision::kF32, threads), ""};
  const double bf16 = native_bf16 ? gemm_peak_gflops(Precision::kBF16, threads) : 0;
  if (bf16 > f.gflops) f = {Precision::kBF16, bf16, ""};
  f.describe = fmt::format("this CPU's fastest GEMM, {} at {:.0f} GFLOP/s {}", precision_label(f.precision), f.gflops,
                           at_threads(threads));
  if (native_bf16)
    f.describe += fmt::format(" ({} {:.0f})",
                              precision_label(f.precision == Precision::kF32 ? Precision::kBF16 : Precision::kF32),
                              f.precision == Precision::kF32 ? bf16 : gemm_peak_gflops(Precision::kF32, threads));
  else
    f.describe += " (bf16 is emulated here)";
  return f;
}

}  // namespace cpu

}  // namespace ft
