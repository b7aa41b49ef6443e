#include "obs/telemetry.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "obs/gpu_sampler.h"
#include "obs/metric_names.h"
#include "obs/metrics_server.h"
#include "obs/tensorboard.h"
#include "tensor/memory.h"
#include "util/log.h"

namespace ft::obs {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string run_label(const MetricsConfig& cfg, const std::string& run_dir) {
  if (!cfg.run_name.empty()) return cfg.run_name;
  std::filesystem::path p(run_dir);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "runs/x/" → "runs/x"
  std::string name = p.filename().string();
  return name.empty() ? "fluxtrain" : name;
}

}  // namespace

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
      return "all_reduce";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kBroadcast:
      return "broadcast";
    case CommOp::kSendRecv:
      return "send_recv";
    case CommOp::kBarrier:
      return "barrier";
    case CommOp::kCount:
      break;
  }
  return "other";
}

// Handles resolved once at construction: the hot path never looks a series up.
struct Telemetry::Series {
  Gauge *step, *last_step_time, *tokens_per_s, *loss, *val_loss, *val_bpc, *grad_norm, *lr, *mfu, *loss_scale;
  Gauge *ckpt_last, *ckpt_step, *ckpt_interval;
  Counter *steps, *tokens, *data_wait, *data_fetched, *skipped, *restarts, *ckpt_failures, *straggler_s,
      *ckpt_upload_bytes, *ckpt_upload_s, *ckpt_skipped;
  Gauge *goodput, *productive;
  Counter* badput[kNumBadputKinds];
  Histogram *step_duration, *ckpt_duration;
  static constexpr size_t kOps = static_cast<size_t>(CommOp::kCount);
  Counter *comm_bytes[kOps], *comm_seconds[kOps], *comm_ops[kOps];
};

