// The op trace of one real training step (dryrun/step_trace.h) on the recording GPU: its GEMMs
// are the ones the model's config implies (count, shapes, transposes, order), their FLOPs add up
// to 6 × matmul parameters × tokens, attention and the host read-back are where they belong.
// With parallel.cp > 1 it records the schedule's attention (dryrun/cp_op_trace.h) and counts the
// cp bytes the dry run counts, and the roofline prices the transfers beside the block attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "config/config.h"
#include "dryrun/cp_op_trace.h"
#include "dryrun/dry_run.h"
#include "dryrun/step_trace.h"
#include "parallel/micro_batches.h"
#include "plan/roofline.h"
#include "util/error.h"

namespace ft {
namespace {

// (op, M, N, K, trans_a, trans_b, beta) of one GEMM call.
using Gemm = std::tuple<std::string, int64_t, int64_t, int64_t, bool, bool, float>;

Config tiny(const std::string& precision) {
  return load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml", {"train.precision=\"" + precision + "\""});
}

std::vector<Gemm> traced_gemms(const plan::OpTrace& t) {
  std::vector<Gemm> out;
  for (const plan::OpRecord& r : t.ops)
    if (r.kind == plan::OpKind::kGemm)
      out.emplace_back(r.op, r.gemm.M, r.gemm.N, r.gemm.K, r.gemm.trans_a, r.gemm.trans_b, r.gemm.beta);
  return out;
}

// What model/llama.cpp computes, derived from the config alone: per block 4 forward GEMMs (qkv,
// wo, gate_up, down: x · Wᵀ) and 8 backward (each layer's dX = dY · W and dW += dYᵀ · X, from the
// last block down), the head's 3 per loss chunk (logits, dX, dW). bf16 (one rank): the GEMMs whose
// consumer rounds write bf16 (qkv, gate_up, and backward d(h), d(att)); wo and down add the
// residual in their epilogue (beta 1); fp32: every GEMM is "matmul".
std::vector<Gemm> expected_gemms(const Config& cfg, int64_t chunk, bool bf16) {
  const ModelConfig& m = cfg.model;
  const int64_t N = cfg.train.batch_size * cfg.train.seq_len, C = m.dim, D = m.dim / m.n_heads;
  const int64_t HD = m.n_heads * D, QKV = (m.n_heads + 2 * m.n_kv_heads) * D, F = m.ffn_dim, V = m.vocab_size;
  const std::string plain = bf16 ? "matmul_bf16" : "matmul", rounded = bf16 ? "matmul_bf16_rounded" : "matmul",
                    residual = bf16 ? "matmul_bf16_add" : "matmul";
  const float res_beta = bf16 ? 1.0f : 0.0f;
  std::vector<Gemm> g;
  for (int64_t l = 0; l < m.n_layers; ++l) {
    g.emplace_back(rounded, N, QKV, C, false, true, 0.0f);
    g.emplace_back(residual, N, C, HD, false, true, res_beta);
    g.emplace_back(rounded, N, 2 * F, C, false, true, 0.0f);
    g.emplace_back(residual, N, C, F, false, true, res_beta);
  }
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t n = std::min(chunk, N - n0);
    g.emplace_back(plain, n, V, C, false, true, 0.0f);
    g.emplace_back(plain, n, C, V, false, false, 0.0f);
    g.emplace_back(plain, V, C, n, true, false, 1.0f);
  }
  for (int64_t l = 0; l < m.n_layers; ++l) {
    g.emplace_back(rounded, N, F, C, false, false, 0.0f);
    g.emplace_back(plain, C, F, N, true, false, 1.0f);
    g.emplace_back(plain, N, C, 2 * F, false, false, 0.0f);
    g.emplace_back(plain, 2 * F, C, N, true, false, 1.0f);
    g.emplace_back(rounded, N, HD, C, false, false, 0.0f);
    g.emplace_back(plain, C, HD, N, true, false, 1.0f);
    g.emplace_back(plain, N, C, QKV, false, false, 0.0f);
    g.emplace_back(plain, QKV, C, N, true, false, 1.0f);
  }
  return g;
}

