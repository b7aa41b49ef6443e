// Tensor parallelism without ranks: how ParamLayout splits the model (every element of every
// rank's shard is the unsharded model's element at its global index, and every global element is
// held), the errors for degrees that do not split the model, and the activation sizes the
// planner shares against the allocator's accounting.
#include <gtest/gtest.h>
#include <omp.h>

#include <map>
#include <vector>

#include "config/config.h"
#include "model/activation_sizes.h"
#include "model/activations.h"
#include "model/param_layout.h"
#include "util/error.h"

namespace ft {
namespace {

ModelConfig tiny() {
  return model_preset("tiny");
}  // 4 heads, 2 kv heads, ffn 160, vocab 256

// Global element index of local element i of spec p.
int64_t global_index(const ParamSpec& p, int64_t i) {
  if (p.shape.size() == 1) return i;
  int64_t r = i / p.shape[1], c = i % p.shape[1];
  if (p.split_dim == 0) r += p.split_offset;
  if (p.split_dim == 1) c += p.split_offset;
  return r * p.global_shape[1] + c;
}

TEST(TensorParallelLayout, ShardsHoldTheUnshardedValuesAndCoverEveryElement) {
  omp_set_num_threads(1);  // many tiny initialisations: a thread team per parameter costs more than it saves
  for (bool tied : {false, true}) {
    ModelConfig m = tiny();
    m.tie_embeddings = tied;
    ParamLayout full = ParamLayout::llama(m);
    std::vector<float> w(static_cast<size_t>(full.total()));
    full.init(w.data(), 7);
    for (int64_t tp : {2, 4}) {
      std::map<std::string, std::vector<int>> holders;  // per global element: ranks holding it
      for (const ParamSpec& p : full.specs()) holders[p.name].assign(static_cast<size_t>(p.numel()), 0);
      for (int64_t r = 0; r < tp; ++r) {
        ParamLayout l = ParamLayout::llama(m, 1, {}, {.rank = r, .size = tp});
        ASSERT_EQ(l.specs().size(), full.specs().size());
        std::vector<float> mine(static_cast<size_t>(l.total()));
        l.init(mine.data(), 7);
        for (const ParamSpec& p : l.specs()) {
          const ParamSpec& g = full.at(p.name);
          EXPECT_EQ(p.global_shape, g.shape) << p.name;
          std::vector<int>& held = holders[p.name];
          for (int64_t i = 0; i < p.numel(); ++i) {
            int64_t gi = global_index(p, i);
            ASSERT_EQ(mine[static_cast<size_t>(p.offset + i)], w[static_cast<size_t>(g.offset + gi)])
                << p.name << " rank " << r << " of " << tp << " element " << i;
            ++held[static_cast<size_t>(gi)];
          }
        }
      }
      ParamLayout rank0 = ParamLayout::llama(m, 1, {}, {.rank = 0, .size = tp});
      for (const ParamSpec& p : rank0.specs())
        for (int h : holders[p.name]) ASSERT_EQ(h, p.tp_replicas) << p.name << " at tp " << tp;
    }
  }
}

TEST(TensorParallelLayout, SplitsAsMegatron) {
  const ModelConfig m = tiny();
  const int64_t D = m.head_dim(), C = m.dim;
  ParamLayout l = ParamLayout::llama(m, 1, {}, {.rank = 1, .size = 2});
  auto& q = l.at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.shape, (Shape{2 * D, C}));  // column-parallel: 2 of 4 heads
  EXPECT_EQ(q.split_dim, 0);
  EXPECT_EQ(q.split_offset, 2 * D);
  auto& k = l.at("model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(k.shape, (Shape{D, C}));  // kv heads split: 1 of 2
  EXPECT_EQ(k.split_offset, D);
  EXPECT_EQ(k.tp_replicas, 1);
  EXPECT_FALSE(k.tp_partial_grad);
  auto& o = l.at("model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(o.shape, (Shape{C, 2 * D}));  // row-parallel
  EXPECT_EQ(o.split_dim, 1);
  EXPECT_EQ(l.at("model.layers.0.mlp.down_proj.weight").shape, (Shape{C, m.ffn_dim / 2}));
  EXPECT_EQ(l.at("model.layers.0.mlp.gate_proj.weight").split_offset, m.ffn_dim / 2);
  auto& e = l.at("model.embed_tokens.weight");
  EXPECT_EQ(e.shape, (Shape{m.vocab_size / 2, C}));  // vocab-parallel
  EXPECT_EQ(e.split_offset, m.vocab_size / 2);
  auto& n = l.at("model.norm.weight");
  EXPECT_EQ(n.split_dim, -1);
  EXPECT_EQ(n.tp_replicas, 2);
  EXPECT_FALSE(n.tp_partial_grad);                                    // replicated tokens
  const TpShard sp{.rank = 1, .size = 2, .sequence_parallel = true};  // norms see only their tokens
  EXPECT_TRUE(ParamLayout::llama(m, 1, {}, sp).at("model.norm.weight").tp_partial_grad);
  EXPECT_FALSE(ParamLayout::tp_counts(n, 1));
  EXPECT_TRUE(ParamLayout::tp_counts(n, 0));
}

TEST(TensorParallelLayout, ReplicatesKvHeadsWhenRanksOutnumberThem) {
  const ModelConfig m = tiny();  // 2 kv heads over 4 ranks: each read by 2 ranks' query heads
  const int64_t D = m.head_dim();
  for (int64_t r = 0; r < 4; ++r) {
    ParamLayout l = ParamLayout::llama(m, 1, {}, {.rank = r, .size = 4});
    for (const char* w : {"k_proj", "v_proj"}) {
      auto& k = l.at(std::string("model.layers.1.self_attn.") + w + ".weight");
      EXPECT_EQ(k.shape, (Shape{D, m.dim}));
      EXPECT_EQ(k.split_offset, (r / 2) * D) << "rank " << r;  // query heads r read kv head r / 2
      EXPECT_EQ(k.tp_replicas, 2);
      EXPECT_TRUE(k.tp_partial_grad);
      EXPECT_EQ(ParamLayout::tp_counts(k, r), r % 2 == 0);
    }
  }
}

std::string tp_error(ModelConfig m, int64_t tp) {
  try {
    ParamLayout::check_tp(m, tp);
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(TensorParallelLayout, DegreesThatDoNotSplitTheModelAreClearErrors) {
  ModelConfig m = tiny();
  EXPECT_EQ(tp_error(m, 2), "");
  EXPECT_EQ(ParamLayout::tp_degrees(m), (std::vector<int64_t>{1, 2, 4}));
  std::string e = tp_error(m, 3);
  EXPECT_NE(e.find("model.dim = 64 is not divisible by 3"), std::string::npos) << e;
  EXPECT_NE(e.find("degrees that work for this model: 1, 2, 4"), std::string::npos) << e;
  e = tp_error(m, 8);
  EXPECT_NE(e.find("model.n_heads = 4 is not divisible by 8"), std::string::npos) << e;

  ModelConfig kv = m;  // 6 heads of dim 16, 3 kv heads: tp 2 neither splits nor replicates them
  kv.dim = 96;
  kv.n_heads = 6;
  kv.n_kv_heads = 3;
  kv.ffn_dim = 192;
  kv.vocab_size = 264;
  e = tp_error(kv, 2);
  EXPECT_NE(e.find("model.n_kv_heads = 3"), std::string::npos) << e;
  EXPECT_NE(e.find("1, 3, 6"), std::string::npos) << e;

  ModelConfig ffn = m;
  ffn.ffn_dim = 162;
  e = tp_error(ffn, 4);
  EXPECT_NE(e.find("model.ffn_dim = 162 is not divisible by 4"), std::string::npos) << e;
  EXPECT_NE(e.find("pad model.ffn_dim to 164"), std::string::npos) << e;

  ModelConfig vocab = m;
  vocab.vocab_size = 255;
  e = tp_error(vocab, 2);
  EXPECT_NE(e.find("model.vocab_size = 255 is not divisible by 2"), std::string::npos) << e;
  EXPECT_NE(e.find("pad model.vocab_size to 256"), std::string::npos) << e;

  // The config is rejected before any rank starts.
  EXPECT_THROW(load_config("", {"parallel.tp=3"}), Error);
  EXPECT_NO_THROW(load_config("", {"parallel.tp=4", "parallel.sequence_parallel=true"}));
}

TEST(TensorParallelActivations, SizeFunctionsMatchTheAllocator) {
  ModelConfig m = tiny();
  const int64_t B = 4, T = 16, chunk = 32;
  int64_t prev_kept = 0;
  for (TpSplit tp : {TpSplit{1, false}, TpSplit{2, false}, TpSplit{2, true}, TpSplit{4, true}}) {
    const int64_t before = MemoryTracker::global().live(MemCategory::kActivations);
    {
      Activations acts;
      acts.allocate(m, B, T, chunk, {}, tp);
      const int64_t kept = MemoryTracker::global().live(MemCategory::kActivations) - before;
      EXPECT_EQ(kept, kept_activation_bytes(m, B, T, chunk, Recompute::kNone, {}, tp))
          << "tp " << tp.size << " sp " << tp.sequence_parallel;
      if (prev_kept > 0) {
        EXPECT_LT(kept, prev_kept) << "tp " << tp.size << " sp " << tp.sequence_parallel;
      }
      prev_kept = kept;
      BackwardScratch s;
      s.allocate(m, B, T, tp);
      EXPECT_EQ(MemoryTracker::global().live(MemCategory::kActivations) - before - kept,
                scratch_activation_bytes(m, B, T, tp));
    }
  }
  // Sequence parallelism divides the per-token (N, C) activations by tp: on llama-125m at
  // seq 512, batch 4 and tp 2 a rank keeps well under the activations of tp alone.
  ModelConfig big = model_preset("llama-125m");
  const int64_t tp_bytes = kept_activation_bytes(big, 4, 512, 2048, Recompute::kNone, {}, {2, false});
  const int64_t sp_bytes = kept_activation_bytes(big, 4, 512, 2048, Recompute::kNone, {}, {2, true});
  const int64_t one = kept_activation_bytes(big, 4, 512, 2048, Recompute::kNone);
  EXPECT_LT(sp_bytes, tp_bytes);
  EXPECT_LT(tp_bytes, one);
  std::printf("llama-125m, 4 x 512 tokens, activations kept per rank: 1 rank %.1f MiB, tp2 %.1f MiB, tp2+sp %.1f MiB\n",
              static_cast<double>(one) / (1 << 20), static_cast<double>(tp_bytes) / (1 << 20),
              static_cast<double>(sp_bytes) / (1 << 20));
}

}  // namespace
}  // namespace ft
