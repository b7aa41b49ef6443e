#include "parallel/pipeline_parallel/pipeline_plan.h"

#include "util/error.h"

namespace ft {

PipelinePlan PipelinePlan::make(const ModelConfig& m, int64_t seq_len, const ParallelConfig& p, int64_t micro_batches) {
  const int stages = static_cast<int>(p.pp), v = static_cast<int>(p.virtual_stages);
  if (stages > 1 && m.tie_embeddings) {
    throw Error(fmt::format("model.tie_embeddings = true with parallel.pp = {}: the embedding (first stage) and the LM "
                            "head (last stage) would be one matrix held by two stages, and fluxtrain does not sum "
                            "the two gradient copies across stages",
                            stages),
                "set model.tie_embeddings = false (the llama-20m and llama-125m presets tie them), or parallel.pp = 1");
  }
  PipelinePlan plan;
  plan.partition = StagePartition::balanced(m, seq_len, stages, v);
  if (p.pp_schedule == PipelineSchedule::kInterleaved && micro_batches % stages != 0) {
    throw Error(
        fmt::format("parallel.pp_schedule = \"interleaved\" runs micro-batches in groups of parallel.pp = {}, "
                    "but a step has {} micro-batch(es) per rank",
                    stages, micro_batches),
        fmt::format("use a multiple of {} micro-batches (parallel.micro_batches, or train.micro_batch_size)", stages));
  }
  const int mbs = static_cast<int>(micro_batches);
  plan.train = make_schedule(p.pp_schedule, stages, mbs, v);
  plan.eval = make_forward_schedule(p.pp_schedule, stages, mbs, v);
  plan.train_report = simulate(plan.train);  // throws if the generator ever produced a bad table
  simulate(plan.eval);
  // The same table timed with each chunk's forward and backward FLOPs: what imbalance adds.
  SimCosts flops;
  for (int k = 0; k < plan.partition.chunks(); ++k) {
    const ChunkUnits& c = plan.partition.chunk(k);
    flops.chunk_forward.push_back(c.forward);
    flops.chunk_backward.push_back(c.cost - c.forward);
  }
  plan.flops_report = simulate(plan.train, flops);
  return plan;
}

}  // namespace ft
