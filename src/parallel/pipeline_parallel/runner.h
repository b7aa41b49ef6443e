// PipelineRunner: executes this stage's action list (schedule.h) for one step — one short loop
// over the table. Activations travel to the next stage and their gradients back point to point
// over the pipeline group (mesh.pp(): group rank = stage; one group per (dp, tp) index), as
// non-blocking sends and receives: a receive is posted where the table says and joined on the
// compute stream (Work::stream_wait) by the computation that needs it; sends complete in the
// background, and a buffer a send reads goes back to its pool only once the host has seen the send
// done or the compute stream has been made to wait for it — every later writer of the buffer is
// then ordered after the send: the compute stream's ops, and the transfers NcclComm posts behind
// an event recorded on the compute stream. Over NCCL on a GPU the host never waits for a transfer;
// over MPI, or on the CPU, stream_wait is wait(). Under tensor parallelism each tp
// rank sends what it holds of the residual stream to the same tp rank of the next stage: the whole
// (B·T, dim) (every tp rank holds it), or its (B·T/tp, dim) token shard with sequence parallelism.
// Each (micro-batch, chunk) in flight holds one Activations set for the chunk's layers, taken from
// a pool (shared by the stage's chunks of equal shape) and returned after its backward, so a stage
// holds at most the schedule's in-flight bound of them (1F1B: p − s on stage s).
//
//   PipelineRunner runner(plan, mesh.coord().pp, model, engine, mesh.pp(), micro_batch, seq_len, chunk_tokens);
//   DeviceScalars losses(ctx, micro_batches);                           // one per forward of the head
//   runner.train(batch.tokens.data(), grad_scale, losses.at(0));         // added to on the last stage only
//   runner.last().busy_s;                                             // from the actions' timestamps
//
// Idle time (the bubble) is measured against the whole pipeline's pass — from the first stage's
// start to the last stage's end (train/pipeline_executor.h reports start, end and busy of every
// stage) — as the theory counts it: a stage that finishes early is idle until the pass ends.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "model/activations.h"
#include "model/llama.h"
#include "parallel/comm/comm.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"

namespace ft {

struct PipelineStepStats {
  double start = 0, end = 0;  // the pass on this stage, seconds on the monotonic clock
  double busy_s = 0;          // forward and backward computations
  int max_in_flight = 0;      // activation sets held at once
  struct Timed {
    PipelineAction action;
    double start, end;  // seconds on the monotonic clock (computations only)
  };
  std::vector<Timed> trace;  // computations in execution order
};

class PipelineRunner {
 public:
  PipelineRunner(const PipelinePlan& plan, int stage, Llama& model, ParamEngine& engine, Communicator& pp,
                 int64_t micro_batch, int64_t seq_len, int64_t loss_chunk_tokens);
  ~PipelineRunner();

  // tokens: this rank's batch, (micro_batches · micro_batch, seq_len + 1). Forward, loss and
  // backward of every micro-batch; parameter gradients accumulate grad_scale · d(sum of losses).
  // The last stage adds the token losses of its k-th head forward (in the order the schedule
  // runs them) into loss_sums[k]: device memory (DeviceScalars), a slot per micro-batch; the
  // other stages add nothing.
  void train(const int32_t* tokens, float grad_scale, double* loss_sums);
  // Forwards only (validation), the losses added likewise.
  void forward_loss(const int32_t* tokens, double* loss_sums);

  const PipelineStepStats& last() const { return stats_; }
  int stage() const { return stage_; }

 private:
  using Key = std::pair<int, int>;  // (micro-batch, chunk)
  struct Slot {
    std::unique_ptr<Activations> acts;
    int pool = 0;  // index of the shape (layers, head) the set was sized for
    WorkPtr send;  // the activation sent from this set's output
  };

  void run(const Schedule& s, const int32_t* tokens, float grad_scale, double* loss_sums);
  // Adds the head's losses (last chunk only) into *loss_sum.
  void forward(const PipelineAction& a, const int32_t* tokens, float grad_scale, bool training, double* loss_sum);
  void backward(const PipelineAction& a);
  Activations& acquire(const PipelineAction& a);
  // Returns k's set to its pool; wait_send: once its send is joined on the stream (after_on_stream),
  // else once the send is seen done (until then it retires).
  void release(const Key& k, bool wait_send);
  Tensor acquire_grad();
  void wait_recv(const PipelineAction& a);
  // What the compute stream runs next (and every transfer posted after it) follows w: a receive's
  // data is there, a send's buffer may be written again. On a GPU over NCCL the host runs on.
  void after_on_stream(Work& w);
  // Returns send buffers to the pools: those seen done; all: every one, joined on the stream.
  void reap(bool all);

  const PipelinePlan& plan_;
  int stage_;
  Llama& model_;
  ParamEngine& engine_;
  Communicator& pp_;
  int64_t B_, T_, pitch_, chunk_tokens_;  // T_: the tokens of a sample on this rank; pitch_: a batch row
  int64_t rows_;       // tokens of the residual stream this rank holds (N, or N/tp with sequence parallelism)
  int64_t msg_bytes_;  // one activation or gradient message: rows_ · dim fp32
  std::vector<std::pair<int64_t, bool>> shapes_;                 // (layers, head) of the pools
  std::vector<int> pool_of_chunk_;                               // per local chunk
  std::vector<std::vector<std::unique_ptr<Activations>>> free_;  // per shape
  std::map<Key, Slot> live_;
  std::vector<Slot> retiring_;  // released, send still in flight
  std::vector<Tensor> free_grads_;
  std::map<Key, Tensor> grads_;  // received or computed input gradients
  std::vector<std::pair<WorkPtr, Tensor>> grad_sends_;
  std::map<std::tuple<int, int, int>, WorkPtr> recvs_;  // (op, mb, chunk)
  PipelineStepStats stats_;
};

}  // namespace ft
