// GpuSampler: reads GPU health from NVML every interval into the registry, and raises an
// in-process alarm above a temperature threshold (one warning per excursion, and the gauge
// fluxtrain_gpu_temperature_alert{gpu} = 1 while it lasts).
//
//   obs::GpuSampler gpus(registry, {.interval_s = 10, .temp_alert_c = 82});   // all GPUs
//   obs::GpuSampler mine(registry, {.cuda_device = 3});   // the rank's own GPU (gpu_select.h)
//   gpus.start();            // background thread; the destructor stops it
//   gpus.sample_once();      // or sample synchronously (tests)
//
// NVML absent → available() is false, one log line, no GPU series. A call that fails at run
// time drops that series for that GPU with one log line; the other series carry on.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "obs/nvml_lib.h"

namespace ft::obs {

class Registry;
class Gauge;
class Counter;

struct GpuSamplerOptions {
  std::string library;       // "" = $FLUXTRAIN_NVML_LIB or libnvidia-ml.so.1
  std::vector<int> devices;  // NVML indices to sample; empty = every GPU
  // >= 0: sample only the GPU that is CUDA device `cuda_device` of this process, found through
  // CUDA_VISIBLE_DEVICES (indices or UUIDs; obs/gpu_select.h). Overrides `devices`.
  int cuda_device = -1;
  double interval_s = 10;
  double temp_alert_c = 82;
};

class GpuSampler {
 public:
  GpuSampler(Registry& registry, GpuSamplerOptions opts);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  bool available() const { return nvml_ != nullptr; }
  size_t num_gpus() const { return gpus_.size(); }
  void sample_once();
  void start();
  void stop();

 private:
  enum Series { kTemp, kPower, kUtil, kMemory, kClock, kThrottle, kEcc, kNumSeries };
  struct Gpu;
  bool call_ok(Gpu& g, Series s, const char* fn, NvmlReturn rc);
  void drop(Gpu& g, Series s);

  Registry& registry_;
  GpuSamplerOptions opts_;
  std::unique_ptr<NvmlLib> nvml_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  std::mutex sample_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ft::obs
