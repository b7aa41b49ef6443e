#include "dryrun/dry_run.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "config/plan_job.h"
#include "dryrun/fake_comm.h"
#include "model/param_layout.h"
#include "parallel/data_parallel/shard_plan.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "parallel/wires.h"
#include "plan/traffic.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft {
namespace {

// The model's pieces a rank's layout holds, by global unit: 0 embedding, 1..L blocks, L+1 head.
struct Held {
  bool embed = false, head = false;
  int64_t blocks = 0;
};

Held held_units(const ParamLayout& layout, const ModelConfig& m) {
  Held h;
  for (int u = 0; u < layout.num_units(); ++u) {
    const int g = layout.global_unit(u);
    if (g == 0)
      h.embed = true;
    else if (g <= m.n_layers)
      ++h.blocks;
    else
      h.head = true;
  }
  if (m.tie_embeddings && h.embed) h.head = true;  // the tied table is the head as well
  return h;
}

// One training step's collectives, as Trainer::step, the ParamEngine of parallel.zero, the
// tensor-parallel model and the pipeline runner issue them (sizes only, into fake communicators).
// Not counted: PowerSGD's compression (counted as the plain all-reduce), checkpoints, validation.
void one_step(const Config& cfg, const ParamLayout& layout, const ShardPlan& shard, const Schedule* schedule,
              int64_t micro_batches, int64_t micro_tokens, Mesh& mesh) {
  const ParallelConfig& par = cfg.parallel;
  const ModelConfig& m = cfg.model;
  const int64_t C = m.dim, N = micro_tokens, P = par.tp;
  const bool sp = par.sequence_parallel && P > 1;
  const Held h = held_units(layout, m);
  Communicator &dp = mesh.dp(), &tp = mesh.tp(), &pp = mesh.pp(), &world = mesh.world();
  const TrainerWires w = trainer_wires(par, cfg.train.precision == Precision::kBF16);
  const Wire wire = w.grads;
  const int U = layout.num_units();
  // Full recompute runs each block's forward again in backward, its collectives included.
  const int64_t again = cfg.model.recompute == Recompute::kFull ? 2 : 0;

  // Tensor parallelism, per micro-batch: the block's two row-parallel outputs and the gradients
  // of its two column-parallel inputs (all-reduces of the (N, C) stream; with sequence
  // parallelism reduce-scatters onto the (N/tp, C) shards, and all-gathers of the normed GEMM
  // inputs — forward, recompute, backward's weight gradients, the head's — and of the
  // scattered outputs' gradients), the vocabulary-parallel embedding and head, the
  // cross-entropy's row statistics.
  for (int64_t mb = 0; mb < micro_batches && P > 1; ++mb) {
    const int64_t ends = (h.embed ? 1 : 0) + (h.head ? 1 : 0);
    if (sp) {
      const int64_t shard = N / P * C;
      for (int64_t i = 0; i < (4 + again) * h.blocks + (h.head ? 1 : 0); ++i)
        tp.all_gather(nullptr, nullptr, shard * wire_bytes(w.gemm_inputs));
      for (int64_t i = 0; i < 2 * h.blocks + (h.embed ? 1 : 0); ++i)
        tp.all_gather(nullptr, nullptr, shard * wire_bytes(w.activations));
      for (int64_t i = 0; i < (4 + again) * h.blocks + ends; ++i)
        tp.reduce_scatter(nullptr, nullptr, shard, w.activations);
    } else {
      for (int64_t i = 0; i < (4 + again) * h.blocks + ends; ++i)
        tp.all_reduce(static_cast<float*>(nullptr), N * C, ReduceOp::kSum, w.activations);
    }
    if (h.head) {
      tp.all_reduce(static_cast<double*>(nullptr), N, ReduceOp::kMax);
      tp.all_reduce(static_cast<double*>(nullptr), 2 * N);
    }
  }
  // Partial gradients of replicated pieces (norm weights under sequence parallelism, replicated
  // kv heads) are summed over tp per unit (TpGradSync::sum_partial): once a step, or every
  // micro-batch under ZeRO 2 and 3.
  std::vector<int64_t> partial(static_cast<size_t>(U), 0);
  for (const ParamSpec& p : layout.specs()) {
    if (!p.tp_partial_grad || P == 1) continue;
    partial[static_cast<size_t>(p.unit)] += p.tp_replicas == P ? p.numel() : shape_numel(p.global_shape);
  }
  const int64_t syncs = par.zero >= 2 ? micro_batches : 1;
  for (int64_t s = 0; s < syncs; ++s)
    for (int64_t n : partial)
      if (n > 0) tp.all_reduce(static_cast<float*>(nullptr), n);

  // Pipeline: every send of this stage's part of the schedule carries what a tp rank holds of
  // the residual stream of one micro-batch.
  if (schedule) {
    const int64_t msg = (sp ? N / P : N) * C * wire_bytes(w.activations);
    for (const PipelineAction& a : schedule->actions[static_cast<size_t>(mesh.coord().pp)])
      if (a.kind == PipelineActionKind::kSendActivation || a.kind == PipelineActionKind::kSendGrad)
        pp.send(nullptr, msg, 0, 0);
  }

  // Data parallelism by ZeRO stage (parallel/data_parallel/).
  switch (par.zero) {
    case 0: {  // buckets of whole units, ~bucket_mb, from the last unit down, all-reduced once
      const int64_t target = static_cast<int64_t>(par.bucket_mb * 1024 * 1024 / 4);
      int64_t begin = 0, end = 0;
      bool open = false;
      for (int u = U - 1; u >= 0; --u) {
        if (!open || end - begin >= target) {
          if (open) dp.all_reduce(static_cast<float*>(nullptr), end - begin, ReduceOp::kSum, wire);
          end = layout.unit_end(u);
          open = true;
        }
        begin = layout.unit_begin(u);
      }
      if (open) dp.all_reduce(static_cast<float*>(nullptr), end - begin, ReduceOp::kSum, wire);
      break;
    }
    case 1:
    case 2:  // gradients reduce-scattered per unit (ZeRO 2: every micro-batch), weights
             // all-gathered
      for (int64_t s = 0; s < (par.zero == 2 ? micro_batches : 1); ++s)
        for (int u = U - 1; u >= 0; --u) dp.reduce_scatter(nullptr, nullptr, shard.piece_size(u), wire);
      for (int u = 0; u < U; ++u) dp.all_gather(nullptr, nullptr, shard.piece_size(u) * wire_bytes(w.weights));
      break;
    default:  // ZeRO 3, every micro-batch: gather each unit for forward and again for backward
              // (not the rank's last unit, which forward keeps for backward), reduce-scatter its
              // gradients
      for (int64_t mb = 0; mb < micro_batches; ++mb) {
        for (int u = 0; u < U; ++u) dp.all_gather(nullptr, nullptr, shard.piece_size(u) * wire_bytes(w.weights));
        for (int u = U - 1; u >= 0; --u) {
          if (u != U - 1) dp.all_gather(nullptr, nullptr, shard.piece_size(u) * wire_bytes(w.weights));
          dp.reduce_scatter(nullptr, nullptr, shard.piece_size(u), wire);
        }
      }
  }
  // The gradient norm: summed over dp (sharded gradients) and over tp.
  if (par.zero >= 1) dp.all_reduce(static_cast<double*>(nullptr), 1);
  if (P > 1) tp.all_reduce(static_cast<double*>(nullptr), 1);
  // Trainer::sum_over_ranks (loss, norm and data hash over the stages, loss and data hash over
  // dp) and the training guards' agreement (TrainingFaults::judge: rank 0's loss and norm to
  // every rank), and at the step boundary whether any rank was asked to stop (StopRequest::agreed).
  pp.all_reduce(static_cast<double*>(nullptr), 3);
  dp.all_reduce(static_cast<double*>(nullptr), 2);
  if (world.size() > 1) world.broadcast(nullptr, 16, 0);
  if (world.size() > 1) world.all_reduce(static_cast<double*>(nullptr), 2, ReduceOp::kMax);
}

std::string human_seconds(double s) {
  if (s <= 0) return "0";
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::vector<int> members(Communicator& c) {
  std::vector<int> out;
  for (int i = 0; i < c.size(); ++i) out.push_back(c.world_rank_of(i));
  return out;
}

// Ranks that differ only by their dp / tp index (and group members) are alike in every figure
// printed (the world broadcast's few bytes depend on the rank's place in the tree: JSON only).
std::string kind_key(const DryRunRank& r) {
  nlohmann::json j = {
      r.arena,   r.shard, r.in_flight, r.memory.total(), r.dp.total_bytes(), r.tp.total_bytes(), r.pp.total_bytes(),
      r.coord.pp};
  return j.dump();
}

nlohmann::json comm_json(const CommStats& s) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 0; k < kNumCollKinds; ++k)
    if (s.bytes_sent[k] > 0) j[coll_kind_name(static_cast<CollKind>(k))] = s.bytes_sent[k];
  j["total"] = s.total_bytes();
  return j;
}

}  // namespace

