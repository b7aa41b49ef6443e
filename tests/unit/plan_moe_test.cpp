// Mixture of experts in the planner (plan/moe.h), against published numbers: Mixtral 8x7B (its
// config: 32 layers, hidden 4096, 32 heads, 8 kv heads, 8 experts of width 14336, top-2, vocab
// 32000) has "46.7B total parameters but only uses 12.9B parameters per token" (Mistral AI's
// announcement). The all-to-all, the load factor and the record's errors by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "plan/research/record.h"
#include "util/error.h"

namespace ft::plan {
namespace {

nlohmann::json mixtral(int64_t ep) {
  return {{"id", "mixtral-test"},
          {"layers", 32},
          {"hidden", 4096},
          {"heads", 32},
          {"kv_heads", 8},
          {"vocab", 32000},
          {"seq_len", 4096},
          {"num_gpus", 8},
          {"gpu_type", "H100 SXM"},
          {"params_b", 46.7},
          {"active_params_b", 12.9},
          {"num_experts", 8},
          {"experts_per_token", 2},
          {"moe_ffn_hidden", 14336},
          {"ep", ep},
          {"tp", 1},
          {"pp", 1},
          {"micro_batch", 1},
          {"global_batch_seqs", 8},
          {"precision", "bf16"}};
}

TEST(PlanMoe, MixtralActiveAndTotalParameters) {
  const RecordJob rj = job_from_record(mixtral(1));
  const double active = static_cast<double>(rj.job.model.num_params());
  EXPECT_NEAR(active / 12.9e9, 1.0, 0.01);
  // Every layer holds 8 experts; the active model counts 2: 6 more of 3·4096·14336 each.
  EXPECT_DOUBLE_EQ(moe_extra_params_per_layer(rj.job.moe, 4096, 1, 1), 6.0 * 3 * 4096 * 14336);
  EXPECT_NEAR((active + 32 * moe_extra_params_per_layer(rj.job.moe, 4096, 1, 1)) / 46.7e9, 1.0, 0.01);
  // Over ep = 8 each rank holds one expert: one fewer than the active two.
  EXPECT_DOUBLE_EQ(moe_extra_params_per_layer(rj.job.moe, 4096, 8, 1), -1.0 * 3 * 4096 * 14336);
}

// 4096 tokens, each sent to 2 experts and back, forward and backward, in bf16, 7/8 of them to
// another of 8 ranks: 4 · 4096 · 2 · 4096 · 2 · 7/8 bytes; the step takes them over NVLink at the
// catalog's 450 GB/s per direction × collective 0.8, 32 layers, 1 micro-batch per rank.
TEST(PlanMoe, AllToAllByHand) {
  MoeSpec moe;
  moe.experts = 8;
  moe.top_k = 2;
  moe.expert_ffn = 14336;
  const double bytes = 4.0 * 4096 * 2 * 4096 * 2 * 7 / 8;
  EXPECT_DOUBLE_EQ(moe_all_to_all_bytes(moe, 4096, 4096, 8, 2.0, false), bytes);
  EXPECT_DOUBLE_EQ(moe_all_to_all_bytes(moe, 4096, 4096, 8, 2.0, true), bytes * 6 / 4);
  EXPECT_DOUBLE_EQ(moe_all_to_all_bytes(moe, 4096, 4096, 1, 2.0, false), 0.0);

  nlohmann::json rec = mixtral(8);
  rec["activation_recompute"] = "none";  // a full recompute would repeat the forward's two
  RecordJob rj = job_from_record(rec);
  const RecordPrediction p = predict(rj);
  EXPECT_EQ(p.plan.layout.ep, 8);
  EXPECT_EQ(p.plan.time.micro_batches, 1);
  EXPECT_NEAR(p.plan.time.ep_comm, 32 * bytes / (450e9 * 0.8), 1e-9);
  double sum = 0;  // the all-to-alls are one of the terms that make the step
  for (const auto& t : dominant_terms(p.plan.time)) sum += t.seconds;
  EXPECT_NEAR(sum, p.plan.time.total, 1e-9 * p.plan.time.total);
}

// The busiest expert: capacity factor 1.25 pads the routed GEMMs by a quarter over a perfectly
// balanced 1.0; the routed FLOPs of a micro-batch are 2 · 4096 tokens · 32 layers · 3·4096·14336
// · 2 experts, × 3 (forward and two backward GEMMs).
TEST(PlanMoe, CapacityFactorPadsTheRoutedGemms) {
  RecordJob rj = job_from_record(mixtral(8));
  Layout l = rj.fixed.with_defaults(8);
  l.micro_batch = 1;
  Job j = rj.job;
  j.moe.capacity_factor = 1.0;
  const double t1 = estimate_step_time(j, l).gemm;
  j.moe.capacity_factor = 1.25;
  const double t125 = estimate_step_time(j, l).gemm;
  const double routed = 2.0 * 4096 * 32 * 3 * 4096 * 14336 * 2 * 3;
  EXPECT_NEAR(t125 - t1, 0.25 * routed / (j.gpu.peak_bf16 * j.gpu.eff.gemm), 1e-12);
  j.moe.capacity_factor = 0;  // dropless
  EXPECT_NEAR(estimate_step_time(j, l).gemm - t1,
              (kDroplessImbalance - 1) * routed / (j.gpu.peak_bf16 * j.gpu.eff.gemm), 1e-12);
}

// Memory: over ep = 8 each rank holds the shared part (attention, norms, embeddings: the active
// model less its two experts per layer) and one expert per layer, in 16-bit weights without ZeRO.
TEST(PlanMoe, MemoryHoldsTheRanksExperts) {
  RecordJob rj = job_from_record(mixtral(8));
  Layout l = rj.fixed.with_defaults(8);
  l.micro_batch = 1;
  l.zero = 0;
  const double expert = 3.0 * 4096 * 14336;
  const double shared = static_cast<double>(rj.job.model.num_params()) - 32 * 2 * expert;
  EXPECT_NEAR(estimate_memory(rj.job, l).parameters, (shared + 32 * 1 * expert) * 2.0, 1.0);
  l.zero = 1;  // the optimizer states of the expert shard over dp·cp/ep = 1 rank: unchanged
  const MemoryBreakdown z1 = estimate_memory(rj.job, l);
  EXPECT_NEAR(z1.optimizer_state, (shared / 8 + 32 * expert) * 12.0, 1.0);
}

TEST(PlanMoe, RecordErrorsNameTheField) {
  auto message = [](nlohmann::json r) {
    try {
      RecordJob rj = job_from_record(r);
      predict(rj);
    } catch (const Error& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return std::string("no error");
  };
  nlohmann::json r = mixtral(1);
  r.erase("experts_per_token");
  EXPECT_NE(message(r).find("num_experts = 8 needs experts_per_token and moe_ffn_hidden"), std::string::npos)
      << message(r);
  r = mixtral(1);
  r["experts_per_token"] = 9;
  EXPECT_NE(message(r).find("experts_per_token = 9 must be between 1 and num_experts = 8"), std::string::npos);
  r = mixtral(1);
  r["capacity_factor"] = 0.5;
  EXPECT_NE(message(r).find("capacity_factor = 0.5 is below 1"), std::string::npos);
  r = mixtral(3);
  r["num_gpus"] = 6;
  r["global_batch_seqs"] = 6;
  EXPECT_NE(message(r).find("ep = 3 does not divide num_experts = 8"), std::string::npos) << message(r);
  r = mixtral(2);
  r.erase("num_experts");
  EXPECT_NE(message(r).find("ep = 2 but num_experts is not given"), std::string::npos) << message(r);
}

}  // namespace
}  // namespace ft::plan
