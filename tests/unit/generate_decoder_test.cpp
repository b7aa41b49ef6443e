// The KV-cache decoder against the training forward (Llama::forward_logits, the code path the
// PyTorch oracle checks): feeding a sequence token by token, or as a prompt and then token by
// token, gives the same logits at every position. And the sampler's rules.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "generate/decoder.h"
#include "model/activation_sizes.h"
#include "model/llama.h"
#include "model/param_access.h"
#include "util/error.h"

namespace ft {
namespace {

double max_rel(const float* a, const float* b, int64_t n) {
  double scale = 0, diff = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  for (int64_t i = 0; i < n; ++i) diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
  return diff / std::max(scale, 1e-30);
}

void check(ModelConfig m) {
  ParamLayout layout = ParamLayout::llama(m);
  FlatParams p(layout);
  layout.init(p.weight_arena(), 99);
  const int64_t T = 13, V = m.vocab_size;
  std::vector<int32_t> seq;
  for (int64_t t = 0; t <= T; ++t) seq.push_back(static_cast<int32_t>((t * 37 + 5) % V));
  Llama model(cpu_context(), m, layout, Precision::kF32);
  Activations acts;
  acts.allocate(m, 1, T, loss_chunk_tokens(m, 0, T));
  std::vector<float> full(static_cast<size_t>(T * V));
  model.forward_logits(p, acts, seq.data(), full.data());

  Decoder one(cpu_context(), m, layout, p.weight_arena(), T);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float>& l = one.feed({seq[static_cast<size_t>(t)]});
    ASSERT_LT(max_rel(l.data(), full.data() + t * V, V), 1e-5) << "position " << t;
  }
  Decoder prompt(cpu_context(), m, layout, p.weight_arena(), T);
  prompt.set_keep_all_logits(true);
  prompt.feed(std::vector<int32_t>(seq.begin(), seq.begin() + 7));
  ASSERT_LT(max_rel(prompt.all_logits().data(), full.data(), 7 * V), 1e-5);
  for (int64_t t = 7; t < T; ++t) {
    prompt.feed({seq[static_cast<size_t>(t)]});
    ASSERT_LT(max_rel(prompt.all_logits().data(), full.data() + t * V, V), 1e-5) << "position " << t;
  }
  EXPECT_THROW(prompt.feed({1}), Error);  // past max_positions
}

TEST(Decoder, MatchesTrainingForwardUntied) {
  check(ModelConfig{});
}

TEST(Decoder, MatchesTrainingForwardTiedMHA) {
  ModelConfig m;
  m.tie_embeddings = true;
  m.n_kv_heads = m.n_heads;
  check(m);
}

TEST(Sampler, GreedyTopPAndSeeds) {
  std::vector<float> logits = {0.1f, 3.0f, 2.9f, -1.0f};
  EXPECT_EQ(sample_token(logits, {.temperature = 0}, 0), 1);
  // A nucleus smaller than the top token's probability keeps only it.
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(sample_token(logits, {.temperature = 1, .top_p = 0.3, .seed = 3}, i), 1);
  // top_p = 0.9 keeps tokens 1 and 2 only (each ~0.47, token 0 ~0.05): both appear, nothing else.
  std::set<int32_t> seen;
  for (uint64_t i = 0; i < 200; ++i) seen.insert(sample_token(logits, {.temperature = 1, .top_p = 0.9, .seed = 3}, i));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2}));
  // Same seed and index: same token.
  EXPECT_EQ(sample_token(logits, {.temperature = 2, .top_p = 1, .seed = 9}, 17),
            sample_token(logits, {.temperature = 2, .top_p = 1, .seed = 9}, 17));
}

// Temperature sampling draws each token with probability softmax(logits / T): frequencies over
// many draws (fixed seed) match the probabilities computed here in double, for T below and above
// 1; with top_p the kept tokens' probabilities are renormalised over the nucleus.
TEST(Sampler, TemperatureFrequenciesFollowSoftmax) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f};
  const int draws = 40000;
  for (double T : {0.5, 1.0, 2.0}) {
    std::vector<double> p(logits.size());
    double z = 0;
    for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(logits[i] / T);
    std::vector<int> count(logits.size(), 0);
    for (int i = 0; i < draws; ++i)
      ++count[static_cast<size_t>(sample_token(logits, {.temperature = T, .seed = 5}, i))];
    for (size_t i = 0; i < p.size(); ++i) {
      const double want = p[i] / z, got = static_cast<double>(count[i]) / draws;
      EXPECT_NEAR(got, want, 4 * std::sqrt(want * (1 - want) / draws) + 1e-4) << "T " << T << " token " << i;
    }
  }
  // top_p = 0.8 at T = 1: probabilities (sorted) ~0.57, 0.21, 0.09, 0.08, 0.05 -> tokens 3, 0 and
  // 1 (mass 0.87 >= 0.8), renormalised.
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp(logits[i]);
  const double kept = p[3] + p[0] + p[1];
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < draws; ++i)
    ++count[static_cast<size_t>(sample_token(logits, {.temperature = 1, .top_p = 0.8, .seed = 6}, i))];
  EXPECT_EQ(count[2] + count[4], 0);
  for (size_t i : {3, 0, 1}) {
    const double want = p[i] / kept, got = static_cast<double>(count[i]) / draws;
    EXPECT_NEAR(got, want, 4 * std::sqrt(want * (1 - want) / draws) + 1e-4) << "top-p token " << i;
  }
}

}  // namespace
}  // namespace ft
