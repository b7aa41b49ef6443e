// No silent no-ops (config/key_effects.h): a key the user sets either implies the setting it
// needs, contradicts another key (an error naming both), or does nothing here (a warning naming
// the key that gates it).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "config/config.h"
#include "data_test_util.h"
#include "util/error.h"

namespace ft {
namespace {

bool has(const std::vector<std::string>& v, const std::string& part) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
}

std::string error_of(const std::vector<std::string>& sets) {
  try {
    load_config("", sets);
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(ConfigEffects, DataPathSelectsTheDatasetSourceAndItsVocabulary) {
  auto ds = testing::make_fake_dataset(testing::scratch_dir("effects"), {400}, {100});
  Config c = load_config("", {"data.path=\"" + ds.dir + "\""});
  EXPECT_EQ(c.data.source, DataSource::kDataset);
  EXPECT_EQ(c.model.vocab_size, 65536);  // the tokenizer's, not the preset's 256
  EXPECT_TRUE(has(c.config_notes, "data.source = \"dataset\" (implied by data.path")) << c.config_notes.size();
  EXPECT_TRUE(has(c.config_notes, "model.vocab_size = 65536"));
  // A vocabulary the user chose is kept (the loader checks that it covers the tokenizer).
  EXPECT_EQ(load_config("", {"data.path=\"" + ds.dir + "\"", "model.vocab_size=70000"}).model.vocab_size, 70000);
}

TEST(ConfigEffects, DataPathToAFileSelectsTokens) {
  std::string f = testing::scratch_dir("effects_tokens") + "/t.bin";
  std::ofstream(f) << std::string(4096, '\1');
  Config c = load_config("", {"data.path=\"" + f + "\""});
  EXPECT_EQ(c.data.source, DataSource::kTokenFile);
}

TEST(ConfigEffects, DataPathWithASyntheticSourceIsAnError) {
  std::string e = error_of({"data.source=\"synthetic\"", "data.path=\"/tmp\""});
  EXPECT_NE(e.find("data.path = \"/tmp\" is set but data.source = \"synthetic\" ignores it"), std::string::npos) << e;
  e = error_of({"data.path=\"/nonexistent/ft-data\""});
  EXPECT_NE(e.find("data.path = \"/nonexistent/ft-data\" does not exist"), std::string::npos) << e;
}

TEST(ConfigEffects, MetricsPortEnablesTheEndpoint) {
  Config c = load_config("", {"metrics.port=9611"});
  EXPECT_TRUE(c.metrics.enabled);
  EXPECT_TRUE(has(c.config_notes, "metrics.enabled = true (implied by metrics.port)"));
  // Said explicitly, "off" stays off, and the port is reported as doing nothing.
  Config off = load_config("", {"metrics.enabled=false", "metrics.port=9611"});
  EXPECT_FALSE(off.metrics.enabled);
  EXPECT_TRUE(has(off.config_warnings, "metrics.port has no effect: metrics.enabled = false"));
}

TEST(ConfigEffects, GatedKeysAreWarningsNamingTheGate) {
  Config c =
      load_config("", {"train.precision=\"fp32\"", "optim.loss_scale_window=10", "ckpt.keep=5", "parallel.zero=2",
                       "parallel.pp_schedule=\"gpipe\"", "train.eval_batches=3", "data.token_dtype=\"u32\"",
                       "parallel.powersgd_rank=2", "fault.spike_window=50", "fault.spike_zscore=0"});
  const auto& w = c.config_warnings;
  EXPECT_TRUE(has(w, "optim.loss_scale_window has no effect: train.precision is \"fp32\", not \"fp16\""));
  EXPECT_TRUE(has(w, "ckpt.keep has no effect: ckpt.interval = 0"));
  EXPECT_TRUE(has(w, "parallel.zero has no effect: parallel.dp = 1"));
  EXPECT_TRUE(has(w, "parallel.pp_schedule has no effect: parallel.pp = 1"));
  EXPECT_TRUE(has(w, "train.eval_batches has no effect: train.eval_interval = 0"));
  EXPECT_TRUE(has(w, "data.token_dtype has no effect: data.source is \"synthetic\""));
  EXPECT_TRUE(has(w, "parallel.powersgd_rank has no effect"));
  EXPECT_TRUE(has(w, "fault.spike_window has no effect: fault.spike_zscore = 0"));
  EXPECT_EQ(w.size(), 8u);
  // The same keys where they act: no warnings.
  Config active = load_config("", {"train.precision=\"fp16\"", "optim.loss_scale_window=10", "ckpt.keep=5",
                                   "ckpt.interval=10", "train.eval_batches=3", "train.eval_interval=5"});
  EXPECT_TRUE(active.config_warnings.empty()) << active.config_warnings.front();
}

TEST(ConfigEffects, StragglerKeysNeedPeers) {
  Config one = load_config("", {"metrics.straggler_factor=1.5", "metrics.straggler_window=8"});
  EXPECT_TRUE(has(one.config_warnings, "metrics.straggler_factor has no effect: one rank"));
  EXPECT_TRUE(has(one.config_warnings, "metrics.straggler_window has no effect: one rank"));
  EXPECT_EQ(one.config_warnings.size(), 2u);
  Config four = load_config("", {"parallel.dp=4", "metrics.straggler_factor=1.5", "metrics.straggler_window=8"});
  EXPECT_TRUE(four.config_warnings.empty()) << four.config_warnings.front();
}

TEST(ConfigEffects, DefaultsAndUnsetKeysSayNothing) {
  Config c = load_config(FT_SOURCE_DIR "/configs/tiny.toml", {});
  EXPECT_TRUE(c.config_warnings.empty()) << c.config_warnings.front();
  EXPECT_TRUE(c.config_notes.empty()) << c.config_notes.front();
}

}  // namespace
}  // namespace ft