DryRun dry_run(const Config& cfg, int64_t world_size, const plan::GpuSpec& device) {
  DryRun d;
  d.cfg = cfg;
  const ParallelConfig& par = cfg.parallel;
  Mesh::validate(par, world_size);
  d.job = plan::job_for_run(cfg, device);
  d.layout = plan::layout_for_run(cfg);
  plan::validate_layout(d.job, d.layout);
  const MicroBatching mb = split_batch(cfg.train.batch_size, cfg.train.micro_batch_size, par);
  d.micro_batches = mb.count;
  std::optional<PipelinePlan> pipeline;
  if (par.pp > 1) {
    pipeline = PipelinePlan::make(cfg.model, cfg.train.seq_len, par, mb.count);
    d.schedule = pipeline->train.describe();
  }
  const bool sp = par.sequence_parallel && par.tp > 1;
  for (int r = 0; r < world_size; ++r) {
    Mesh mesh = fake_mesh(par, r);
    DryRunRank k;
    k.rank = r;
    k.coord = mesh.coord();
    k.dp_group = members(mesh.dp());
    k.tp_group = members(mesh.tp());
    k.pp_group = members(mesh.pp());
    const int stage = static_cast<int>(k.coord.pp);
    std::vector<int> units;
    if (pipeline) units = pipeline->partition.stage_units(stage);
    // What the Trainer builds for this rank (train/trainer.cpp), as a description only.
    const ParamLayout layout = ParamLayout::llama(cfg.model, par.dp, units,
                                                  TpShard{.rank = k.coord.tp, .size = par.tp, .sequence_parallel = sp});
    const ShardPlan shard(layout, static_cast<int>(k.coord.dp), static_cast<int>(par.dp));
    k.arena = layout.total();
    k.shard = shard.shard_size();
    k.in_flight = pipeline ? pipeline->train.in_flight_bound[static_cast<size_t>(stage)] : 1;
    k.memory = plan::estimate_stage_memory(d.job, d.layout, stage);
    one_step(cfg, layout, shard, pipeline ? &pipeline->train : nullptr, mb.count, mb.size * cfg.train.seq_len, mesh);
    k.dp = mesh.dp().stats();
    k.tp = mesh.tp().stats();
    k.pp = mesh.pp().stats();
    k.world = mesh.world().stats();
    d.ranks.push_back(std::move(k));
  }
  d.time = plan::estimate_step_time(d.job, d.layout);
  return d;
}