Telemetry::Telemetry(const MetricsConfig& cfg, const RankInfo& rank, const std::string& run_dir, int64_t total_steps)
    : cfg_(cfg), rank_(rank), m_(std::make_unique<Series>()) {
  Labels constant{{"run", run_label(cfg, run_dir)},
                  {"rank", std::to_string(rank.rank)},
                  {"dp", std::to_string(rank.dp)},
                  {"tp", std::to_string(rank.tp)},
                  {"pp", std::to_string(rank.pp)}};
  if (!rank.host.empty()) constant.push_back({"host", rank.host});
  registry_ = std::make_unique<Registry>(std::move(constant));
  Registry& r = *registry_;
  Series& m = *m_;
  r.gauge(metric::kStartTime).set(unix_now());
  r.gauge(metric::kWorldSize).set(rank.world_size);
  if (total_steps > 0) r.gauge(metric::kStepsPlanned).set(static_cast<double>(total_steps));
  m.steps = &r.counter(metric::kSteps);
  m.step = &r.gauge(metric::kStep);
  m.last_step_time = &r.gauge(metric::kLastStepTime);
  m.step_duration = &r.histogram(metric::kStepDuration, exponential_buckets(0.01, 2, 16));  // 10 ms .. 5.5 min
  m.tokens = &r.counter(metric::kTokens);
  m.tokens_per_s = &r.gauge(metric::kTokensPerSecond);
  m.loss = &r.gauge(metric::kLoss);
  m.val_loss = &r.gauge(metric::kValLoss);
  m.val_bpc = &r.gauge(metric::kValBpc);
  m.grad_norm = &r.gauge(metric::kGradNorm);
  m.lr = &r.gauge(metric::kLearningRate);
  m.mfu = &r.gauge(metric::kMfu);
  m.data_wait = &r.counter(metric::kDataWait);
  m.data_fetched = &r.counter(metric::kDataFetched);
  m.loss_scale = &r.gauge(metric::kLossScale);
  m.skipped = &r.counter(metric::kSkippedSteps);
  m.restarts = &r.counter(metric::kRestarts);
  m.goodput = &r.gauge(metric::kGoodput);
  m.productive = &r.gauge(metric::kProductive);
  for (size_t k = 0; k < kNumBadputKinds; ++k)
    m.badput[k] = &r.counter(metric::kBadput, {{"kind", badput_kind_name(static_cast<BadputKind>(k))}});
  m.straggler_s = &r.counter(metric::kStragglerSeconds);
  for (size_t i = 0; i < Series::kOps; ++i) {
    Labels op{{"op", comm_op_name(static_cast<CommOp>(i))}};
    m.comm_bytes[i] = &r.counter(metric::kCommBytes, op);
    m.comm_seconds[i] = &r.counter(metric::kCommSeconds, op);
    m.comm_ops[i] = &r.counter(metric::kCommOps, op);
  }
  m.ckpt_duration = &r.histogram(metric::kCkptDuration, exponential_buckets(0.1, 2, 14));  // 0.1 s .. 14 min
  m.ckpt_last = &r.gauge(metric::kCkptLastSuccess);
  m.ckpt_step = &r.gauge(metric::kCkptStep);
  m.ckpt_interval = &r.gauge(metric::kCkptInterval);
  m.ckpt_failures = &r.counter(metric::kCkptFailures);
  m.ckpt_upload_bytes = &r.counter(metric::kCkptUploadBytes);
  m.ckpt_upload_s = &r.counter(metric::kCkptUploadSeconds);
  m.ckpt_skipped = &r.counter(metric::kCkptSkipped);

  // Memory is read from the process-wide tracker when scraped: nothing on the hot path. The CPU's
  // under fluxtrain_memory_*; each accelerator with a backend built in under fluxtrain_device_memory_*.
  struct DeviceGauges {
    Device device;
    std::vector<Gauge*> live, peak;  // per category, then the total
  };
  std::vector<DeviceGauges> devices;
  for (size_t d = 0; d < kNumDevices; ++d) {
    const auto dev = static_cast<Device>(d);
    if (!device_memory_registered(dev)) continue;
    DeviceGauges g{dev, {}, {}};
    for (size_t c = 0; c <= kNumMemCategories; ++c) {
      std::string name = c < kNumMemCategories ? mem_category_name(static_cast<MemCategory>(c)) : "total";
      if (dev == Device::kCPU) {
        g.live.push_back(&r.gauge(metric::kMemory, {{"category", name}}));
        g.peak.push_back(&r.gauge(metric::kMemoryPeak, {{"category", name}}));
      } else {
        g.live.push_back(&r.gauge(metric::kDeviceMemory, {{"device", device_name(dev)}, {"category", name}}));
        g.peak.push_back(&r.gauge(metric::kDeviceMemoryPeak, {{"device", device_name(dev)}, {"category", name}}));
      }
    }
    devices.push_back(std::move(g));
  }
  Gauge* rss = &r.gauge(metric::kRss);
  Gauge* peak_rss = &r.gauge(metric::kPeakRss);
  r.on_collect([devices = std::move(devices), rss, peak_rss] {
    auto& t = MemoryTracker::global();
    for (const DeviceGauges& g : devices) {
      for (size_t c = 0; c < kNumMemCategories; ++c) {
        g.live[c]->set(static_cast<double>(t.live(static_cast<MemCategory>(c), g.device)));
        g.peak[c]->set(static_cast<double>(t.peak(static_cast<MemCategory>(c), g.device)));
      }
      g.live[kNumMemCategories]->set(static_cast<double>(t.total_live(g.device)));
      g.peak[kNumMemCategories]->set(static_cast<double>(t.total_peak(g.device)));
    }
    rss->set(static_cast<double>(process_rss_bytes()));
    peak_rss->set(static_cast<double>(process_peak_rss_bytes()));
  });

  if (cfg.tensorboard && rank.rank == 0) tb_ = std::make_unique<TensorBoardWriter>(run_dir + "/tb");

  // GPU health: the rank's own GPU; a CPU rank with local rank 0 watches every GPU of the node.
  if (cfg.gpu_interval_s > 0 && (rank.gpu >= 0 || rank.cuda_device >= 0 || rank.local_rank == 0)) {
    GpuSamplerOptions o;
    if (rank.gpu >= 0) o.devices = {rank.gpu};
    o.cuda_device = rank.cuda_device;
    o.interval_s = cfg.gpu_interval_s;
    o.temp_alert_c = cfg.gpu_temp_alert_c;
    gpus_ = std::make_unique<GpuSampler>(r, o);
    gpus_->start();
  }

  if (cfg.enabled) {
    int port = cfg.port == 0 ? 0 : cfg.port + rank.local_rank;
    server_ =
        std::make_unique<MetricsServer>(r, cfg.bind_address, port, cfg.port_fallback ? cfg.port_fallback_tries : 0);
  }
}

Telemetry::~Telemetry() {
  server_.reset();  // stop serving before the series go away
  gpus_.reset();
  tb_.reset();
}

std::string Telemetry::gpu_fault() const {
  return gpus_ ? gpus_->fault() : std::string();
}

int Telemetry::port() const {
  return server_ ? server_->port() : -1;
}
std::string Telemetry::tensorboard_path() const {
  return tb_ ? tb_->path() : "";
}