int64_t calls(const plan::OpTrace& t, const std::string& op) {
  int64_t n = 0;
  for (const plan::OpRecord& r : t.ops) n += r.op == op;
  return n;
}

TEST(StepTrace, Bf16GemmsAreTheModelsShapes) {
  const Config cfg = tiny("bf16");
  const plan::OpTrace t = trace_training_step(cfg);
  // configs/tiny.toml: 8 × 32 = 256 tokens, one micro-batch, one loss chunk (bf16: 32M / 256 logits
  // per chunk, capped at the 256 tokens).
  ASSERT_EQ(t.tokens, 256);
  const std::vector<Gemm> want = expected_gemms(cfg, 256, true);
  EXPECT_EQ(want.size(), 12u * 4 + 3);  // 4 blocks × (4 forward + 8 backward) + the head's 3
  EXPECT_EQ(traced_gemms(t), want);
}

TEST(StepTrace, GemmFlopsAreSixTimesMatmulParametersPerToken) {
  for (const char* precision : {"bf16", "fp32"}) {
    const Config cfg = tiny(precision);
    const plan::OpTrace t = trace_training_step(cfg);
    double gemm = 0;
    for (const plan::OpRecord& r : t.ops)
      if (r.kind == plan::OpKind::kGemm) gemm += r.flops;
    // Forward 2, backward 4 FLOPs per matmul parameter and token; attention's T² terms are in the
    // attention ops, not in the GEMMs.
    const double six_n = 6.0 * static_cast<double>(cfg.model.matmul_params()) * static_cast<double>(t.tokens);
    EXPECT_DOUBLE_EQ(gemm, six_n) << precision;
    // The model FLOPs of MFU: 6N plus attention's 12 · layers · dim · seq_len per token.
    EXPECT_DOUBLE_EQ(t.model_flops, six_n + 12.0 * static_cast<double>(cfg.model.n_layers * cfg.model.dim) *
                                                static_cast<double>(cfg.train.seq_len) * static_cast<double>(t.tokens))
        << precision;
  }
}

TEST(StepTrace, Fp32StepRunsFp32Gemms) {
  const Config cfg = tiny("fp32");
  const plan::OpTrace t = trace_training_step(cfg);
  EXPECT_EQ(traced_gemms(t), expected_gemms(cfg, 256, false));
  for (const plan::OpRecord& r : t.ops)
    if (r.kind == plan::OpKind::kGemm) {
      EXPECT_EQ(r.gemm.precision, Precision::kF32);
    }
}

TEST(StepTrace, AttentionReadBackAndUpdate) {
  const ModelConfig m = tiny("fp32").model;
  // fp32 runs the flash kernels, bf16 the bf16 attention (cuDNN SDPA), once per block each way;
  // the forward 2 causal products, the backward 7 (the flash kernels recompute twice) or 5.
  for (const auto& [precision, fwd, bwd, bwd_products] :
       {std::tuple{"fp32", "attention_forward", "attention_backward", 7.0},
        std::tuple{"bf16", "attention_forward_bf16", "attention_backward_bf16", 5.0}}) {
    const Config cfg = tiny(precision);
    const plan::OpTrace t = trace_training_step(cfg);
    EXPECT_EQ(calls(t, fwd), m.n_layers) << precision;
    EXPECT_EQ(calls(t, bwd), m.n_layers) << precision;
    const int64_t B = cfg.train.batch_size, T = cfg.train.seq_len, D = m.dim / m.n_heads;
    for (const plan::OpRecord& r : t.ops) {
      if (r.op == fwd) {
        EXPECT_DOUBLE_EQ(r.flops, 2.0 * B * m.n_heads * T * T * D);
      }
      if (r.op == bwd) {
        EXPECT_DOUBLE_EQ(r.flops, bwd_products * B * m.n_heads * T * T * D);
      }
    }
  }
  const Config cfg = tiny("bf16");
  const plan::OpTrace t = trace_training_step(cfg);
  EXPECT_EQ(calls(t, "attention_forward"), 0) << "bf16 training never takes the fp32 attention";
  // The residual adds are in the GEMMs' epilogues (forward) and the norms' backward; the only
  // roundings left are the two residual-stream gradients per block (d(out), d(x_mid)).
  EXPECT_EQ(calls(t, "add_inplace"), 0);
  EXPECT_EQ(calls(t, "to_bf16"), 2 * cfg.model.n_layers);
  // The host reads the step's scalars back once and sends the tokens and targets once, and the
  // update's values (lr, bias corrections, clip factor: AdamwStepScalars, 16 bytes) once.
  EXPECT_EQ(calls(t, "memcpy_d2h"), 1);
  EXPECT_EQ(calls(t, "memcpy_h2d"), 3);
  EXPECT_GE(calls(t, "adamw_step"), 1);
  EXPECT_GT(t.peak_device_bytes, 0);
  // Priced, the step has a time and an MFU below 100%.
  const plan::StepPrice p = plan::price_step(t, plan::h200_roofline());
  EXPECT_GT(p.seconds, 0);
  EXPECT_GT(p.mfu, 0);
  EXPECT_LT(p.mfu, 1);
}

