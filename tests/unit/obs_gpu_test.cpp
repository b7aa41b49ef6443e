// GPU sampler against the fake NVML library (tests/fake_nvml), whose state file drives values.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "obs/gpu_sampler.h"
#include "obs/gpu_select.h"
#include "obs/gpu_xid.h"
#include "obs/metric_names.h"
#include "obs/registry.h"

namespace ft::obs {
namespace {

class GpuSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = (std::filesystem::temp_directory_path() / ("ft_fake_nvml_" + std::to_string(::getpid()))).string();
    ::setenv("FAKE_NVML_STATE", state_.c_str(), 1);
    write_state("devices 2\n");
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_STATE");
    std::filesystem::remove(state_);
  }
  void write_state(const std::string& s) { std::ofstream(state_) << s; }
  GpuSamplerOptions opts() {
    GpuSamplerOptions o;
    o.library = FT_FAKE_NVML_LIB;
    o.temp_alert_c = 82;
    return o;
  }
  static long calls(const char* fn) {
    void* h = ::dlopen(FT_FAKE_NVML_LIB, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return -1;
    auto f = reinterpret_cast<long (*)(const char*)>(::dlsym(h, "fake_nvml_calls"));
    long n = f ? f(fn) : -1;
    ::dlclose(h);
    return n;
  }
  std::string state_;
};

double value_of(const std::string& text, const std::string& series) {
  // A sample line starts the line (a HELP line may mention the name too).
  auto p = ("\n" + text).find("\n" + series + " ");
  if (p == std::string::npos) return NAN;
  return std::stod(text.substr(p + series.size() + 1));
}

TEST_F(GpuSamplerTest, ReadsEverySeriesInBaseUnits) {
  write_state(
      "devices 2\ntemp.0 61\ntemp.1 70\npower_w.1 312.5\nutil.1 97\nmem_used.1 2147483648\n"
      "mem_total.1 85899345920\nsm_mhz.1 1410\nthrottle.1 0x44\necc_corrected.1 5\necc_uncorrected.1 1\n");
  Registry reg(Labels{{"rank", "0"}});
  GpuSampler s(reg, opts());
  ASSERT_TRUE(s.available());
  ASSERT_EQ(s.num_gpus(), 2u);
  s.sample_once();
  std::string t = reg.expose();
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_temperature_celsius{rank=\"0\",gpu=\"0\"}"), 61);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_temperature_celsius{rank=\"0\",gpu=\"1\"}"), 70);
  EXPECT_DOUBLE_EQ(value_of(t, "fluxtrain_gpu_power_watts{rank=\"0\",gpu=\"1\"}"), 312.5);
  EXPECT_DOUBLE_EQ(value_of(t, "fluxtrain_gpu_utilization_ratio{rank=\"0\",gpu=\"1\"}"), 0.97);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_memory_used_bytes{rank=\"0\",gpu=\"1\"}"), 2147483648.0);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_memory_total_bytes{rank=\"0\",gpu=\"1\"}"), 85899345920.0);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_sm_clock_hertz{rank=\"0\",gpu=\"1\"}"), 1.41e9);
  // 0x44 = sw_power_cap (0x4) | hw_thermal_slowdown (0x40)
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_throttle_active{rank=\"0\",gpu=\"1\",reason=\"sw_power_cap\"}"), 1);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_throttle_active{rank=\"0\",gpu=\"1\",reason=\"hw_thermal_slowdown\"}"), 1);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_throttle_active{rank=\"0\",gpu=\"1\",reason=\"hw_slowdown\"}"), 0);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_ecc_errors_total{rank=\"0\",gpu=\"1\",type=\"corrected\"}"), 5);
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_ecc_errors_total{rank=\"0\",gpu=\"1\",type=\"uncorrected\"}"), 1);
  EXPECT_NE(t.find("fluxtrain_gpu_info{rank=\"0\",gpu=\"1\",uuid=\"GPU-fake-0001\",name=\"Fake GPU 1\"} 1"),
            std::string::npos)
      << t;
  // ECC counters follow NVML's counts upwards.
  write_state("devices 2\necc_corrected.1 9\n");
  s.sample_once();
  EXPECT_EQ(value_of(reg.expose(), "fluxtrain_gpu_ecc_errors_total{rank=\"0\",gpu=\"1\",type=\"corrected\"}"), 9);
}

