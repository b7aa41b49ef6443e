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
//
// Health with cause: throttle reasons, XID errors (NVML's event API, drained at every sample),
// remapped rows and retired pages. A GPU that reports an uncorrectable ECC error while the rank
// runs, a fatal XID (obs/gpu_xid.h) or a failed row remap sets fault() — the trainer stops the rank
// on it and the supervisor excludes the host (docs/operations.md, "GPU health").
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
  // Why this rank must stop ("" while the GPUs are healthy): the first fatal report, in words.
  std::string fault() const;

 private:
  enum Series { kTemp, kPower, kUtil, kMemory, kClock, kThrottle, kEcc, kRemap, kRetired, kNumSeries };
  struct Gpu;
  bool call_ok(Gpu& g, Series s, const char* fn, NvmlReturn rc);
  void drop(Gpu& g, Series s);
  void register_xid_events();
  void drain_xid_events();
  void sample_memory_health(Gpu& g);
  void set_fault(Gpu& g, const std::string& why);

  Registry& registry_;
  GpuSamplerOptions opts_;
  std::unique_ptr<NvmlLib> nvml_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  NvmlEventSet events_ = nullptr;  // XID events of every sampled GPU; null: not supported
  mutable std::mutex fault_mu_;
  std::string fault_;
  std::mutex sample_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ft::obs
