// What the trainer's float traffic carries per element on the wire, by kind: the one description
// the gradient reducer (grads), the dry run's byte accounting (dryrun/dry_run.cpp) and the
// planner's communication model (plan::layout_for_run → plan::Layout::wire) read.
//
//   TrainerWires w = trainer_wires(cfg.parallel, cfg.train.precision == Precision::kBF16);
//   wire_bytes(w.activations);   // 4: tensor-parallel activations travel in fp32
#pragma once

#include "parallel/comm/wire.h"
#include "parallel/parallel_config.h"

namespace ft {

struct TrainerWires {
  // Tensor parallelism's all-reduces and reduce-scatters of the residual stream, its all-gathers of
  // gradient rows, the pipeline's sends: fp32 (the model's float buffers, Communicator's default).
  Wire activations = Wire::kF32;
  // Sequence parallelism's all-gathers of normed rows that feed a GEMM (xn1, xn2, xf): the rows
  // themselves, bf16 when the model computes in bf16 (Llama::gather_tokens), else fp32.
  Wire gemm_inputs = Wire::kF32;
  // Context parallelism's keys and values (the ring's blocks and their dk, dv; the all-to-all's
  // heads, outputs and their gradients): bf16 when the model computes in bf16, else fp32.
  Wire attention = Wire::kF32;
  // ZeRO's all-gathers of weights (the fp32 master weights: ZeRO 1/2 after the update, ZeRO 3 per unit).
  Wire weights = Wire::kF32;
  // Data-parallel gradient reduction (all-reduce or reduce-scatter): bf16 or fp16 with
  // parallel.grad_compression = "bf16" or "fp16" (PowerSGD's factors are fp32).
  Wire grads = Wire::kF32;
};

TrainerWires trainer_wires(const ParallelConfig& p, bool bf16_compute);

}  // namespace ft