TEST_F(GpuSamplerTest, TemperatureAlarmWarnsOncePerExcursion) {
  GpuSamplerOptions o = opts();
  o.devices = {1};  // this rank's GPU only
  Registry reg;
  GpuSampler s(reg, o);
  ASSERT_EQ(s.num_gpus(), 1u);
  auto alert = [&] { return value_of(reg.expose(), "fluxtrain_gpu_temperature_alert{gpu=\"1\"}"); };

  write_state("devices 2\ntemp.1 82\n");  // at the threshold: not above it
  s.sample_once();
  EXPECT_EQ(alert(), 0);
  EXPECT_EQ(reg.expose().find("gpu=\"0\""), std::string::npos);  // GPU 0 is not this rank's

  write_state("devices 2\ntemp.1 85\n");
  testing::internal::CaptureStderr();
  s.sample_once();
  s.sample_once();  // still hot: no second warning
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(alert(), 1);
  EXPECT_NE(err.find("warning: GPU 1 is at 85 C, above metrics.gpu_temp_alert_c = 82 C"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos) << err;
  EXPECT_EQ(value_of(reg.expose(), "fluxtrain_gpu_temperature_alert_threshold_celsius"), 82);

  write_state("devices 2\ntemp.1 70\n");
  s.sample_once();
  EXPECT_EQ(alert(), 0);
}

TEST_F(GpuSamplerTest, FailingCallDropsThatSeriesWithOneLogLine) {
  Registry reg;
  GpuSamplerOptions o = opts();
  o.devices = {0};
  GpuSampler s(reg, o);
  s.sample_once();
  ASSERT_FALSE(std::isnan(value_of(reg.expose(), "fluxtrain_gpu_power_watts{gpu=\"0\"}")));
  long before = calls("nvmlDeviceGetPowerUsage");
  write_state("devices 2\nfail.nvmlDeviceGetPowerUsage 1\ntemp.0 55\n");
  testing::internal::CaptureStderr();
  s.sample_once();
  s.sample_once();
  s.sample_once();
  std::string err = testing::internal::GetCapturedStderr();
  std::string t = reg.expose();
  EXPECT_EQ(t.find("fluxtrain_gpu_power_watts"), std::string::npos) << t;      // dropped, not stale
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_temperature_celsius{gpu=\"0\"}"), 55);  // the others carry on
  EXPECT_NE(err.find("nvmlDeviceGetPowerUsage on GPU 0 failed: Unknown Error"), std::string::npos) << err;
  EXPECT_NE(err.find("dropping fluxtrain_gpu_power_watts for GPU 0"), std::string::npos) << err;
  size_t lines = std::count(err.begin(), err.end(), '\n');
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_EQ(calls("nvmlDeviceGetPowerUsage"), before + 1);  // not retried every interval
}