void Telemetry::on_step(const StepStats& s) {
  Series& m = *m_;
  m.steps->inc();
  m.step->set(static_cast<double>(s.step));
  m.last_step_time->set(unix_now());
  if (std::isfinite(s.step_s)) m.step_duration->observe(s.step_s);
  m.tokens->inc(static_cast<double>(s.tokens));
  if (!std::isnan(s.tokens_per_s)) m.tokens_per_s->set(s.tokens_per_s);
  m.loss->set(s.loss);  // NaN included: the alert rules look for it
  if (!std::isnan(s.grad_norm)) m.grad_norm->set(s.grad_norm);
  if (!std::isnan(s.lr)) m.lr->set(s.lr);
  if (!std::isnan(s.mfu)) m.mfu->set(s.mfu);
  if (s.data_wait_s > 0) m.data_wait->inc(s.data_wait_s);
  if (!std::isnan(s.loss_scale)) m.loss_scale->set(s.loss_scale);
  if (s.skipped) m.skipped->inc();
  if (std::isfinite(s.step_s) && s.step_s > 0) {
    ema_step_s_ = ema_step_s_ < 0 ? s.step_s : 0.95 * ema_step_s_ + 0.05 * s.step_s;
    if (ckpt_interval_steps_ > 0) m.ckpt_interval->set(static_cast<double>(ckpt_interval_steps_) * ema_step_s_);
  }
  if (tb_) {
    tb_->add_scalar("train/loss", s.step, static_cast<float>(s.loss));
    if (!std::isnan(s.lr)) tb_->add_scalar("train/learning_rate", s.step, static_cast<float>(s.lr));
    if (!std::isnan(s.grad_norm)) tb_->add_scalar("train/grad_norm", s.step, static_cast<float>(s.grad_norm));
    if (!std::isnan(s.tokens_per_s)) tb_->add_scalar("train/tokens_per_s", s.step, static_cast<float>(s.tokens_per_s));
    if (!std::isnan(s.mfu)) tb_->add_scalar("train/mfu", s.step, static_cast<float>(s.mfu));
    if (std::isfinite(s.step_s)) tb_->add_scalar("train/step_s", s.step, static_cast<float>(s.step_s));
  }
}

void Telemetry::on_badput(const BadputTotals& t) {
  Series& m = *m_;
  m.goodput->set(t.goodput());
  m.productive->set(t.productive_s);
  for (size_t k = 0; k < kNumBadputKinds; ++k) {  // counters: each bucket only grows
    if (t.seconds[k] > badput_reported_[k]) m.badput[k]->inc(t.seconds[k] - badput_reported_[k]);
    badput_reported_[k] = std::max(badput_reported_[k], t.seconds[k]);
  }
}

void Telemetry::set_rank_hosts(std::vector<std::string> hosts) {
  StragglerOptions o{.factor = cfg_.straggler_factor,
                     .window = static_cast<int>(cfg_.straggler_window),
                     .min_slow = static_cast<int>(cfg_.straggler_min_steps)};
  stragglers_ = std::make_unique<StragglerDetector>(std::move(hosts), o);
}

StragglerReport Telemetry::on_rank_compute(int64_t step, const std::vector<double>& compute_s) {
  if (!stragglers_) return {};
  StragglerReport rep = stragglers_->observe(step, compute_s);
  StragglerOptions o{.factor = cfg_.straggler_factor,
                     .window = static_cast<int>(cfg_.straggler_window),
                     .min_slow = static_cast<int>(cfg_.straggler_min_steps)};
  auto labels = [](const Straggler& s) {
    return Labels{{"straggler_rank", std::to_string(s.rank)}, {"straggler_host", s.host}};
  };
  for (const Straggler& s : rep.started) log_warn("step {}: straggler: {}", step, describe(s, rep.median_s, o));
  for (const Straggler& s : rep.recovered) {
    log_info("step {}: rank {}{} is no longer a straggler (named at step {}; it cost the job {:.3f} s)", step, s.rank,
             s.host.empty() ? "" : " on " + s.host, s.since_step, s.cost_total_s);
    registry_->gauge(metric::kStragglerSlowdown, labels(s)).clear();
  }
  for (const Straggler& s : rep.current) registry_->gauge(metric::kStragglerSlowdown, labels(s)).set(s.slowdown);
  if (rep.cost_s > 0) m_->straggler_s->inc(rep.cost_s);
  return rep;
}

