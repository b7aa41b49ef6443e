// TrainConfig (train.*): the step loop's knobs (the optimizer's are optim/optim_config.h).
#pragma once

#include <cstdint>
#include <string>

#include "data/loader/loader.h"
#include "kernels/ops.h"

namespace ft {

class ConfigBinder;

// train.precision as written: "auto" is decided by the trainer at start by the device's backend
// (Backend::auto_precision: bf16 on a GPU, on a CPU by the measured GEMM peaks); until then it
// holds the host backend's guess (guess_auto_precision, tensor/backend.h).
enum class PrecisionSetting : uint8_t { kAuto, kFp32, kBf16, kFp16 };

// train.cuda_graphs: whether the steady-state step's forward/backward is captured as a CUDA graph
// and replayed (train/step_graph.h). "auto": where it can be (a GPU that captures, dp = tp = pp =
// 1) and the step is launch-bound (step_graph.h, graphs_pay_off); "on": required (an error where it
// cannot be); "off": never.
enum class CudaGraphs : uint8_t { kAuto, kOn, kOff };

struct TrainConfig {
  int64_t steps = 100;
  int64_t batch_size = 8;        // global batch in sequences (same for every parallel layout)
  int64_t micro_batch_size = 0;  // sequences per forward/backward on a rank; 0 = whole rank batch
  int64_t seq_len = 64;
  uint64_t seed = 1234;
  PrecisionSetting precision_setting = PrecisionSetting::kAuto;  // the key train.precision
  Precision precision = Precision::kF32;                         // what runs (for "auto": settled at start)
  std::string precision_reason;             // why ("train.precision = \"bf16\"", "auto: the CPU has ...")
  std::string device = "cpu";               // train.device: where each rank's ops run: "cpu", "cuda" or "auto"
  static constexpr int kMaxThreads = 4096;  // train.threads, as OMP_NUM_THREADS
  static constexpr int64_t kMaxStepTokens = int64_t{1} << 40;  // train.batch_size x train.seq_len
  int threads = 0;                // OpenMP threads per rank; 0 = the device backend's rule (train/threads.h)
  int64_t log_interval = 1;       // progress line every N steps (metrics.jsonl gets every step)
  int64_t eval_interval = 0;      // validation every N steps; 0 = never
  int64_t eval_batches = 4;       // batches per validation
  int64_t loss_chunk_tokens = 0;  // tokens per LM-head/cross-entropy chunk; 0 = auto (~32 MiB)
  std::string run_dir = "runs/latest";
  double stop_after_minutes = 0;  // time budget: checkpoint and stop (exit 4) after it; 0 = none
  bool memory_check = true;       // refuse to start when the estimate exceeds the memory available
  CudaGraphs cuda_graphs = CudaGraphs::kAuto;

  void bind(ConfigBinder& b);
  void validate() const;
  // The device train.device names (validate() has accepted it); "auto" is CUDA when the build has
  // the backend and a GPU is visible (tensor/device_runtime.h), else the CPU.
  Device compute_device() const;
  // Sets precision (and precision_reason) from precision_setting; "auto" stays "auto" with a
  // guess from the CPU's flags until the trainer settles it.
  void resolve_precision();
  bool precision_is_auto() const { return precision_setting == PrecisionSetting::kAuto; }
  // "auto" decided (by the trainer, from the device and measured peaks): precision and reason set,
  // and the setting replaced by the precision chosen.
  void settle_auto_precision(Precision chosen, const std::string& reason);
  // What the data loaders take from these settings (data/loader/loader.h).
  BatchSpec batch_spec() const { return {batch_size, seq_len, seed, run_dir}; }
};

}  // namespace ft
