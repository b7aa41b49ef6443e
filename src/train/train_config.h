// TrainConfig (train.*) and OptimConfig (optim.*): the step loop's and the optimizer's knobs.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace ft {

class ConfigBinder;

// train.precision as written: "auto" picks from the CPU at start (kernels/cpu/native_precision.h).
enum class PrecisionSetting : uint8_t { kAuto, kFp32, kBf16, kFp16 };

struct TrainConfig {
  int64_t steps = 100;
  int64_t batch_size = 8;         // global batch in sequences (same for every parallel layout)
  int64_t micro_batch_size = 0;   // sequences per forward/backward on a rank; 0 = whole rank batch
  int64_t seq_len = 64;
  uint64_t seed = 1234;
  PrecisionSetting precision_setting = PrecisionSetting::kAuto;  // the key train.precision
  Precision precision = Precision::kF32;  // what runs: set by resolve_precision() at load
  std::string precision_reason;           // why ("train.precision = \"bf16\"", "auto: the CPU has ...")
  int threads = 0;  // OpenMP threads per rank; 0 = the CPUs this rank may use (train/threads.h)
  int64_t log_interval = 1;       // progress line every N steps (metrics.jsonl gets every step)
  int64_t eval_interval = 0;      // validation every N steps; 0 = never
  int64_t eval_batches = 4;       // batches per validation
  int64_t loss_chunk_tokens = 0;  // tokens per LM-head/cross-entropy chunk; 0 = auto (~32 MiB)
  std::string run_dir = "runs/latest";

  void bind(ConfigBinder& b);
  void validate() const;
  // Sets precision (and precision_reason) from precision_setting; "auto" asks the CPU and is
  // then replaced by the precision it chose.
  void resolve_precision();
};

struct OptimConfig {
  double lr = 3e-3;
  double min_lr_ratio = 0.1;    // end of the cosine decay, as a fraction of lr
  int64_t warmup_steps = 10;    // linear warm-up from 0
  int64_t decay_steps = 0;      // cosine decay length after warm-up; 0 = until train.steps
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;    // applied to matrices, not to norm weights
  double grad_clip = 1.0;       // global-norm clipping; 0 = off
  double loss_scale_init = 65536;     // fp16: the first dynamic loss scale
  int64_t loss_scale_window = 2000;   // fp16: clean steps in a row before the scale doubles

  void bind(ConfigBinder& b);
  void validate() const;
};

}  // namespace ft