// A layout of more than one rank traces one rank's step (its share of the batch, its groups'
// collectives); a rank outside the layout is refused.
TEST(StepTrace, TracesOneRankOfALayout) {
  const Config cfg = load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml", {"parallel.dp=2"});
  const plan::OpTrace t = trace_training_step(cfg, {.world_rank = 1, .ops = true});
  EXPECT_EQ(t.tokens, 4 * 32);  // 4 of the 8 sequences
  EXPECT_FALSE(t.ops.empty());
  bool dp = false;
  for (const plan::CollRecord& c : t.collectives) dp |= c.group == "dp";
  EXPECT_TRUE(dp);
  EXPECT_THROW(trace_training_step(cfg, {.world_rank = 2, .ops = true}), Error);
}

// The zig-zag split gives every cp rank the same causal work: its queries see T(T + 1)/2 / cp of the
// sequence's (query, key) pairs, over the blocks of all ranks.
TEST(StepTrace, CpCausalPairsAreBalancedByTheZigZag) {
  for (int64_t cp : {2, 4}) {
    const int64_t T = 32;
    double all = 0;
    for (int64_t r = 0; r < cp; ++r) {
      double mine = 0;
      for (int64_t owner = 0; owner < cp; ++owner) mine += CpOpRecorder::causal_pairs(T, cp, r, owner);
      EXPECT_DOUBLE_EQ(mine, T * (T + 1) / 2.0 / static_cast<double>(cp)) << "cp " << cp << " rank " << r;
      all += mine;
    }
    EXPECT_DOUBLE_EQ(all, T * (T + 1) / 2.0);
  }
}

