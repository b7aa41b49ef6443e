// PipelineExecutor: this rank's pipeline stage runs the plan's action table (PipelineRunner) —
// the training schedule for train_queued(), the forward-only one for evaluate() — and reports what the
// runner measured: per rank its pass's start and end, busy time, activation sets in flight and
// bytes sent; over the world the measured bubble against the schedule's simulated one.
//
//   PipelinePlan plan = PipelinePlan::make(cfg.model, seq_len, cfg.parallel, mb.count);
//   ParamLayout layout = ParamLayout::llama(cfg.model, dp, plan.partition.stage_units(stage), shard);
//   ... the engine and the model over that layout ...
//   PipelineExecutor exec(std::move(plan), mesh, model, engine, mb, seq_len, chunk_tokens);
//   exec.train_queued(batch, grad_scale);  // its loss_slots() are non-zero on the last stage only
#pragma once

#include <cstdint>
#include <memory>

#include "model/llama.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/mesh.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "parallel/pipeline_parallel/runner.h"
#include "tensor/device_scalars.h"
#include "train/pinned_batch.h"
#include "train/step_executor.h"

namespace ft {

class PipelineExecutor final : public StepExecutor {
 public:
  // Runs stage mesh.coord().pp of the plan over mesh.pp(); the model and the engine hold that
  // stage's units (plan.partition.stage_units).
  PipelineExecutor(const ExecContext& ctx, PipelinePlan plan, Mesh& mesh, Llama& model, ParamEngine& engine,
                   const MicroBatching& mb, int64_t seq_len, int64_t loss_chunk_tokens);
  ~PipelineExecutor() override;

  void train_queued(const Batch& batch, float grad_scale) override;
  const DeviceScalars& loss_slots() const override { return loss_sums_; }
  void use_loss_slots(DeviceScalars slots) override;
  void evaluate(const Batch& batch, BatchLoss& total) override;
  // pp_send_bytes, pp_in_flight, pp_busy_s, pp_start, pp_end of the last train_queued().
  RankFigures stats() const override { return stats_; }
  // pp_bubble (measured), pp_bubble_theory, pp_bubble_theory_flops, pp_bytes; per rank pp_idle_s
  // (pp_start and pp_end are dropped: only their differences mean something).
  void summarize(nlohmann::json& per_rank, nlohmann::json& row) const override;
  void log_plan() const override;

  const PipelinePlan& plan() const { return plan_; }

 private:
  // The tokens of the micro-batches whose loss this stage computes: all of them on the last.
  int64_t loss_tokens() const;
  void check(const Batch& batch) const;  // the batch is this rank's share, of seq_len tokens

  PipelinePlan plan_;  // before runner_, which keeps a reference to it
  Mesh& mesh_;
  MicroBatching mb_;
  int64_t seq_len_;
  ParamEngine& engine_;
  std::unique_ptr<PipelineRunner> runner_;
  DeviceScalars loss_sums_;  // one device slot per head forward (last stage), read back once per batch
  PinnedBatch pinned_;       // the batch's tokens on their way to the device
  RankFigures stats_;
};

}  // namespace ft
