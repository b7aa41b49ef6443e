// The profile file (plan/profile.h): written and read back equal (with the concurrency each op set
// was timed at), its magic and version checked with a hint, a version-1 file read as ops timed
// alone, the collective line recovered from exact points, and ops priced by measurement, by the
// same op's work, or by their kind's line.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "plan/profile.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::plan {
namespace {

OpRecord gemm(int64_t M, int64_t N, int64_t K, double seconds) {
  OpRecord r;
  r.op = "matmul";
  r.shape = fmt::format("M={} N={} K={}", M, N, K);
  r.kind = OpKind::kGemm;
  r.flops = 2.0 * M * N * K;
  r.bytes_read = 4.0 * (M * K + K * N);
  r.bytes_written = 4.0 * M * N;
  r.seconds = seconds;
  return r;
}

OpRecord elementwise(const std::string& op, double bytes, double seconds) {
  OpRecord r;
  r.op = op;
  r.shape = fmt::format("n={}", bytes / 8);
  r.bytes_read = bytes / 2;
  r.bytes_written = bytes / 2;
  r.seconds = seconds;
  return r;
}

Profile sample() {
  Profile p;
  p.device = "this CPU (2 CPUs)";
  p.source = "configs/tiny.toml --set train.precision=\"bf16\"";
  p.ops[1][1] = aggregate_ops({gemm(64, 64, 64, 2e-4), gemm(64, 64, 64, 1e-4), gemm(128, 64, 64, 3e-4),
                               elementwise("add_inplace", 1e6, 1e-4), elementwise("rmsnorm_forward", 2e6, 3e-4)});
  p.ops[1][2] = aggregate_ops({gemm(64, 64, 64, 0.6e-4)});
  // Timed by 2 processes at once, 1 thread each: slower beside a busy core.
  p.ops[2][1] = aggregate_ops({gemm(64, 64, 64, 1.2e-4), elementwise("add_inplace", 1e6, 1.5e-4)});
  p.untimed_share[1][1] = 0.125;  // the profiled steps' time outside their ops, beside two of the sets
  p.untimed_share[2][1] = 0.25;
  p.collectives["dp"]["all_reduce"] = fit_collective({{4096, 30e-6}, {65536, 90e-6}, {1048576, 1.05e-3}});
  p.collectives["tp"]["all_gather"] = fit_collective({{1e3, 1e-5}, {1e6, 2e-3}});
  return p;
}

TEST(PlanProfile, RoundTripIsExact) {
  const Profile p = sample();
  const std::string path = (std::filesystem::temp_directory_path() / "plan_profile_test.json").string();
  write_profile(path, p);
  const Profile q = read_profile(path);
  EXPECT_EQ(q, p);
  // Twice: the text is stable too.
  write_profile(path, q);
  EXPECT_EQ(read_file(path), to_json(p).dump(1) + "\n");
  std::filesystem::remove(path);
}

TEST(PlanProfile, AggregatesLeastTimePerShape) {
  const Profile p = sample();
  const ProfileOps& ops = p.ops.at(1).at(1);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].calls, 2);
  EXPECT_DOUBLE_EQ(ops[0].seconds, 1e-4);  // the least of 2e-4 and 1e-4
}

TEST(PlanProfile, BadFilesNameWhatIsWrong) {
  nlohmann::json j = to_json(sample());
  j["format"] = "something-else";
  try {
    profile_from_json(j, "p.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: not a profile"), std::string::npos) << e.what();
  }
  j = to_json(sample());
  j["version"] = 99;
  try {
    profile_from_json(j, "p.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("profile version 99"), std::string::npos) << e.what();
  }
  j = to_json(sample());
  j["op_sets"][0]["ops"][0]["seconds"] = -1;
  EXPECT_THROW(profile_from_json(j, "p.json"), Error);
  j = to_json(sample());
  j["op_sets"][0]["concurrency"] = 0;
  try {
    profile_from_json(j, "p.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: op_sets: concurrency 0 threads 1: expected both >= 1"),
              std::string::npos)
        << e.what();
  }
  j = to_json(sample());
  j["op_sets"][1]["threads"] = 1;  // (1, 2) becomes a second (1, 1)
  try {
    profile_from_json(j, "p.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("concurrency 1 threads 1 appears twice"), std::string::npos) << e.what();
  }
  j = to_json(sample());
  j["op_sets"][0]["untimed_share"] = -0.5;
  try {
    profile_from_json(j, "p.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("p.json: op_sets: concurrency 1 threads 1: untimed_share -0.5 is not in [0, 10)"),
        std::string::npos)
        << e.what();
  }
  j = to_json(sample());
  j.erase("op_sets");
  EXPECT_THROW(profile_from_json(j, "p.json"), Error);
}

TEST(PlanProfile, VersionOneReadsAsOpsTimedAlone) {
  // A version-1 file: "ops" by thread count; every set was timed by one process alone.
  nlohmann::json j = to_json(sample());
  j["version"] = 1;
  nlohmann::json v1 = nlohmann::json::object();
  for (const nlohmann::json& set : j["op_sets"])
    if (set["concurrency"] == 1) v1[std::to_string(set["threads"].get<int>())] = set["ops"];
  j.erase("op_sets");
  j["ops"] = v1;
  const Profile p = profile_from_json(j, "old.json");
  Profile want = sample();
  want.ops.erase(2);
  want.untimed_share.clear();  // version 1 had none
  EXPECT_EQ(p, want);
  j["ops"]["0"] = nlohmann::json::array();
  EXPECT_THROW(profile_from_json(j, "old.json"), Error);
}

