#include "plan/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/fs.h"

namespace ft::plan {

namespace {

using nlohmann::json;

constexpr std::pair<OpKind, const char*> kKindNames[] = {
    {OpKind::kGemm, "gemm"},        {OpKind::kFlashFp32, "flash_fp32"},
    {OpKind::kSdpa, "sdpa"},        {OpKind::kElementwise, "elementwise"},
    {OpKind::kSerial, "serial"},    {OpKind::kFill, "fill"},
    {OpKind::kCopyD2D, "copy_d2d"}, {OpKind::kCopyH2D, "copy_h2d"},
    {OpKind::kCopyD2H, "copy_d2h"},
};

const char* kind_name(OpKind k) {
  for (auto [kind, name] : kKindNames)
    if (kind == k) return name;
  return "elementwise";
}

OpKind kind_from_name(const std::string& s, const std::string& where) {
  for (auto [kind, name] : kKindNames)
    if (s == name) return kind;
  throw Error(fmt::format("{}: op kind '{}' is unknown", where, s), "gemm, sdpa, flash_fp32, elementwise, ...");
}

bool compute_bound(OpKind k) {
  return k == OpKind::kGemm || k == OpKind::kFlashFp32 || k == OpKind::kSdpa;
}

// What an op's time grows with: FLOPs for GEMMs and attention, bytes for everything else.
double work(OpKind kind, double flops, double bytes) {
  return compute_bound(kind) ? flops : bytes;
}
double work(const OpRecord& r) {
  return work(r.kind, r.flops, r.bytes() + r.side_bytes);
}
double work(const ProfileOp& p) {
  return work(p.kind, p.flops, p.bytes);
}

// t = c0 + c1 · w over (w, t) samples, least squares of the relative error (each sample weighted
// 1 / t², so a 4 KiB message's latency counts as much as a 16 MiB one's bandwidth), c0, c1 >= 0:
// through the origin when the intercept would be negative; a proportion with one distinct w.
struct Line {
  double c0 = 0, c1 = 0;
  double at(double w) const { return c0 + c1 * w; }
};
Line fit_line(const std::vector<std::pair<double, double>>& s) {
  Line l;
  if (s.empty()) return l;
  double n = 0, sw = 0, st = 0, sww = 0, swt = 0;
  for (auto [w, t] : s) {
    const double k = 1.0 / std::max(t * t, 1e-24);
    n += k;
    sw += k * w;
    st += k * t;
    sww += k * w * w;
    swt += k * w * t;
  }
  const double det = n * sww - sw * sw;
  if (det > 1e-12 * n * sww) {
    l.c1 = (n * swt - sw * st) / det;
    l.c0 = (st - l.c1 * sw) / n;
    if (l.c0 >= 0 && l.c1 >= 0) return l;
  }
  if (sww > 0) {
    l.c0 = 0;
    l.c1 = std::max(0.0, swt / sww);
  } else {
    l.c0 = st / n;
    l.c1 = 0;
  }
  return l;
}

}  // namespace

ProfileOps aggregate_ops(const std::vector<OpRecord>& timed) {
  ProfileOps out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const OpRecord& r : timed) {
    auto [it, added] = index.try_emplace({r.op, r.shape}, out.size());
    if (added) {
      out.push_back(ProfileOp{.op = r.op,
                              .shape = r.shape,
                              .kind = r.kind,
                              .flops = r.flops,
                              .bytes = r.bytes() + r.side_bytes,
                              .seconds = r.seconds,
                              .calls = 1});
    } else {
      ProfileOp& p = out[it->second];
      p.seconds = std::min(p.seconds, r.seconds);
      ++p.calls;
    }
  }
  return out;
}

double Profile::untimed_share_at(std::pair<int, int> at) const {
  const auto c = untimed_share.find(at.first);
  if (c == untimed_share.end()) return 0;
  const auto t = c->second.find(at.second);
  return t == c->second.end() ? 0 : t->second;
}

double CollectiveFit::seconds(double bytes) const {
  if (bytes <= 0) return 0;
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const auto [b0, t0] = points[i];
    const auto [b1, t1] = points[i + 1];
    if (bytes >= b0 && bytes <= b1 && b1 > b0) return t0 + (t1 - t0) * (bytes - b0) / (b1 - b0);
  }
  if (!points.empty() && bytes > points.back().first) {  // beyond: the last point plus the line's slope
    const auto [b, t] = points.back();
    return t + (bytes - b) / bytes_per_s;
  }
  return latency_s + bytes / bytes_per_s;
}

