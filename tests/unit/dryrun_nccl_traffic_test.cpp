// `fluxtrain train --dry-run`'s communication per mesh axis and step against numbers worked out by
// hand for a small layout, beside the planner's time for each axis (also worked out by hand).
#include <gtest/gtest.h>

#include "config/config.h"
#include "dryrun/dry_run.h"

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
  // 240 GB/s; all 8 ranks in one node): tp = 2 layers × 4 all-reduces × N·C·4 bytes × 2·(1/2) /
  // 240e9 = 262144 / 240e9 s, not overlapped; pp = 2 × N·C·4 / 240e9 (the send and its return).
  EXPECT_NEAR(axes[1].planner_s, 262144 / 240e9, 1e-18);
  EXPECT_EQ(axes[1].planner_exposed_s, axes[1].planner_s);
  EXPECT_NEAR(axes[2].planner_s, 2 * act / 240e9, 1e-18);
  EXPECT_EQ(axes[0].planner_s, d.time.dp_comm);
  EXPECT_EQ(axes[0].planner_exposed_s, d.time.dp_exposed);
  EXPECT_LE(d.time.dp_exposed, d.time.dp_comm);

  const std::string text = format_dry_run(d);
  EXPECT_NE(text.find("communication per step by mesh axis (NCCL on GPUs)"), std::string::npos) << text;
  EXPECT_NE(text.find("tp         2       291.01 KiB"), std::string::npos) << text;  // 297992 bytes
}

}  // namespace
}  // namespace ft
