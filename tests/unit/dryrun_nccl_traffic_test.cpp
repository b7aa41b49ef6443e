// `fluxtrain train --dry-run`'s communication per mesh axis and step against numbers worked out by
// hand for a small layout, beside the planner's time for each axis (also worked out by hand).
#include <gtest/gtest.h>

#include "config/config.h"
#include "dryrun/dry_run.h"
#include "plan/traffic.h"

namespace ft {
namespace {

// configs/tiny.toml: dim C = 64, 4 layers, 4 heads / 2 kv heads (head dim 16), ffn 160, vocab 256,
// fp32, batch 8 × 32 tokens. Layout dp 2 × tp 2 × pp 2 (8 ranks), ZeRO 0 in one bucket: each rank
// holds 4 sequences = N = 128 tokens in one micro-batch; stage 0 has the embedding and blocks 0-1,
// stage 1 blocks 2-3, the final norm and the head.
TEST(DryRunNcclTraffic, SmallLayoutByHand) {
  Config cfg = load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml",
                           {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.bucket_mb=1000"});
  DryRun d = dry_run(cfg, 8, plan::find_gpu("a100-80gb"));
  ASSERT_EQ(d.micro_batches, 1);
  const double act = 128.0 * 64 * 4;  // one (N, C) fp32 activation: 32768 bytes
  // Parameters a tp rank holds per block: wq 64·64/2 = 2048, wk = wv = 64·32/2 = 1024, wo 2048,
  // gate = up = down = 160·64/2 = 5120, two norms 2·64 = 128 → 21632; the embedding and the head
  // 256·64/2 = 8192 each; the final norm 64.
  const double arena0 = 2 * 21632 + 8192, arena1 = 2 * 21632 + 64 + 8192;  // 51456, 51520
  // dp (group of 2, ring all-reduce: each rank sends n elements), + loss and data hash (2 doubles:
  // 2·(p−1)·2·8/p = 16 bytes).
  const double dp0 = arena0 * 4 + 16, dp1 = arena1 * 4 + 16;
  // tp: 4 all-reduces per block + 1 at the embedding / the head, of one activation each; the head
  // adds the cross-entropy's row max and sums (N and 2N doubles: 1024 + 2048 bytes); the gradient
  // norm 8 bytes.
  const double tp0 = 9 * act + 8, tp1 = 9 * act + 1024 + 2048 + 8;
  // pp: one activation sent forward (stage 0) or one gradient back (stage 1) per micro-batch, and
  // 3 doubles summed over the stages (24 bytes).
  const double pp = act + 24;
  const std::vector<AxisTraffic> axes = axis_traffic(d);
  ASSERT_EQ(axes.size(), 3u);
  // The planner's bytes for the rank it times (the last stage) are the same ones.
  EXPECT_EQ(axes[0].planner_bytes, dp1);
  EXPECT_EQ(axes[1].planner_bytes, tp1);
  EXPECT_EQ(axes[2].planner_bytes, pp);
  EXPECT_EQ(axes[0].axis, "dp");
  EXPECT_EQ(axes[0].max_rank_bytes, dp1);  // 206096
  EXPECT_EQ(axes[0].total_bytes, 4 * dp0 + 4 * dp1);
  EXPECT_EQ(axes[1].axis, "tp");
  EXPECT_EQ(axes[1].max_rank_bytes, tp1);  // 297992
  EXPECT_EQ(axes[1].total_bytes, 4 * tp0 + 4 * tp1);
  EXPECT_EQ(axes[2].axis, "pp");
  EXPECT_EQ(axes[2].max_rank_bytes, pp);  // 32792
  EXPECT_EQ(axes[2].total_bytes, 8 * pp);
  for (const DryRunRank& r : d.ranks) {
    EXPECT_EQ(static_cast<double>(r.dp.total_bytes()), r.coord.pp == 0 ? dp0 : dp1) << r.rank;
    EXPECT_EQ(static_cast<double>(r.tp.total_bytes()), r.coord.pp == 0 ? tp0 : tp1) << r.rank;
  }

  // The planner's time on an A100 (NVLink 300 GB/s per direction × collective efficiency 0.8 =
  // 240 GB/s; all 8 ranks in one node): tp = the last stage's bytes above (2 layers × 4
  // all-reduces, the head's, the cross-entropy statistics, the norm: 297992) / 240e9 s, not
  // overlapped; pp = 2 × N·C·4 / 240e9 (the send and its return).
  EXPECT_NEAR(axes[1].planner_s, tp1 / 240e9, 1e-18);
  EXPECT_EQ(axes[1].planner_exposed_s, axes[1].planner_s);
  EXPECT_NEAR(axes[2].planner_s, 2 * act / 240e9, 1e-18);
  EXPECT_EQ(axes[0].planner_s, d.time.dp_comm);
  EXPECT_EQ(axes[0].planner_exposed_s, d.time.dp_exposed);
  EXPECT_LE(d.time.dp_exposed, d.time.dp_comm);

  const std::string text = format_dry_run(d);
  EXPECT_NE(text.find("communication per step by mesh axis (NCCL on GPUs)"), std::string::npos) << text;
  EXPECT_NE(text.find("tp         2       291.01 KiB"), std::string::npos) << text;  // 297992 bytes
}

// The planner's tensor-parallel and ZeRO-3 bytes against the dry run's count, worked out by hand,
// where the wires differ: bf16 compute (sequence parallelism gathers the normed GEMM inputs in
// bf16; everything else of tp in fp32), fp32 weight gathers, gradients in fp32 or (grad_compression
// = "bf16") bf16. Tiny model, dp 2 × tp 2 with sequence parallelism, ZeRO 3, 2 micro-batches of
// 2 sequences: N = 64 tokens, a token shard of 32 × 64 = 2048 elements.
TEST(DryRunNcclTraffic, PlannerBytesEqualTheCountedOnesPerWire) {
  for (const bool bf16_grads : {false, true}) {
    std::vector<std::string> sets = {"parallel.dp=2",
                                     "parallel.tp=2",
                                     "parallel.zero=3",
                                     "parallel.sequence_parallel=true",
                                     "train.micro_batch_size=2",
                                     "train.precision=\"bf16\""};
    if (bf16_grads) sets.push_back("parallel.grad_compression=\"bf16\"");
    Config cfg = load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml", sets);
    DryRun d = dry_run(cfg, 4, plan::find_gpu("a100-80gb"));
    ASSERT_EQ(d.micro_batches, 2);
    EXPECT_EQ(d.layout.wire.gemm_inputs, 2);
    EXPECT_EQ(d.layout.wire.activations, 4);
    EXPECT_EQ(d.layout.wire.weights, 4);
    EXPECT_EQ(d.layout.wire.grads, bf16_grads ? 2 : 4);
    // tp, per micro-batch (4 blocks, the embedding and the head on the one stage; each all-gather
    // or reduce-scatter sends one 2048-element shard):
    //   all-gathers of GEMM inputs, 4 per block + the head's: 17 × 2048 × 2 = 69632
    //   all-gathers of gradients, 2 per block + the embedding's: 9 × 2048 × 4 = 73728
    //   reduce-scatters, 4 per block + the embedding and the head: 18 × 2048 × 4 = 147456
    //   cross-entropy row max and sums, 3 × 64 doubles all-reduced: 1536
    // = 292352, twice; the norm weights' gradients summed per unit every micro-batch (ZeRO 3):
    // 2 × 64 floats per block, 64 at the head, all-reduced: 2 × (4 × 512 + 256) = 4608; the
    // gradient norm 8.
    const double tp = 2 * 292352.0 + 4608 + 8;  // 589320
    // dp, ZeRO 3: a rank holds 4 × 21632 + 8192 + 64 + 8192 = 102976 elements, its shard 51488.
    // Per micro-batch: gather every unit for forward (51488 × 4 bytes) and all but the head unit
    // (64 + 8192 elements, piece 4128) for backward ((51488 − 4128) × 4), reduce-scatter the
    // gradients (51488 × 4, or × 2 in bf16); + the gradient norm (8) and the loss and data
    // hash (16).
    const double gathers = 2 * (51488.0 + 51488 - 4128) * 4;  // 790784
    const double scatters = 2 * 51488.0 * (bf16_grads ? 2 : 4);
    const double dp = gathers + scatters + 24;  // 1202712, or 996760 with bf16 gradients
    const std::vector<AxisTraffic> axes = axis_traffic(d);
    EXPECT_EQ(axes[0].max_rank_bytes, dp) << bf16_grads;
    EXPECT_EQ(axes[0].planner_bytes, dp) << bf16_grads;
    EXPECT_EQ(axes[1].max_rank_bytes, tp) << bf16_grads;
    EXPECT_EQ(axes[1].planner_bytes, tp) << bf16_grads;
    const plan::RankTraffic t = plan::rank_traffic(d.job, d.layout);
    EXPECT_EQ(t.dp_weights, gathers);
    EXPECT_EQ(t.dp_grads, scatters);
    // The planner's time is these bytes over the links (A100 NVLink 300 GB/s × 0.8; all in one node).
    EXPECT_NEAR(axes[1].planner_s, tp / 240e9, 1e-18);
    EXPECT_NEAR(axes[0].planner_s, dp / 240e9, 1e-18);
  }
}

// fp16 on the gradient wire (fp16 training): the dry run's counted gradient bytes and the
// planner's are half of fp32's, for the all-reduce (ZeRO 0, one bucket: of the whole model,
// 4 × 43136 + 16384 + 64 + 16384 = 205376 elements, each rank sends 2 (P − 1) / P of them, all) and
// the reduce-scatters (ZeRO 2: (P − 1) / P, 102688 per rank); everything else of dp (the doubles;
// ZeRO 2's weight gathers) unchanged.
TEST(DryRunNcclTraffic, Fp16GradientsSendHalfTheBytes) {
  for (const int zero : {0, 2}) {
    double bytes[2] = {0, 0};
    for (const bool fp16 : {false, true}) {
      std::vector<std::string> sets = {"parallel.dp=2", "parallel.zero=" + std::to_string(zero),
                                       "parallel.bucket_mb=1000", "train.precision=\"fp16\""};
      if (fp16) sets.push_back("parallel.grad_compression=\"fp16\"");
      Config cfg = load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml", sets);
      DryRun d = dry_run(cfg, 2, plan::find_gpu("a100-80gb"));
      EXPECT_EQ(d.layout.wire.grads, fp16 ? 2 : 4);
      const plan::RankTraffic t = plan::rank_traffic(d.job, d.layout);
      EXPECT_EQ(t.dp_grads, 205376.0 * (fp16 ? 2 : 4) * (zero == 0 ? 1 : 0.5)) << zero << fp16;
      const std::vector<AxisTraffic> axes = axis_traffic(d);
      EXPECT_EQ(axes[0].max_rank_bytes, axes[0].planner_bytes) << zero << fp16;
      bytes[fp16] = axes[0].max_rank_bytes;
    }
    EXPECT_EQ(bytes[0] - bytes[1], 205376.0 * 2 * (zero == 0 ? 1 : 0.5)) << "zero " << zero;
  }
}

// Full recompute runs each block's forward again in backward, its two reduces with it.
TEST(DryRunNcclTraffic, RecomputeRepeatsTheForwardsCollectives) {
  Config cfg =
      load_config(std::string(FT_SOURCE_DIR) + "/configs/tiny.toml", {"parallel.tp=2", "model.recompute=\"full\""});
  DryRun d = dry_run(cfg, 2, plan::find_gpu("a100-80gb"));
  ASSERT_EQ(d.micro_batches, 1);
  // 6 all-reduces per block + the embedding and the head, of N = 256 tokens × 64 × 4 bytes
  // (each rank sends half, twice); the cross-entropy's 3 × 256 doubles; the norm.
  const double tp = (6 * 4 + 2) * 256.0 * 64 * 4 + 3 * 256 * 8 + 8;
  const std::vector<AxisTraffic> axes = axis_traffic(d);
  EXPECT_EQ(axes[1].max_rank_bytes, tp);
  EXPECT_EQ(axes[1].planner_bytes, tp);
}

}  // namespace
}  // namespace ft
