#include "dryrun/step_profile.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>

#include "dryrun/comm_sweep.h"
#include "dryrun/fake_comm.h"
#include "dryrun/step_trace.h"
#include "parallel/mesh.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/schedule.h"
#include "util/error.h"

namespace ft {

std::map<int, plan::ProfileOps> profile_step_ops(const Config& cfg, const std::vector<int>& threads, int repeats,
                                                 const std::function<void()>& sync,
                                                 std::map<int, double>* untimed_share) {
  // The config's layout, then one rank holding the whole model at the batch of one, two and four
  // data-parallel replicas, the tp = 2 shard, and the cp = 2 ranks of each attention schedule
  // (their block attention ops: the shapes other layouts' ranks run). A cp layout is timed on
  // each of its cp ranks: a ring rank's blocks see other (query, key) pairs than its neighbour's.
  struct Timed {
    Config cfg;
    int world_rank = 0;
    bool required = false;  // the config's own layout must run; the others are extra shapes
  };
  std::vector<Timed> layouts;
  auto add = [&](const Config& c, bool required) {
    for (int64_t i = 0; i < c.parallel.cp; ++i)  // the cp ranks of the first replica, stage and tp rank
      layouts.push_back({c, static_cast<int>(i * c.parallel.tp), required});
  };
  add(cfg, true);
  Config whole = cfg;
  whole.parallel = ParallelConfig{};
  whole.parallel.comm = cfg.parallel.comm;
  for (int64_t replicas : {1, 2, 4}) {
    Config c = whole;
    if (c.train.batch_size % replicas != 0 || (replicas == 1 && cfg.parallel.world_size() == 1)) continue;
    c.train.batch_size /= replicas;
    if (c.train.micro_batch_size > c.train.batch_size) c.train.micro_batch_size = 0;
    add(c, false);
  }
  Config tp2 = whole;
  tp2.parallel.tp = 2;
  add(tp2, false);
  for (CpAttention schedule : {CpAttention::kRing, CpAttention::kAllToAll}) {
    Config cp2 = whole;
    cp2.parallel.cp = 2;
    cp2.parallel.cp_attention = schedule;
    const ParallelConfig& own = cfg.parallel;
    if (cfg.train.seq_len % 4 != 0 || (own.cp == 2 && own.cp_attention == schedule && own.world_size() == 2)) continue;
    add(cp2, false);
  }
  std::map<int, plan::ProfileOps> out;
  const int before = omp_get_max_threads();
  for (int t : threads) {
    if (t < 1) throw Error(fmt::format("profile at {} threads: must be at least 1", t));
    omp_set_num_threads(t);
    std::vector<plan::OpRecord> all;
    double steps = 0, op_sums = 0;
    for (const Timed& l : layouts) {
      plan::OpTrace tr;
      if (sync) sync();
      try {
        tr = trace_training_step(l.cfg, {.world_rank = l.world_rank, .timed_on_host = true, .repeats = repeats});
      } catch (const Error&) {
        if (l.required) throw;
        continue;
      }
      all.insert(all.end(), tr.ops.begin(), tr.ops.end());
      steps += tr.step_seconds;
      op_sums += tr.step_ops_seconds;
    }
    out[t] = plan::aggregate_ops(all);
    // What the op set prices those calls at: each (op, shape) at its least over every timed call.
    std::map<std::pair<std::string, std::string>, double> price;
    for (const plan::ProfileOp& p : out[t]) price[{p.op, p.shape}] = p.seconds;
    double least = 0, priced = 0;
    for (const plan::OpRecord& r : all) {
      least += r.seconds;
      priced += price[{r.op, r.shape}];
    }
    // The share the timed steps take beyond their ops as priced: their work outside the ops and
    // their ops' typical time above the least the op set keeps, both measured here.
    if (untimed_share && priced > 0) (*untimed_share)[t] = std::max(0.0, steps - priced) / priced;
    std::fprintf(stderr,
                 "profile: %d thread(s): the timed steps %.4f s (median), their ops %.4f s (median sum), each "
                 "call's least %.4f s, as the op set prices them %.4f s: outside the ops +%.1f%%, the step over "
                 "its priced ops +%.1f%%\n",
                 t, steps, op_sums, least, priced, op_sums > 0 ? 100 * std::max(0.0, steps - op_sums) / op_sums : 0.0,
                 priced > 0 ? 100 * std::max(0.0, steps - priced) / priced : 0.0);
  }
  omp_set_num_threads(before);
  return out;
}

ProfiledStep predict_with_profile(const Config& cfg, const plan::Profile& profile, int threads, int cpus) {
  const ParallelConfig& par = cfg.parallel;
  const int world = static_cast<int>(par.world_size());
  if (world > 64)
    throw Error(fmt::format("--profile-file predicts layouts of up to 64 ranks; this one has {}", world),
                "profile-based prediction traces every rank");
  const int concurrency = cpus > 0 ? std::clamp(cpus / std::max(1, threads), 1, world) : world;
  std::pair<int, int> at;
  const plan::ProfileOps& ops = profile.ops_for(concurrency, threads, &at);
  const int used_threads = at.second;
  ProfiledStep best;
  best.threads = used_threads;
  best.concurrency_wanted = concurrency;
  best.concurrency = at.first;
  const double share = cpus > 0 ? static_cast<double>(world) * used_threads / cpus : 1.0;
  best.oversubscription = std::max(1.0, share);
  best.untimed_share = profile.untimed_share_at(at);
  const double stretch = best.oversubscription * (1 + best.untimed_share);
  double best_total = -1;
  for (int r = 0; r < world; ++r) {
    const plan::OpTrace tr = trace_training_step(cfg, {.world_rank = r});
    double compute = 0, measured = 0, cp_hidden = 0;
    for (const plan::OpRecord& op : tr.ops) {
      const bool memory_op = op.kind == plan::OpKind::kFill || op.kind == plan::OpKind::kCopyD2D ||
                             op.kind == plan::OpKind::kCopyH2D || op.kind == plan::OpKind::kCopyD2H;
      if (memory_op && best.untimed_share > 0) continue;  // measured in the untimed share
      const plan::OpPricing p = plan::profiled_op_seconds(op, ops);
      compute += p.seconds * stretch;
      if (p.measured) measured += p.seconds * stretch;
      // The ring's key/value transfer beside this block: hidden up to the block's time.
      if (op.overlapped_send_bytes > 0)
        cp_hidden += std::min(profile.collective_seconds("cp", "send", op.overlapped_send_bytes),
                              p.seconds * best.oversubscription);
    }
    best.compute_s_by_rank.push_back(compute);
    const MeshCoord c = Mesh::coord_of(par, r);
    std::map<std::string, double> comm;
    for (const plan::CollRecord& call : tr.collectives) {
      const std::string name = profile_collective_name(call.op);
      if (name.empty()) continue;
      int index = 0, size = 1;
      std::string axis = call.group;
      if (axis == "dp") index = static_cast<int>(c.dp), size = static_cast<int>(par.dp);
      if (axis == "tp") index = static_cast<int>(c.tp), size = static_cast<int>(par.tp);
      if (axis == "pp") index = static_cast<int>(c.pp), size = static_cast<int>(par.pp);
      if (axis == "cp") index = static_cast<int>(c.cp), size = static_cast<int>(par.cp);
      if (axis == "dp_cp") {
        index = static_cast<int>(c.dp * par.cp + c.cp), size = static_cast<int>(par.dp * par.cp);
        // The gradient group: its own fits, else (a profile without them) the dp axis's.
        if (profile.collectives.count("dp_cp") == 0 && profile.collectives.count("dp") != 0) axis = "dp";
      }
      if (axis == "world") {
        index = r, size = world;
        // The step's sums over the world: a few doubles, priced by the dp axis (else the first
        // axis profiled).
        if (profile.collectives.count("world") == 0 && !profile.collectives.empty())
          axis = profile.collectives.count("dp") ? "dp" : profile.collectives.begin()->first;
      }
      if (size < 2) continue;
      const double bytes = static_cast<double>(FakeCommunicator::bytes_sent(call, index, size));
      comm[call.group] += profile.collective_seconds(axis, name, bytes);
    }
    // The cp group's transfers add to the step only where no block attention hides them
    // (plan/roofline.cpp's price_step: the ops run on one stream).
    double cp_s = 0, cp_exposed = 0;
    if (comm.count("cp")) {
      cp_s = comm["cp"];
      cp_exposed = std::max(0.0, cp_s - cp_hidden);
      comm["cp"] = cp_exposed;
    }
    double bubble = 0;
    if (par.pp > 1) {
      const MicroBatching mb = split_batch(cfg.train.batch_size, cfg.train.micro_batch_size, par);
      bubble = theoretical_bubble(par.pp_schedule, static_cast<int>(par.pp), static_cast<int>(mb.count),
                                  static_cast<int>(par.virtual_stages));
    }
    double total = compute / (1 - bubble);
    for (auto& [axis, s] : comm) total += s;
    if (total > best_total) {
      best_total = total;
      best.step_s = total;
      best.compute_s = compute;
      best.bubble = bubble;
      best.comm_s_by_axis = comm;
      best.slowest_rank = r;
      best.measured_share = compute > 0 ? measured / compute : 0;
      best.op_calls = static_cast<int64_t>(tr.ops.size());
      best.cp_s = cp_s;
      best.cp_exposed_s = cp_exposed;
      best.cp_bytes = tr.cp_bytes;
    }
  }
  return best;
}

}  // namespace ft
