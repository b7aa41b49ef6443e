#include "obs/gpu_sampler.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "obs/gpu_select.h"
#include "obs/metric_names.h"
#include "obs/registry.h"
#include "util/log.h"

namespace ft::obs {
namespace {

struct ThrottleReason {
  unsigned long long bit;
  const char* label;
};
// nvmlClocksThrottleReason* bits of nvml.h.
constexpr ThrottleReason kThrottleReasons[] = {
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock_setting"},
};
constexpr size_t kNumReasons = sizeof(kThrottleReasons) / sizeof(kThrottleReasons[0]);

const char* series_metric(int s) {
  static const char* names[] = {metric::kGpuTemp.name,    metric::kGpuPower.name,   metric::kGpuUtil.name,
                                metric::kGpuMemUsed.name, metric::kGpuSmClock.name, metric::kGpuThrottle.name,
                                metric::kGpuEcc.name};
  return names[s];
}

}  // namespace

struct GpuSampler::Gpu {
  int index = 0;
  NvmlDevice dev = nullptr;
  std::string label;
  bool dropped[kNumSeries] = {};
  bool alerting = false;
  Gauge *temp, *power, *util, *mem_used, *mem_total, *clock, *alert;
  Gauge* throttle[kNumReasons];
  Counter *ecc_corrected, *ecc_uncorrected;
  unsigned long long ecc_last[2] = {0, 0};
  bool ecc_seen = false;
};

GpuSampler::GpuSampler(Registry& registry, GpuSamplerOptions opts) : registry_(registry), opts_(std::move(opts)) {
  std::string why;
  nvml_ = NvmlLib::open(opts_.library, &why);
  if (!nvml_) {
    log_info("GPU metrics off: {}", why);
    return;
  }
  unsigned int count = 0;
  NvmlReturn rc = nvml_->device_get_count(&count);
  if (rc != kNvmlSuccess) {
    log_warn("GPU metrics off: nvmlDeviceGetCount_v2 failed: {}", nvml_->error_string(rc));
    nvml_.reset();
    return;
  }
  std::vector<int> wanted = opts_.devices;
  if (opts_.cuda_device >= 0) {
    std::vector<std::string> uuids;
    for (unsigned i = 0; i < count; ++i) {
      NvmlDevice d = nullptr;
      char uuid[96] = "";
      if (nvml_->device_get_handle_by_index(i, &d) == kNvmlSuccess && nvml_->device_get_uuid)
        nvml_->device_get_uuid(d, uuid, sizeof uuid);
      uuids.emplace_back(uuid);
    }
    const GpuPick pick = pick_nvml_gpu(opts_.cuda_device, std::getenv("CUDA_VISIBLE_DEVICES"), uuids);
    if (pick.nvml_index < 0) {
      log_info("GPU metrics off: this rank's GPU (CUDA device {}) is not found: {}", opts_.cuda_device, pick.why);
      nvml_.reset();
      return;
    }
    wanted = {pick.nvml_index};
  }
  if (wanted.empty())
    for (unsigned i = 0; i < count; ++i) wanted.push_back(static_cast<int>(i));
  registry_.gauge(metric::kGpuTempThreshold).set(opts_.temp_alert_c);
  for (int idx : wanted) {
    if (idx < 0 || static_cast<unsigned>(idx) >= count) {
      log_warn("GPU metrics: GPU {} does not exist (NVML sees {}); not sampled", idx, count);
      continue;
    }
    auto g = std::make_unique<Gpu>();
    g->index = idx;
    rc = nvml_->device_get_handle_by_index(static_cast<unsigned>(idx), &g->dev);
    if (rc != kNvmlSuccess) {
      log_warn("GPU metrics: nvmlDeviceGetHandleByIndex_v2({}) failed: {}; GPU {} not sampled", idx,
               nvml_->error_string(rc), idx);
      continue;
    }
    g->label = std::to_string(idx);
    Labels l{{"gpu", g->label}};
    char name[96] = "", uuid[96] = "";
    if (nvml_->device_get_name) nvml_->device_get_name(g->dev, name, sizeof name);
    if (nvml_->device_get_uuid) nvml_->device_get_uuid(g->dev, uuid, sizeof uuid);
    registry_.gauge(metric::kGpuInfo, {{"gpu", g->label}, {"uuid", uuid}, {"name", name}}).set(1);
    g->temp = &registry_.gauge(metric::kGpuTemp, l);
    g->power = &registry_.gauge(metric::kGpuPower, l);
    g->util = &registry_.gauge(metric::kGpuUtil, l);
    g->mem_used = &registry_.gauge(metric::kGpuMemUsed, l);
    g->mem_total = &registry_.gauge(metric::kGpuMemTotal, l);
    g->clock = &registry_.gauge(metric::kGpuSmClock, l);
    g->alert = &registry_.gauge(metric::kGpuTempAlert, l);
    for (size_t r = 0; r < kNumReasons; ++r)
      g->throttle[r] =
          &registry_.gauge(metric::kGpuThrottle, {{"gpu", g->label}, {"reason", kThrottleReasons[r].label}});
    g->ecc_corrected = &registry_.counter(metric::kGpuEcc, {{"gpu", g->label}, {"type", "corrected"}});
    g->ecc_uncorrected = &registry_.counter(metric::kGpuEcc, {{"gpu", g->label}, {"type", "uncorrected"}});
    gpus_.push_back(std::move(g));
  }
  std::string which;
  for (const auto& g : gpus_) which += (which.empty() ? "" : ",") + g->label;
  log_info("GPU metrics: sampling GPU {} (NVML index{}) every {} s through {}", which.empty() ? "none" : which,
           opts_.cuda_device >= 0 ? fmt::format(", this rank's CUDA device {}", opts_.cuda_device) : "",
           opts_.interval_s, nvml_->path());
}

GpuSampler::~GpuSampler() {
  stop();
}

void GpuSampler::drop(Gpu& g, Series s) {
  g.dropped[s] = true;
  switch (s) {
    case kTemp:
      g.temp->clear();
      g.alert->clear();
      break;
    case kPower:
      g.power->clear();
      break;
    case kUtil:
      g.util->clear();
      break;
    case kMemory:
      g.mem_used->clear();
      g.mem_total->clear();
      break;
    case kClock:
      g.clock->clear();
      break;
    case kThrottle:
      for (auto* t : g.throttle) t->clear();
      break;
    case kEcc:
      break;  // counters keep their last value (a counter never disappears mid-run)
    default:
      break;
  }
}

bool GpuSampler::call_ok(Gpu& g, Series s, const char* fn, NvmlReturn rc) {
  if (rc == kNvmlSuccess) return true;
  std::string what = fn ? nvml_->error_string(rc) : "entry point missing from the library";
  log_warn("GPU metrics: {} on GPU {} failed: {}; dropping {} for GPU {}", fn ? fn : "an NVML call", g.index, what,
           series_metric(s), g.index);
  drop(g, s);
  return false;
}

void GpuSampler::sample_once() {
  if (!nvml_) return;
  std::lock_guard<std::mutex> lock(sample_mu_);
  NvmlLib& n = *nvml_;
  for (auto& gp : gpus_) {
    Gpu& g = *gp;
    const int kMissing = -1;  // rc used when an entry point is absent
    if (!g.dropped[kTemp]) {
      unsigned t = 0;
      NvmlReturn rc = n.device_get_temperature ? n.device_get_temperature(g.dev, kNvmlTemperatureGpu, &t) : kMissing;
      if (call_ok(g, kTemp, n.device_get_temperature ? "nvmlDeviceGetTemperature" : nullptr, rc)) {
        g.temp->set(t);
        bool hot = t > opts_.temp_alert_c;
        if (hot && !g.alerting) {
          log_warn(
              "GPU {} is at {} C, above metrics.gpu_temp_alert_c = {} C: check cooling and clocks "
              "(fluxtrain_gpu_temperature_alert = 1)",
              g.index, t, opts_.temp_alert_c);
        } else if (!hot && g.alerting) {
          log_info("GPU {} is back at {} C (alarm threshold {} C)", g.index, t, opts_.temp_alert_c);
        }
        g.alerting = hot;
        g.alert->set(hot ? 1 : 0);
      }
    }
    if (!g.dropped[kPower]) {
      unsigned mw = 0;
      NvmlReturn rc = n.device_get_power_usage ? n.device_get_power_usage(g.dev, &mw) : kMissing;
      if (call_ok(g, kPower, n.device_get_power_usage ? "nvmlDeviceGetPowerUsage" : nullptr, rc))
        g.power->set(mw / 1000.0);
    }
    if (!g.dropped[kUtil]) {
      NvmlUtilization u{};
      NvmlReturn rc = n.device_get_utilization_rates ? n.device_get_utilization_rates(g.dev, &u) : kMissing;
      if (call_ok(g, kUtil, n.device_get_utilization_rates ? "nvmlDeviceGetUtilizationRates" : nullptr, rc))
        g.util->set(u.gpu / 100.0);
    }
    if (!g.dropped[kMemory]) {
      NvmlMemory m{};
      NvmlReturn rc = n.device_get_memory_info ? n.device_get_memory_info(g.dev, &m) : kMissing;
      if (call_ok(g, kMemory, n.device_get_memory_info ? "nvmlDeviceGetMemoryInfo" : nullptr, rc)) {
        g.mem_used->set(static_cast<double>(m.used));
        g.mem_total->set(static_cast<double>(m.total));
      }
    }
    if (!g.dropped[kClock]) {
      unsigned mhz = 0;
      NvmlReturn rc = n.device_get_clock_info ? n.device_get_clock_info(g.dev, kNvmlClockSm, &mhz) : kMissing;
      if (call_ok(g, kClock, n.device_get_clock_info ? "nvmlDeviceGetClockInfo" : nullptr, rc)) g.clock->set(mhz * 1e6);
    }
    if (!g.dropped[kThrottle]) {
      unsigned long long mask = 0;
      NvmlReturn rc = n.device_get_throttle_reasons ? n.device_get_throttle_reasons(g.dev, &mask) : kMissing;
      if (call_ok(g, kThrottle, n.device_get_throttle_reasons ? NvmlLib::kThrottleFn : nullptr, rc))
        for (size_t r = 0; r < kNumReasons; ++r) g.throttle[r]->set((mask & kThrottleReasons[r].bit) ? 1 : 0);
    }
    if (!g.dropped[kEcc]) {
      unsigned long long v[2] = {0, 0};
      NvmlReturn rc = kMissing;
      if (n.device_get_total_ecc_errors) {
        rc = n.device_get_total_ecc_errors(g.dev, kNvmlMemoryErrorCorrected, kNvmlVolatileEcc, &v[0]);
        if (rc == kNvmlSuccess)
          rc = n.device_get_total_ecc_errors(g.dev, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc, &v[1]);
      }
      if (call_ok(g, kEcc, n.device_get_total_ecc_errors ? "nvmlDeviceGetTotalEccErrors" : nullptr, rc)) {
        // NVML's volatile counts run since the driver loaded; the counters follow them upwards.
        Counter* c[2] = {g.ecc_corrected, g.ecc_uncorrected};
        for (int k = 0; k < 2; ++k) {
          unsigned long long prev = g.ecc_seen ? g.ecc_last[k] : 0;
          if (v[k] > prev) c[k]->inc(static_cast<double>(v[k] - prev));
          g.ecc_last[k] = v[k];
        }
        g.ecc_seen = true;
      }
    }
  }
}

void GpuSampler::start() {
  if (!nvml_ || gpus_.empty() || thread_.joinable() || !(opts_.interval_s > 0)) return;
  stopping_ = false;
  thread_ = std::thread([this] {
    auto period = std::chrono::duration<double>(opts_.interval_s);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      sample_once();
      lock.lock();
      cv_.wait_for(lock, period, [this] { return stopping_; });
    }
  });
}

void GpuSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ft::obs
