#include "parallel/pipeline_parallel/runner.h"

#include <algorithm>

#include "util/clock.h"
#include "util/error.h"

namespace ft {

PipelineRunner::PipelineRunner(const PipelinePlan& plan, int stage, Llama& model, ParamEngine& engine, Communicator& pp,
                               int64_t micro_batch, int64_t seq_len, int64_t loss_chunk_tokens)
    : plan_(plan),
      stage_(stage),
      model_(model),
      engine_(engine),
      pp_(pp),
      B_(micro_batch),
      // Context parallelism: this rank's T / cp tokens of each sample (its zig-zag chunks); the
      // batch rows stay whole samples of seq_len + 1 tokens.
      T_(model.local_seq_len(seq_len)),
      pitch_(seq_len + 1),
      chunk_tokens_(loss_chunk_tokens),
      // What this rank holds of a micro-batch's residual stream: (B·T, dim), or its N/tp-token
      // shard under sequence parallelism — each tp rank exchanges its own with the same tp index
      // (and, under context parallelism, the same cp index: the same chunks).
      rows_(model.tp_split().tokens(micro_batch * T_)),
      msg_bytes_(rows_ * model.config().dim * 4) {
  FT_CHECK(pp.size() == plan.partition.stages() && pp.rank() == stage,
           "pipeline group rank {} of {} for stage {} of {}", pp.rank(), pp.size(), stage, plan.partition.stages());
  // One pool per shape of chunk (layers, head): the stage's chunks of equal shape share sets.
  for (int k = stage; k < plan.partition.chunks(); k += plan.partition.stages()) {
    LayerSpan sp = plan.partition.span(k);
    std::pair<int64_t, bool> shape{sp.count, sp.head};
    auto it = std::find(shapes_.begin(), shapes_.end(), shape);
    pool_of_chunk_.push_back(static_cast<int>(it - shapes_.begin()));
    if (it == shapes_.end()) shapes_.push_back(shape);
  }
  free_.resize(shapes_.size());
}

PipelineRunner::~PipelineRunner() = default;

void PipelineRunner::train(const int32_t* tokens, float grad_scale, double* loss_sums) {
  run(plan_.train, tokens, grad_scale, loss_sums);
}

void PipelineRunner::forward_loss(const int32_t* tokens, double* loss_sums) {
  run(plan_.eval, tokens, 0.0f, loss_sums);
}

// The loop: each action of this stage's list, in order.
void PipelineRunner::run(const Schedule& s, const int32_t* tokens, float grad_scale, double* loss_sums) {
  stats_ = PipelineStepStats{};
  stats_.start = now_seconds();
  int64_t heads = 0;  // head forwards so far: the slot of the next one
  for (const PipelineAction& a : s.actions[static_cast<size_t>(stage_)]) {
    const Key k{a.mb, a.chunk};
    switch (a.kind) {
      case PipelineActionKind::kRecvActivation: {
        Activations& x = acquire(a);
        recvs_[{int(a.kind), a.mb, a.chunk}] = pp_.recv_async(x.res.front().data<float>(), msg_bytes_,
                                                              s.stage_of(a.chunk - 1), activation_tag(a.chunk - 1));
        break;
      }
      case PipelineActionKind::kForward: {
        const bool head = plan_.partition.has_head(a.chunk);
        FT_CHECK(!head || heads < s.micro_batches, "pipeline: more head forwards than the {} micro-batches",
                 s.micro_batches);
        forward(a, tokens, grad_scale, s.training, head ? loss_sums + heads++ : nullptr);
        break;
      }
      case PipelineActionKind::kSendActivation: {
        Slot& slot = live_.at(k);
        slot.send = pp_.send_async(slot.acts->res.back().data<float>(), msg_bytes_, s.stage_of(a.chunk + 1),
                                   activation_tag(a.chunk));
        if (!s.training) release(k, /*wait_send=*/false);
        break;
      }
      case PipelineActionKind::kRecvGrad: {
        Tensor g = acquire_grad();
        recvs_[{int(a.kind), a.mb, a.chunk}] =
            pp_.recv_async(g.data<float>(), msg_bytes_, s.stage_of(a.chunk + 1), grad_tag(a.chunk + 1));
        grads_[k] = g;
        break;
      }
      case PipelineActionKind::kBackward:
        backward(a);
        break;
      case PipelineActionKind::kSendGrad: {
        Tensor g = grads_.at(k);
        grads_.erase(k);
        grad_sends_.push_back(
            {pp_.send_async(g.data<float>(), msg_bytes_, s.stage_of(a.chunk - 1), grad_tag(a.chunk)), g});
        break;
      }
    }
    reap(false);
  }
  reap(true);
  FT_CHECK(live_.empty() && grads_.empty() && recvs_.empty(),
           "pipeline step ended with {} activation sets, {} "
           "gradients and {} receives outstanding",
           live_.size(), grads_.size(), recvs_.size());
  stats_.end = now_seconds();
}

void PipelineRunner::forward(const PipelineAction& a, const int32_t* tokens, float grad_scale, bool training,
                             double* loss_sum) {
  const StagePartition& part = plan_.partition;
  const bool first = part.has_embedding(a.chunk), last = part.has_head(a.chunk);
  if (a.chunk == 0) acquire(a);  // later chunks took their set when the receive was posted
  Activations& x = *live_.at({a.mb, a.chunk}).acts;
  wait_recv(a);
  const double t0 = now_seconds();
  if (training) engine_.begin_micro_batch(a.mb);
  if (first || last) model_.load_batch(x, tokens + a.mb * B_ * pitch_);
  if (first) model_.embed_forward(engine_, x);
  const LayerSpan span = part.span(a.chunk);
  for (int64_t l = span.first; l < span.first + span.count; ++l) model_.block_forward(engine_, x, l);
  if (last) model_.head_forward(engine_, x, grad_scale, training, loss_sum);
  stats_.trace.push_back({a, t0, now_seconds()});
  stats_.busy_s += stats_.trace.back().end - t0;
  if (!training && last) release({a.mb, a.chunk}, false);
}

void PipelineRunner::backward(const PipelineAction& a) {
  const StagePartition& part = plan_.partition;
  const Key k{a.mb, a.chunk};
  const bool first = part.has_embedding(a.chunk), last = part.has_head(a.chunk);
  wait_recv(a);
  const double t0 = now_seconds();
  engine_.begin_micro_batch(a.mb);
  Activations& x = *live_.at(k).acts;
  if (last) grads_[k] = acquire_grad();
  float* d_res = grads_.at(k).data<float>();  // (rows, C): gradient of the chunk's output, then of its input
  if (last) model_.head_backward(engine_, x, d_res);
  const LayerSpan span = part.span(a.chunk);
  for (int64_t l = span.first + span.count - 1; l >= span.first; --l) model_.block_backward(engine_, x, l, d_res);
  if (first) {
    model_.embed_backward(engine_, x, d_res);
    free_grads_.push_back(grads_.at(k));
    grads_.erase(k);
  }
  stats_.trace.push_back({a, t0, now_seconds()});
  stats_.busy_s += stats_.trace.back().end - t0;
  // The activation sent from this set was received before this backward could start.
  release(k, /*wait_send=*/true);
}

Activations& PipelineRunner::acquire(const PipelineAction& a) {
  Slot slot;
  slot.pool = pool_of_chunk_[static_cast<size_t>(plan_.train.local_chunk(a.chunk))];
  auto& pool = free_[static_cast<size_t>(slot.pool)];
  // A set whose output is still on the wire (forward-only passes) is reused once its send
  // completes rather than allocating another: the receiver needs nothing later from us to post it.
  for (auto it = retiring_.begin(); pool.empty() && it != retiring_.end(); ++it) {
    if (it->pool != slot.pool) continue;
    after_on_stream(*it->send);
    pool.push_back(std::move(it->acts));
    retiring_.erase(it);
    break;
  }
  if (pool.empty()) {
    slot.acts = std::make_unique<Activations>();
    slot.acts->allocate(model_.config(), B_, T_, chunk_tokens_, plan_.partition.span(a.chunk), model_.tp_split(),
                        model_.precision(), model_.context().device);
    FT_CHECK(slot.acts->res.front().nbytes() == static_cast<size_t>(msg_bytes_),
             "pipeline messages of {} bytes for a residual stream of {} bytes", msg_bytes_,
             slot.acts->res.front().nbytes());
  } else {
    slot.acts = std::move(pool.back());
    pool.pop_back();
    slot.acts->first_layer = plan_.partition.span(a.chunk).first;  // same shape, this chunk's layers
  }
  Activations& x = *slot.acts;
  auto [it, fresh] = live_.emplace(Key{a.mb, a.chunk}, std::move(slot));
  FT_CHECK(fresh, "activation set of micro-batch {}, chunk {} taken twice", a.mb, a.chunk);
  stats_.max_in_flight = std::max(stats_.max_in_flight, static_cast<int>(live_.size()));
  return x;
}

void PipelineRunner::release(const Key& k, bool wait_send) {
  auto it = live_.find(k);
  Slot slot = std::move(it->second);
  live_.erase(it);
  if (slot.send && wait_send) after_on_stream(*slot.send);
  if (slot.send && !wait_send && !slot.send->done()) {
    retiring_.push_back(std::move(slot));
    return;
  }
  free_[static_cast<size_t>(slot.pool)].push_back(std::move(slot.acts));
}

Tensor PipelineRunner::acquire_grad() {
  if (!free_grads_.empty()) {
    Tensor g = free_grads_.back();
    free_grads_.pop_back();
    return g;
  }
  return Tensor::empty({rows_, model_.config().dim}, DType::kF32, MemCategory::kCommunication, model_.context().device);
}

void PipelineRunner::wait_recv(const PipelineAction& a) {
  PipelineActionKind op =
      a.kind == PipelineActionKind::kForward ? PipelineActionKind::kRecvActivation : PipelineActionKind::kRecvGrad;
  auto it = recvs_.find({int(op), a.mb, a.chunk});
  if (it == recvs_.end()) return;  // the first chunk's forward and the last chunk's backward receive nothing
  after_on_stream(*it->second);
  recvs_.erase(it);
}

void PipelineRunner::after_on_stream(Work& w) {
  w.stream_wait(model_.context());
}

void PipelineRunner::reap(bool all) {
  for (size_t i = 0; i < grad_sends_.size();) {
    if (all) after_on_stream(*grad_sends_[i].first);
    if (!all && !grad_sends_[i].first->done()) {
      ++i;
      continue;
    }
    free_grads_.push_back(grad_sends_[i].second);
    grad_sends_.erase(grad_sends_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (size_t i = 0; i < retiring_.size();) {
    if (all) after_on_stream(*retiring_[i].send);
    if (!all && !retiring_[i].send->done()) {
      ++i;
      continue;
    }
    free_[static_cast<size_t>(retiring_[i].pool)].push_back(std::move(retiring_[i].acts));
    retiring_.erase(retiring_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

}  // namespace ft
