// Pipeline stages without ranks: the compute-balanced partition (against brute force), the
// micro-batch rule, layouts and activations of a subset of units, and a model split into stages
// in one process reproducing the whole model's loss and every gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "config/config.h"
#include "model/activation_sizes.h"
#include "model/llama.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "tensor/device_scalars.h"
#include "util/error.h"

namespace ft {
namespace {

ModelConfig tiny() {
  return model_preset("tiny");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Partition, TinySplitsEvenlyWithEmbeddingFirstAndHeadLast) {
  StagePartition p2 = StagePartition::balanced(tiny(), 32, 2, 1);
  EXPECT_EQ(p2.stage_units(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p2.stage_units(1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(p2.describe(), "stage 0: embedding, layers 0-1 | stage 1: layers 2-3, head");
  StagePartition p4 = StagePartition::balanced(tiny(), 32, 4, 1);
  EXPECT_EQ(p4.stage_units(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(p4.stage_units(3), (std::vector<int>{4, 5}));
  EXPECT_TRUE(p4.has_embedding(0) && p4.has_head(3) && !p4.has_head(2));
  // Interleaved: stage s holds chunks s and s + p.
  ModelConfig m = tiny();
  m.n_layers = 8;
  StagePartition pi = StagePartition::balanced(m, 32, 4, 2);
  EXPECT_EQ(pi.stage_units(0), (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(pi.stage_units(3), (std::vector<int>{4, 8, 9}));
  LayerSpan last = pi.span(7);
  EXPECT_EQ(last.first, 7);
  EXPECT_EQ(last.count, 1);
  EXPECT_TRUE(last.head);
}

// The smallest possible largest-chunk cost, by trying every split of the layers.
double brute_force_best(const ModelConfig& m, int64_t T, int K) {
  const int L = static_cast<int>(m.n_layers);
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> cuts(static_cast<size_t>(K) - 1);
  std::function<void(int, int)> go = [&](int k, int from) {
    if (k == K - 1) {
      double worst = 0;
      int begin = 0;
      for (int c = 0; c < K; ++c) {
        int end = c == K - 1 ? L : cuts[static_cast<size_t>(c)];
        double cost = c == 0 ? StagePartition::unit_cost(m, T, 0) : 0;
        for (int l = begin; l < end; ++l) cost += StagePartition::unit_cost(m, T, l + 1);
        if (c == K - 1) cost += StagePartition::unit_cost(m, T, L + 1);
        worst = std::max(worst, cost);
        begin = end;
      }
      best = std::min(best, worst);
      return;
    }
    for (int c = from; c <= L - (K - 1 - k); ++c) {
      cuts[static_cast<size_t>(k)] = c;
      go(k + 1, c + 1);
    }
  };
  go(0, 1);
  return best;
}

TEST(Partition, BalancesComputeIncludingTheHeadsVocabularyGemm) {
  ModelConfig m = tiny();
  m.n_layers = 10;
  m.vocab_size = 2048;  // the head costs about three layers
  const double head = StagePartition::unit_cost(m, 32, 11), layer = StagePartition::unit_cost(m, 32, 1);
  EXPECT_GT(head, 2.5 * layer);
  for (int K : {2, 3, 4, 5}) {
    StagePartition p = StagePartition::balanced(m, 32, K, 1);
    double worst = 0;
    for (int k = 0; k < K; ++k) worst = std::max(worst, p.chunk(k).cost);
    EXPECT_DOUBLE_EQ(worst, brute_force_best(m, 32, K)) << K << " stages: " << p.describe();
    EXPECT_LT(p.span(K - 1).count, p.span(0).count) << "the head's stage takes fewer layers: " << p.describe();
  }
}

TEST(Partition, MoreChunksThanLayersIsAClearError) {
  std::string e = error_of([] { StagePartition::balanced(tiny(), 32, 5, 1); });
  EXPECT_NE(e.find("parallel.pp = 5 is greater than the number of layers, model.n_layers = 4"), std::string::npos) << e;
  e = error_of([] { StagePartition::balanced(tiny(), 32, 4, 2); });
  EXPECT_NE(e.find("parallel.pp × parallel.virtual_stages = 4 × 2 = 8 model chunks but model.n_layers = 4"),
            std::string::npos)
      << e;
}

TEST(PipelinePlan, RejectsTiedEmbeddingsAndUngroupableMicroBatches) {
  ParallelConfig p;
  p.pp = 2;
  ModelConfig tied = tiny();
  tied.tie_embeddings = true;
  std::string e = error_of([&] { PipelinePlan::make(tied, 32, p, 4); });
  EXPECT_NE(e.find("model.tie_embeddings = true with parallel.pp = 2"), std::string::npos) << e;
  p.pp_schedule = PipelineSchedule::kInterleaved;
  p.virtual_stages = 2;
  e = error_of([&] { PipelinePlan::make(tiny(), 32, p, 3); });
  EXPECT_NE(e.find("groups of parallel.pp = 2, but a step has 3 micro-batch(es)"), std::string::npos) << e;
  PipelinePlan ok = PipelinePlan::make(tiny(), 32, p, 4);
  EXPECT_NEAR(ok.train_report.bubble, 1.0 / 9.0, 1e-12);  // (p−1)/(v·m+p−1) = 1/(8+1)
}

TEST(MicroBatches, OneRuleForCountAndSize) {
  TrainConfig t;
  ParallelConfig p;
  t.batch_size = 16;
  p.dp = 2;
  MicroBatching mb = split_batch(t.batch_size, t.micro_batch_size, p);  // defaults: the whole per-rank batch at once
  EXPECT_EQ(mb.local_batch, 8);
  EXPECT_EQ(mb.count, 1);
  t.micro_batch_size = 2;
  EXPECT_EQ(split_batch(t.batch_size, t.micro_batch_size, p).count, 4);
  p.micro_batches = 4;  // agrees with size 2
  EXPECT_EQ(split_batch(t.batch_size, t.micro_batch_size, p).size, 2);
  t.micro_batch_size = 0;
  p.micro_batches = 8;
  EXPECT_EQ(split_batch(t.batch_size, t.micro_batch_size, p).size, 1);
  p.micro_batches = 3;
  std::string e = error_of([&] { split_batch(t.batch_size, t.micro_batch_size, p); });
  EXPECT_NE(e.find("parallel.micro_batches = 3 does not divide the per-rank batch of 8 sequences "
                   "(train.batch_size 16 / parallel.dp 2)"),
            std::string::npos)
      << e;
  p.micro_batches = 4;
  t.micro_batch_size = 1;
  e = error_of([&] { split_batch(t.batch_size, t.micro_batch_size, p); });
  EXPECT_NE(e.find("disagrees"), std::string::npos) << e;
  p.micro_batches = 0;
  t.micro_batch_size = 3;
  e = error_of([&] { split_batch(t.batch_size, t.micro_batch_size, p); });
  EXPECT_NE(e.find("train.micro_batch_size = 3 does not divide"), std::string::npos) << e;
}

TEST(Config, PipelineErrorsShowWhenTheConfigLoads) {
  EXPECT_NE(error_of([] { load_config("", {"parallel.pp=5"}); }).find("greater than the number of layers"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              load_config("", {"parallel.pp=2", "parallel.micro_batches=3"});
            }).find("does not divide"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_config("", {"parallel.virtual_stages=2"}); }).find("needs parallel.pp_schedule"),
            std::string::npos);
}

TEST(StageLayout, HoldsItsUnitsWithLocalNumbersAndTheSameInitialValues) {
  ModelConfig m = tiny();
  ParamLayout full = ParamLayout::llama(m, 4);
  ParamLayout stage = ParamLayout::llama(m, 4, {3, 4, 5});
  EXPECT_EQ(stage.num_units(), 3);
  EXPECT_EQ(stage.global_unit(0), 3);
  EXPECT_EQ(stage.local_unit(5), 2);
  EXPECT_EQ(stage.local_unit(0), -1);
  EXPECT_FALSE(stage.has("model.embed_tokens.weight"));
  EXPECT_FALSE(stage.has("model.layers.1.mlp.up_proj.weight"));
  EXPECT_EQ(stage.at("model.layers.2.input_layernorm.weight").unit, 0);
  EXPECT_EQ(stage.at("lm_head.weight").unit, 2);
  EXPECT_EQ(stage.unit_size(1), full.unit_size(4));
  for (int u = 0; u < 3; ++u) EXPECT_EQ(stage.unit_size(u) % 4, 0);
  std::vector<float> fw(static_cast<size_t>(full.total())), sw(static_cast<size_t>(stage.total()));
  full.init(fw.data(), 7);
  stage.init(sw.data(), 7);
  for (const ParamSpec& p : stage.specs()) {
    const ParamSpec& f = full.at(p.name);
    EXPECT_EQ(std::memcmp(sw.data() + p.offset, fw.data() + f.offset, static_cast<size_t>(p.numel()) * 4), 0) << p.name;
  }
}

TEST(StageActivations, AllocatorMatchesTheSharedSizes) {
  ModelConfig m = tiny();
  StagePartition part = StagePartition::balanced(m, 16, 2, 1);
  for (int k = 0; k < 2; ++k) {
    int64_t before = MemoryTracker::global().live(MemCategory::kActivations);
    Activations a;
    a.allocate(m, 2, 16, 32, part.span(k));
    EXPECT_EQ(MemoryTracker::global().live(MemCategory::kActivations) - before,
              kept_activation_bytes(m, 2, 16, 32, Recompute::kNone, part.span(k)));
    EXPECT_EQ(a.first_layer, 2 * k);
    EXPECT_EQ(a.res.size(), 3u);
  }
  // The chunks together keep the whole model's activations plus one shared boundary buffer.
  int64_t N = 2 * 16;
  EXPECT_EQ(kept_activation_bytes(m, 2, 16, 32, Recompute::kNone, part.span(0)) +
                kept_activation_bytes(m, 2, 16, 32, Recompute::kNone, part.span(1)),
            kept_activation_bytes(m, 2, 16, 32, Recompute::kNone) + 4 * N * m.dim);
}

// Two stages in one process, handing the residual stream and its gradient over by copy, give
// the whole model's loss and gradients (the same arithmetic in the same order: bit-identical).
TEST(StageModel, TwoStagesInOneProcessMatchTheWholeModel) {
  ModelConfig m = tiny();
  const int64_t B = 2, T = 16, N = B * T, C = m.dim;
  std::mt19937 rng(3);
  std::vector<int32_t> seqs(static_cast<size_t>(B * (T + 1)));
  for (auto& t : seqs) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(m.vocab_size));
  const float scale = 1.0f / static_cast<float>(N);

  FlatParams whole(ParamLayout::llama(m));
  whole.layout().init(whole.weight_arena(), 11);
  Llama model(cpu_context(), m, whole.layout(), Precision::kF32);
  Activations acts;
  acts.allocate(m, B, T, 8);
  DeviceScalars losses(cpu_context(), 2);  // [0] the whole model's, [1] the stages'
  model.forward_backward(whole, acts, seqs.data(), scale, losses.at(0));

  StagePartition part = StagePartition::balanced(m, T, 2, 1);
  std::vector<std::unique_ptr<FlatParams>> params;
  std::vector<std::unique_ptr<Llama>> stages;
  std::vector<Activations> sa(2);
  for (int s = 0; s < 2; ++s) {
    params.push_back(std::make_unique<FlatParams>(ParamLayout::llama(m, 1, part.stage_units(s))));
    params[static_cast<size_t>(s)]->layout().init(params[static_cast<size_t>(s)]->weight_arena(), 11);
    stages.push_back(
        std::make_unique<Llama>(cpu_context(), m, params[static_cast<size_t>(s)]->layout(), Precision::kF32));
    sa[static_cast<size_t>(s)].allocate(m, B, T, 8, part.span(s));
  }
  Llama &s0 = *stages[0], &s1 = *stages[1];
  EXPECT_TRUE(s0.holds_unit(0) && !s0.holds_unit(3) && s1.holds_unit(5));
  s0.load_batch(sa[0], seqs.data());
  s0.embed_forward(*params[0], sa[0]);
  for (int64_t l = 0; l < 2; ++l) s0.block_forward(*params[0], sa[0], l);
  sa[1].res.front().copy_from(sa[0].res.back());  // "send" the activation
  s1.load_batch(sa[1], seqs.data());
  for (int64_t l = 2; l < 4; ++l) s1.block_forward(*params[1], sa[1], l);
  s1.head_forward(*params[1], sa[1], scale, true, losses.at(1));
  Tensor d = Tensor::zeros({N, C}, DType::kF32, MemCategory::kCommunication);
  s1.head_backward(*params[1], sa[1], d.data<float>());
  for (int64_t l = 3; l >= 2; --l) s1.block_backward(*params[1], sa[1], l, d.data<float>());
  for (int64_t l = 1; l >= 0; --l) s0.block_backward(*params[0], sa[0], l, d.data<float>());  // "received"
  s0.embed_backward(*params[0], sa[0], d.data<float>());

  const std::vector<double> loss = losses.read_back();
  EXPECT_GT(loss[0], 0.0);
  EXPECT_EQ(loss[1], loss[0]);
  for (int s = 0; s < 2; ++s) {
    FlatParams& p = *params[static_cast<size_t>(s)];
    for (const ParamSpec& spec : p.layout().specs()) {
      const ParamSpec& w = whole.layout().at(spec.name);
      EXPECT_EQ(std::memcmp(p.grad_arena() + spec.offset, whole.grad_arena() + w.offset,
                            static_cast<size_t>(spec.numel()) * 4),
                0)
          << spec.name;
    }
  }
}

}  // namespace
}  // namespace ft
