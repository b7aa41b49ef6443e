#include "cli/plan_profile.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "dryrun/comm_sweep.h"
#include "dryrun/step_profile.h"
#include "parallel/ranks.h"
#include "plan/profile.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::cli {

namespace {

using nlohmann::json;

std::string source_of(const ProfileArgs& a, const Config& cfg) {
  std::string s = a.config.empty() ? cfg.model.preset : a.config;
  for (const auto& set : a.sets) s += " --set " + set;
  return s;
}

// A temporary directory for the ranks' boards and fits, removed on exit.
struct TempDir {
  std::string path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "fluxtrain-profile-XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) throw Error("could not make a temporary directory for the profile's ranks");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// The concurrencies the ops are timed at under --nproc N with `threads` per process: 2, 4, 8, ...
// below N, and N — each only where that many processes' threads fit the CPUs (beyond, the cores
// would be time-shared: the prediction stretches for that on its own).
std::vector<int> concurrencies(int nproc, int threads, int cpus) {
  std::vector<int> out;
  for (int c = 2; c < nproc; c *= 2)
    if (c * threads <= cpus) out.push_back(c);
  if (nproc >= 2 && nproc * threads <= cpus) out.push_back(nproc);
  return out;
}

// Each (op, shape) at the median over the processes of their least seconds (the mean of the
// middle two for an even count); the op list and calls of the first.
plan::ProfileOps median_over_ranks(const std::vector<plan::ProfileOps>& ranks) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> seconds;
  for (const plan::ProfileOps& ops : ranks)
    for (const plan::ProfileOp& o : ops) seconds[{o.op, o.shape}].push_back(o.seconds);
  plan::ProfileOps out = ranks.at(0);
  for (plan::ProfileOp& o : out) {
    std::vector<double>& v = seconds[{o.op, o.shape}];
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    o.seconds = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  return out;
}

// The step's ops timed by `concurrency` processes at once under mpirun (run_profile_ops_rank
// each), at each of `threads`: the median over the processes.
std::map<int, plan::ProfileOps> time_ops_concurrently(const ProfileArgs& a, int concurrency,
                                                      const std::vector<int>& threads,
                                                      std::map<int, double>* untimed_share) {
  TempDir tmp;
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::vector<std::string> argv = {self,
                                   "plan",
                                   "--profile-ops-rank",
                                   tmp.path,
                                   "--nproc",
                                   std::to_string(concurrency),
                                   "--repeats",
                                   std::to_string(a.repeats)};
  for (int t : threads) argv.insert(argv.end(), {"--profile-threads", std::to_string(t)});
  if (!a.config.empty()) argv.insert(argv.end(), {"--config", a.config});
  for (const auto& s : a.sets) argv.insert(argv.end(), {"--set", s});
  std::fprintf(stderr, "profile: timing the step's ops in %d processes at once\n", concurrency);
  if (int rc = exec_under_mpirun(concurrency, argv); rc != 0)
    throw Error(fmt::format("timing the ops in {} processes at once failed (mpirun exit {})", concurrency, rc),
                "run it without --nproc for the ops timed alone");
  std::map<int, std::vector<plan::ProfileOps>> by_threads;
  std::map<int, std::vector<double>> shares;  // by thread count: each process's untimed share
  for (int r = 0; r < concurrency; ++r) {
    const std::string path = fmt::format("{}/ops.{}.json", tmp.path, r);
    plan::Profile part = plan::read_profile(path);
    for (auto& [t, ops] : part.ops.at(concurrency)) {
      by_threads[t].push_back(std::move(ops));
      shares[t].push_back(part.untimed_share_at({concurrency, t}));
    }
  }
  std::map<int, plan::ProfileOps> out;
  for (auto& [t, ranks] : by_threads) out[t] = median_over_ranks(ranks);
  for (auto& [t, v] : shares) {  // the median over the processes
    std::sort(v.begin(), v.end());
    (*untimed_share)[t] = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
  return out;
}

}  // namespace

int run_profile_ops_rank(const ProfileArgs& a) {
  const Config cfg = load_config(a.config, a.sets);
  ParallelConfig world;  // only the barrier's group: the timed step is the config's own layout
  world.dp = a.nproc;
  world.comm = cfg.parallel.comm;
  Ranks ranks(world, a.ops_rank_dir);
  Communicator& all = ranks.mesh().world();
  plan::Profile p;
  std::map<int, double> untimed;
  p.ops[a.nproc] = profile_step_ops(
      cfg, a.threads, a.repeats, [&] { all.barrier(); }, &untimed);
  p.untimed_share[a.nproc] = untimed;
  write_profile(fmt::format("{}/ops.{}.json", a.ops_rank_dir, ranks.mesh().world_rank()), p);
  all.barrier();
  return 0;
}

int run_profile_collectives(const ProfileArgs& a) {
  const Config cfg = load_config(a.config, a.sets);
  const std::string dir = std::filesystem::path(a.collectives_out).parent_path().string();
  Ranks ranks(cfg.parallel, dir);
  auto fits = sweep_collectives(ranks.mesh(), a.repeats);
  if (ranks.mesh().world_rank() == 0) {
    plan::Profile p;
    p.collectives = std::move(fits);
    write_file_atomic(a.collectives_out, to_json(p)["collectives"].dump() + "\n");
  }
  ranks.mesh().world().barrier();
  return 0;
}

int run_profile(const ProfileArgs& a) {
  if (a.out.empty()) throw Error("--profile needs --out FILE", "e.g. --out cpu-profile.json");
  const Config cfg = load_config(a.config, a.sets);
  plan::Profile p;
  const int cpus = omp_get_num_procs();
  p.device = fmt::format("this CPU ({} CPUs)", cpus);
  p.source = source_of(a, cfg);
  if (a.nproc > 1) {
    TempDir tmp;
    const std::string self = std::filesystem::canonical("/proc/self/exe").string();
    for (const char* axis : {"dp", "tp", "pp", "cp"}) {
      const std::string fits = tmp.path + "/" + axis + ".json";
      std::vector<std::string> argv = {self, "plan",      "--profile-collectives",
                                       fits, "--repeats", std::to_string(a.repeats)};
      if (!a.config.empty()) argv.insert(argv.end(), {"--config", a.config});
      for (const auto& s : a.sets) argv.insert(argv.end(), {"--set", s});
      for (const char* other : {"dp", "tp", "pp", "cp"})
        argv.insert(argv.end(), {"--set", fmt::format("parallel.{}={}", other, other == axis ? a.nproc : 1)});
      if (std::string(axis) == "cp") {  // a sequence the cp ranks can cut: a multiple of 2 · N at most T
        const int64_t chunks = 2 * a.nproc, T = cfg.train.seq_len;
        argv.insert(argv.end(), {"--set", fmt::format("train.seq_len={}", std::max(chunks, T - T % chunks)), "--set",
                                 "parallel.cp_attention=\"ring\""});
      }
      // Only the mesh is built: the settings a layout of the axis needs, whatever the config's model.
      argv.insert(argv.end(), {"--set", "parallel.zero=0", "--set", "parallel.sequence_parallel=false", "--set",
                               "parallel.virtual_stages=1", "--set", "parallel.micro_batches=0", "--set",
                               "model.tie_embeddings=false"});
      std::fprintf(stderr, "profile: timing the %s axis's collectives over %d ranks\n", axis, a.nproc);
      if (int rc = exec_under_mpirun(a.nproc, argv); rc != 0)
        throw Error(
            fmt::format("timing the {} axis's collectives over {} ranks failed (mpirun exit {})", axis, a.nproc, rc),
            "run it with a config the ranks can build (--config), or without --nproc for the ops only");
      const json j = json::parse(read_file(fits));
      plan::Profile part = plan::profile_from_json({{"format", plan::kProfileFormat},
                                                    {"version", plan::kProfileVersion},
                                                    {"device", ""},
                                                    {"op_sets", json::array()},
                                                    {"collectives", j}},
                                                   fits);
      for (auto& [ax, by_op] : part.collectives) p.collectives[ax] = by_op;
    }
  }
  std::vector<int> threads = a.threads;
  if (threads.empty()) threads = cpus > 1 ? std::vector<int>{1, cpus} : std::vector<int>{1};
  std::fprintf(stderr, "profile: timing the step's ops of %s\n", p.source.c_str());
  std::map<int, double> untimed;
  p.ops[1] = profile_step_ops(cfg, threads, a.repeats, {}, &untimed);
  p.untimed_share[1] = untimed;
  std::map<int, std::vector<int>> threads_at;  // concurrency -> the thread counts that fit the CPUs
  for (int t : threads)
    for (int c : concurrencies(a.nproc, t, cpus)) threads_at[c].push_back(t);
  for (auto& [c, ts] : threads_at) {
    std::map<int, double> shares;
    p.ops[c] = time_ops_concurrently(a, c, ts, &shares);
    p.untimed_share[c] = shares;
  }
  write_profile(a.out, p);
  if (a.json) {
    std::printf("%s\n", to_json(p).dump(2).c_str());
    return 0;
  }
  std::printf("profile of %s on %s\n", p.source.c_str(), p.device.c_str());
  for (auto& [c, by_threads] : p.ops)
    for (auto& [t, ops] : by_threads) {
      double s = 0;
      int64_t calls = 0;
      for (const auto& o : ops) {
        s += o.seconds * static_cast<double>(o.calls);
        calls += o.calls;
      }
      std::printf(
          "  ops at %d thread(s), %d process(es) at once: %zu distinct (op, shape), %lld calls, %.4f s; the steps "
          "over their priced ops: +%.1f%%\n",
          t, c, ops.size(), static_cast<long long>(calls), s, 100 * p.untimed_share_at({c, t}));
    }
  for (auto& [axis, by_op] : p.collectives)
    for (auto& [op, f] : by_op)
      std::printf("  %-5s %-15s latency %8.1f us, %8.3f GB/s (%zu sizes)\n", axis.c_str(), op.c_str(),
                  f.latency_s * 1e6, f.bytes_per_s / 1e9, f.points.size());
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

int run_profile_file(const ProfileArgs& a) {
  const plan::Profile p = plan::read_profile(a.profile_file);
  const Config cfg = load_config(a.config, a.sets);
  const int world = static_cast<int>(cfg.parallel.world_size());
  int threads = a.predict_threads;
  if (threads <= 0)
    threads = cfg.train.threads > 0 ? static_cast<int>(cfg.train.threads) : std::max(1, omp_get_num_procs() / world);
  const ProfiledStep s = predict_with_profile(cfg, p, threads, omp_get_num_procs());
  if (a.json) {
    json comm = json::object();
    for (auto& [axis, sec] : s.comm_s_by_axis) comm[axis] = sec;
    std::printf("%s\n", json{{"step_s", s.step_s},
                             {"compute_s", s.compute_s},
                             {"compute_s_by_rank", s.compute_s_by_rank},
                             {"bubble", s.bubble},
                             {"comm_s_by_axis", comm},
                             {"slowest_rank", s.slowest_rank},
                             {"threads", s.threads},
                             {"concurrency", s.concurrency},
                             {"concurrency_wanted", s.concurrency_wanted},
                             {"measured_share", s.measured_share},
                             {"untimed_share", s.untimed_share},
                             {"oversubscription", s.oversubscription},
                             {"op_calls", s.op_calls},
                             {"cp", cfg.parallel.cp},
                             {"cp_bytes", s.cp_bytes},
                             {"cp_s", s.cp_s},
                             {"cp_exposed_s", s.cp_exposed_s},
                             {"world", world}}
                            .dump(2)
                            .c_str());
    return 0;
  }
  const ParallelConfig& par = cfg.parallel;
  const std::string cp = par.cp > 1 ? fmt::format(" cp {} ({})", par.cp, cp_attention_name(par.cp_attention)) : "";
  std::printf("predicted step of %s (%d ranks, dp %lld tp %lld pp %lld%s) from %s at %d thread(s) per rank:\n",
              source_of(a, cfg).c_str(), world, static_cast<long long>(par.dp), static_cast<long long>(par.tp),
              static_cast<long long>(par.pp), cp.c_str(), a.profile_file.c_str(), s.threads);
  std::printf("  compute  %.4f s (rank %d, %lld op calls; %.0f%% of it priced by a measured (op, shape))\n",
              s.compute_s, s.slowest_rank, static_cast<long long>(s.op_calls), 100 * s.measured_share);
  if (s.untimed_share > 0)
    std::printf(
        "  untimed  +%.1f%% (the profiled steps over their ops as priced: the work outside the ops, the ops' "
        "typical time over their least)\n",
        100 * s.untimed_share);
  std::printf("  ops      timed %d process(es) at once (the layout runs %d at once on this host)\n", s.concurrency,
              s.concurrency_wanted);
  if (s.oversubscription > 1)
    std::printf("  shared   %d ranks x %d thread(s) on %d CPUs: compute x %.2f\n", world, s.threads,
                omp_get_num_procs(), s.oversubscription);
  if (s.bubble > 0) std::printf("  bubble   %.1f%% of the pipeline's time\n", 100 * s.bubble);
  for (auto& [axis, sec] : s.comm_s_by_axis)
    if (axis != "cp") std::printf("  %-8s %.4f s of collectives\n", axis.c_str(), sec);
  if (par.cp > 1)
    std::printf("  cp       %.4f s of transfers (%.0f bytes sent), %.4f s of it exposed\n", s.cp_s, s.cp_bytes,
                s.cp_exposed_s);
  std::printf("  step     %.4f s\n", s.step_s);
  return 0;
}

}  // namespace ft::cli
