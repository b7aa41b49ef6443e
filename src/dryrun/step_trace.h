// The op trace of one real training step on one GPU, without a GPU: the trainer's own pieces —
// the ZeRO engine over the model's parameter layout, the Llama model, the micro-batch executor,
// the gradient norm and the optimizer update — built on the recording GPU
// (backends/trace/trace_backend.h, registered here as Device::kCUDA) and run for two steps; the
// second (the steady state: lazily made buffers exist) is recorded op by op. The mesh's
// communicators are the dry run's fake ones (one rank: nothing to send). Nothing is computed, so
// the 1.1B model at 8 × 2048 tokens traces in seconds on a laptop.
//
//   plan::OpTrace t = trace_training_step(load_config("configs/llama-20m.toml", sets));
//   plan::StepPrice p = plan::price_step(t, plan::h200_roofline());    // plan/roofline.h
//
// train.device is not read (the step is the GPU's); train.precision = "auto" is settled as the
// trainer settles it on this GPU (bf16). What it does not trace: the data loader, checkpoints, validation, the training
// guards (host work), and layouts of more than one rank (parallel.dp, tp and pp must be 1: ft::Error otherwise).
#pragma once

#include "config/config.h"
#include "plan/op_trace.h"

namespace ft {

plan::OpTrace trace_training_step(const Config& cfg);

}  // namespace ft