CollectiveFit fit_collective(std::vector<std::pair<double, double>> points) {
  std::sort(points.begin(), points.end());
  CollectiveFit f;
  const Line l = fit_line(points);
  f.latency_s = l.c0;
  f.bytes_per_s = l.c1 > 0 ? 1.0 / l.c1 : 1e30;
  f.points = std::move(points);
  return f;
}

OpPricing profiled_op_seconds(const OpRecord& r, const ProfileOps& ops) {
  const bool memory_op =
      r.kind == OpKind::kFill || r.kind == OpKind::kCopyD2D || r.kind == OpKind::kCopyH2D || r.kind == OpKind::kCopyD2H;
  std::vector<std::pair<double, double>> same_op, same_class;
  for (const ProfileOp& p : ops) {
    if (!memory_op && p.op == r.op) {
      if (p.shape == r.shape) return {.seconds = p.seconds, .measured = true};
      same_op.emplace_back(work(p), p.seconds);
    }
    if (compute_bound(p.kind) == compute_bound(r.kind) && (!memory_op || p.kind == OpKind::kElementwise))
      same_class.emplace_back(work(p), p.seconds);
  }
  const double w = work(r);
  if (same_op.size() == 1) {
    const auto [w0, t0] = same_op[0];
    return {.seconds = w0 > 0 ? t0 * w / w0 : t0, .measured = false};
  }
  if (!same_op.empty()) return {.seconds = fit_line(same_op).at(w), .measured = false};
  return {.seconds = fit_line(same_class).at(w), .measured = false};
}

namespace {

// The key of `m` nearest `want`; of two as near, the higher when `ties_up`, else the lower. m must
// not be empty.
template <class Map>
auto nearest(const Map& m, int want, bool ties_up) {
  auto best = m.begin();
  for (auto it = m.begin(); it != m.end(); ++it) {
    const int d = std::abs(it->first - want), b = std::abs(best->first - want);
    if (d < b || (ties_up && d == b)) best = it;
  }
  return best;
}

}  // namespace

const ProfileOps& Profile::ops_for(int concurrency, int threads, std::pair<int, int>* at) const {
  if (ops.empty()) throw Error("the profile has no timed ops", "profile with `fluxtrain plan --profile --config C`");
  // Of two concurrencies as near, the higher (more contention: the conservative side); of two
  // thread counts, the lower.
  const auto c = nearest(ops, concurrency, true);
  if (c->second.empty()) throw Error(fmt::format("the profile has no ops timed at concurrency {}", c->first));
  const auto t = nearest(c->second, threads, false);
  if (at) *at = {c->first, t->first};
  return t->second;
}

double Profile::collective_seconds(const std::string& axis, const std::string& op, double bytes) const {
  if (bytes <= 0) return 0;
  auto a = collectives.find(axis);
  if (a == collectives.end()) {
    std::string have;
    for (auto& [k, v] : collectives) have += (have.empty() ? "" : ", ") + k;
    throw Error(
        fmt::format("the profile has no collectives timed over the {} axis (it has: {})", axis,
                    have.empty() ? "none" : have),
        "profile again with `fluxtrain plan --profile --nproc N`: it times every axis (dp, tp, pp, cp) over N ranks");
  }
  auto o = a->second.find(op);
  if (o == a->second.end())
    throw Error(fmt::format("the profile has no {} timed over the {} axis", op, axis),
                "profile again with this binary: it times every collective the step makes");
  return o->second.seconds(bytes);
}

json to_json(const Profile& p) {
  json sets = json::array();
  for (auto& [concurrency, by_threads] : p.ops)
    for (auto& [threads, list] : by_threads) {
      json arr = json::array();
      for (const ProfileOp& o : list)
        arr.push_back({{"op", o.op},
                       {"shape", o.shape},
                       {"kind", kind_name(o.kind)},
                       {"flops", o.flops},
                       {"bytes", o.bytes},
                       {"seconds", o.seconds},
                       {"calls", o.calls}});
      json set = {{"concurrency", concurrency}, {"threads", threads}, {"ops", arr}};
      if (double u = p.untimed_share_at({concurrency, threads}); u != 0) set["untimed_share"] = u;
      sets.push_back(std::move(set));
    }
  json coll = json::object();
  for (auto& [axis, by_op] : p.collectives)
    for (auto& [op, f] : by_op)
      coll[axis][op] = {{"latency_s", f.latency_s}, {"bytes_per_s", f.bytes_per_s}, {"points", f.points}};
  return {{"format", kProfileFormat}, {"version", kProfileVersion}, {"device", p.device}, {"source", p.source},
          {"op_sets", sets},          {"collectives", coll}};
}

