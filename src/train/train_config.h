// TrainConfig (train.*): the step loop's knobs (the optimizer's are optim/optim_config.h).
#pragma once

#include <cstdint>
#include <string>

#include "data/loader.h"
#include "kernels/ops.h"

namespace ft {

class ConfigBinder;

// train.precision as written: "auto" picks from the CPU at start (kernels/cpu/native_precision.h).
enum class PrecisionSetting : uint8_t { kAuto, kFp32, kBf16, kFp16 };

struct TrainConfig {
  int64_t steps = 100;
  int64_t batch_size = 8;        // global batch in sequences (same for every parallel layout)
  int64_t micro_batch_size = 0;  // sequences per forward/backward on a rank; 0 = whole rank batch
  int64_t seq_len = 64;
  uint64_t seed = 1234;
  PrecisionSetting precision_setting = PrecisionSetting::kAuto;  // the key train.precision
  Precision precision = Precision::kF32;                         // what runs: set by resolve_precision() at load
  std::string precision_reason;   // why ("train.precision = \"bf16\"", "auto: the CPU has ...")
  std::string device = "cpu";     // train.device: where each rank's ops run: "cpu", "cuda" or "auto"
  int threads = 0;                // OpenMP threads per rank; 0 = the CPUs this rank may use (train/threads.h)
  int64_t log_interval = 1;       // progress line every N steps (metrics.jsonl gets every step)
  int64_t eval_interval = 0;      // validation every N steps; 0 = never
  int64_t eval_batches = 4;       // batches per validation
  int64_t loss_chunk_tokens = 0;  // tokens per LM-head/cross-entropy chunk; 0 = auto (~32 MiB)
  std::string run_dir = "runs/latest";
  double stop_after_minutes = 0;  // time budget: checkpoint and stop (exit 4) after it; 0 = none
  bool memory_check = true;       // refuse to start when the estimate exceeds the memory available

  void bind(ConfigBinder& b);
  void validate() const;
  // The device train.device names (validate() has accepted it); "auto" is CUDA when the build has
  // the backend and a GPU is visible (tensor/device_runtime.h), else the CPU.
  Device compute_device() const;
  // Sets precision (and precision_reason) from precision_setting; "auto" asks the CPU and is
  // then replaced by the precision it chose.
  void resolve_precision();
  // What the data loaders take from these settings (data/loader.h).
  BatchSpec batch_spec() const { return {batch_size, seq_len, seed, run_dir}; }
};

}  // namespace ft