std::vector<AxisTraffic> axis_traffic(const DryRun& d) {
  const ParallelConfig& par = d.cfg.parallel;
  const plan::RankTraffic t = plan::rank_traffic(d.job, d.layout);
  std::vector<AxisTraffic> out = {
      {"dp", par.dp, 0, 0, t.dp(), d.time.dp_comm, d.time.dp_exposed},
      {"tp", par.tp, 0, 0, t.tp, d.time.tp_comm, d.time.tp_comm},  // not overlapped
      {"pp", par.pp, 0, 0, t.pp, d.time.pp_comm, d.time.pp_comm},
  };
  for (const DryRunRank& r : d.ranks) {
    const CommStats* s[] = {&r.dp, &r.tp, &r.pp};
    for (size_t a = 0; a < out.size(); ++a) {
      const auto b = static_cast<double>(s[a]->total_bytes());
      out[a].max_rank_bytes = std::max(out[a].max_rank_bytes, b);
      out[a].total_bytes += b;
    }
  }
  return out;
}

nlohmann::json dry_run_json(const DryRun& d) {
  nlohmann::json ranks = nlohmann::json::array();
  double peak = 0;
  for (const DryRunRank& r : d.ranks) {
    nlohmann::json mem = nlohmann::json::object();
    for (const auto& [name, bytes] : r.memory.items()) mem[name] = bytes;
    mem["total"] = r.memory.total();
    peak = std::max(peak, r.memory.total());
    ranks.push_back(
        {{"rank", r.rank},
         {"coord", {{"pp", r.coord.pp}, {"dp", r.coord.dp}, {"tp", r.coord.tp}}},
         {"groups", {{"dp", r.dp_group}, {"tp", r.tp_group}, {"pp", r.pp_group}}},
         {"arena_elements", r.arena},
         {"shard_elements", r.shard},
         {"in_flight", r.in_flight},
         {"memory_bytes", mem},
         {"comm_bytes_per_step",
          {{"dp", comm_json(r.dp)}, {"tp", comm_json(r.tp)}, {"pp", comm_json(r.pp)}, {"world", comm_json(r.world)}}}});
  }
  nlohmann::json axes = nlohmann::json::object();
  for (const AxisTraffic& a : axis_traffic(d))
    axes[a.axis] = {{"group_size", a.group},          {"max_rank_bytes", a.max_rank_bytes},
                    {"total_bytes", a.total_bytes},   {"planner_rank_bytes", a.planner_bytes},
                    {"planner_seconds", a.planner_s}, {"planner_exposed_seconds", a.planner_exposed_s}};
  return {{"world_size", d.ranks.size()},  {"comm_per_axis_per_step", axes},    {"planner_step_seconds", d.time.total},
          {"layout", d.layout.describe()}, {"device", d.job.gpu.name},          {"micro_batches", d.micro_batches},
          {"schedule", d.schedule},        {"memory_per_rank_max_bytes", peak}, {"ranks", ranks}};
}

