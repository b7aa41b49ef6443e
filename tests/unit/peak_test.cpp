// GEMM peak: the peak file (path resolution, records, bad files) and a small measurement.
#include "backends/cpu/peak.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>

#include "backends/cpu/gemm.h"
#include "backends/cpu/native_precision.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft {
namespace {

namespace fs = std::filesystem;

// Sets (or unsets, for nullopt) an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Sets the OpenMP thread count for a scope.
class ScopedThreadCount {
 public:
  explicit ScopedThreadCount(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedThreadCount() { omp_set_num_threads(prev_); }

 private:
  int prev_;
};

class PeakFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ft_peak_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    path_ = (dir_ / "sub" / "peak.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return "";
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(PeakFile, PathFollowsEnvironmentOrder) {
  {
    ScopedEnv a("FLUXTRAIN_PEAK_FILE", "/x/peak.json"), b("XDG_CACHE_HOME", "/cache");
    EXPECT_EQ(peak_file_path(), "/x/peak.json");
  }
  {
    ScopedEnv a("FLUXTRAIN_PEAK_FILE", std::nullopt), b("XDG_CACHE_HOME", "/cache"), c("HOME", "/home/u");
    EXPECT_EQ(peak_file_path(), "/cache/fluxtrain/peak.json");
  }
  {
    ScopedEnv a("FLUXTRAIN_PEAK_FILE", std::nullopt), b("XDG_CACHE_HOME", std::nullopt), c("HOME", "/home/u");
    EXPECT_EQ(peak_file_path(), "/home/u/.cache/fluxtrain/peak.json");
  }
}

PeakRecord record(const std::string& cpu, const std::string& isa, int threads, Precision p, double gflops) {
  PeakRecord r;
  r.cpu = cpu;
  r.isa = isa;
  r.threads = threads;
  r.precision = p;
  r.gflops = gflops;
  r.size = 2048;
  r.library = "oneDNN";
  r.impl = "brg";
  r.measured_at = "t";
  return r;
}

TEST_F(PeakFile, RecordsAreKeyedByCpuIsaThreadsAndPrecision) {
  EXPECT_FALSE(read_peak(path_, "cpu A", "avx2", 2, Precision::kF32));  // no file yet: no record
  PeakRecord r = record("cpu A", "avx2", 2, Precision::kF32, 150.0);
  record_peak(path_, r);  // creates the directories
  r.precision = Precision::kBF16;
  r.gflops = 1000.0;
  r.emulated = true;
  record_peak(path_, r);
  r.threads = 1;
  r.gflops = 500.0;
  record_peak(path_, r);
  r.gflops = 550.0;  // replaces (cpu A, avx2, 1, bf16)
  record_peak(path_, r);
  r.isa = "avx512_core_bf16";
  r.gflops = 900.0;
  r.emulated = false;
  record_peak(path_, r);

  EXPECT_DOUBLE_EQ(read_peak(path_, "cpu A", "avx2", 2, Precision::kF32)->gflops, 150.0);
  EXPECT_DOUBLE_EQ(read_peak(path_, "cpu A", "avx2", 2, Precision::kBF16)->gflops, 1000.0);
  EXPECT_DOUBLE_EQ(read_peak(path_, "cpu A", "avx2", 1, Precision::kBF16)->gflops, 550.0);
  EXPECT_TRUE(read_peak(path_, "cpu A", "avx2", 1, Precision::kBF16)->emulated);
  EXPECT_DOUBLE_EQ(read_peak(path_, "cpu A", "avx512_core_bf16", 1, Precision::kBF16)->gflops, 900.0);
  EXPECT_FALSE(read_peak(path_, "cpu A", "avx512_core_bf16", 1, Precision::kBF16)->emulated);
  EXPECT_FALSE(read_peak(path_, "cpu A", "avx2", 1, Precision::kF32));
  EXPECT_FALSE(read_peak(path_, "cpu A", "avx512_core", 2, Precision::kF32));
  EXPECT_FALSE(read_peak(path_, "cpu B", "avx2", 2, Precision::kF32));
  EXPECT_EQ(read_peak(path_, "cpu A", "avx2", 2, Precision::kF32)->impl, "brg");
}

// A version-1 file (no "isa") is read: its entries stand for the CPU's unlimited ISA, and they
// survive a rewrite as version 2.
TEST_F(PeakFile, VersionOneFilesAreReadAndKept) {
  fs::create_directories(fs::path(path_).parent_path());
  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 1, "entries": [
    {"cpu": "c", "threads": 1, "precision": "f32", "gflops": 42, "size": 2048, "library": "oneDNN 2.6.3",
     "impl": "gemm:jit", "measured_at": "t"}]})");
  {
    ScopedEnv a("ONEDNN_MAX_CPU_ISA", std::nullopt), b("DNNL_MAX_CPU_ISA", std::nullopt);
    EXPECT_DOUBLE_EQ(read_peak(path_, "c", "avx512_core_bf16", 1, Precision::kF32)->gflops, 42.0);
    record_peak(path_, record("c", "avx2", 1, Precision::kF32, 7.0));
    EXPECT_NE(read_file(path_).find("\"version\": 2"), std::string::npos);
    EXPECT_DOUBLE_EQ(read_peak(path_, "c", "avx512_core_bf16", 1, Precision::kF32)->gflops, 42.0);
    EXPECT_DOUBLE_EQ(read_peak(path_, "c", "avx2", 1, Precision::kF32)->gflops, 7.0);
  }
  ScopedEnv a("ONEDNN_MAX_CPU_ISA", "AVX512_CORE");  // a limited ISA is not what version 1 measured
  EXPECT_FALSE(read_peak(path_, "c", "avx512_core", 1, Precision::kF32));
}

// A file a newer build wrote (two builds share the user's cache) is not this build's to read or
// replace: it reads as no record, and recording leaves it byte for byte as it was.
TEST_F(PeakFile, NewerVersionFilesAreLeftToTheBuildThatWroteThem) {
  fs::create_directories(fs::path(path_).parent_path());
  const std::string newer = R"({"format": "fluxtrain-gemm-peak", "version": 99, "entries": [
    {"cpu": "c", "threads": 1, "precision": "f32", "gflops": 42, "isa": "avx2", "future": true}]})";
  write_file_atomic(path_, newer);
  EXPECT_FALSE(read_peak(path_, "c", "avx2", 1, Precision::kF32));
  record_peak(path_, record("c", "avx2", 1, Precision::kF32, 7.0));
  EXPECT_EQ(read_file(path_), newer);
}

