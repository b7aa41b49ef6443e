#include "train/train_config.h"

#include "kernels/cpu/native_precision.h"
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
             {{"auto", PrecisionSetting::kAuto}, {"fp32", PrecisionSetting::kFp32},
              {"bf16", PrecisionSetting::kBf16}, {"fp16", PrecisionSetting::kFp16}},
             "compute precision of the GEMMs: auto = bf16 where the CPU has AVX512-BF16 or AMX, else fp32; "
             "fp16 uses dynamic loss scaling (master weights and gradients stay fp32)");
  b.add("train.threads", &threads,
        "threads per rank (0 = OMP_NUM_THREADS if set, else the CPUs of the rank's affinity mask and cgroup "
        "quota, shared among the local ranks bound to them)");
  b.add("train.log_interval", &log_interval, "steps between progress lines");
  b.add("train.eval_interval", &eval_interval, "steps between validations (0 = never)");
  b.add("train.eval_batches", &eval_batches, "batches per validation");
  b.add("train.loss_chunk_tokens", &loss_chunk_tokens,
        "tokens per LM-head/cross-entropy chunk (0 = auto: ~32 MiB of fp32 logits, ~128 MiB with bf16)");
  b.add("train.run_dir", &run_dir, "directory for metrics, logs and checkpoints");
}

void TrainConfig::validate() const {
  if (steps < 0) throw Error(fmt::format("train.steps = {} must be >= 0", steps));
  if (batch_size <= 0) throw Error(fmt::format("train.batch_size = {} must be positive", batch_size));
  if (seq_len <= 0) throw Error(fmt::format("train.seq_len = {} must be positive", seq_len));
  if (micro_batch_size < 0)
    throw Error(fmt::format("train.micro_batch_size = {} must be >= 0", micro_batch_size));
  if (threads < 0) throw Error(fmt::format("train.threads = {} must be >= 0", threads));
  if (log_interval <= 0) throw Error(fmt::format("train.log_interval = {} must be positive", log_interval));
  if (eval_interval < 0) throw Error(fmt::format("train.eval_interval = {} must be >= 0", eval_interval));
  if (run_dir.empty()) throw Error("train.run_dir is empty", "set --run-dir DIR");
}

void TrainConfig::resolve_precision() {
  switch (precision_setting) {
    case PrecisionSetting::kAuto: {
      cpu::PrecisionChoice c = cpu::auto_precision();
      precision = c.precision;
      precision_reason = c.reason;
      // From here on the config says what runs: config.json records it, and a calibration or
      // a resume on another machine reads the precision this run used.
      precision_setting = precision == Precision::kBF16 ? PrecisionSetting::kBf16 : PrecisionSetting::kFp32;
      return;
    }
    case PrecisionSetting::kFp32: precision = Precision::kF32; break;
    case PrecisionSetting::kBf16: precision = Precision::kBF16; break;
    case PrecisionSetting::kFp16: precision = Precision::kF16; break;
  }
  precision_reason = fmt::format("train.precision = \"{}\"", precision_label(precision));
}

void OptimConfig::bind(ConfigBinder& b) {
  b.add("optim.lr", &lr, "peak learning rate");
  b.add("optim.min_lr_ratio", &min_lr_ratio, "learning rate at the end of the cosine decay, as a fraction of optim.lr");
  b.add("optim.warmup_steps", &warmup_steps, "linear warm-up steps");
  b.add("optim.decay_steps", &decay_steps, "cosine decay steps after warm-up (0 = to train.steps)");
  b.add("optim.beta1", &beta1, "AdamW beta1");
  b.add("optim.beta2", &beta2, "AdamW beta2");
  b.add("optim.eps", &eps, "AdamW epsilon");
  b.add("optim.weight_decay", &weight_decay, "decoupled weight decay (matrices only)");
  b.add("optim.grad_clip", &grad_clip, "global gradient-norm clip (0 = off)");
  b.add("optim.loss_scale_init", &loss_scale_init,
        "fp16 only: the initial dynamic loss scale (halved on overflow, the update skipped)");
  b.add("optim.loss_scale_window", &loss_scale_window,
        "fp16 only: clean steps in a row after which the loss scale doubles");
}

void OptimConfig::validate() const {
  if (!(lr >= 0)) throw Error(fmt::format("optim.lr = {} must be >= 0", lr));
  if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1))
    throw Error(fmt::format("optim.min_lr_ratio = {} must be in [0, 1]", min_lr_ratio));
  if (warmup_steps < 0) throw Error(fmt::format("optim.warmup_steps = {} must be >= 0", warmup_steps));
  if (!(beta1 >= 0 && beta1 < 1)) throw Error(fmt::format("optim.beta1 = {} must be in [0, 1)", beta1));
  if (!(beta2 >= 0 && beta2 < 1)) throw Error(fmt::format("optim.beta2 = {} must be in [0, 1)", beta2));
  if (!(eps > 0)) throw Error(fmt::format("optim.eps = {} must be > 0", eps));
  if (!(grad_clip >= 0)) throw Error(fmt::format("optim.grad_clip = {} must be >= 0", grad_clip));
  if (!(loss_scale_init >= 1 && loss_scale_init <= 16777216))
    throw Error(fmt::format("optim.loss_scale_init = {} must be in [1, 2^24]", loss_scale_init),
                "65536 is the usual start; the scaler adapts it");
  if (loss_scale_window <= 0)
    throw Error(fmt::format("optim.loss_scale_window = {} must be positive", loss_scale_window));
}

}  // namespace ft
