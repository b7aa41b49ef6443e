#include "optim/optim_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

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