TEST(PlanProfile, OpsAtTheNearestConcurrencyTimed) {
  const Profile p = sample();
  std::pair<int, int> at;
  EXPECT_EQ(&p.ops_for(2, 1, &at), &p.ops.at(2).at(1));
  EXPECT_EQ(at, std::make_pair(2, 1));
  EXPECT_EQ(&p.ops_for(1, 1, &at), &p.ops.at(1).at(1));
  // 4 processes at once: none timed so; the nearest (2), its nearest thread count (1).
  EXPECT_EQ(&p.ops_for(4, 2, &at), &p.ops.at(2).at(1));
  EXPECT_EQ(at, std::make_pair(2, 1));
  // Between two as near: the higher concurrency (more contention).
  Profile q = p;
  q.ops[3][1] = q.ops[2][1];
  q.ops.erase(2);
  EXPECT_EQ(&q.ops_for(2, 1, &at), &q.ops.at(3).at(1));
  EXPECT_EQ(at, std::make_pair(3, 1));
  // The contended set prices its op slower than the one timed alone.
  EXPECT_GT(profiled_op_seconds(gemm(64, 64, 64, 0), p.ops_for(2, 1)).seconds,
            profiled_op_seconds(gemm(64, 64, 64, 0), p.ops_for(1, 1)).seconds);
}

TEST(PlanProfile, UntimedShareBesideItsOpSet) {
  const Profile p = sample();
  EXPECT_DOUBLE_EQ(p.untimed_share_at({1, 1}), 0.125);
  EXPECT_DOUBLE_EQ(p.untimed_share_at({2, 1}), 0.25);
  EXPECT_EQ(p.untimed_share_at({1, 2}), 0);  // not measured beside that set
  // A set written without it (a profile from before) reads as 0, the key absent on writing back.
  nlohmann::json j = to_json(p);
  EXPECT_TRUE(j["op_sets"][0].contains("untimed_share"));
  j["op_sets"][0].erase("untimed_share");
  const Profile q = profile_from_json(j, "p.json");
  EXPECT_EQ(q.untimed_share_at({1, 1}), 0);
  EXPECT_FALSE(to_json(q)["op_sets"][0].contains("untimed_share"));
}

TEST(PlanProfile, CollectiveLineFromExactPoints) {
  // t = 20 us + bytes / 1 GB/s exactly.
  std::vector<std::pair<double, double>> pts;
  for (double b : {4096.0, 65536.0, 1048576.0, 16777216.0}) pts.emplace_back(b, 20e-6 + b / 1e9);
  const CollectiveFit f = fit_collective(pts);
  EXPECT_NEAR(f.latency_s, 20e-6, 1e-12);
  EXPECT_NEAR(f.bytes_per_s, 1e9, 1e-3);
  Profile p;
  p.collectives["dp"]["all_reduce"] = f;
  EXPECT_NEAR(p.collective_seconds("dp", "all_reduce", 5e6), 20e-6 + 5e-3, 1e-12);  // between points
  EXPECT_NEAR(p.collective_seconds("dp", "all_reduce", 1e3), 20e-6 + 1e-6, 1e-12);  // below: the line
  EXPECT_NEAR(p.collective_seconds("dp", "all_reduce", 1e8), 20e-6 + 0.1, 1e-12);   // above: last + slope
  // Between two measured points the points decide, not the line.
  CollectiveFit bent = fit_collective({{1e6, 1e-3}, {4e6, 10e-3}, {2e6, 5e-3}});
  EXPECT_EQ(bent.points.front().first, 1e6);  // sorted
  EXPECT_NEAR(bent.seconds(3e6), 7.5e-3, 1e-15);
  EXPECT_EQ(p.collective_seconds("dp", "all_reduce", 0), 0);
  try {
    p.collective_seconds("tp", "all_reduce", 1);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the tp axis (it has: dp)"), std::string::npos) << e.what();
  }
}

TEST(PlanProfile, OpsPricedByMeasurementThenWorkThenKind) {
  const Profile p = sample();
  const ProfileOps& ops = p.ops_for(1, 1);
  // Measured.
  OpPricing m = profiled_op_seconds(gemm(64, 64, 64, 0), ops);
  EXPECT_TRUE(m.measured);
  EXPECT_DOUBLE_EQ(m.seconds, 1e-4);
  // The same op at another shape: the line through its two shapes (FLOPs 524288 -> 1e-4,
  // 1048576 -> 3e-4) would have a negative intercept, so through the origin, each sample weighted
  // 1 / t² (relative error): c1 = Σ (w / t) / Σ (w / t)², at 4 x 524288 FLOPs.
  m = profiled_op_seconds(gemm(128, 128, 64, 0), ops);
  EXPECT_FALSE(m.measured);
  const double w1 = 524288, w2 = 1048576, t1 = 1e-4, t2 = 3e-4;
  EXPECT_NEAR(m.seconds, (w1 / t1 + w2 / t2) / (w1 * w1 / (t1 * t1) + w2 * w2 / (t2 * t2)) * 4 * w1, 1e-12);
  // An op never profiled: its kind's line over the elementwise ops' bytes (1e6 -> 1e-4, 2e6 -> 3e-4:
  // t = -1e-4 + 2e-10 b, negative intercept: through the origin, weighted as above).
  OpRecord silu = elementwise("swiglu_forward", 4e6, 0);
  m = profiled_op_seconds(silu, ops);
  EXPECT_FALSE(m.measured);
  EXPECT_NEAR(m.seconds, (1e6 / 1e-4 + 2e6 / 3e-4) / (1e20 + 4e12 / 9e-8) * 4e6, 1e-12);
  // Thread counts: the nearest profiled.
  EXPECT_EQ(&p.ops_for(1, 2), &p.ops.at(1).at(2));
  EXPECT_EQ(&p.ops_for(1, 8), &p.ops.at(1).at(2));
}

}  // namespace
}  // namespace ft::plan
