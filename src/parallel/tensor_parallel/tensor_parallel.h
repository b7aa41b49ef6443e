// Tensor parallelism (Megatron-style) over the mesh's tp axis — the folder's entry point.
//
//   TpGroup: the TpComm the model calls at its f/g points (model/tp_comm.h), implemented with
//            the tp communicator's collectives: copy/reduce pairs are all-reduces, the
//            sequence-parallel gather/scatter pairs all-gathers and reduce-scatters, and the
//            vocab-parallel cross-entropy combines per-row statistics (max, sum of exp, target
//            logit), so no rank ever holds the full logits.
// Every collective here moves buffers of the rank's context whose next reader is that context's
// stream, so it is joined there (Work::stream_wait): over NCCL on a GPU the compute stream waits
// for it and the host runs on; over MPI, or on the CPU, that is wait(). Host scalars (the
// gradient norm's tp sum) stay blocking.
//   TpGradSync: what the ParamEngine (parallel/data_parallel) does about parameters several tp
//            ranks hold: sums their partial gradients over the holders (replicated kv heads;
//            norm weights under sequence parallelism) and counts each replicated piece once in
//            the global gradient norm.
// The split itself is ParamLayout::llama(cfg, align, tp_rank, tp_size): the model derives its
// local sizes from the shapes it is given.
//
//   TpGroup tp(mesh.tp(), cfg.parallel.sequence_parallel);
//   Llama model(ctx, cfg.model, engine.layout(), precision, &tp);
//   TpGradSync sync(engine.layout(), mesh.tp());
//   sync.sum_partial(grads_of_unit, u);  double s = sync.sum_squares(g, 0, layout.total());
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/param_layout.h"
#include "model/tp_comm.h"
#include "parallel/comm/comm.h"
#include "tensor/exec_context.h"
#include "tensor/tensor.h"

namespace ft {

class TpGroup final : public TpComm {
 public:
  TpGroup(const ExecContext& ctx, Communicator& tp, bool sequence_parallel)
      : ctx_(ctx), tp_(tp), sp_(sequence_parallel) {}
  int64_t size() const override { return tp_.size(); }
  int64_t rank() const override { return tp_.rank(); }
  bool sequence_parallel() const override { return sp_; }

  void copy_backward(float* dx, int64_t n) override { on_stream(tp_.all_reduce_async(dx, n)); }
  void reduce_forward(float* y, int64_t n) override { on_stream(tp_.all_reduce_async(y, n)); }
  void gather_forward(float* full, const float* shard, int64_t n) override {
    on_stream(tp_.all_gather_async(full, shard, n * 4));
  }
  void gather_backward(float* dshard, const float* dfull, int64_t n) override {
    on_stream(tp_.reduce_scatter_async(dshard, dfull, n));
  }
  void combine_xent_rows(float* lse, float* target_logit, int64_t n) override;

 private:
  ExecContext ctx_;
  Communicator& tp_;
  bool sp_;
  Tensor stats_;  // (3 · rows) doubles: row maxima, exp sums, target logits
  // What ctx's stream runs next follows the collective (the host waits only where it must).
  void on_stream(const WorkPtr& w) const { w->stream_wait(ctx_); }
};

class TpGradSync {
 public:
  TpGradSync(const ExecContext& ctx, const ParamLayout& layout, Communicator& tp);
  // Sums the partial gradients of unit u over the tp ranks that hold them, in place.
  // unit_grads points at the unit's first element. Collective over the tp group, joined on ctx's
  // stream (what the stream runs next sees the sums; the host does not wait on a GPU).
  void sum_partial(float* unit_grads, int unit);
  // Adds the sum of squares of the gradients in arena range [begin, end) that this rank counts
  // (replicated pieces only on the first of their holders) into *sum, a double in ctx's device
  // memory, range by range. grads points at element begin.
  void sum_squares(const ExecContext& ctx, double* sum, const float* grads, int64_t begin, int64_t end) const;
  // Sums a per-rank partial sum of squares over the tp group (a no-op for one rank).
  double all_reduce(double s);

 private:
  ExecContext ctx_;
  struct Slot {
    int64_t local, count;  // piece: unit-relative offset and elements
    int64_t at;            // where the piece goes in the exchange buffer
  };
  Communicator& tp_;
  std::vector<std::vector<Slot>> slots_;              // per unit
  std::vector<int64_t> buffer_size_;                  // per unit
  std::vector<std::pair<int64_t, int64_t>> counted_;  // arena ranges this rank counts, sorted
  Tensor buffer_;                                     // the exchange buffer (the largest unit's)
};

}  // namespace ft
