#include "train/micro_batch_executor.h"

#include "util/error.h"

namespace ft {

MicroBatchExecutor::MicroBatchExecutor(const ExecContext& ctx, Llama& model, ParamEngine& engine,
                                       const MicroBatching& mb, int64_t seq_len, int64_t loss_chunk_tokens)
    : model_(model), engine_(engine), mb_(mb), seq_len_(seq_len), loss_sums_(ctx, mb.count), pinned_(ctx) {
  acts_.allocate(model.config(), mb.size, model.local_seq_len(seq_len), loss_chunk_tokens, {}, model.tp_split(),
                 model.precision(), ctx.device);
}

void MicroBatchExecutor::use_loss_slots(DeviceScalars slots) {
  FT_CHECK(slots.size() == loss_sums_.size(), "{} loss slots for {}", slots.size(), loss_sums_.size());
  loss_sums_ = std::move(slots);
}

void MicroBatchExecutor::train_queued(const Batch& batch, float grad_scale) {
  stage(batch);
  queue_staged(grad_scale);
}

void MicroBatchExecutor::stage(const Batch& batch) {
  check(batch);
  staged_ = pinned_.stage(batch);
  // Checked here for a replay, which runs no load_batch on the host (an eager step checks twice).
  model_.check_tokens(staged_, mb_.local_batch, seq_len_);
}

void MicroBatchExecutor::queue_staged(float grad_scale) {
  FT_CHECK(staged_, "queue_staged before stage");
  engine_.begin_step(static_cast<int>(mb_.count));
  loss_sums_.zero();
  const int32_t* seqs = staged_;
  for (int64_t mb = 0; mb < mb_.count; ++mb) {
    engine_.begin_micro_batch(static_cast<int>(mb));
    model_.forward_backward(engine_, acts_, seqs + mb * mb_.size * (seq_len_ + 1), grad_scale, loss_sums_.at(mb));
  }
}

void MicroBatchExecutor::evaluate(const Batch& batch, BatchLoss& total) {
  check(batch);
  loss_sums_.zero();
  const int32_t* seqs = pinned_.stage(batch);
  for (int64_t mb = 0; mb < mb_.count; ++mb)
    model_.forward_loss(engine_, acts_, seqs + mb * mb_.size * (seq_len_ + 1), loss_sums_.at(mb));
  for (double s : loss_sums_.read_back()) total.sum += s;  // one read-back per batch
  total.tokens += mb_.count * mb_.size * seq_len_;
}

void MicroBatchExecutor::check(const Batch& batch) const {
  FT_CHECK(batch.batch == mb_.local_batch && batch.seq_len == seq_len_,
           "a batch of {} x {} tokens for micro-batches of {} x {} x {}", batch.batch, batch.seq_len, mb_.count,
           mb_.size, seq_len_);
}

}  // namespace ft
