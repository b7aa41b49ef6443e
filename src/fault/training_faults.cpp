#include "fault/training_faults.h"

#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "obs/metric_names.h"
#include "obs/registry.h"
#include "parallel/comm/comm.h"
#include "util/error.h"
#include "util/log.h"

namespace ft {

TrainingFaults::TrainingFaults(const FaultConfig& cfg, const std::string& run_dir, int world_rank, int64_t dp_rank,
                               int64_t local_batch, obs::Registry* registry)
    : cfg_(cfg),
      guard_(cfg),
      injector_(FaultInjector::from_env()),
      heartbeat_(Heartbeat::from_env(world_rank)),
      step_delay_ms_(FaultInjector::delays().step_ms),
      world_rank_(world_rank),
      dp_rank_(dp_rank),
      local_batch_(local_batch),
      registry_(registry) {
  if (cfg_.record_samples) {
    std::string dir = run_dir + "/samples";
    std::filesystem::create_directories(dir);
    std::string path = fmt::format("{}/rank-{:05d}.jsonl", dir, world_rank);
    samples_ = std::fopen(path.c_str(), "a");  // appended across restarts: later lines win
    if (!samples_) throw Error(fmt::format("cannot open {} for writing", path), "check that train.run_dir is writable");
  }
  if (registry_) {
    rollbacks_ = &registry_->counter(obs::metric::kRollbacks);
    recovery_ = &registry_->gauge(obs::metric::kRecovery);
  }
  if (const char* r = std::getenv("FLUXTRAIN_RESTARTS")) restarts_ = std::atoll(r);
  if (const char* a = std::getenv("FLUXTRAIN_ATTEMPT")) attempt_ = std::atoll(a);
  if (const char* t = std::getenv("FLUXTRAIN_FAILURE_DETECTED_AT")) failure_detected_at_ = std::atof(t);
  if (!injector_.empty() && world_rank_ == 0)
    log_warn("fault injection is on (FLUXTRAIN_FAULT_INJECT={}): this run is a test",
             std::getenv("FLUXTRAIN_FAULT_INJECT"));
  beat("starting", 0);
}

TrainingFaults::~TrainingFaults() {
  if (samples_) std::fclose(samples_);
}

InjectedFault TrainingFaults::injection(int64_t first_sample, int64_t batch_size) const {
  return injector_.at(first_sample / batch_size + 1, world_rank_);
}

void TrainingFaults::record_samples(int64_t step, int64_t first_sample) {
  if (!samples_) return;
  int64_t begin = first_sample + dp_rank_ * local_batch_;
  std::fprintf(samples_, "{\"step\": %lld, \"begin\": %lld, \"end\": %lld, \"attempt\": %lld}\n",
               static_cast<long long>(step), static_cast<long long>(begin),
               static_cast<long long>(begin + local_batch_), static_cast<long long>(attempt_));
  std::fflush(samples_);
}

std::array<double, 2> TrainingFaults::rank0_values(Communicator& world, double loss, double grad_norm) {
  // Every rank judges rank 0's values, so the guards' histories can never drift apart.
  std::array<double, 2> in = {loss, grad_norm};
  if (world.size() > 1) world.broadcast(in.data(), sizeof in, 0);
  return in;
}

GuardVerdict TrainingFaults::judge(Communicator& world, int64_t step, double loss, double grad_norm,
                                   double local_loss_sum) {
  const std::array<double, 2> in = rank0_values(world, loss, grad_norm);
  GuardVerdict v = guard_.judge(step, in[0], in[1]);
  last_bad_ranks_.clear();
  if (v.reason.rfind("nan", 0) == 0 || v.reason.rfind("inf", 0) == 0) {
    std::vector<double> bad(static_cast<size_t>(world.size()), 0.0);
    bad[static_cast<size_t>(world.rank())] = std::isfinite(local_loss_sum) ? 0.0 : 1.0;
    if (world.size() > 1) world.all_reduce(bad.data(), static_cast<int64_t>(bad.size()));
    for (size_t r = 0; r < bad.size(); ++r)
      if (bad[r] > 0) last_bad_ranks_.push_back(world.world_rank_of(static_cast<int>(r)));
    std::string who = last_bad_ranks_.empty()
                          ? "no rank's own loss was non-finite: the gradients overflowed in backward"
                          : fmt::format("produced by rank {}", fmt::join(last_bad_ranks_, ", "));
    v.message += " (" + who + ")";
  }
  if (v.skipped() && registry_) registry_->counter(obs::metric::kGuardEvents, {{"reason", v.reason}}).inc();
  if (v.action != GuardAction::kUpdate && v.action != GuardAction::kStop && world_rank_ == 0) {
    log_warn("{}; update skipped{}", v.message,
             v.action == GuardAction::kRollback ? ", rolling back to the last checkpoint" : "");
  }
  return v;
}

void TrainingFaults::rolled_back(int64_t from_step, int64_t to_step, int64_t skip_begin, int64_t skip_end) {
  guard_.rolled_back(to_step);
  if (rollbacks_) rollbacks_->inc();
  rollback_to_ = to_step, skip_begin_ = skip_begin, skip_end_ = skip_end;
  if (world_rank_ == 0)
    log_warn(
        "rolled back from step {} to the checkpoint of step {}; the data window that caused the "
        "spikes, global "
        "samples [{}, {}), is skipped, not replayed",
        from_step, to_step, skip_begin, skip_end);
}

nlohmann::json TrainingFaults::guard_state() const {
  return guard_.to_json();
}

void TrainingFaults::restore_guard(const nlohmann::json& state, const std::string& dir, int64_t step) {
  if (state.is_null()) {
    if (world_rank_ == 0)
      log_warn(
          "resume: the checkpoint of step {} holds no loss-spike guard state (written by an older fluxtrain): the "
          "guard starts with an empty window and judges no spike before fault.spike_min_history = {} steps",
          step, cfg_.spike_min_history);
    return;
  }
  guard_.restore(state, dir + "/manifest.json");
  if (world_rank_ == 0)
    log_info("resume: loss-spike guard restored: {} step(s) of history, {} spike(s) in the window",
             guard_.history_size(), guard_.spikes_in_window());
}

void TrainingFaults::add_to_metrics(const GuardVerdict& v, nlohmann::json& j) {
  if (v.skipped()) {
    j["skipped"] = true;
    j["guard"] = v.reason;
    if (!last_bad_ranks_.empty()) j["guard_ranks"] = last_bad_ranks_;
    if (v.loss_z != 0 || v.grad_norm_z != 0) {
      j["loss_z"] = std::isfinite(v.loss_z) ? v.loss_z : 1e300;
      j["grad_norm_z"] = std::isfinite(v.grad_norm_z) ? v.grad_norm_z : 1e300;
    }
  }
  if (rollback_to_ >= 0) {
    j["rollback"] = {{"to_step", rollback_to_}, {"skip_samples", {skip_begin_, skip_end_}}};
    rollback_to_ = -1;
  }
  if (failure_detected_at_ > 0) {  // the first step after a supervisor restart
    double s = unix_seconds() - failure_detected_at_;
    j["recovery_s"] = s;
    j["restarts"] = restarts_;
    if (recovery_) recovery_->set(s);
    if (world_rank_ == 0)
      log_info("recovered: {:.2f} s from failure detection to the first step after restart {}", s, restarts_);
    failure_detected_at_ = 0;
  }
}

void TrainingFaults::beat(const std::string& phase, int64_t step) {
  if (heartbeat_) heartbeat_->beat(phase, step);
  if (step_delay_ms_ > 0 && phase == "train") std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms_));
  if (phase == "ready") {
    const int start_ms = FaultInjector::delays().start_ms;
    if (start_ms > 0) {
      if (world_rank_ == 0)
        log_info("test: waiting {} ms before the first step (FLUXTRAIN_START_TEST_DELAY_MS)", start_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(start_ms));
    }
  }
}

void TrainingFaults::set_start_step(int64_t s) {
  if (heartbeat_) heartbeat_->set_start_step(s);
}

}  // namespace ft