namespace {

ProfileOps ops_from_json(const json& arr, const std::string& where) {
  ProfileOps list;
  for (const json& o : arr) {
    ProfileOp op{.op = o.at("op").get<std::string>(),
                 .shape = o.at("shape").get<std::string>(),
                 .kind = kind_from_name(o.at("kind").get<std::string>(), where),
                 .flops = o.at("flops").get<double>(),
                 .bytes = o.at("bytes").get<double>(),
                 .seconds = o.at("seconds").get<double>(),
                 .calls = o.at("calls").get<int64_t>()};
    if (!(op.seconds >= 0) || !(op.flops >= 0) || !(op.bytes >= 0) || op.calls < 1)
      throw Error(
          fmt::format("{}: op {} ({}): seconds, flops and bytes must be >= 0 and calls >= 1", where, op.op, op.shape));
    list.push_back(std::move(op));
  }
  return list;
}

}  // namespace

Profile profile_from_json(const json& j, const std::string& where) {
  if (!j.is_object() || j.value("format", std::string()) != kProfileFormat)
    throw Error(fmt::format("{}: not a profile (\"format\" is not \"{}\")", where, kProfileFormat),
                "write one with `fluxtrain plan --profile --config C --out P.json`");
  const int version = j.value("version", 0);
  if (version != 1 && version != kProfileVersion)
    throw Error(
        fmt::format("{}: profile version {} (this build reads versions 1 and {})", where, version, kProfileVersion),
        "profile again with this binary");
  Profile p;
  try {
    p.device = j.at("device").get<std::string>();
    p.source = j.value("source", std::string());
    if (version == 1) {  // ops by thread count, timed alone
      for (auto& [threads_text, arr] : j.at("ops").items()) {
        char* end = nullptr;
        const long threads = std::strtol(threads_text.c_str(), &end, 10);
        if (end == threads_text.c_str() || *end != '\0' || threads < 1)
          throw Error(fmt::format("{}: ops.\"{}\": expected a thread count >= 1", where, threads_text));
        p.ops[1][static_cast<int>(threads)] = ops_from_json(arr, where);
      }
    } else {
      for (const json& set : j.at("op_sets")) {
        const int concurrency = set.at("concurrency").get<int>(), threads = set.at("threads").get<int>();
        if (concurrency < 1 || threads < 1)
          throw Error(
              fmt::format("{}: op_sets: concurrency {} threads {}: expected both >= 1", where, concurrency, threads),
              "concurrency: the processes that timed the ops at once; threads: each one's");
        if (p.ops[concurrency].count(threads))
          throw Error(fmt::format("{}: op_sets: concurrency {} threads {} appears twice", where, concurrency, threads));
        p.ops[concurrency][threads] = ops_from_json(set.at("ops"), where);
        const double untimed = set.value("untimed_share", 0.0);
        if (!(untimed >= 0 && untimed < 10))
          throw Error(fmt::format("{}: op_sets: concurrency {} threads {}: untimed_share {} is not in [0, 10)", where,
                                  concurrency, threads, untimed),
                      "the step's time outside its timed ops over their time: a share such as 0.12");
        if (untimed > 0) p.untimed_share[concurrency][threads] = untimed;
      }
    }
    for (auto& [axis, by_op] : j.at("collectives").items())
      for (auto& [op, f] : by_op.items()) {
        CollectiveFit fit{.latency_s = f.at("latency_s").get<double>(),
                          .bytes_per_s = f.at("bytes_per_s").get<double>(),
                          .points = f.at("points").get<std::vector<std::pair<double, double>>>()};
        if (!(fit.latency_s >= 0) || !(fit.bytes_per_s > 0))
          throw Error(
              fmt::format("{}: collectives.{}.{}: latency_s must be >= 0 and bytes_per_s > 0", where, axis, op));
        p.collectives[axis][op] = std::move(fit);
      }
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {}", where, e.what()), "the profile's fields are in docs/formats.md, \"Profile\"");
  }
  return p;
}

Profile read_profile(const std::string& path) {
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", path, e.what()), "write it with `fluxtrain plan --profile`");
  }
  return profile_from_json(j, path);
}

void write_profile(const std::string& path, const Profile& p) {
  write_file_atomic(path, to_json(p).dump(1) + "\n");
}

}  // namespace ft::plan
