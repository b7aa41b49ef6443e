#include "obs/gpu_sampler.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "obs/gpu_select.h"
#include "obs/gpu_xid.h"
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
  static const char* names[] = {metric::kGpuTemp.name,    metric::kGpuPower.name,        metric::kGpuUtil.name,
                                metric::kGpuMemUsed.name, metric::kGpuSmClock.name,      metric::kGpuThrottle.name,
                                metric::kGpuEcc.name,     metric::kGpuRemappedRows.name, metric::kGpuRetiredPages.name};
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
  Counter* xid_events = nullptr;
  Gauge *last_xid = nullptr, *fault = nullptr;
  Gauge *remapped_corr, *remapped_unc, *remap_pending, *remap_failure;
  Gauge *retired_sbe, *retired_dbe;
  std::string uuid;
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
    g->uuid = uuid;
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
    g->fault = &registry_.gauge(metric::kGpuFault, l);
    g->fault->set(0);
    g->remapped_corr = &registry_.gauge(metric::kGpuRemappedRows, {{"gpu", g->label}, {"cause", "correctable"}});
    g->remapped_unc = &registry_.gauge(metric::kGpuRemappedRows, {{"gpu", g->label}, {"cause", "uncorrectable"}});
    g->remap_pending = &registry_.gauge(metric::kGpuRemapPending, l);
    g->remap_failure = &registry_.gauge(metric::kGpuRemapFailure, l);
    g->retired_sbe = &registry_.gauge(metric::kGpuRetiredPages, {{"gpu", g->label}, {"cause", "single_bit_ecc"}});
    g->retired_dbe = &registry_.gauge(metric::kGpuRetiredPages, {{"gpu", g->label}, {"cause", "double_bit_ecc"}});
    gpus_.push_back(std::move(g));
  }
  register_xid_events();
  std::string which;
  for (const auto& g : gpus_) which += (which.empty() ? "" : ",") + g->label;
  log_info("GPU metrics: sampling GPU {} (NVML index{}) every {} s through {}", which.empty() ? "none" : which,
           opts_.cuda_device >= 0 ? fmt::format(", this rank's CUDA device {}", opts_.cuda_device) : "",
           opts_.interval_s, nvml_->path());
}

GpuSampler::~GpuSampler() {
  stop();
  if (events_ && nvml_ && nvml_->event_set_free) nvml_->event_set_free(events_);
}

void GpuSampler::register_xid_events() {
  NvmlLib& n = *nvml_;
  if (gpus_.empty()) return;
  if (!n.event_set_create || !n.device_register_events || !n.event_set_wait || !n.event_set_free) {
    log_info(
        "GPU metrics: {} has no event API (nvmlEventSetCreate/nvmlDeviceRegisterEvents/nvmlEventSetWait_v2): "
        "no XID errors",
        n.path());
    return;
  }
  NvmlReturn rc = n.event_set_create(&events_);
  if (rc != kNvmlSuccess) {
    log_warn("GPU metrics: nvmlEventSetCreate failed: {}; no XID errors", n.error_string(rc));
    events_ = nullptr;
    return;
  }
  int registered = 0;
  for (auto& g : gpus_) {
    rc = n.device_register_events(g->dev, kNvmlEventTypeXidCriticalError, events_);
    if (rc == kNvmlSuccess) {
      g->xid_events = &registry_.counter(metric::kGpuXidEvents, {{"gpu", g->label}});
      g->last_xid = &registry_.gauge(metric::kGpuLastXid, {{"gpu", g->label}});
      g->last_xid->set(0);
      ++registered;
    } else {
      log_warn("GPU metrics: nvmlDeviceRegisterEvents(XID) on GPU {} failed: {}; no XID errors for GPU {}", g->index,
               n.error_string(rc), g->index);
    }
  }
  if (registered == 0) {
    n.event_set_free(events_);
    events_ = nullptr;
  }
}

void GpuSampler::set_fault(Gpu& g, const std::string& why) {
  g.fault->set(1);
  std::lock_guard<std::mutex> lock(fault_mu_);
  if (!fault_.empty()) return;
  fault_ = fmt::format("GPU {} ({}) {}", g.index, g.uuid.empty() ? "no UUID" : g.uuid, why);
  log_error("GPU health: {}: this rank stops", fault_);
}

std::string GpuSampler::fault() const {
  std::lock_guard<std::mutex> lock(fault_mu_);
  return fault_;
}

