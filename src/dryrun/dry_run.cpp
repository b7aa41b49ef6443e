#include "dryrun/dry_run.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "config/plan_job.h"
#include "dryrun/fake_comm.h"
#include "dryrun/step_trace.h"
#include "model/param_layout.h"
#include "parallel/data_parallel/shard_plan.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "plan/traffic.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft {
namespace {

// A traced step's collectives, each distinct call with how often the step made it: replaying a
// call for a rank costs O(1), so a rank costs the number of distinct calls, not of calls.
using CallCounts = std::map<plan::CollRecord, int64_t>;

CallCounts count_calls(const std::vector<plan::CollRecord>& calls) {
  CallCounts out;
  for (const plan::CollRecord& c : calls) ++out[c];
  return out;
}

// What the traced calls send from the rank at `index` of a group of `size` ("dp", "tp", "pp",
// "world"), counted as the fake communicators count them.
CommStats replay(const CallCounts& calls, const std::string& group, int64_t index, int64_t size) {
  CommStats s;
  for (const auto& [c, times] : calls) {
    if (c.group != group || c.op == plan::CollOp::kRecv) continue;
    const auto k = static_cast<size_t>(FakeCommunicator::stats_kind(c.op));
    s.bytes_sent[k] += times * FakeCommunicator::bytes_sent(c, static_cast<int>(index), static_cast<int>(size));
    s.calls[k] += times;
  }
  return s;
}

// The world ranks of `r`'s group on one axis, in the axis's order (Mesh::create_with's groups).
std::vector<int> group_members(const ParallelConfig& p, const MeshCoord& c, const std::string& axis) {
  auto rank_of = [&](int64_t pp, int64_t dp, int64_t cp, int64_t tp) {
    return static_cast<int>(((pp * p.dp + dp) * p.cp + cp) * p.tp + tp);
  };
  std::vector<int> out;
  if (axis == "tp")
    for (int64_t i = 0; i < p.tp; ++i) out.push_back(rank_of(c.pp, c.dp, c.cp, i));
  if (axis == "dp")
    for (int64_t i = 0; i < p.dp; ++i) out.push_back(rank_of(c.pp, i, c.cp, c.tp));
  if (axis == "pp")
    for (int64_t i = 0; i < p.pp; ++i) out.push_back(rank_of(i, c.dp, c.cp, c.tp));
  if (axis == "cp")
    for (int64_t i = 0; i < p.cp; ++i) out.push_back(rank_of(c.pp, c.dp, i, c.tp));
  return out;
}

std::string human_seconds(double s) {
  if (s <= 0) return "0";
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

// Ranks that differ only by their dp / tp index (and group members) are alike in every figure
// printed (the world broadcast's few bytes depend on the rank's place in the tree: JSON only).
std::string kind_key(const DryRunRank& r) {
  nlohmann::json j = {r.arena,
                      r.shard,
                      r.in_flight,
                      r.memory.total(),
                      r.dp.total_bytes(),
                      r.tp.total_bytes(),
                      r.pp.total_bytes(),
                      r.coord.pp,
                      r.cp.total_bytes()};
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
  if (world_size > kMaxDryRunRanks)
    throw Error(fmt::format("--world-size {}: the dry run plans and prints every rank, at most {}", world_size,
                            kMaxDryRunRanks),
                "plan a smaller world with the same tp and pp (fewer dp ranks: every dp rank of a stage is alike), "
                "or size the whole job with `fluxtrain plan`");
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
  // The step's collectives, recorded from the real step's code (dryrun/step_trace.h) for one rank
  // of each pipeline stage, (dp 0, cp 0, tp 0): the other ranks of a stage make the same calls — the
  // layouts of the tp ranks and the shards of the dp ranks are equal in size (units padded to a
  // multiple of dp, tp shards even), and no call depends on a rank's index but through its group
  // (tests/unit/dryrun_trace_replay_test.cpp traces every rank of small layouts to check it).
  // What a call sends from each rank is then counted for that rank's place in its groups.
  // train.precision = "auto" is read as the planner reads it for this dry run (the wires of
  // parallel/wires.h: bf16 only when asked for), not as the recording GPU would settle it.
  Config traced = cfg;
  if (traced.train.precision_is_auto())
    traced.train.settle_auto_precision(traced.train.precision, "the dry run reads the configured precision");
  std::vector<CallCounts> stage_calls;
  for (int64_t s = 0; s < par.pp; ++s) {
    const int rep = static_cast<int>(s * par.dp * par.cp * par.tp);
    stage_calls.push_back(count_calls(trace_training_step(traced, {.world_rank = rep, .ops = false}).collectives));
  }
  const bool sp = par.sequence_parallel && par.tp > 1;
  // What the Trainer builds for a rank (train/trainer.cpp), as a description only: one layout per
  // (stage, tp rank); the memory is the stage's.
  std::map<std::pair<int64_t, int64_t>, ParamLayout> layouts;
  std::vector<plan::MemoryBreakdown> memory;
  for (int64_t s = 0; s < par.pp; ++s) memory.push_back(plan::estimate_stage_memory(d.job, d.layout, s));
  d.ranks.reserve(static_cast<size_t>(world_size));
  for (int64_t r = 0; r < world_size; ++r) {
    DryRunRank k;
    k.rank = static_cast<int>(r);
    k.coord = Mesh::coord_of(par, r);
    const int stage = static_cast<int>(k.coord.pp);
    auto it = layouts.find({k.coord.pp, k.coord.tp});
    if (it == layouts.end()) {
      std::vector<int> units;
      if (pipeline) units = pipeline->partition.stage_units(stage);
      it = layouts
               .emplace(std::pair{k.coord.pp, k.coord.tp},
                        ParamLayout::llama(cfg.model, par.dp * par.cp, units,
                                           TpShard{.rank = k.coord.tp, .size = par.tp, .sequence_parallel = sp}))
               .first;
    }
    const ParamLayout& layout = it->second;
    k.arena = layout.total();
    const int64_t dp_cp_index = k.coord.dp * par.cp + k.coord.cp;  // the gradient group's (Mesh::dp_cp)
    k.shard = ShardPlan(layout, static_cast<int>(dp_cp_index), static_cast<int>(par.dp * par.cp)).shard_size();
    k.in_flight = pipeline ? pipeline->train.in_flight_bound[static_cast<size_t>(stage)] : 1;
    k.memory = memory[static_cast<size_t>(stage)];
    const CallCounts& calls = stage_calls[static_cast<size_t>(stage)];
    k.dp = replay(calls, "dp", k.coord.dp, par.dp);
    if (par.cp > 1) k.dp += replay(calls, "dp_cp", dp_cp_index, par.dp * par.cp);
    k.cp = replay(calls, "cp", k.coord.cp, par.cp);
    k.tp = replay(calls, "tp", k.coord.tp, par.tp);
    k.pp = replay(calls, "pp", k.coord.pp, par.pp);
    k.world = replay(calls, "world", r, world_size);
    d.ranks.push_back(std::move(k));
  }
  d.time = plan::estimate_step_time(d.job, d.layout);
  return d;
}

std::vector<AxisTraffic> axis_traffic(const DryRun& d) {
  const ParallelConfig& par = d.cfg.parallel;
  const plan::RankTraffic t = plan::rank_traffic(d.job, d.layout);
  std::vector<AxisTraffic> out = {
      {"dp", par.dp * par.cp, 0, 0, t.dp(), d.time.dp_comm, d.time.dp_exposed},  // gradients over dp × cp
      {"tp", par.tp, 0, 0, t.tp, d.time.tp_comm, d.time.tp_comm},                // not overlapped
      {"pp", par.pp, 0, 0, t.pp, d.time.pp_comm, d.time.pp_comm},
  };
  if (par.cp > 1) out.push_back({"cp", par.cp, 0, 0, t.cp, d.time.cp_comm, d.time.cp_exposed});
  for (const DryRunRank& r : d.ranks) {
    const CommStats* s[] = {&r.dp, &r.tp, &r.pp, &r.cp};  // out.size() <= 4
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
    nlohmann::json rank = {
        {"rank", r.rank},
        {"coord", {{"pp", r.coord.pp}, {"dp", r.coord.dp}, {"tp", r.coord.tp}}},
        {"groups",
         {{"dp", group_members(d.cfg.parallel, r.coord, "dp")},
          {"tp", group_members(d.cfg.parallel, r.coord, "tp")},
          {"pp", group_members(d.cfg.parallel, r.coord, "pp")}}},
        {"arena_elements", r.arena},
        {"shard_elements", r.shard},
        {"in_flight", r.in_flight},
        {"memory_bytes", mem},
        {"comm_bytes_per_step",
         {{"dp", comm_json(r.dp)}, {"tp", comm_json(r.tp)}, {"pp", comm_json(r.pp)}, {"world", comm_json(r.world)}}}};
    if (d.cfg.parallel.cp > 1) {  // the fifth axis, where there is one
      rank["coord"]["cp"] = r.coord.cp;
      rank["groups"]["cp"] = group_members(d.cfg.parallel, r.coord, "cp");
      rank["comm_bytes_per_step"]["cp"] = comm_json(r.cp);
    }
    ranks.push_back(std::move(rank));
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
  const bool cp = d.cfg.parallel.cp > 1;
  out += fmt::format("{:<16} {:>5} {:>12} {:>12} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>13} {:>11} {:>11}{}\n",
                     "ranks", "stage", "arena", "zero shard", "params", "grads", "optimizer", "activations", "other",
                     "total", "dp B/step", "tp B/step", "pp B/step", cp ? fmt::format(" {:>11}", "cp B/step") : "");
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
        "{:>11}{}\n",
        who, r.coord.pp, r.arena, r.shard, human_bytes(m.parameters), human_bytes(m.gradients),
        human_bytes(m.optimizer_state), human_bytes(m.activations), human_bytes(other), human_bytes(m.total()),
        human_bytes(static_cast<double>(r.dp.total_bytes())), human_bytes(static_cast<double>(r.tp.total_bytes())),
        human_bytes(static_cast<double>(r.pp.total_bytes())),
        cp ? fmt::format(" {:>11}", human_bytes(static_cast<double>(r.cp.total_bytes()))) : "");
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
  if (cp) {
    // The largest rank's (the ring passes equal blocks; the all-to-all's pieces are equal in size).
    int64_t most = 0;
    for (const DryRunRank& r : d.ranks) most = std::max(most, r.cp.total_bytes());
    out += fmt::format("cp bytes per rank per step: {} ({} bytes; parallel.cp = {}, {} attention)\n",
                       human_bytes(static_cast<double>(most)), most, d.cfg.parallel.cp,
                       cp_attention_name(d.cfg.parallel.cp_attention));
  }
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
