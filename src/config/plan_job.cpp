#include "config/plan_job.h"

#include <algorithm>

#include "plan/traffic.h"

namespace ft::plan {

Job job_for_run(const Config& cfg, const GpuSpec& device) {
  Job job;
  job.model = cfg.model;
  job.seq_len = cfg.train.seq_len;
  job.global_batch = cfg.train.batch_size;
  job.gpu = device;
  job.gpus = cfg.parallel.world_size();
  job.gpus_per_node = device.gpus_per_node;
  job.nodes = (job.gpus + job.gpus_per_node - 1) / job.gpus_per_node;
  job.loss_chunk_tokens = cfg.train.loss_chunk_tokens;
  // Our CUDA backend runs bf16 and fp16 attention through cuDNN's fused kernel
  // (backends/cuda/attention_sdpa.cpp), priced at the GPU's attention_hopper (= attention off
  // Hopper); fp32 attention and context parallelism's block attention run our own kernels.
  job.hopper_attention = cfg.train.precision != ft::Precision::kF32 && cfg.parallel.cp == 1;
  return job;
}

Layout layout_for_run(const Config& cfg) {
  Layout l;
  l.dp = cfg.parallel.dp;
  l.tp = cfg.parallel.tp;
  l.pp = cfg.parallel.pp;
  l.cp = cfg.parallel.cp;
  l.cp_attention = cfg.parallel.cp_attention;
  l.zero = static_cast<int>(cfg.parallel.zero);
  const int64_t per_replica = std::max<int64_t>(1, cfg.train.batch_size / cfg.parallel.dp);
  l.micro_batch = cfg.train.micro_batch_size > 0 ? cfg.train.micro_batch_size : per_replica;
  l.recompute = cfg.model.recompute;
  l.precision = cfg.train.precision == ft::Precision::kBF16  ? Precision::kBF16
                : cfg.train.precision == ft::Precision::kF16 ? Precision::kF16
                                                             : Precision::kF32;
  l.sequence_parallel = cfg.parallel.sequence_parallel && cfg.parallel.tp > 1;
  l.wire = wire_bytes_of(trainer_wires(cfg.parallel, cfg.train.precision == ft::Precision::kBF16));
  return l;
}

}  // namespace ft::plan
