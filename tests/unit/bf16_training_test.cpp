// bf16 compute: the bf16 weight copy the engines keep (Bf16Weights, rounded once per update) and
// the model's own rounding (ZeRO 3, FlatParams) give the same numbers; the copy is the rounded
// fp32 weights after every update; bf16 activations are accounted like the allocator counts them.
// (Against PyTorch: tests/oracle, oracle_bf16.)
#include <gtest/gtest.h>

#include <filesystem>

#include "config/config.h"
#include "model/activation_sizes.h"
#include "parallel/data_parallel/bf16_weights.h"
#include "tensor/dtype.h"
#include "train/trainer.h"

namespace ft {
namespace {

Config tiny_bf16(std::vector<std::string> extra = {}) {
  std::string dir = (std::filesystem::temp_directory_path() / ("ft_bf16_" + std::to_string(::getpid()))).string();
  std::vector<std::string> sets = {
      "train.batch_size=4",    "train.seq_len=16",         "train.steps=4",
      "train.eval_interval=0", "train.precision=\"bf16\"", "train.run_dir=\"" + dir + "\""};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_config("", sets);
}

std::vector<double> losses(const Config& c) {
  Mesh mesh = Mesh::single();
  Trainer t(c, mesh);
  std::vector<double> out;
  for (int i = 0; i < c.train.steps; ++i) out.push_back(t.step().loss);
  return out;
}

TEST(Bf16Training, SameSeedGivesBitIdenticalLosses) {
  auto a = losses(tiny_bf16()), b = losses(tiny_bf16());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
}

// ZeRO 0 reads the engine's bf16 copy (written by AdamW); ZeRO 3 keeps none, so the model rounds
// each gathered weight itself (including the stacked q/k/v and gate/up matrices): same losses.
TEST(Bf16Training, EngineCopyAndModelRoundingGiveTheSameLosses) {
  auto copy = losses(tiny_bf16({"parallel.zero=0"}));
  auto model = losses(tiny_bf16({"parallel.zero=3"}));
  for (size_t i = 0; i < copy.size(); ++i) EXPECT_EQ(copy[i], model[i]) << "step " << i + 1;
  auto recompute = losses(tiny_bf16({"model.recompute=\"full\""}));
  for (size_t i = 0; i < copy.size(); ++i) EXPECT_EQ(copy[i], recompute[i]) << "step " << i + 1;
  // bf16 stays near fp32 (the oracle test bounds it against PyTorch).
  auto fp32 = losses(tiny_bf16({"train.precision=\"fp32\""}));
  for (size_t i = 0; i < copy.size(); ++i) EXPECT_NEAR(copy[i], fp32[i], 2e-2 * fp32[i]) << "step " << i + 1;
}

TEST(Bf16Training, EngineCopyIsTheRoundedWeightsAfterEachUpdate) {
  for (const char* zero : {"parallel.zero=0", "parallel.zero=1"}) {
    Config c = tiny_bf16({zero});
    Mesh mesh = Mesh::single();
    Trainer t(c, mesh);
    for (int step = 0; step < 2; ++step) {
      t.step();
      ParamEngine& p = t.params();
      for (int u = 0; u < p.layout().num_units(); ++u) {
        const float* w = p.weights(u);
        const uint16_t* w16 = p.weights_bf16(u);
        ASSERT_NE(w16, nullptr) << zero;
        for (const ParamSpec& s : p.layout().specs()) {
          if (s.unit != u) continue;
          const int64_t o = s.offset - p.layout().unit_begin(u);
          for (int64_t i = 0; i < s.numel(); ++i)
            ASSERT_EQ(w16[o + i], f32_to_bf16(w[o + i])) << zero << " " << s.name << "[" << i << "] step " << step;
        }
      }
    }
  }
}

TEST(Bf16Weights, RoundsAUnitOnlyWhenItsVersionChanged) {
  ModelConfig m = model_preset("tiny");
  ParamLayout layout = ParamLayout::llama(m);
  std::vector<float> w(static_cast<size_t>(layout.total()), 1.5f);
  Bf16Weights copy;
  copy.enable(cpu_context(), layout);
  const int u = 1;
  const float* unit = w.data() + layout.unit_begin(u);
  EXPECT_EQ(copy.unit(u, unit, 7)[0], f32_to_bf16(1.5f));
  w[static_cast<size_t>(layout.unit_begin(u))] = -2.0f;
  EXPECT_EQ(copy.unit(u, unit, 7)[0], f32_to_bf16(1.5f));   // same version: the copy is current
  EXPECT_EQ(copy.unit(u, unit, 8)[0], f32_to_bf16(-2.0f));  // new version: rounded again
  copy.arena()[layout.unit_begin(u)] = f32_to_bf16(3.0f);   // an update wrote it directly
  copy.mark_current(9);
  EXPECT_EQ(copy.unit(u, unit, 9)[0], f32_to_bf16(3.0f));
}

TEST(Bf16Training, ActivationAccountingMatchesTheAllocator) {
  ModelConfig m = model_preset("tiny");
  for (Precision p : {Precision::kF32, Precision::kBF16}) {
    int64_t before = MemoryTracker::global().live(MemCategory::kActivations);
    {
      Activations acts;
      acts.allocate(m, 4, 16, 32, {}, {}, p);
      BackwardScratch s;
      s.allocate(m, 4, 16, {}, p);
      EXPECT_EQ(
          MemoryTracker::global().live(MemCategory::kActivations) - before,
          kept_activation_bytes(m, 4, 16, 32, Recompute::kNone, {}, {}, p) + scratch_activation_bytes(m, 4, 16, {}, p));
    }
  }
  // The GEMM-only tensors (xn1, xn2, h) are half the size in bf16.
  EXPECT_LT(kept_activation_bytes(m, 4, 16, 32, Recompute::kNone, {}, {}, Precision::kBF16),
            kept_activation_bytes(m, 4, 16, 32, Recompute::kNone));
}

// bf16 GEMMs need about a thousand rows to amortise re-laying out the LM head's weight: the
// automatic loss chunk holds 4x the fp32 one's logits; a configured chunk is kept.
TEST(Bf16Training, LossChunksAreLargerForBf16) {
  ModelConfig m = model_preset("llama-125m");  // vocabulary 32000
  EXPECT_EQ(loss_chunk_tokens(m, 0, 2048), 262);
  EXPECT_EQ(loss_chunk_tokens(m, 0, 2048, Precision::kBF16), 1048);
  EXPECT_EQ(loss_chunk_tokens(m, 0, 512, Precision::kBF16), 512);
  EXPECT_EQ(loss_chunk_tokens(m, 100, 2048, Precision::kBF16), 100);
}

}  // namespace
}  // namespace ft
