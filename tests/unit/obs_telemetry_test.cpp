#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "config/config.h"
#include "obs/metric_names.h"
#include "obs/metrics_server.h"
#include "obs/telemetry.h"
#include "parallel/comm/comm.h"
#include "tensor/memory.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::obs {
namespace {

namespace fs = std::filesystem;

double value_of(const std::string& text, const std::string& series) {
  // A sample line starts the line (a HELP line may mention the name too).
  auto p = ("\n" + text).find("\n" + series + " ");
  if (p == std::string::npos) return NAN;
  return std::stod(text.substr(p + series.size() + 1));
}

class TelemetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ft_tel_" + std::to_string(::getpid())) / "run7";
    fs::create_directories(dir_);
    cfg_.enabled = true;
    cfg_.bind_address = "127.0.0.1";
    cfg_.port = 0;
    cfg_.gpu_interval_s = 0;
  }
  void TearDown() override { fs::remove_all(dir_.parent_path()); }
  fs::path dir_;
  MetricsConfig cfg_;
};

TEST_F(TelemetryTest, StepsShowOnTheEndpointWithRankLabels) {
  RankInfo rank{.rank = 5, .world_size = 8, .local_rank = 1, .dp = 1, .tp = 1, .pp = 1};
  Telemetry tel(cfg_, rank, dir_.string() + "/", 100);
  ASSERT_GT(tel.port(), 0);
  EXPECT_EQ(tel.tensorboard_path(), "");  // only rank 0 writes TensorBoard events
  tel.set_checkpoint_interval_steps(50);
  for (int s = 1; s <= 3; ++s)
    tel.on_step({.step = s,
                 .loss = 4.0 - s,
                 .lr = 1e-3 * s,
                 .grad_norm = 0.5,
                 .tokens = 4096,
                 .tokens_per_s = 2e4,
                 .step_s = 0.2,
                 .mfu = 0.35,
                 .data_wait_s = 0.01,
                 .skipped = s == 2});
  tel.on_eval(3, 2.25, 1.5);
  tel.on_checkpoint(3, 1.5, true);
  tel.on_checkpoint(3, 0, false);
  tel.on_checkpoint_upload(1000, 0.25);
  tel.on_checkpoint_skipped();
  tel.on_checkpoint_upload(2000, 0.25);
  tel.comm(CommOp::kAllReduce, 1 << 20, 0.004);
  tel.comm(CommOp::kAllReduce, 1 << 20, 0.006, 3);
  tel.set_restarts(2);

  httplib::Client cli("127.0.0.1", tel.port());
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  const std::string& t = res->body;
  const std::string L = "run=\"run7\",rank=\"5\",dp=\"1\",tp=\"1\",pp=\"1\"";
  EXPECT_EQ(value_of(t, "fluxtrain_step{" + L + "}"), 3);
  EXPECT_EQ(value_of(t, "fluxtrain_steps_total{" + L + "}"), 3);
  EXPECT_EQ(value_of(t, "fluxtrain_tokens_total{" + L + "}"), 3 * 4096);
  EXPECT_EQ(value_of(t, "fluxtrain_loss{" + L + "}"), 1);
  EXPECT_DOUBLE_EQ(value_of(t, "fluxtrain_learning_rate{" + L + "}"), 3e-3);
  EXPECT_DOUBLE_EQ(value_of(t, "fluxtrain_mfu_ratio{" + L + "}"), 0.35);
  EXPECT_DOUBLE_EQ(value_of(t, "fluxtrain_data_wait_seconds_total{" + L + "}"), 0.03);
  EXPECT_EQ(value_of(t, "fluxtrain_skipped_steps_total{" + L + "}"), 1);
  EXPECT_EQ(value_of(t, "fluxtrain_validation_bpc{" + L + "}"), 1.5);
  EXPECT_EQ(value_of(t, "fluxtrain_step_duration_seconds_count{" + L + "}"), 3);
  EXPECT_EQ(value_of(t, "fluxtrain_checkpoint_step{" + L + "}"), 3);
  EXPECT_EQ(value_of(t, "fluxtrain_checkpoint_failures_total{" + L + "}"), 1);
  EXPECT_EQ(value_of(t, "fluxtrain_checkpoint_upload_bytes_total{" + L + "}"), 3000);
  EXPECT_DOUBLE_EQ(value_of(t, "fluxtrain_checkpoint_upload_seconds_total{" + L + "}"), 0.5);
  EXPECT_EQ(value_of(t, "fluxtrain_checkpoint_skipped_total{" + L + "}"), 1);
  EXPECT_NEAR(value_of(t, "fluxtrain_checkpoint_interval_seconds{" + L + "}"), 50 * 0.2, 1e-9);
  EXPECT_EQ(value_of(t, "fluxtrain_comm_bytes_total{" + L + ",op=\"all_reduce\"}"), 2 << 20);
  EXPECT_DOUBLE_EQ(value_of(t, "fluxtrain_comm_seconds_total{" + L + ",op=\"all_reduce\"}"), 0.01);
  EXPECT_EQ(value_of(t, "fluxtrain_comm_operations_total{" + L + ",op=\"all_reduce\"}"), 4);
  EXPECT_EQ(value_of(t, "fluxtrain_restarts_total{" + L + "}"), 2);
  EXPECT_EQ(value_of(t, "fluxtrain_world_size{" + L + "}"), 8);
  EXPECT_GT(value_of(t, "fluxtrain_process_resident_memory_bytes{" + L + "}"), 0);
}