TEST_F(GpuSamplerTest, AbsentLibraryMeansNoGpuSeriesAndOneLine) {
  Registry reg;
  GpuSamplerOptions o;
  o.library = "/nonexistent/libnvidia-ml.so.1";
  testing::internal::CaptureStderr();
  GpuSampler s(reg, o);
  s.sample_once();
  s.start();
  s.stop();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(s.available());
  EXPECT_EQ(reg.expose().find("fluxtrain_gpu"), std::string::npos);
  EXPECT_NE(err.find("GPU metrics off: no NVIDIA driver: /nonexistent/libnvidia-ml.so.1: cannot open"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(GpuSamplerTest, DriverNotLoaded) {
  write_state("init_fail 1\n");
  Registry reg;
  testing::internal::CaptureStderr();
  GpuSampler s(reg, opts());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(s.available());
  EXPECT_NE(err.find("nvmlInit_v2 failed: Driver Not Loaded"), std::string::npos) << err;
}

TEST_F(GpuSamplerTest, LibraryPathFromEnvironment) {
  ::setenv("FLUXTRAIN_NVML_LIB", FT_FAKE_NVML_LIB, 1);
  Registry reg;
  GpuSampler s(reg, GpuSamplerOptions{});
  ::unsetenv("FLUXTRAIN_NVML_LIB");
  EXPECT_TRUE(s.available());
  EXPECT_EQ(s.num_gpus(), 2u);
}

TEST_F(GpuSamplerTest, BackgroundThreadSamples) {
  GpuSamplerOptions o = opts();
  o.interval_s = 0.01;
  Registry reg;
  GpuSampler s(reg, o);
  write_state("devices 2\ntemp.0 77\n");
  s.start();
  // Wait (bounded: 30 s, ended by the first sample) for the first sample; no timing is asserted.
  for (int i = 0; i < 3000 && std::isnan(value_of(reg.expose(), "fluxtrain_gpu_temperature_celsius{gpu=\"0\"}")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.stop();
  EXPECT_EQ(value_of(reg.expose(), "fluxtrain_gpu_temperature_celsius{gpu=\"0\"}"), 77);
}

// CUDA_VISIBLE_DEVICES → NVML index, as CUDA reads the variable.
TEST(PickNvmlGpu, IndicesUuidsAndWhatCudaIgnores) {
  const std::vector<std::string> uuids = {"GPU-aaaa1111-0000", "GPU-bbbb2222-0000", "GPU-bbbb3333-0000",
                                          "GPU-cccc4444-0000"};
  EXPECT_EQ(pick_nvml_gpu(2, nullptr, uuids).nvml_index, 2);  // unset: all GPUs, in order
  EXPECT_EQ(pick_nvml_gpu(4, nullptr, uuids).nvml_index, -1);
  EXPECT_EQ(pick_nvml_gpu(0, "3,1", uuids).nvml_index, 3);
  EXPECT_EQ(pick_nvml_gpu(1, "3, 1", uuids).nvml_index, 1);
  EXPECT_EQ(pick_nvml_gpu(0, "GPU-cccc4444-0000,0", uuids).nvml_index, 3);  // a full UUID
  EXPECT_EQ(pick_nvml_gpu(1, "GPU-cccc,GPU-bbbb3", uuids).nvml_index, 2);   // unique prefixes
  EXPECT_EQ(pick_nvml_gpu(0, "aaaa1111", uuids).nvml_index, 0);             // without "GPU-"
  GpuPick ambiguous = pick_nvml_gpu(0, "GPU-bbbb", uuids);
  EXPECT_EQ(ambiguous.nvml_index, -1);
  EXPECT_NE(ambiguous.why.find("2 GPUs have UUIDs starting GPU-bbbb: not unique"), std::string::npos) << ambiguous.why;
  // CUDA stops at the first entry that names no GPU: "1,7,2" shows GPU 1 only.
  EXPECT_EQ(pick_nvml_gpu(0, "1,7,2", uuids).nvml_index, 1);
  GpuPick past = pick_nvml_gpu(1, "1,7,2", uuids);
  EXPECT_EQ(past.nvml_index, -1);
  EXPECT_EQ(past.why,
            "CUDA_VISIBLE_DEVICES='1,7,2' makes 1 GPU(s) visible, so CUDA device 1 is none of them (it stops at index "
            "7 is past the 4 GPU(s) NVML sees)");
  GpuPick none = pick_nvml_gpu(0, "", uuids);  // "" hides every GPU
  EXPECT_EQ(none.nvml_index, -1);
  EXPECT_NE(none.why.find("makes 0 GPU(s) visible"), std::string::npos) << none.why;
  EXPECT_NE(pick_nvml_gpu(0, "MIG-1234", uuids).why.find("MIG instance"), std::string::npos);
  EXPECT_EQ(pick_nvml_gpu(-1, nullptr, uuids).nvml_index, -1);
}

// The sampler watches the rank's own GPU: CUDA device 1 under CUDA_VISIBLE_DEVICES given as UUIDs
// in another order than NVML's is NVML GPU 0, whose temperature sets the alarm.
TEST_F(GpuSamplerTest, RanksOwnGpuThroughCudaVisibleDevices) {
  write_state(
      "devices 3\ntemp.0 88\ntemp.1 50\ntemp.2 51\nuuid.0 GPU-5e1f0aa0-1\nuuid.1 GPU-77c2bb11-2\n"
      "uuid.2 GPU-91d3cc22-3\n");
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-91d3cc22-3,GPU-5e1f", 1);
  GpuSamplerOptions o = opts();
  o.cuda_device = 1;
  Registry reg;
  GpuSampler s(reg, o);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ASSERT_EQ(s.num_gpus(), 1u);
  s.sample_once();
  std::string t = reg.expose();
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_temperature_celsius{gpu=\"0\"}"), 88) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_temperature_alert{gpu=\"0\"}"), 1) << t;
  EXPECT_EQ(t.find("gpu=\"2\""), std::string::npos) << t;  // CUDA device 0 is another rank's
  EXPECT_NE(t.find("uuid=\"GPU-5e1f0aa0-1\""), std::string::npos) << t;
}

TEST_F(GpuSamplerTest, RanksGpuNotVisibleIsOneInfoLineAndNoSeries) {
  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  GpuSamplerOptions o = opts();
  o.cuda_device = 1;  // two ranks on a node where the rank sees one GPU
  Registry reg;
  testing::internal::CaptureStderr();
  GpuSampler s(reg, o);
  s.sample_once();
  std::string err = testing::internal::GetCapturedStderr();
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_FALSE(s.available());
  EXPECT_EQ(reg.expose().find("fluxtrain_gpu"), std::string::npos);
  EXPECT_NE(err.find("GPU metrics off: this rank's GPU (CUDA device 1) is not found: CUDA_VISIBLE_DEVICES='1' makes 1 "
                     "GPU(s) visible"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(GpuSamplerTest, CudaDeviceNameThroughNvml) {
  write_state("devices 2\nname.1 NVIDIA H100 80GB HBM3\n");
  ::setenv("CUDA_VISIBLE_DEVICES", "1,0", 1);
  std::string why;
  EXPECT_EQ(cuda_device_name(0, &why, FT_FAKE_NVML_LIB), "NVIDIA H100 80GB HBM3") << why;
  EXPECT_EQ(cuda_device_name(1, &why, FT_FAKE_NVML_LIB), "Fake GPU 0") << why;
  EXPECT_EQ(cuda_device_name(2, &why, FT_FAKE_NVML_LIB), "");
  EXPECT_NE(why.find("CUDA device 2 is none of them"), std::string::npos) << why;
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(cuda_device_name(0, &why, "/nonexistent/libnvidia-ml.so.1"), "");
  EXPECT_NE(why.find("no NVIDIA driver"), std::string::npos) << why;
}

// Health with cause: throttle reasons, remapped rows, retired pages and XID events, all through
// the stand-in's state file; a non-fatal XID is counted, a fatal one sets fault().
TEST_F(GpuSamplerTest, HealthWithCause) {
  write_state(
      "devices 2\nthrottle.1 0x24\nremap_corr.1 3\nremap_unc.1 1\nremap_pending.1 1\nretired_sbe.0 4\n"
      "retired_dbe.0 1\nremap_unsupported.0 1\nxid.1 13\n");
  Registry reg;
  GpuSampler s(reg, opts());
  s.sample_once();
  std::string t = reg.expose();
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_throttle_active{gpu=\"1\",reason=\"sw_thermal_slowdown\"}"), 1) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_throttle_active{gpu=\"1\",reason=\"sw_power_cap\"}"), 1) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_throttle_active{gpu=\"1\",reason=\"hw_slowdown\"}"), 0) << t;
  EXPECT_EQ(calls("nvmlDeviceGetCurrentClocksThrottleReasons"), 0);  // the newer name is used when present
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_remapped_rows{gpu=\"1\",cause=\"correctable\"}"), 3) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_remapped_rows{gpu=\"1\",cause=\"uncorrectable\"}"), 1) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_row_remap_pending{gpu=\"1\"}"), 1) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_row_remap_failure{gpu=\"1\"}"), 0) << t;
  // GPU 0 retires pages (before Ampere) and does not remap rows; GPU 1 the other way round.
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_retired_pages{gpu=\"0\",cause=\"single_bit_ecc\"}"), 4) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_retired_pages{gpu=\"0\",cause=\"double_bit_ecc\"}"), 1) << t;
  EXPECT_EQ(t.find("fluxtrain_gpu_remapped_rows{gpu=\"0\""), std::string::npos) << t;
  EXPECT_EQ(t.find("fluxtrain_gpu_retired_pages{gpu=\"1\""), std::string::npos) << t;
  // XID 13 (the application's) is counted, not fatal.
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_xid_events_total{gpu=\"1\"}"), 1) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_last_xid{gpu=\"1\"}"), 13) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_xid_events_total{gpu=\"0\"}"), 0) << t;
  EXPECT_EQ(s.fault(), "");
  s.sample_once();  // each XID is reported once
  EXPECT_EQ(value_of(reg.expose(), "fluxtrain_gpu_xid_events_total{gpu=\"1\"}"), 1);

  // XID 79 (fallen off the bus) is fatal: fault() names the GPU, the XID and what it means.
  write_state("devices 2\nxid.1 13,79\n");
  testing::internal::CaptureStderr();
  s.sample_once();
  std::string err = testing::internal::GetCapturedStderr();
  t = reg.expose();
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_xid_events_total{gpu=\"1\"}"), 2) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_last_xid{gpu=\"1\"}"), 79) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_fault{gpu=\"1\"}"), 1) << t;
  EXPECT_EQ(value_of(t, "fluxtrain_gpu_fault{gpu=\"0\"}"), 0) << t;
  EXPECT_EQ(s.fault(),
            "GPU 1 (GPU-fake-0001) reported XID 79: GPU has fallen off the bus (fatal: the GPU needs a "
            "reset or service)");
  EXPECT_NE(err.find("GPU health: GPU 1 (GPU-fake-0001) reported XID 79"), std::string::npos) << err;
}

