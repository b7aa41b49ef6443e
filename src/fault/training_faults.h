// TrainingFaults: everything the step loop does about faults, behind a few calls — the guards
// (StepGuard, agreed over the world and naming the ranks whose loss was not finite), test-only
// fault injection (inject.h), the heartbeat for the supervisor (heartbeat.h), the record of
// consumed samples (fault.record_samples) and the Prometheus series of guard events, rollbacks
// and recovery time.
//
//   TrainingFaults faults(cfg.fault, run_dir, mesh.world_rank(), dp_rank, local_batch,
//   telemetry.registry()); InjectedFault f = faults.injection(first_sample, batch_size);       //
//   test-only corruption GuardVerdict v = faults.judge(mesh.world(), step, loss, grad_norm,
//   local_loss_sum);  // collective faults.add_to_metrics(v, json_line);
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "fault/fault_config.h"
#include "fault/heartbeat.h"
#include "fault/inject.h"
#include "fault/step_guard.h"

namespace ft {

class Communicator;
namespace obs {
class Registry;
class Counter;
class Gauge;
}  // namespace obs

class TrainingFaults {
 public:
  TrainingFaults(const FaultConfig& cfg, const std::string& run_dir, int world_rank, int64_t dp_rank,
                 int64_t local_batch, obs::Registry* registry);
  ~TrainingFaults();

  InjectedFault injection(int64_t first_sample, int64_t batch_size) const;
  // This rank read global samples [first_sample + dp_rank·local, + local) for `step`.
  void record_samples(int64_t step, int64_t first_sample);
  // Collective over `world`: every rank gets the same verdict. local_loss_sum is this rank's own
  // loss contribution before the reduction (to name the rank that produced a non-finite value).
  GuardVerdict judge(Communicator& world, int64_t step, double loss, double grad_norm, double local_loss_sum);
  // judge's collective: rank 0's loss and gradient norm, broadcast to every rank of `world` (the
  // step trace, dryrun/step_trace.h, makes the same call).
  static std::array<double, 2> rank0_values(Communicator& world, double loss, double grad_norm);
  // After a rollback to the checkpoint of `to_step`: counts it, the guard forgets what came after
  // to_step, and the next metrics line records it with the global samples [skip_begin, skip_end)
  // that will not be replayed.
  void rolled_back(int64_t from_step, int64_t to_step, int64_t skip_begin, int64_t skip_end);
  // The guard's state for the next checkpoint (identical on every rank: it judges rank 0's values).
  nlohmann::json guard_state() const;
  // After a resume from the checkpoint of `step` in `dir`: its saved guard state (null: a
  // checkpoint written before the state was saved — the guard starts empty, and says so).
  void restore_guard(const nlohmann::json& state, const std::string& dir, int64_t step);

  // "skipped", "guard", "guard_ranks", z-scores, "rollback" {to_step, skip_samples}; on the first
  // step after a supervisor restart "recovery_s" and "restarts".
  void add_to_metrics(const GuardVerdict& v, nlohmann::json& j);
  // The supervisor's restart count (FLUXTRAIN_RESTARTS), 0 when not restarted.
  int64_t restarts() const { return restarts_; }

  // The heartbeat of `phase` at `step`; after a training step also the test-only step slowdown
  // (FLUXTRAIN_STEP_TEST_DELAY_MS).
  void beat(const std::string& phase, int64_t step);
  void set_start_step(int64_t s);

 private:
  FaultConfig cfg_;
  StepGuard guard_;
  FaultInjector injector_;
  std::unique_ptr<Heartbeat> heartbeat_;
  int step_delay_ms_ = 0;  // FaultInjector::delays().step_ms (tests)
  std::FILE* samples_ = nullptr;
  int world_rank_;
  int64_t dp_rank_, local_batch_;
  obs::Registry* registry_;
  obs::Counter* rollbacks_ = nullptr;
  obs::Gauge* recovery_ = nullptr;
  int64_t restarts_ = 0, attempt_ = 0;  // from the supervisor's environment (0: not supervised)
  double failure_detected_at_ = 0;      // Unix time from FLUXTRAIN_FAILURE_DETECTED_AT; 0 = none
  std::vector<int> last_bad_ranks_;     // world ranks whose own loss was not finite (last judged step)
  int64_t rollback_to_ = -1, skip_begin_ = 0, skip_end_ = 0;  // the rollback to report (-1: none)
};

}  // namespace ft
