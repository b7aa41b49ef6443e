// The op trace of one real training step of one rank, without a GPU: the trainer's own pieces —
// the ZeRO engine over the rank's parameter layout (its pipeline stage's units, its tp shard), the
// Llama model with its tensor-parallel group, the executor (the stage's pipeline schedule, or the
// plain loop over the micro-batches), the gradient norm, the step's sums over the ranks, the
// guards' and the stop request's agreement, and the optimizer update — built for the rank's mesh
// coordinates on the recording GPU (backends/trace/trace_backend.h, registered here as
// Device::kCUDA) and on fake communicators of the layout's sizes (dryrun/fake_comm.h), and run for
// two steps; the second (the steady state: lazily made buffers exist) is recorded op by op and
// collective by collective (OpTrace::collectives: every call the step's code made on the dp, tp,
// pp and world groups, and with parallel.cp > 1 on the cp and dp_cp groups: the ring's or the
// all-to-all's own code issues its transfers there, ContextSplit::dry, and its attention is
// recorded beside it as a GPU would run it, dryrun/cp_op_trace.h; OpTrace::cp_bytes sums what
// the rank sends on the cp group, as the dry run counts it). Nothing is computed and no data
// flows, so the 1.1B model at 8 × 2048 tokens traces in seconds on a laptop.
//
//   plan::OpTrace t = trace_training_step(load_config("configs/llama-20m.toml", sets));
//   plan::StepPrice p = plan::price_step(t, plan::h200_roofline());    // plan/roofline.h
//   plan::OpTrace s = trace_training_step(cfg, {.world_rank = 8, .ops = false});  // collectives only
//   plan::OpTrace m = trace_training_step(cfg, {.timed_on_host = true, .repeats = 3});  // ops.seconds measured
//
// With timed_on_host the step runs for real on this machine's CPU (the timed CPU of
// backends/timing: the CPU's own ops, each call timed) instead of the recording GPU — still on
// fake communicators, so only the rank's compute is timed, never its waits — and each op's
// seconds is the least over `repeats` steady-state steps (the op sequence of every step is the
// same; the least is the one another process on the machine disturbed least). With parallel.cp > 1
// the rank's schedule runs for real over the fake cp group, whose receives read as zeros: its
// block attention ops (ring: one per block, masked by the true positions of the rank's queries
// and the block's keys; all-to-all: the whole-sequence attention of the rank's heads) are timed
// like every other op, the transfers are not.
//
// train.device is not read (the step is the GPU's); train.precision = "auto" is settled as the
// trainer settles it on this GPU (bf16). What it does not trace: the data loader, checkpoints,
// validation, the training guards' own host work, and the loss scaler's skipped steps.
#pragma once

#include "config/config.h"
#include "plan/op_trace.h"

namespace ft {

struct StepTraceOptions {
  int world_rank = 0;  // the rank of the layout (parallel.dp × cp × tp × pp ranks) whose step is traced
  // Record the ops (and refuse a precision the roofline does not price: fp16); false records the
  // collectives only (what the dry run reads), which is faster and takes any precision.
  bool ops = true;
  bool timed_on_host = false;  // run the step's ops on this CPU and time each (OpRecord::seconds)
  int repeats = 1;             // timed steps; each op keeps its least time
};

plan::OpTrace trace_training_step(const Config& cfg, const StepTraceOptions& options = {});

}  // namespace ft