TEST_F(GpuSamplerTest, UncorrectableEccWhileRunningIsFatalNotBefore) {
  write_state("devices 1\necc_uncorrected.0 2\n");  // from before the rank started: counted only
  Registry reg;
  GpuSampler s(reg, opts());
  s.sample_once();
  s.sample_once();
  EXPECT_EQ(s.fault(), "");
  EXPECT_EQ(value_of(reg.expose(), "fluxtrain_gpu_ecc_errors_total{gpu=\"0\",type=\"uncorrected\"}"), 2);
  write_state("devices 1\necc_uncorrected.0 3\n");
  testing::internal::CaptureStderr();
  s.sample_once();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.fault(), "GPU 0 (GPU-fake-0000) reported 1 uncorrectable ECC error(s) while this rank ran");
}

TEST_F(GpuSamplerTest, FailedRowRemapIsFatal) {
  write_state("devices 1\nremap_unc.0 2\nremap_failure.0 1\n");
  Registry reg;
  GpuSampler s(reg, opts());
  testing::internal::CaptureStderr();
  s.sample_once();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.fault(), "GPU 0 (GPU-fake-0000) reports a failed row remap (2 row(s) remapped for uncorrectable errors)");
  EXPECT_EQ(value_of(reg.expose(), "fluxtrain_gpu_row_remap_failure{gpu=\"0\"}"), 1);
}

TEST_F(GpuSamplerTest, NoEventApiMeansNoXidSeries) {
  write_state("devices 1\nxid_unsupported 1\nxid.0 79\n");
  Registry reg;
  testing::internal::CaptureStderr();
  GpuSampler s(reg, opts());
  s.sample_once();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(reg.expose().find("fluxtrain_gpu_xid_events_total"), std::string::npos);
  EXPECT_NE(err.find("nvmlDeviceRegisterEvents(XID) on GPU 0 failed"), std::string::npos) << err;
  EXPECT_EQ(s.fault(), "");
}

TEST(XidTable, FatalOnesFollowNvidiasCatalog) {
  for (unsigned x : {48u, 64u, 74u, 79u, 92u, 95u, 119u, 120u, 140u, 154u}) {
    ASSERT_NE(find_xid(x), nullptr) << x;
    EXPECT_TRUE(find_xid(x)->fatal) << x;
  }
  for (unsigned x : {13u, 31u, 43u, 45u, 63u, 94u}) {
    ASSERT_NE(find_xid(x), nullptr) << x;
    EXPECT_FALSE(find_xid(x)->fatal) << x;
  }
  EXPECT_EQ(find_xid(1), nullptr);
}

}  // namespace
}  // namespace ft::obs