// A cp = 2 step of the tiny model, each schedule: the attention the schedule computes is in the
// trace, the cp bytes are what the dry run counts for each rank (itself held to the real ranks'
// counters by dist_dry_run_cp), and the roofline prices them on the link — the ring hides part of
// its key/value transfers behind the block attention, the all-to-all hides nothing.
TEST(StepTrace, CpStepPricesTheScheduleAndItsTransfers) {
  const plan::Roofline roof = plan::h200_roofline();
  for (const char* schedule : {"ring", "all_to_all"}) {
    SCOPED_TRACE(schedule);
    const Config cfg = load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml",
                                   {"parallel.cp=2", std::string("parallel.cp_attention=\"") + schedule + "\""});
    const DryRun dry = dry_run(cfg, 2, plan::find_gpu("cpu"));
    const int64_t layers = cfg.model.n_layers, H = cfg.model.n_heads;
    const int64_t mbs = split_batch(cfg.train.batch_size, cfg.train.micro_batch_size, cfg.parallel).count;
    for (int rank : {0, 1}) {
      const plan::OpTrace t = trace_training_step(cfg, {.world_rank = rank});
      EXPECT_EQ(t.tokens, 8 * 32 / 2);
      ASSERT_GT(t.cp_bytes, 0);
      EXPECT_EQ(t.cp_bytes, static_cast<double>(dry.ranks[static_cast<size_t>(rank)].cp.total_bytes()));
      int64_t blocks = 0, whole = 0, overlapped = 0;
      for (const plan::OpRecord& r : t.ops) {
        blocks += r.op == "attention_block_forward" || r.op == "attention_block_backward";
        if (r.op == "attention_forward" || r.op == "attention_backward") {
          ++whole;
          EXPECT_EQ(r.attention.T, 32);     // the whole sequence
          EXPECT_EQ(r.attention.H, H / 2);  // of half the heads
        }
        overlapped += r.overlapped_send_bytes > 0;
      }
      const plan::StepPrice p = plan::price_step(t, roof);
      EXPECT_DOUBLE_EQ(p.cp_seconds, t.cp_bytes / roof.link);
      if (std::string(schedule) == "ring") {
        EXPECT_EQ(blocks, 2 * 2 * layers * mbs);  // cp blocks forward and backward, every layer and micro-batch
        EXPECT_EQ(whole, 0);
        EXPECT_EQ(overlapped, 2 * layers * mbs);  // all but the last block of each pass send the next
        EXPECT_LT(p.cp_exposed, p.cp_seconds);
        EXPECT_GT(p.cp_exposed, 0);  // the dK/dV hops and the sums wait
      } else {
        EXPECT_EQ(blocks, 0);
        EXPECT_EQ(whole, 2 * layers * mbs);
        EXPECT_EQ(overlapped, 0);
        EXPECT_DOUBLE_EQ(p.cp_exposed, p.cp_seconds);
      }
      double ops_s = 0;
      for (const plan::OpRecord& r : t.ops) ops_s += plan::price_op(r, roof);
      EXPECT_NEAR(p.seconds, ops_s + p.cp_exposed, 1e-12 * p.seconds);
    }
  }
}

// Timed on the host (`plan --profile`), a cp rank's schedule runs for real over the fake cp group:
// its attention ops are the ones the recording GPU's trace writes for that rank — the ring's
// blocks, each named with the (query, key) pairs its mask lets through (counted from the positions
// the CPU op reads, equal to causal_pairs of the zig-zag chunks), the all-to-all's whole-sequence
// attention of half the heads — same shapes, FLOPs and count, so a profile prices each by its own
// measurement. (Nothing about the seconds is asserted: no timing in unit tests.)
TEST(StepTrace, CpTimedOnHostTimesTheSchedulesOwnAttentionOps) {
  using Op = std::tuple<std::string, std::string, double>;
  auto attention_ops = [](const plan::OpTrace& t) {
    std::vector<Op> out;
    for (const plan::OpRecord& r : t.ops)
      if (r.op.rfind("attention_", 0) == 0 && r.op != "attention_pack_kv") out.emplace_back(r.op, r.shape, r.flops);
    std::sort(out.begin(), out.end());
    return out;
  };
  for (const char* schedule : {"ring", "all_to_all"}) {
    SCOPED_TRACE(schedule);
    const Config cfg = load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml",
                                   {"parallel.cp=2", std::string("parallel.cp_attention=\"") + schedule + "\""});
    for (int rank : {0, 1}) {
      const plan::OpTrace timed = trace_training_step(cfg, {.world_rank = rank, .timed_on_host = true});
      const plan::OpTrace traced = trace_training_step(cfg, {.world_rank = rank});
      const std::vector<Op> mine = attention_ops(timed);
      ASSERT_FALSE(mine.empty());
      EXPECT_EQ(mine, attention_ops(traced)) << "rank " << rank;
      if (std::string(schedule) == "ring") {
        for (const Op& o : mine) {
          const std::string& shape = std::get<1>(o);
          const double pairs = std::stod(shape.substr(shape.find("pairs=") + 6));
          EXPECT_TRUE(pairs == CpOpRecorder::causal_pairs(32, 2, rank, 0) ||
                      pairs == CpOpRecorder::causal_pairs(32, 2, rank, 1))
              << shape;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ft
