#include "train/pipeline_executor.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "util/error.h"
#include "util/log.h"

namespace ft {

PipelineExecutor::PipelineExecutor(const ExecContext& ctx, PipelinePlan plan, Mesh& mesh, Llama& model,
                                   ParamEngine& engine, const MicroBatching& mb, int64_t seq_len,
                                   int64_t loss_chunk_tokens)
    : plan_(std::move(plan)),
      mesh_(mesh),
      mb_(mb),
      seq_len_(seq_len),
      engine_(engine),
      loss_sums_(ctx, mb.count),
      pinned_(ctx) {
  runner_ = std::make_unique<PipelineRunner>(plan_, static_cast<int>(mesh_.coord().pp), model, engine, mesh_.pp(),
                                             mb.size, seq_len, loss_chunk_tokens);
}

PipelineExecutor::~PipelineExecutor() = default;

int64_t PipelineExecutor::loss_tokens() const {
  const bool last = mesh_.coord().pp == mesh_.degrees().pp - 1;
  return last ? mb_.count * mb_.size * seq_len_ : 0;
}

void PipelineExecutor::use_loss_slots(DeviceScalars slots) {
  FT_CHECK(slots.size() == loss_sums_.size(), "{} loss slots for {}", slots.size(), loss_sums_.size());
  loss_sums_ = std::move(slots);
}

void PipelineExecutor::train_queued(const Batch& batch, float grad_scale) {
  check(batch);
  const int64_t sent0 = mesh_.pp().stats().bytes_sent[static_cast<size_t>(CollKind::kSendRecv)];
  engine_.begin_step(static_cast<int>(mb_.count));
  loss_sums_.zero();
  runner_->train(pinned_.stage(batch), grad_scale, loss_sums_.at(0));
  const PipelineStepStats& p = runner_->last();
  const int64_t sent = mesh_.pp().stats().bytes_sent[static_cast<size_t>(CollKind::kSendRecv)] - sent0;
  stats_ = {{"pp_send_bytes", static_cast<double>(sent)},
            {"pp_in_flight", p.max_in_flight},
            {"pp_busy_s", p.busy_s},
            {"pp_start", p.start},
            {"pp_end", p.end}};
}

void PipelineExecutor::evaluate(const Batch& batch, BatchLoss& total) {
  check(batch);
  loss_sums_.zero();
  runner_->forward_loss(pinned_.stage(batch), loss_sums_.at(0));
  total.sum += loss_sums_.read_back_sum();  // the batch's forwards summed first, then added
  total.tokens += loss_tokens();
}

void PipelineExecutor::check(const Batch& batch) const {
  FT_CHECK(batch.batch == mb_.local_batch && batch.seq_len == seq_len_,
           "a batch of {} x {} tokens for micro-batches of {} x {} x {}", batch.batch, batch.seq_len, mb_.count,
           mb_.size, seq_len_);
}

// Measured bubble: each pipeline (ranks sharing dp, cp and tp coordinates) runs from its first
// stage's start to its last stage's end; a stage is idle for that span minus its busy time.
// Timestamps come from one monotonic clock, comparable across the ranks of one host.
void PipelineExecutor::summarize(nlohmann::json& r, nlohmann::json& j) const {
  const int n = mesh_.world_size();
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<double, double>> span;  // (dp, cp, tp) -> (start, end)
  auto group = [&](int rank) {
    MeshCoord c = Mesh::coord_of(mesh_.degrees(), rank);
    return std::make_tuple(c.dp, c.cp, c.tp);
  };
  for (int i = 0; i < n; ++i) {
    auto [it, fresh] = span.try_emplace(group(i), r["pp_start"][i].get<double>(), r["pp_end"][i].get<double>());
    it->second.first = std::min(it->second.first, r["pp_start"][i].get<double>());
    it->second.second = std::max(it->second.second, r["pp_end"][i].get<double>());
  }
  double busy = 0, total = 0, bytes = 0;
  nlohmann::json idle = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    auto [start, end] = span[group(i)];
    idle.push_back(end - start - r["pp_busy_s"][i].get<double>());
    busy += r["pp_busy_s"][i].get<double>();
    total += end - start;
    bytes += r["pp_send_bytes"][i].get<double>();
  }
  r["pp_idle_s"] = idle;
  r.erase("pp_start");  // absolute clock readings: only their differences mean something
  r.erase("pp_end");
  j["pp_bubble"] = total > 0 ? 1 - busy / total : 0;
  j["pp_bubble_theory"] = plan_.train_report.bubble;
  j["pp_bubble_theory_flops"] = plan_.flops_report.bubble;
  j["pp_bytes"] = static_cast<int64_t>(bytes);
}

void PipelineExecutor::log_plan() const {
  log_info("pipeline: {}; {}; simulated bubble {:.3f} (unit-time actions), {:.3f} (this partition's FLOPs)",
           plan_.train.describe(), plan_.partition.describe(), plan_.train_report.bubble, plan_.flops_report.bubble);
  if (mb_.count < mesh_.degrees().pp)
    log_warn("pipeline: {} micro-batch(es) for {} stages leave most stages idle; raise parallel.micro_batches",
             mb_.count, mesh_.degrees().pp);
}

}  // namespace ft
