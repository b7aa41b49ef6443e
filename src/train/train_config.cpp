#include "train/train_config.h"

#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void TrainConfig::bind(ConfigBinder& b) {
  b.add("train.steps", &steps, "optimizer steps to run");
  b.add("train.batch_size", &batch_size, "global batch in sequences");
  b.add("train.micro_batch_size", &micro_batch_size,
        "sequences per forward/backward on a rank (0 = the whole per-rank batch)");
  b.add("train.seq_len", &seq_len, "tokens per sequence");
  b.add("train.seed", &seed, "seed of initialisation and data order");
  b.add_enum("train.precision", &precision_setting,
             {{"auto", PrecisionSetting::kAuto},
              {"fp32", PrecisionSetting::kFp32},
              {"bf16", PrecisionSetting::kBf16},
              {"fp16", PrecisionSetting::kFp16}},
             "compute precision of the GEMMs: auto = bf16 on a GPU; on a CPU bf16 only where it runs natively and its "
             "measured GEMM peak beats fp32's by 10% (the peak file), else fp32; "
             "fp16 uses dynamic loss scaling (master weights and gradients stay fp32)");
  b.add("train.device", &device,
        "where each rank's ops run: \"cpu\", \"cuda\" (one GPU per rank, by local rank; CUDA_VISIBLE_DEVICES "
        "respected) or \"auto\" (a GPU when this build has the CUDA backend and one is visible, else the CPU)");
  b.add("train.threads", &threads,
        "threads per rank (0 = OMP_NUM_THREADS if set, else the CPUs of the rank's affinity mask and cgroup "
        "quota, shared among the local ranks bound to them)");
  b.add("train.log_interval", &log_interval, "steps between progress lines");
  b.add("train.eval_interval", &eval_interval, "steps between validations (0 = never)");
  b.add("train.eval_batches", &eval_batches, "batches per validation");
  b.add("train.loss_chunk_tokens", &loss_chunk_tokens,
        "tokens per LM-head/cross-entropy chunk (0 = auto: ~32 MiB of fp32 logits, ~128 MiB with bf16)");
  b.add("train.run_dir", &run_dir, "directory for metrics, logs and checkpoints");
  b.add("train.stop_after_minutes", &stop_after_minutes,
        "time budget from the process start: at the first step boundary after it, checkpoint and exit with code 4 "
        "(a Slurm job's wall-clock limit); 0 = none");
  b.add("train.memory_check", &memory_check,
        "before starting, compare the memory the run needs (the dry run's accounting, times the ranks on this "
        "machine) with what the process may use (cgroup limit, MemAvailable); false = start anyway");
  b.add_enum("train.cuda_graphs", &cuda_graphs,
             {{"auto", CudaGraphs::kAuto}, {"on", CudaGraphs::kOn}, {"off", CudaGraphs::kOff}},
             "capture the steady-state step's forward and backward as a CUDA graph and replay it: auto = on a GPU "
             "with parallel.dp = tp = pp = 1 when the step is launch-bound (small models); on = required (an error "
             "where it cannot be); off = never");
}

Device TrainConfig::compute_device() const {
  return resolve_device(device);
}

void TrainConfig::validate() const {
  if (steps < 0) throw Error(fmt::format("train.steps = {} must be >= 0", steps));
  if (batch_size <= 0) throw Error(fmt::format("train.batch_size = {} must be positive", batch_size));
  if (seq_len <= 0) throw Error(fmt::format("train.seq_len = {} must be positive", seq_len));
  // Tokens of a step: beyond 2^40 (a million times the largest published batches) the sizes
  // derived from them would overflow 64-bit counts.
  if (batch_size > kMaxStepTokens / seq_len) {
    throw Error(fmt::format("train.batch_size = {} sequences of train.seq_len = {} tokens is more than {} tokens per "
                            "step",
                            batch_size, seq_len, kMaxStepTokens),
                "use a smaller train.batch_size (or train.seq_len)");
  }
  if (micro_batch_size < 0) throw Error(fmt::format("train.micro_batch_size = {} must be >= 0", micro_batch_size));
  // Whether "cuda" can run here is the trainer's question (the device runtime, at start-up).
  check_device_name(device, "train.device");
  // The same ceiling as OMP_NUM_THREADS (train/threads.cpp): far beyond any machine's CPUs, and
  // a thread count above this host's CPUs is never measured into the GEMM peak file (peak.cpp).
  if (threads < 0 || threads > kMaxThreads) {
    throw Error(fmt::format("train.threads = {} is not valid: expected an integer from 0 to {}", threads, kMaxThreads),
                "0 = the CPUs this process may use (its affinity mask and cgroup quota)");
  }
  if (log_interval <= 0) throw Error(fmt::format("train.log_interval = {} must be positive", log_interval));
  // 0 batches would average nothing: a validation loss of nan (and `eval` failing without a word).
  if (eval_batches < 1)
    throw Error(fmt::format("train.eval_batches = {} is not valid: expected an integer >= 1", eval_batches),
                "batches per validation; train.eval_interval = 0 turns validation off");
  if (loss_chunk_tokens < 0)
    throw Error(fmt::format("train.loss_chunk_tokens = {} is not valid: expected an integer >= 0", loss_chunk_tokens),
                "0 = auto (~32 MiB of fp32 logits per chunk)");
  if (eval_interval < 0) throw Error(fmt::format("train.eval_interval = {} must be >= 0", eval_interval));
  if (run_dir.empty()) throw Error("train.run_dir is empty", "set --run-dir DIR");
  if (cuda_graphs == CudaGraphs::kOn && device == "cpu")
    throw Error("train.cuda_graphs = \"on\" captures the step on a GPU, but train.device = \"cpu\"",
                "set train.device = \"cuda\", or train.cuda_graphs = \"auto\" (captures only where it can)");
  if (!(stop_after_minutes >= 0))
    throw Error(fmt::format("train.stop_after_minutes = {} must be >= 0", stop_after_minutes), "0 = no time budget");
}

void TrainConfig::resolve_precision() {
  switch (precision_setting) {
    case PrecisionSetting::kAuto: {
      // The host backend's guess (the CPU's flags) for the dry run and the planner; the trainer
      // settles it (settle_auto_precision) once the device and the threads are known.
      PrecisionChoice c = guess_auto_precision();
      precision = c.precision;
      precision_reason = c.reason;
      return;
    }
    case PrecisionSetting::kFp32:
      precision = Precision::kF32;
      break;
    case PrecisionSetting::kBf16:
      precision = Precision::kBF16;
      break;
    case PrecisionSetting::kFp16:
      precision = Precision::kF16;
      break;
  }
  precision_reason = fmt::format("train.precision = \"{}\"", precision_label(precision));
}

void TrainConfig::settle_auto_precision(Precision chosen, const std::string& reason) {
  FT_CHECK(precision_setting == PrecisionSetting::kAuto, "train.precision is not \"auto\"");
  precision = chosen;
  precision_reason = reason;
  // From here on the config says what runs: config.json records it, and a calibration or a
  // resume on another machine reads the precision this run used.
  precision_setting = chosen == Precision::kBF16 ? PrecisionSetting::kBf16 : PrecisionSetting::kFp32;
}

}  // namespace ft
