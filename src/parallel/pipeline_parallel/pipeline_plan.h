// PipelinePlan: what a pipeline-parallel run decides before any rank starts — the partition of
// the model into chunks and the training and evaluation schedules, both checked by simulation.
// Config validation builds it too, so bad input fails before mpirun starts ranks.
//
//   PipelinePlan plan = PipelinePlan::make(cfg.model, cfg.train.seq_len, cfg.parallel, mb.count);
//   plan.partition.stage_units(stage);   plan.train.actions[stage];
#pragma once

#include <cstdint>

#include "model/model_config.h"
#include "parallel/parallel_config.h"
#include "parallel/pipeline_parallel/partition.h"
#include "parallel/pipeline_parallel/schedule.h"
#include "parallel/pipeline_parallel/schedule_sim.h"

namespace ft {

struct PipelinePlan {
  StagePartition partition;
  Schedule train, eval;
  ScheduleReport train_report;  // simulated with unit-time actions: the textbook bubble, in-flight counts
  ScheduleReport flops_report;  // simulated with each chunk's forward and backward FLOPs

  // Throws ft::Error naming the keys: more chunks than layers, tied embeddings across stages,
  // micro-batches the schedule cannot use.
  static PipelinePlan make(const ModelConfig& m, int64_t seq_len, const ParallelConfig& p, int64_t micro_batches);
};

}  // namespace ft
