// GEMM peak: the peak file (path resolution, records, bad files) and a small measurement.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "kernels/peak.h"
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

TEST_F(PeakFile, RecordsAreKeyedByCpuThreadsAndPrecision) {
  EXPECT_FALSE(read_peak(path_, "cpu A", 2, Precision::kF32));  // no file yet: no record
  PeakRecord r{"cpu A", 2, Precision::kF32, 150.0, 2048, "oneDNN", "brg", "t"};
  record_peak(path_, r);  // creates the directories
  r.precision = Precision::kBF16;
  r.gflops = 1000.0;
  record_peak(path_, r);
  r.threads = 1;
  r.gflops = 500.0;
  record_peak(path_, r);
  r.gflops = 550.0;  // replaces (cpu A, 1, bf16)
  record_peak(path_, r);

  EXPECT_DOUBLE_EQ(read_peak(path_, "cpu A", 2, Precision::kF32)->gflops, 150.0);
  EXPECT_DOUBLE_EQ(read_peak(path_, "cpu A", 2, Precision::kBF16)->gflops, 1000.0);
  EXPECT_DOUBLE_EQ(read_peak(path_, "cpu A", 1, Precision::kBF16)->gflops, 550.0);
  EXPECT_FALSE(read_peak(path_, "cpu A", 1, Precision::kF32));
  EXPECT_FALSE(read_peak(path_, "cpu B", 2, Precision::kF32));
  EXPECT_EQ(read_peak(path_, "cpu A", 2, Precision::kF32)->impl, "brg");
}

TEST_F(PeakFile, RecordedPeakIsReturnedWithoutMeasuring) {
  ScopedEnv env("FLUXTRAIN_PEAK_FILE", path_);
  record_peak(path_, PeakRecord{cpu_model_name(), 1, Precision::kF32, 12345.0, 2048, "x", "y", "z"});
  EXPECT_DOUBLE_EQ(gemm_peak_gflops(Precision::kF32, 1), 12345.0);  // a real measurement is far lower
}

TEST_F(PeakFile, MissingPeakIsMeasuredAndRecorded) {
  ScopedEnv env("FLUXTRAIN_PEAK_FILE", path_);
  PeakOptions small{128, 0.01};
  double g = gemm_peak_gflops(Precision::kBF16, 1, small);
  EXPECT_GT(g, 0.0);
  auto r = read_peak(path_, cpu_model_name(), 1, Precision::kBF16);
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->gflops, g);
  EXPECT_EQ(r->size, 128);
  EXPECT_FALSE(r->impl.empty());
  EXPECT_DOUBLE_EQ(gemm_peak_gflops(Precision::kBF16, 1, small), g);  // now read, not re-measured
}

TEST_F(PeakFile, BadFilesNameThePathAndHowToFixIt) {
  fs::create_directories(fs::path(path_).parent_path());
  write_file_atomic(path_, "{not json");
  std::string e = error_of([&] { read_peak(path_, "c", 1, Precision::kF32); });
  EXPECT_NE(e.find(path_ + ": not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("delete"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "something-else", "version": 1, "entries": []})");
  e = error_of([&] { read_peak(path_, "c", 1, Precision::kF32); });
  EXPECT_NE(e.find("not a GEMM peak file"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 7, "entries": []})");
  e = error_of([&] { read_peak(path_, "c", 1, Precision::kF32); });
  EXPECT_NE(e.find("version 7"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 1,
    "entries": [{"cpu": "c", "threads": 1, "precision": "fp8", "gflops": 1}]})");
  e = error_of([&] { read_peak(path_, "c", 1, Precision::kF32); });
  EXPECT_NE(e.find("unknown precision 'fp8'"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 1,
    "entries": [{"cpu": "c", "threads": 1, "precision": "f32", "gflops": -3}]})");
  e = error_of([&] { read_peak(path_, "c", 1, Precision::kF32); });
  EXPECT_NE(e.find("must be positive"), std::string::npos) << e;

  write_file_atomic(path_, R"({"format": "fluxtrain-gemm-peak", "version": 1, "entries": [{"cpu": "c"}]})");
  e = error_of([&] { read_peak(path_, "c", 1, Precision::kF32); });
  EXPECT_NE(e.find("malformed entry"), std::string::npos) << e;
}

TEST(Peak, MeasurementReportsWhatRan) {
  PeakRecord r = measure_gemm_peak(Precision::kF32, 1, PeakOptions{96, 0.0});
  EXPECT_GT(r.gflops, 0.0);
  EXPECT_EQ(r.threads, 1);
  EXPECT_EQ(r.size, 96);
  EXPECT_NE(r.library.find("oneDNN"), std::string::npos);
  EXPECT_FALSE(r.impl.empty());
}

}  // namespace
}  // namespace ft