void GpuSampler::drain_xid_events() {
  if (!events_) return;
  NvmlLib& n = *nvml_;
  for (int k = 0; k < 256; ++k) {  // every event waiting now; none is waited for
    NvmlEventData e{};
    NvmlReturn rc = n.event_set_wait(events_, &e, 0);
    if (rc == kNvmlErrorTimeout) return;
    if (rc != kNvmlSuccess) {
      log_warn("GPU metrics: nvmlEventSetWait_v2 failed: {}; no more XID errors", n.error_string(rc));
      n.event_set_free(events_);
      events_ = nullptr;
      return;
    }
    if (!(e.event_type & kNvmlEventTypeXidCriticalError)) continue;
    Gpu* g = nullptr;
    for (auto& gp : gpus_)
      if (gp->dev == e.device && gp->xid_events) g = gp.get();
    if (!g) continue;
    const auto xid = static_cast<unsigned>(e.event_data);
    g->xid_events->inc();
    g->last_xid->set(xid);
    const XidInfo* info = find_xid(xid);
    const std::string what = info ? info->what : "not in fluxtrain's XID table (obs/gpu_xid.cpp)";
    if (info && info->fatal) {
      set_fault(*g, fmt::format("reported XID {}: {} (fatal: the GPU needs a reset or service)", xid, what));
    } else {
      log_warn("GPU {} reported XID {}: {} (fluxtrain_gpu_xid_events_total)", g->index, xid, what);
    }
  }
}

void GpuSampler::sample_memory_health(Gpu& g) {
  NvmlLib& n = *nvml_;
  if (!g.dropped[kRemap]) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    NvmlReturn rc = n.device_get_remapped_rows ? n.device_get_remapped_rows(g.dev, &corr, &unc, &pending, &failure)
                                               : kNvmlErrorNotSupported;
    if (rc == kNvmlErrorNotSupported) {  // no row remapping on this GPU (before Ampere): no series, no warning
      drop(g, kRemap);
    } else if (call_ok(g, kRemap, "nvmlDeviceGetRemappedRows", rc)) {
      g.remapped_corr->set(corr);
      g.remapped_unc->set(unc);
      g.remap_pending->set(pending ? 1 : 0);
      g.remap_failure->set(failure ? 1 : 0);
      if (failure)
        set_fault(g, fmt::format("reports a failed row remap ({} row(s) remapped for uncorrectable errors)", unc));
    }
  }
  if (!g.dropped[kRetired]) {
    unsigned count[2] = {0, 0};
    NvmlReturn rc = kNvmlErrorNotSupported;
    if (n.device_get_retired_pages) {
      for (int c = 0; c < 2; ++c) {  // a count of 0 asks for the number of pages only
        rc = n.device_get_retired_pages(g.dev, c == 0 ? kNvmlRetiredMultipleSingleBit : kNvmlRetiredDoubleBit,
                                        &count[c], nullptr);
        if (rc == kNvmlErrorInsufficientSize) rc = kNvmlSuccess;
        if (rc != kNvmlSuccess) break;
      }
    }
    if (rc == kNvmlErrorNotSupported) {  // Ampere and later remap rows instead
      drop(g, kRetired);
    } else if (call_ok(g, kRetired, "nvmlDeviceGetRetiredPages", rc)) {
      g.retired_sbe->set(count[0]);
      g.retired_dbe->set(count[1]);
    }
  }
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
    case kRemap:
      g.remapped_corr->clear();
      g.remapped_unc->clear();
      g.remap_pending->clear();
      g.remap_failure->clear();
      break;
    case kRetired:
      g.retired_sbe->clear();
      g.retired_dbe->clear();
      break;
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
      if (call_ok(g, kThrottle, n.device_get_throttle_reasons ? n.throttle_fn : nullptr, rc))
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
        // An uncorrectable error while this rank runs is fatal; one from before it started (the
        // counts run since the driver loaded) is counted, and the alert on the counter tells.
        if (g.ecc_seen && v[1] > g.ecc_last[1])
          set_fault(g, fmt::format("reported {} uncorrectable ECC error(s) while this rank ran", v[1] - g.ecc_last[1]));
        for (int k = 0; k < 2; ++k) {
          unsigned long long prev = g.ecc_seen ? g.ecc_last[k] : 0;
          if (v[k] > prev) c[k]->inc(static_cast<double>(v[k] - prev));
          g.ecc_last[k] = v[k];
        }
        g.ecc_seen = true;
      }
    }
    sample_memory_health(g);
  }
  drain_xid_events();
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
