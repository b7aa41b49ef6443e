// A measured profile of one machine (`fluxtrain plan --profile`) and the step time it predicts for
// any layout (`fluxtrain plan --profile-file P.json`): the real training step's ops timed op by op
// on the local device (plan/op_trace.h's records with their measured seconds, at each thread count
// profiled, alone and while other processes time the same ops beside it: the contention of the
// ranks a layout runs on one host) and the collectives of each mesh axis timed over the ranks it was launched with,
// sizes swept and a latency + bandwidth line fitted per axis and collective.
//
//   Profile p = read_profile("cpu.json");                   // ft::Error naming the file and key
//   const ProfileOps& ops = p.ops_for(/*concurrency=*/2, /*threads=*/1);  // or the nearest timed
//   double s = profiled_op_seconds(record, ops);            // measured, or scaled from the same op
//   double c = p.collective_seconds("dp", "all_reduce", bytes);
//   write_profile("cpu.json", p);                           // read_profile gives it back equal
//
// Format (JSON, docs/formats.md "Profile"): {"format": "fluxtrain-profile", "version": 2, "device",
// "source", "op_sets": [{"concurrency", "threads", "untimed_share" (optional, 0), "ops": [{"op",
// "shape", "kind", "flops", "bytes", "seconds", "calls"}]}], "collectives": {"<axis>": {"<op>":
// {"latency_s", "bytes_per_s", "points": [[bytes, s], ...]}}}}. Version 1 (ops by thread count alone, "ops":
// {"<threads>": [...]}) still reads: its ops were timed alone (concurrency 1).
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "plan/op_trace.h"

namespace ft::plan {

inline constexpr const char* kProfileFormat = "fluxtrain-profile";
inline constexpr int kProfileVersion = 2;

// One distinct op call of a profiled step: (op, shape) with its least seconds per call.
struct ProfileOp {
  std::string op, shape;
  OpKind kind = OpKind::kElementwise;
  double flops = 0, bytes = 0;
  double seconds = 0;  // per call
  int64_t calls = 0;   // how often the profiled step made it
  bool operator==(const ProfileOp&) const = default;
};
using ProfileOps = std::vector<ProfileOp>;

// t = latency + bytes / bytes_per_s, fitted to (bytes a rank sends, seconds) points. A size is
// priced by the measured points themselves where they reach (linear between the two around it:
// the line cannot follow the cache effects between 4 KiB and 16 MiB), by the line beyond them.
struct CollectiveFit {
  double latency_s = 0, bytes_per_s = 0;
  std::vector<std::pair<double, double>> points;  // sorted by bytes
  double seconds(double bytes) const;
  bool operator==(const CollectiveFit&) const = default;
};

struct Profile {
  std::string device;  // "this CPU: AMD EPYC ..., 2 threads"
  std::string source;  // what was profiled: "configs/llama-20m.toml (train.precision = bf16)"
  // By concurrency (how many processes timed the same op trace at once on this host: 1 alone, N
  // under `--nproc N`), then by thread count per process.
  std::map<int, std::map<int, ProfileOps>> ops;
  // Beside each op set (same concurrency, threads): the profiled steps' time beyond their ops as
  // the set prices them — (Σ step − Σ priced) / Σ priced over the steps timed, each step timed
  // whole as its ops are (OpTrace::step_seconds, the median of the repeats) and each of its op
  // calls priced at its (op, shape)'s least: the step's work outside the ops (memory fills and
  // copies, allocation, the host's bookkeeping) and its ops' typical time over their least.
  // 0 where not measured (a profile written before it).
  std::map<int, std::map<int, double>> untimed_share;
  std::map<std::string, std::map<std::string, CollectiveFit>> collectives;  // axis -> op -> fit
  bool operator==(const Profile&) const = default;

  // The ops timed at `concurrency` processes at once, else at the nearest concurrency timed (the
  // higher of two as near), and among those at `threads`, else at the nearest thread count
  // (ft::Error when none). `at` (optional) gets the (concurrency, threads) used.
  const ProfileOps& ops_for(int concurrency, int threads, std::pair<int, int>* at = nullptr) const;
  // The untimed share measured beside the op set at `at` (ops_for's), else 0.
  double untimed_share_at(std::pair<int, int> at) const;
  // Seconds of one collective `op` ("all_reduce", "reduce_scatter", "all_gather", "send") sending
  // `bytes` per rank over `axis`; ft::Error naming the axis and op when the profile has no fit.
  double collective_seconds(const std::string& axis, const std::string& op, double bytes) const;
};

// Distinct (op, shape) of a timed step, each with its least seconds per call and its count.
ProfileOps aggregate_ops(const std::vector<OpRecord>& timed);
// Least squares of t = latency + bytes / bw over the points (latency >= 0, bw > 0).
CollectiveFit fit_collective(std::vector<std::pair<double, double>> points);

// Seconds of one op call priced by a profile: the measured (op, shape) when profiled; else the
// same op's calls scaled by its work (FLOPs for GEMMs and attention, bytes otherwise: a line
// through its profiled shapes, or a proportion with one); else its kind's line over every op
// of that kind. Fills and copies are priced by the elementwise ops' bytes.
struct OpPricing {
  double seconds = 0;
  bool measured = false;  // the exact (op, shape) was profiled
};
OpPricing profiled_op_seconds(const OpRecord& r, const ProfileOps& ops);

nlohmann::json to_json(const Profile& p);
Profile profile_from_json(const nlohmann::json& j, const std::string& where);
Profile read_profile(const std::string& path);
void write_profile(const std::string& path, const Profile& p);

}  // namespace ft::plan
