// The plain step executor (MicroBatchExecutor) against the model driven by hand: its loss is the
// sum of its micro-batches' losses, its gradients accumulate over them (equal to one micro-batch
// of the whole batch), and evaluation changes neither gradients nor weights. The pipeline
// executor runs under mpirun: tests/dist/parity_pp_test.py checks its losses, validation and stats.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "config/config.h"
#include "model/activation_sizes.h"
#include "parallel/mesh.h"
#include "train/micro_batch_executor.h"

namespace ft {
namespace {

constexpr int64_t kBatch = 4, kSeq = 16;

Config tiny() {
  return load_config("", {"train.precision=\"fp32\"", "train.batch_size=4", "train.seq_len=16"});
}

Batch random_batch(const ModelConfig& m, uint32_t seed) {
  std::mt19937 rng(seed);
  Batch b{.batch = kBatch, .seq_len = kSeq, .tokens = std::vector<int32_t>(static_cast<size_t>(kBatch * (kSeq + 1)))};
  for (int32_t& t : b.tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(m.vocab_size));
  return b;
}

// A model and its ZeRO-0 engine on one process, the weights from the seed.
struct OneProcess {
  Config cfg = tiny();
  Mesh mesh = Mesh::single();
  std::unique_ptr<ParamEngine> engine =
      make_param_engine(cpu_context(), cfg.parallel, cfg.optim, ParamLayout::llama(cfg.model), mesh.dp(), mesh.tp(),
                        mesh.pp(), cfg.train.seed);
  Llama model{cpu_context(), cfg.model, engine->layout(), Precision::kF32};

  MicroBatchExecutor executor(int64_t micro_batches) {
    const MicroBatching mb{.local_batch = kBatch, .size = kBatch / micro_batches, .count = micro_batches};
    return MicroBatchExecutor(cpu_context(), model, *engine, mb, kSeq,
                              loss_chunk_tokens(cfg.model, 0, mb.size * kSeq, Precision::kF32));
  }
  // The engine's gradient-norm slots, read here as the trainer reads its step scalars.
  DeviceScalars norms = [this] {
    DeviceScalars n(cpu_context(), engine->norm_slot_count());
    engine->use_norm_slots(n.slice(0, n.size()));
    return n;
  }();

  // The trainer's step up to the update (Trainer::step): the batch through the executor, the
  // gradients finished and their norm reduced, the loss summed with it over the ranks.
  double train(StepExecutor& exec, const Batch& b, float grad_scale) {
    exec.train_queued(b, grad_scale);
    engine->queue_gradient_norm();
    double loss = exec.loss_slots().read_back_sum();
    EXPECT_GT(engine->reduce_gradient_norm(norms.read_back_sum(), {&loss, 1}), 0);
    return loss;
  }
  std::vector<float> grads() {
    std::vector<float> g;
    for (int u = 0; u < engine->layout().num_units(); ++u)
      g.insert(g.end(), engine->grads(u), engine->grads(u) + engine->layout().unit_size(u));
    return g;
  }
  std::vector<float> weights() {
    std::vector<float> w(static_cast<size_t>(engine->layout().total()));
    engine->gather_weights(w.data());
    return w;
  }
};

TEST(MicroBatchExecutor, LossIsTheSumOfItsMicroBatchesAndGradientsAccumulate) {
  OneProcess s;
  const Batch b = random_batch(s.cfg.model, 7);
  const float scale = 1.0f / static_cast<float>(kBatch * kSeq);

  // By hand: each sequence's loss, forward only, one at a time.
  Activations one;
  one.allocate(s.cfg.model, 1, kSeq, loss_chunk_tokens(s.cfg.model, 0, kSeq, Precision::kF32));
  DeviceScalars sums(cpu_context(), kBatch);
  for (int64_t i = 0; i < kBatch; ++i) s.model.forward_loss(*s.engine, one, b.sequence(i), sums.at(i));
  double by_hand = 0;
  for (double v : sums.read_back()) by_hand += v;

  MicroBatchExecutor four = s.executor(4);
  const double l4 = s.train(four, b, scale);
  EXPECT_EQ(four.loss_slots().size(), 4);  // one per micro-batch
  EXPECT_DOUBLE_EQ(l4, by_hand);
  const std::vector<float> g4 = s.grads();

  // One micro-batch of the whole batch: the same loss and gradients up to rounding. A second
  // train_queued() starts from zero gradients (the engine's begin_step), it does not add to the first.
  MicroBatchExecutor whole = s.executor(1);
  const double l1 = s.train(whole, b, scale);
  EXPECT_EQ(whole.loss_slots().size(), 1);
  EXPECT_NEAR(l1, l4, 1e-5 * l4);
  const std::vector<float> g1 = s.grads();
  ASSERT_EQ(g1.size(), g4.size());
  double norm = 0, diff = 0;
  for (size_t i = 0; i < g1.size(); ++i) {
    norm += static_cast<double>(g1[i]) * g1[i];
    diff += (static_cast<double>(g1[i]) - g4[i]) * (static_cast<double>(g1[i]) - g4[i]);
  }
  EXPECT_GT(norm, 0);
  EXPECT_LT(std::sqrt(diff), 1e-5 * std::sqrt(norm));
}

TEST(MicroBatchExecutor, EvaluationTouchesNeitherGradientsNorWeights) {
  OneProcess s;
  MicroBatchExecutor exec = s.executor(2);
  const Batch a = random_batch(s.cfg.model, 1), b = random_batch(s.cfg.model, 2);
  const double trained = s.train(exec, a, 1.0f / static_cast<float>(kBatch * kSeq));
  const std::vector<float> grads = s.grads(), weights = s.weights();

  BatchLoss first;
  exec.evaluate(a, first);
  EXPECT_DOUBLE_EQ(first.sum, trained);  // the same forward, without the backward
  BatchLoss both;                        // a running sum over batches
  exec.evaluate(a, both);
  exec.evaluate(b, both);
  BatchLoss second;
  exec.evaluate(b, second);
  EXPECT_EQ(both.tokens, 2 * kBatch * kSeq);
  EXPECT_DOUBLE_EQ(both.sum, first.sum + second.sum);
  EXPECT_NE(first.sum, second.sum);

  EXPECT_EQ(s.grads(), grads);
  EXPECT_EQ(s.weights(), weights);
}

}  // namespace
}  // namespace ft