std::string format_dry_run(const DryRun& d) {
  std::string out = fmt::format(
      "dry run: {} ranks, {} ({}); model {} ({:.2f}B parameters), batch {} x {} tokens, {} "
      "micro-batch(es) per "
      "rank{}\nnothing was allocated: every rank's mesh, shard plan and schedule were built with "
      "fake "
      "communicators; memory is the planner's accounting (`fluxtrain plan` reports the "
      "largest)\n\n",
      d.ranks.size(), d.layout.describe(), d.job.gpu.name, d.cfg.model.preset,
      static_cast<double>(d.cfg.model.num_params()) / 1e9, d.cfg.train.batch_size, d.cfg.train.seq_len, d.micro_batches,
      d.schedule.empty() ? "" : "; schedule " + d.schedule);
  // Group ranks whose figures are identical (they differ only by their dp / tp index).
  std::map<std::string, std::vector<int>> kinds;
  std::vector<std::string> order;
  for (const DryRunRank& r : d.ranks) {
    std::string key = kind_key(r);
    if (!kinds.count(key)) order.push_back(key);
    kinds[key].push_back(r.rank);
  }
  out += fmt::format("{:<16} {:>5} {:>12} {:>12} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>13} {:>11} {:>11}\n",
                     "ranks", "stage", "arena", "zero shard", "params", "grads", "optimizer", "activations", "other",
                     "total", "dp B/step", "tp B/step", "pp B/step");
  double peak = 0;
  for (const std::string& key : order) {
    const std::vector<int>& rs = kinds[key];
    const DryRunRank& r = d.ranks[static_cast<size_t>(rs.front())];
    const plan::MemoryBreakdown& m = r.memory;
    const double other = m.total() - m.parameters - m.gradients - m.optimizer_state - m.activations;
    peak = std::max(peak, m.total());
    std::string who =
        rs.size() == 1 ? std::to_string(rs[0]) : fmt::format("{}..{} ({})", rs.front(), rs.back(), rs.size());
    out += fmt::format(
        "{:<16} {:>5} {:>12} {:>12} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>13} {:>11} "
        "{:>11}\n",
        who, r.coord.pp, r.arena, r.shard, human_bytes(m.parameters), human_bytes(m.gradients),
        human_bytes(m.optimizer_state), human_bytes(m.activations), human_bytes(other), human_bytes(m.total()),
        human_bytes(static_cast<double>(r.dp.total_bytes())), human_bytes(static_cast<double>(r.tp.total_bytes())),
        human_bytes(static_cast<double>(r.pp.total_bytes())));
  }
  double dp = 0, tp = 0, pp = 0;
  for (const DryRunRank& r : d.ranks) {
    dp += static_cast<double>(r.dp.total_bytes());
    tp += static_cast<double>(r.tp.total_bytes());
    pp += static_cast<double>(r.pp.total_bytes());
  }
  out += fmt::format(
      "\nlargest rank: {} ({:.0f} bytes){}; all ranks together send per step: dp {}, tp {}, pp "
      "{}\n",
      human_bytes(peak), peak, peak <= d.job.gpu.memory_bytes ? "" : " — does not fit the device", human_bytes(dp),
      human_bytes(tp), human_bytes(pp));
  out += fmt::format(
      "\ncommunication per step by mesh axis (NCCL on GPUs): bytes the ranks send, counted with the communicator's "
      "ring algorithms, beside the planner's bytes for its rank (plan/traffic.h: the last stage) and its time for them "
      "on {} (step {})\n",
      d.job.gpu.name, human_seconds(d.time.total));
  out += fmt::format("{:<5} {:>6} {:>16} {:>16} {:>16} {:>14} {:>14} {:>16}\n", "axis", "group", "largest rank",
                     "all ranks", "planner's rank", "planner time", "exposed", "rank rate");
  for (const AxisTraffic& a : axis_traffic(d)) {
    if (a.group == 1) continue;
    const std::string rate = a.planner_s > 0 ? human_bytes(a.max_rank_bytes / a.planner_s) + "/s" : "-";
    out += fmt::format("{:<5} {:>6} {:>16} {:>16} {:>16} {:>14} {:>14} {:>16}\n", a.axis, a.group,
                       human_bytes(a.max_rank_bytes), human_bytes(a.total_bytes), human_bytes(a.planner_bytes),
                       human_seconds(a.planner_s), human_seconds(a.planner_exposed_s), rate);
  }
  return out;
}

}  // namespace ft