TEST_F(PeakFile, RecordedPeakIsReturnedWithoutMeasuring) {
  ScopedEnv env("FLUXTRAIN_PEAK_FILE", path_);
  record_peak(path_, record(cpu_model_name(), cpu::onednn_isa_name(), 1, Precision::kF32, 12345.0));
  EXPECT_DOUBLE_EQ(gemm_peak_gflops(Precision::kF32, 1), 12345.0);  // a real measurement is far lower
}

// "auto" is decided by measurement: bf16 only where it is native and at least kBf16Margin faster
// (AVX512-BF16 without AMX measured 81 GFLOP/s in bf16 vs 151 in fp32 on one thread).
TEST(AutoPrecision, Bf16OnlyWhereNativeAndMeasurablyFaster) {
  using cpu::choose_auto_precision;
  const PrecisionChoice slow = choose_auto_precision("avx512_bf16", 81, 151, 1);
  EXPECT_EQ(slow.precision, Precision::kF32);
  EXPECT_NE(slow.reason.find("bf16 GEMM 81 GFLOP/s vs fp32 151 GFLOP/s at 1 thread"), std::string::npos) << slow.reason;
  EXPECT_NE(slow.reason.find("not measurably faster"), std::string::npos) << slow.reason;
  EXPECT_EQ(choose_auto_precision("avx512_bf16", 160, 151, 2).precision, Precision::kF32);  // within the margin
  const PrecisionChoice fast = choose_auto_precision("amx_bf16", 1800, 300, 2);
  EXPECT_EQ(fast.precision, Precision::kBF16);
  EXPECT_NE(fast.reason.find("amx_bf16 bf16 GEMM 1800 GFLOP/s vs fp32 300 GFLOP/s at 2 threads"), std::string::npos)
      << fast.reason;
  EXPECT_EQ(choose_auto_precision("", 1e6, 1, 1).precision, Precision::kF32);  // emulated: never bf16
}

