#include "parallel/parallel_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void ParallelConfig::bind(ConfigBinder& b) {
  b.add("parallel.dp", &dp, "data-parallel degree");
  b.add("parallel.tp", &tp, "tensor-parallel degree");
  b.add("parallel.pp", &pp, "pipeline-parallel degree");
  b.add("parallel.cp", &cp,
        "context-parallel degree: each sample's train.seq_len tokens split over cp ranks (zig-zag: 2 of 2·cp chunks "
        "each)");
  b.add_enum("parallel.cp_attention", &cp_attention,
             {{"ring", CpAttention::kRing}, {"all_to_all", CpAttention::kAllToAll}},
             "attention over the context-parallel split: ring (key/value blocks passed around the cp group) or "
             "all_to_all (Ulysses: heads scattered, sequences gathered; heads divisible by cp)");
  b.add("parallel.sequence_parallel", &sequence_parallel,
        "with tp > 1, keep norms and residuals on sequence shards (all-gather/reduce-scatter instead of all-reduce)");
  b.add("parallel.collective_timeout_s", &collective_timeout_s,
        "seconds a rank waits for its peers before stopping with an error naming them");
  b.add_enum("parallel.comm", &comm,
             {{"auto", CommBackend::kAuto}, {"mpi", CommBackend::kMpi}, {"nccl", CommBackend::kNccl}},
             "transport of the dp/tp/pp groups: auto (NCCL when train.device is a GPU, else MPI), mpi, nccl (device "
             "buffers over NCCL, host scalars over MPI)");
  b.add("parallel.zero", &zero, "ZeRO stage over the data-parallel group (0, 1, 2, 3)");
  b.add("parallel.bucket_mb", &bucket_mb, "gradient all-reduce bucket size in MiB (ZeRO 0)");
  b.add_enum(
      "parallel.grad_compression", &grad_compression,
      {{"none", GradCompression::kNone},
       {"bf16", GradCompression::kBF16},
       {"fp16", GradCompression::kFP16},
       {"powersgd", GradCompression::kPowerSGD}},
      "gradient compression on the data-parallel wire: none (fp32), bf16, fp16 (needs train.precision = \"fp16\": "
      "the loss-scaled gradients fit its range; an overflow skips the step) or powersgd");
  b.add("parallel.powersgd_rank", &powersgd_rank, "rank of PowerSGD's low-rank approximation");
  b.add("parallel.powersgd_warmup_steps", &powersgd_warmup_steps,
        "optimizer steps with uncompressed gradients before PowerSGD starts");
  b.add("parallel.micro_batches", &micro_batches,
        "micro-batches per step and rank (0 = per-rank batch / train.micro_batch_size)");
  b.add_enum("parallel.pp_schedule", &pp_schedule,
             {{"gpipe", PipelineSchedule::kGPipe},
              {"1f1b", PipelineSchedule::k1F1B},
              {"interleaved", PipelineSchedule::kInterleaved}},
             "pipeline schedule");
  b.add("parallel.virtual_stages", &virtual_stages, "model chunks per pipeline stage (interleaved schedule)");
}

const char* comm_backend_name(CommBackend c) {
  switch (c) {
    case CommBackend::kAuto:
      return "auto";
    case CommBackend::kMpi:
      return "mpi";
    case CommBackend::kNccl:
      return "nccl";
  }
  return "?";
}

const char* cp_attention_name(CpAttention a) {
  return a == CpAttention::kRing ? "ring" : "all_to_all";
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGPipe:
      return "gpipe";
    case PipelineSchedule::k1F1B:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}

void ParallelConfig::validate() const {
  if (dp <= 0 || cp <= 0 || tp <= 0 || pp <= 0)
    throw Error(fmt::format("parallel degrees must be positive: dp = {}, cp = {}, tp = {}, pp = {}", dp, cp, tp, pp));
  if (!(collective_timeout_s > 0))
    throw Error(fmt::format("parallel.collective_timeout_s = {} must be > 0", collective_timeout_s));
  if (zero < 0 || zero > 3)
    throw Error(fmt::format("parallel.zero = {} is not a ZeRO stage", zero), "use 0 (off), 1, 2 or 3");
  if (!(bucket_mb > 0)) throw Error(fmt::format("parallel.bucket_mb = {} must be > 0", bucket_mb));
  if (powersgd_warmup_steps < 0)
    throw Error(fmt::format("parallel.powersgd_warmup_steps = {} must be >= 0", powersgd_warmup_steps));
  if (powersgd_rank <= 0) throw Error(fmt::format("parallel.powersgd_rank = {} must be positive", powersgd_rank));
  if (micro_batches < 0) throw Error(fmt::format("parallel.micro_batches = {} must be >= 0", micro_batches));
  if (virtual_stages <= 0) throw Error(fmt::format("parallel.virtual_stages = {} must be positive", virtual_stages));
  if (virtual_stages > 1 && pp_schedule != PipelineSchedule::kInterleaved)
    throw Error(fmt::format("parallel.virtual_stages = {} needs parallel.pp_schedule = \"interleaved\" (it is \"{}\")",
                            virtual_stages, pipeline_schedule_name(pp_schedule)),
                "set parallel.pp_schedule = \"interleaved\", or parallel.virtual_stages = 1");
  if (pp_schedule == PipelineSchedule::kInterleaved && virtual_stages < 2)
    throw Error("parallel.pp_schedule = \"interleaved\" needs parallel.virtual_stages >= 2 model chunks per stage",
                "set parallel.virtual_stages = 2 (or more), or use parallel.pp_schedule = \"1f1b\"");
}

std::string ParallelConfig::degrees_product() const {
  if (cp > 1)
    return fmt::format("parallel.dp × parallel.cp × parallel.tp × parallel.pp = {} × {} × {} × {} = {}", dp, cp, tp, pp,
                       world_size());
  return fmt::format("parallel.dp × parallel.tp × parallel.pp = {} × {} × {} = {}", dp, tp, pp, world_size());
}

void ParallelConfig::check_seq_len(int64_t seq_len) const {
  if (cp > 1 && seq_len % (2 * cp) != 0)
    throw Error(fmt::format("train.seq_len = {} is not divisible by 2 x parallel.cp = {}: context parallelism cuts "
                            "each sample into 2·cp equal chunks",
                            seq_len, 2 * cp),
                fmt::format("use a train.seq_len that is a multiple of {}", 2 * cp));
}

}  // namespace ft