TEST_F(TelemetryTest, MemoryCategoriesComeFromTheTracker) {
  Telemetry tel(cfg_, {}, dir_.string(), 0);
  std::string before = tel.registry().expose();
  double live0 = value_of(
      before, "fluxtrain_memory_bytes{run=\"run7\",rank=\"0\",dp=\"0\",tp=\"0\",pp=\"0\",category=\"activations\"}");
  void* p = mem_alloc(Device::kCPU, 1 << 20, MemCategory::kActivations);
  std::string during = tel.registry().expose();
  mem_free(Device::kCPU, p, 1 << 20, MemCategory::kActivations);
  EXPECT_EQ(
      value_of(during,
               "fluxtrain_memory_bytes{run=\"run7\",rank=\"0\",dp=\"0\",tp=\"0\",pp=\"0\",category=\"activations\"}"),
      live0 + (1 << 20));
}

TEST_F(TelemetryTest, EachLocalRankServesPortPlusLocalRank) {
  // Find two consecutive free ports by binding them.
  int base = 0;
  for (int tries = 0; tries < 20 && base == 0; ++tries) {
    Registry probe;
    auto first = std::make_unique<MetricsServer>(probe, "127.0.0.1", 0, 0);
    int p = first->port();
    first.reset();
    if (p >= 65535) continue;
    try {
      MetricsServer a(probe, "127.0.0.1", p, 0), b(probe, "127.0.0.1", p + 1, 0);
      base = p;
    } catch (const Error&) {
    }
  }
  ASSERT_GT(base, 0);
  cfg_.port = base;
  Telemetry r0(cfg_, {.rank = 0, .world_size = 2, .local_rank = 0}, dir_.string(), 10);
  Telemetry r1(cfg_, {.rank = 1, .world_size = 2, .local_rank = 1}, dir_.string(), 10);
  EXPECT_EQ(r0.port(), base);
  EXPECT_EQ(r1.port(), base + 1);
  auto res = httplib::Client("127.0.0.1", base + 1).Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("rank=\"1\""), std::string::npos);
  // A third process of local rank 0 finds the port taken.
  try {
    Telemetry dup(cfg_, {.rank = 2, .world_size = 3, .local_rank = 0}, dir_.string(), 10);
    ADD_FAILURE() << "bound a port that is in use";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("port {}", base)), std::string::npos) << e.what();
  }
}