void Telemetry::on_sniff(const SniffReport& r) {
  auto who = [](const SniffRank& w) {
    return Labels{{"sniff_rank", std::to_string(w.rank)},
                  {"sniff_host", w.host},
                  {"sniff_dp", std::to_string(w.dp)},
                  {"sniff_tp", std::to_string(w.tp)},
                  {"sniff_pp", std::to_string(w.pp)}};
  };
  auto on_axis = [&](const SniffRank& w, size_t a) {
    Labels l = who(w);
    l.insert(l.begin(), {"axis", sniff_axis_name(static_cast<SniffAxis>(a))});
    return l;
  };
  for (size_t i = 0; i < r.samples.size() && i < r.ranks.size(); ++i) {
    const SniffSample& s = r.samples[i];
    if (s.gemm_s >= 0) registry_->gauge(metric::kSniffGemm, who(r.ranks[i])).set(s.gemm_s);
    for (size_t a = 0; a < kNumSniffAxes; ++a) {
      if (s.link_s[a] >= 0) registry_->gauge(metric::kSniffLink, on_axis(r.ranks[i], a)).set(s.link_s[a]);
      if (s.all_reduce_s[a] >= 0)
        registry_->gauge(metric::kSniffAllReduce, on_axis(r.ranks[i], a)).set(s.all_reduce_s[a]);
    }
  }
  std::vector<Labels> now;
  for (const SniffSlow& s : r.slow) {
    Labels l = who(s.who);
    l.insert(l.begin(), {"check", s.check});
    registry_->gauge(metric::kSniffSlow, l).set(s.ratio);
    now.push_back(std::move(l));
  }
  for (const Labels& l : sniff_slow_)  // named before, not now: no longer exposed
    if (std::find(now.begin(), now.end(), l) == now.end()) registry_->gauge(metric::kSniffSlow, l).clear();
  sniff_slow_ = std::move(now);
}

void Telemetry::on_eval(int64_t step, double val_loss, double val_bpc) {
  m_->val_loss->set(val_loss);
  if (!std::isnan(val_bpc)) m_->val_bpc->set(val_bpc);
  if (tb_) {
    tb_->add_scalar("val/loss", step, static_cast<float>(val_loss));
    if (!std::isnan(val_bpc)) tb_->add_scalar("val/bits_per_char", step, static_cast<float>(val_bpc));
    tb_->flush();
  }
}

void Telemetry::on_eval_source(int64_t step, const std::string& name, double val_loss, double val_bpc) {
  registry_->gauge(metric::kValSourceLoss, {{"source", name}}).set(val_loss);
  if (!std::isnan(val_bpc)) registry_->gauge(metric::kValSourceBpc, {{"source", name}}).set(val_bpc);
  if (tb_) {
    tb_->add_scalar("val_" + name + "/loss", step, static_cast<float>(val_loss));
    if (!std::isnan(val_bpc)) tb_->add_scalar("val_" + name + "/bits_per_char", step, static_cast<float>(val_bpc));
  }
}

void Telemetry::data_fetched(uint64_t bytes) {
  m_->data_fetched->inc(static_cast<double>(bytes));
}

void Telemetry::on_checkpoint(int64_t step, double seconds, bool ok) {
  if (!ok) {
    m_->ckpt_failures->inc();
    return;
  }
  m_->ckpt_duration->observe(seconds);
  m_->ckpt_last->set(unix_now());
  m_->ckpt_step->set(static_cast<double>(step));
  if (tb_) tb_->flush();
}

void Telemetry::on_checkpoint_upload(uint64_t bytes, double seconds) {
  m_->ckpt_upload_bytes->inc(static_cast<double>(bytes));
  m_->ckpt_upload_s->inc(seconds);
}

void Telemetry::on_checkpoint_skipped() {
  m_->ckpt_skipped->inc();
}

void Telemetry::set_checkpoint_interval_steps(int64_t steps) {
  ckpt_interval_steps_ = steps;
  if (steps <= 0)
    m_->ckpt_interval->clear();
  else if (ema_step_s_ > 0)
    m_->ckpt_interval->set(static_cast<double>(steps) * ema_step_s_);
}

void Telemetry::comm(CommOp op, uint64_t bytes, double seconds, int64_t calls) {
  size_t i = static_cast<size_t>(op);
  if (i >= Series::kOps) return;
  m_->comm_bytes[i]->inc(static_cast<double>(bytes));
  m_->comm_seconds[i]->inc(seconds);
  m_->comm_ops[i]->inc(static_cast<double>(calls));
}

void Telemetry::on_context_parallel(uint64_t bytes, double ring_hidden_ratio) {
  registry_->counter(metric::kCpBytes).inc(static_cast<double>(bytes));
  if (std::isfinite(ring_hidden_ratio)) registry_->gauge(metric::kCpRingHidden).set(ring_hidden_ratio);
}

void Telemetry::set_restarts(int64_t n) {
  double have = m_->restarts->value();
  if (n > have) m_->restarts->inc(static_cast<double>(n) - have);
}

}  // namespace ft::obs