// On this machine: "auto" follows the recorded peaks (read from the peak file, not re-measured),
// and MFU's denominator is the fastest precision's peak, whatever runs.
TEST_F(PeakFile, AutoAndMfuFollowTheRecordedPeaks) {
  ScopedEnv env("FLUXTRAIN_PEAK_FILE", path_);
  const int threads = 5;  // a thread count no other test resolves
  const std::string cpu = cpu_model_name(), isa = cpu::onednn_isa_name();
  for (const auto& [bf16, f32] : {std::pair{900.0, 300.0}, std::pair{100.0, 300.0}}) {
    record_peak(path_, record(cpu, isa, threads, Precision::kF32, f32));
    record_peak(path_, record(cpu, isa, threads, Precision::kBF16, bf16));
    const PrecisionChoice c = cpu::auto_precision(threads);
    const cpu::FastestPeak f = cpu::fastest_gemm_peak(threads);
    if (cpu::onednn_has_native_bf16()) {
      EXPECT_EQ(c.precision, bf16 > f32 ? Precision::kBF16 : Precision::kF32) << c.reason;
      EXPECT_DOUBLE_EQ(f.gflops, std::max(bf16, f32));
      EXPECT_EQ(f.precision, bf16 > f32 ? Precision::kBF16 : Precision::kF32) << f.describe;
    } else {  // emulated bf16 is never chosen, never the denominator
      EXPECT_EQ(c.precision, Precision::kF32) << c.reason;
      EXPECT_DOUBLE_EQ(f.gflops, f32);
      EXPECT_NE(f.describe.find("bf16 is emulated here"), std::string::npos) << f.describe;
    }
    EXPECT_NE(f.describe.find("at 5 threads"), std::string::npos) << f.describe;
  }
}

// Every precision has a peak on every CPU: bf16 native or emulated, fp16 emulated.
TEST_F(PeakFile, MissingPeakIsMeasuredAndRecorded) {
  ScopedEnv env("FLUXTRAIN_PEAK_FILE", path_);
  PeakOptions small{128, 0.01};
  for (Precision p : {Precision::kBF16, Precision::kF16, Precision::kF32}) {
    double g = gemm_peak_gflops(p, 1, small);
    EXPECT_GT(g, 0.0);
    auto r = read_peak(path_, cpu_model_name(), cpu::onednn_isa_name(), 1, p);
    ASSERT_TRUE(r) << precision_name(p);
    EXPECT_DOUBLE_EQ(r->gflops, g);
    EXPECT_EQ(r->size, 128);
    EXPECT_FALSE(r->impl.empty());
    EXPECT_EQ(r->emulated, p == Precision::kF16 || (p == Precision::kBF16 && !cpu::onednn_has_native_bf16()));
    EXPECT_DOUBLE_EQ(gemm_peak_gflops(p, 1, small), g);  // now read, not re-measured
  }
}