TEST_F(TelemetryTest, DisabledServesNothingButStillCounts) {
  cfg_.enabled = false;
  Telemetry tel(cfg_, {}, dir_.string(), 10);
  EXPECT_EQ(tel.port(), -1);
  tel.on_step({.step = 1, .loss = 2, .tokens = 10});
  EXPECT_EQ(
      value_of(tel.registry().expose(), "fluxtrain_tokens_total{run=\"run7\",rank=\"0\",dp=\"0\",tp=\"0\",pp=\"0\"}"),
      10);
  EXPECT_NE(tel.tensorboard_path(), "");
  EXPECT_TRUE(fs::exists(tel.tensorboard_path()));
}

TEST_F(TelemetryTest, DataFetchedBytesAndPerSourceValidation) {
  Telemetry tel(cfg_, {}, dir_.string(), 10);
  tel.data_fetched(100);
  tel.data_fetched(50);
  tel.on_eval_source(3, "ru", 2.5, 1.25);
  tel.on_eval_source(3, "en", 2.0, NAN);  // bits/char unknown: no gauge
  std::string text = tel.registry().expose();
  const std::string labels = "run=\"run7\",rank=\"0\",dp=\"0\",tp=\"0\",pp=\"0\"";
  EXPECT_EQ(value_of(text, "fluxtrain_data_fetched_bytes_total{" + labels + "}"), 150);
  EXPECT_EQ(value_of(text, "fluxtrain_validation_source_loss{" + labels + ",source=\"ru\"}"), 2.5);
  EXPECT_EQ(value_of(text, "fluxtrain_validation_source_bpc{" + labels + ",source=\"ru\"}"), 1.25);
  EXPECT_EQ(value_of(text, "fluxtrain_validation_source_loss{" + labels + ",source=\"en\"}"), 2.0);
  EXPECT_EQ(text.find("fluxtrain_validation_source_bpc{" + labels + ",source=\"en\"}"), std::string::npos);
}

TEST_F(TelemetryTest, NanLossIsExportedForTheAlertRules) {
  Telemetry tel(cfg_, {}, dir_.string(), 10);
  tel.on_step({.step = 1, .loss = NAN});
  EXPECT_NE(tel.registry().expose().find("fluxtrain_loss{run=\"run7\",rank=\"0\",dp=\"0\",tp=\"0\",pp=\"0\"} NaN"),
            std::string::npos);
}

TEST(MetricsConfig, BoundAndValidated) {
  Config c = load_config("", {"metrics.enabled=true", "metrics.port=9600", "metrics.gpu_temp_alert_c=85"});
  EXPECT_TRUE(c.metrics.enabled);
  EXPECT_EQ(c.metrics.port, 9600);
  EXPECT_EQ(c.metrics.gpu_temp_alert_c, 85);
  EXPECT_EQ(c.metrics.gpu_interval_s, 10);
  try {
    load_config("", {"metrics.port=70000"});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.port = 70000"), std::string::npos);
  }
  EXPECT_THROW(load_config("", {"metrics.gpu_interval_s=-1"}), Error);
}

TEST(CommOp, MirrorsTheCommunicatorsKinds) {
  ASSERT_EQ(kNumCommOps, kNumCollKinds);
  for (size_t k = 0; k < kNumCollKinds; ++k)
    EXPECT_STREQ(comm_op_name(static_cast<CommOp>(k)), coll_kind_name(static_cast<CollKind>(k)));
}

TEST(MetricNames, DocumentedInFormatsMd) {
  std::string doc = read_file(std::string(FT_SOURCE_DIR) + "/docs/formats.md");
  auto at = doc.find("## Metrics");
  ASSERT_NE(at, std::string::npos) << "docs/formats.md has no \"## Metrics\" section";
  std::string section = doc.substr(at, doc.find("\n## ", at + 1) - at);
  std::set<std::string> documented;
  std::regex name("`(fluxtrain_[a-z_]+)`");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), name); it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  std::set<std::string> declared;
  for (const MetricDef* d : kAllMetrics) declared.insert(d->name);
  for (const auto& n : declared) EXPECT_TRUE(documented.count(n)) << n << " is not documented in docs/formats.md";
  for (const auto& n : documented) EXPECT_TRUE(declared.count(n)) << n << " is documented but not declared";
}

}  // namespace
}  // namespace ft::obs