// The fp32 library bench-peak records is the one ops::matmul uses; FLUXTRAIN_GEMM overrides it
// and a bad value is an error naming it.
TEST_F(PeakFile, RecordedLibraryIsUsedAndTheEnvironmentOverridesIt) {
  ScopedEnv env("FLUXTRAIN_PEAK_FILE", path_), gemm("FLUXTRAIN_GEMM", std::nullopt);
  const int threads = 3;  // a thread count no other test resolves
  cpu::reset_f32_gemm_library();
  EXPECT_EQ(recorded_gemm_library(cpu::onednn_isa_name(), threads), std::nullopt);
  {
    ScopedThreadCount t(threads);
    EXPECT_EQ(cpu::f32_gemm_library(), cpu::GemmLibrary::kOneDnn);  // nothing recorded: the default
  }
  std::optional<cpu::GemmLibrary> other;
  for (auto lib : {cpu::GemmLibrary::kBlis, cpu::GemmLibrary::kOpenBlas})
    if (cpu::gemm_library_status(lib).available) other = lib;
  PeakRecord r = record(cpu_model_name(), cpu::onednn_isa_name(), threads, Precision::kF32, 100.0);
  r.gemm = other ? cpu::gemm_library_name(*other) : "onednn";
  r.shape_gflops = {{"onednn", 90.0}, {r.gemm, 100.0}};
  record_peak(path_, r);
  EXPECT_EQ(recorded_gemm_library(cpu::onednn_isa_name(), threads), r.gemm);
  EXPECT_EQ(read_peak(path_, cpu_model_name(), cpu::onednn_isa_name(), threads, Precision::kF32)->shape_gflops,
            r.shape_gflops);
  cpu::reset_f32_gemm_library();
  {
    ScopedThreadCount t(threads);
    EXPECT_EQ(cpu::gemm_library_name(cpu::f32_gemm_library()), r.gemm);
  }
  {
    ScopedEnv g("FLUXTRAIN_GEMM", "onednn");
    cpu::reset_f32_gemm_library();
    ScopedThreadCount t(threads);
    EXPECT_EQ(cpu::f32_gemm_library(), cpu::GemmLibrary::kOneDnn);
  }
  {
    ScopedEnv g("FLUXTRAIN_GEMM", "mkl");
    cpu::reset_f32_gemm_library();
    ScopedThreadCount t(threads);
    std::string e = error_of([] { cpu::f32_gemm_library(); });
    EXPECT_NE(e.find("FLUXTRAIN_GEMM=mkl"), std::string::npos) << e;
    EXPECT_NE(e.find("onednn, openblas or blis"), std::string::npos) << e;
  }
  cpu::reset_f32_gemm_library();
}

TEST_F(PeakFile, BadFilesNameThePathAndHowToFixIt) {
  fs::create_directories(fs::path(path_).parent_path());
  write_file_atomic(path_, "{not json");
  std::string e = error_of([&] { read_peak(path_, "c", "avx2", 1, Precision::kF32); });
  EXPECT_NE(e.find(path_ + ": not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("delete"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "something-else", "version": 1, "entries": []})");
  e = error_of([&] { read_peak(path_, "c", "avx2", 1, Precision::kF32); });
  EXPECT_NE(e.find("not a GEMM peak file"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "entries": []})");
  e = error_of([&] { read_peak(path_, "c", "avx2", 1, Precision::kF32); });
  EXPECT_NE(e.find("version 0"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 1,
    "entries": [{"cpu": "c", "threads": 1, "precision": "fp8", "gflops": 1}]})");
  e = error_of([&] { read_peak(path_, "c", "avx2", 1, Precision::kF32); });
  EXPECT_NE(e.find("unknown precision 'fp8'"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 1,
    "entries": [{"cpu": "c", "threads": 1, "precision": "f32", "gflops": -3}]})");
  e = error_of([&] { read_peak(path_, "c", "avx2", 1, Precision::kF32); });
  EXPECT_NE(e.find("must be positive"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 1, "entries": [{"cpu": "c"}]})");
  e = error_of([&] { read_peak(path_, "c", "avx2", 1, Precision::kF32); });
  EXPECT_NE(e.find("malformed entry"), std::string::npos) << e;
}

TEST(Peak, MeasurementReportsWhatRan) {
  PeakRecord r = measure_gemm_peak(Precision::kF32, 1, PeakOptions{96, 0.0});
  EXPECT_GT(r.gflops, 0.0);
  EXPECT_EQ(r.threads, 1);
  EXPECT_EQ(r.size, 96);
  EXPECT_FALSE(r.library.empty());
  EXPECT_FALSE(r.impl.empty());
  EXPECT_EQ(r.isa, cpu::onednn_isa_name());
}

}  // namespace
}  // namespace ft
