// The planner's context parallelism (plan/context_parallel.h): memory per rank falls with cp, the
// cp traffic per step is what the ring and the all-to-all send, its link is the node's while
// tp · cp ranks fit one, the ring's K/V transfers hide behind block attention at long sequences,
// and the layout search takes cp > 1 where a long sequence needs it to fit, not where it does not;
// it combines cp with pp, and of the two schedules takes the one whose exposed transfers are
// fewer. The bytes are checked against real cp ranks by tests/dist/dry_run_cp_test.py.
#include <gtest/gtest.h>

#include "plan/context_parallel.h"
#include "plan/memory_estimate.h"
#include "plan/search.h"
#include "plan/time.h"
#include "plan/traffic.h"
#include "util/error.h"

namespace ft::plan {
namespace {

Job llama7b(int64_t seq_len, int64_t gpus, int64_t global_batch) {
  Job j;
  j.model = model_preset("llama2-7b");
  j.seq_len = seq_len;
  j.global_batch = global_batch;
  j.gpu = find_gpu("a100-80gb");
  j.gpus_per_node = 8;
  j.gpus = gpus;
  j.nodes = (gpus + 7) / 8;
  return j;
}

Layout layout(int64_t dp, int64_t tp, int64_t cp, CpAttention a = CpAttention::kRing) {
  Layout l;
  l.dp = dp, l.tp = tp, l.cp = cp, l.cp_attention = a;
  l.sequence_parallel = tp > 1;
  l.recompute = ActRecompute::kFull;
  l.wire = published_wires(Precision::kBF16);
  return l;
}

TEST(PlanCp, ActivationsPerRankFallWithCp) {
  const Job j = llama7b(32768, 8, 8);
  const double a1 = estimate_memory(j, layout(1, 8, 1)).activations;
  const double a2 = estimate_memory(j, layout(1, 4, 2)).activations;  // half the tokens, twice the heads
  const double a4 = estimate_memory(j, layout(1, 2, 4)).activations;
  EXPECT_GT(a1, 0);
  EXPECT_NEAR(estimate_memory(j, layout(2, 4, 1)).activations / a2, 2.0, 1e-9);  // T/cp tokens at equal tp
  EXPECT_GT(a4, 0);
  // The ring's buffers: four blocks of the rank's keys and values and every cp rank's positions
  // (T int32), counted as communication memory (what RingAttention allocates there).
  const CpCost c = cp_cost(j, layout(1, 4, 2), 0);
  const double block = 16384.0 * 2 * (32 / 4) * 128 * 2;  // T/cp · 2 · Hkv/tp · D · bf16
  EXPECT_DOUBLE_EQ(c.buffers, 4 * block + 32768.0 * 4);
  EXPECT_GE(estimate_memory(j, layout(1, 4, 2)).communication, c.buffers);
}

TEST(PlanCp, RingAndAllToAllBytes) {
  Job j = llama7b(8192, 8, 8);
  Layout l = layout(2, 2, 2);
  l.recompute = ActRecompute::kNone;
  const double mbs = static_cast<double>(micro_batches_per_step(j, l));  // 4 micro-batches per replica
  ASSERT_EQ(mbs, 4);
  // Ring: per layer and micro-batch (cp − 1) forward and (cp − 1) backward K/V blocks, cp dK/dV hops.
  const double block = 4096.0 * 2 * 16 * 128 * 2;
  const double sums = 2.0 * 1 / 2 * 16;  // the loss sum and the data hash: two doubles
  EXPECT_DOUBLE_EQ(rank_traffic(j, l).cp, mbs * 32 * (1 + 1 + 2) * block + sums);
  l.recompute = ActRecompute::kFull;  // the forward runs again in backward
  EXPECT_DOUBLE_EQ(rank_traffic(j, l).cp, mbs * 32 * (2 + 1 + 2) * block + sums);
  // All-to-all: (cp − 1) pieces of q, k, v and of the output forward; backward q, k, v, out, dout, d(qkv).
  l.recompute = ActRecompute::kNone;
  l.cp_attention = CpAttention::kAllToAll;
  const double qkv = 4096.0 * (8 + 2 * 8) * 128 * 2, out = 4096.0 * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(rank_traffic(j, l).cp, mbs * 32 * (qkv + out + 2 * qkv + 2 * out) + sums);
  EXPECT_EQ(rank_traffic(j, layout(8, 1, 1)).cp, 0);
}

TEST(PlanCp, LinkInsideANodeUntilTpTimesCpSpansIt) {
  const Job j = llama7b(32768, 16, 16);
  const GpuSpec& g = j.gpu;
  EXPECT_DOUBLE_EQ(cp_link_bandwidth(j, layout(2, 4, 2)), g.nvlink_bw * g.eff.collective);
  EXPECT_DOUBLE_EQ(cp_link_bandwidth(j, layout(1, 8, 2)), g.network_bw * g.eff.collective);
  // The slower link makes the same bytes cost more.
  EXPECT_GT(estimate_step_time(j, layout(1, 8, 2)).cp_comm, estimate_step_time(j, layout(2, 4, 2)).cp_comm);
}

TEST(PlanCp, RingHidesItsKvTransfersBehindBlockAttention) {
  // At 32k tokens a block's attention takes longer than its K/V transfer over NVLink: only the dK/dV
  // hops (which carry the block's result) stay exposed; the all-to-all hides nothing.
  const Job j = llama7b(32768, 8, 8);
  const StepTime ring = estimate_step_time(j, layout(1, 4, 2));
  const StepTime a2a = estimate_step_time(j, layout(1, 4, 2, CpAttention::kAllToAll));
  ASSERT_GT(ring.cp_comm, 0);
  EXPECT_LT(ring.cp_exposed, ring.cp_comm);
  const double kv_sends = 3.0 * (2 - 1), dkv_hops = 2;  // full recompute: three K/V sends, two hops
  EXPECT_NEAR(ring.cp_exposed / ring.cp_comm, dkv_hops / (kv_sends + dkv_hops), 1e-9);
  EXPECT_DOUBLE_EQ(a2a.cp_exposed, a2a.cp_comm);
  EXPECT_GT(ring.total, estimate_step_time(j, layout(1, 8, 1)).total * 0.5);  // the same work, split
}

// The search as `fluxtrain plan --model ...` runs it: this trainer's wires at bf16.
SearchOptions as_the_cli() {
  SearchOptions o;
  o.fixed.wire = wire_bytes_of(trainer_wires(ParallelConfig{}, true));
  return o;
}

TEST(PlanCp, SearchTakesCpWhereTheSequenceNeedsIt) {
  // LLaMA-2 7B at 2M tokens on 32 A100 80G: no cp = 1 layout fits (tp stops at a node's 8 GPUs and
  // pipelining cannot split one layer's activations); the search splits the sequence over nodes.
  Job j = llama7b(2097152, 32, 32);
  SearchOptions fixed = as_the_cli();
  fixed.fixed.cp = 1;
  EXPECT_TRUE(search_layouts(j, fixed).best.empty());
  const SearchResult s = search_layouts(j, as_the_cli());
  ASSERT_FALSE(s.best.empty());
  EXPECT_GT(s.best[0].layout.cp, 1) << s.best[0].layout.describe();
  EXPECT_TRUE(s.best[0].memory.fits());
  EXPECT_EQ(s.best[0].layout.pp, 1);  // one layer's activations: pipelining does not help
}

TEST(PlanCp, SearchKeepsCpOneWhereItIsNotNeeded) {
  // The reference job, 7B at 4k tokens on 128 A100: cp would only add traffic.
  const SearchResult s = search_layouts(llama7b(4096, 128, 1024), as_the_cli());
  ASSERT_FALSE(s.best.empty());
  EXPECT_EQ(s.best[0].layout.cp, 1) << s.best[0].layout.describe();
  // 7B at 32k tokens on 8 A100 80G: tp 2 with sequence parallelism and selective recomputation
  // holds a rank's activations (the planner's accounting), so cp = 1 fits; but in bf16 the ring's
  // blocks travel as bf16 (half of fp32's bytes, inside the node), and splitting the sequence over
  // 4 ranks without recomputation is the faster step.
  SearchOptions one = as_the_cli();
  one.fixed.cp = 1;
  const SearchResult l1 = search_layouts(llama7b(32768, 8, 8), one);
  ASSERT_FALSE(l1.best.empty());
  EXPECT_TRUE(l1.best[0].memory.fits()) << l1.best[0].layout.describe();
  const SearchResult l = search_layouts(llama7b(32768, 8, 8), as_the_cli());
  ASSERT_FALSE(l.best.empty());
  EXPECT_GT(l.best[0].layout.cp, 1) << l.best[0].layout.describe();
  EXPECT_LT(l.best[0].time.total, l1.best[0].time.total);
}

// The search's best layout with the given fields fixed (the schedule left to the search).
PlanResult best(const Job& j, std::optional<int64_t> tp, std::optional<int64_t> cp, std::optional<int64_t> pp = {}) {
  SearchOptions o = as_the_cli();
  o.fixed.tp = tp, o.fixed.cp = cp, o.fixed.pp = pp;
  const SearchResult s = search_layouts(j, o);
  if (s.best.empty()) throw Error("no layout fits");
  return s.best[0];
}

// The same layout with the other schedule, evaluated.
PlanResult with_schedule(const Job& j, Layout l, CpAttention a) {
  l.cp_attention = a;
  validate_layout(j, l);
  return evaluate(j, l);
}

TEST(PlanCp, SearchCombinesCpWithPp) {
  // LLaMA-2 70B at 32k tokens on 64 A100 80G, 64 sequences a step: the sequence needs cp (at cp = 1
  // only full recomputation fits) and the model needs pp (without it, tp 8's traffic or ZeRO-2/3's
  // gathers); the best layout has both.
  Job j = llama7b(32768, 64, 64);
  j.model = model_preset("llama2-70b");
  const PlanResult win = best(j, {}, {});
  EXPECT_GT(win.layout.cp, 1) << win.layout.describe();
  EXPECT_GT(win.layout.pp, 1) << win.layout.describe();
  EXPECT_TRUE(win.memory.fits());
  // Without cp: nothing fits but full recomputation, whose extra forward costs more GEMM time than
  // the winner's exposed cp transfers, bubble and pipeline sends together.
  SearchOptions o = as_the_cli();
  o.fixed.cp = 1;
  for (ActRecompute rc : {ActRecompute::kNone, ActRecompute::kSelective}) {
    o.fixed.recompute = rc;
    EXPECT_TRUE(search_layouts(j, o).best.empty()) << act_recompute_name(rc);
  }
  const PlanResult no_cp = best(j, {}, 1);
  EXPECT_EQ(no_cp.layout.recompute, ActRecompute::kFull);
  EXPECT_GT(no_cp.time.gemm - win.time.gemm, win.time.cp_exposed + win.time.bubble + win.time.pp_comm);
  EXPECT_LT(win.time.total, no_cp.time.total);
  // Without pp: the tensor-parallel traffic and exposed data-parallel time it adds exceed the
  // winner's bubble and pipeline sends.
  const PlanResult no_pp = best(j, {}, {}, 1);
  EXPECT_GT(no_pp.time.tp_comm + no_pp.time.dp_exposed - win.time.tp_comm - win.time.dp_exposed,
            win.time.bubble + win.time.pp_comm);
  EXPECT_LT(win.time.total, no_pp.time.total);
}

TEST(PlanCp, AllToAllWinsWithManyKvHeadsAtLargeCp) {
  // LLaMA-2 7B (32 heads, 32 kv heads) at 32k tokens over cp = 8 on one node of H100: a ring layer
  // sends 3·cp − 2 = 22 K/V blocks of 2·32 heads and cannot hide its 8 dK/dV hops, while the
  // all-to-all sends (cp − 1)/cp of q, k, v and the output three times — fewer bytes than the
  // hops alone.
  Job j = llama7b(32768, 8, 8);
  j.gpu = find_gpu("h100-sxm");
  ASSERT_TRUE(all_to_all_heads_fit(j.model, 1, 8));
  const PlanResult a2a = best(j, 1, 8);
  EXPECT_EQ(a2a.layout.cp_attention, CpAttention::kAllToAll) << a2a.layout.describe();
  EXPECT_NE(a2a.layout.describe().find("cp=8 (all_to_all)"), std::string::npos) << a2a.layout.describe();
  const PlanResult ring = with_schedule(j, a2a.layout, CpAttention::kRing);
  // Why, in the planner's terms: only the cp terms differ, and the all-to-all's exposed part is
  // smaller than the ring's dK/dV hops (which are never hidden) alone.
  EXPECT_DOUBLE_EQ(a2a.time.gemm, ring.time.gemm);
  EXPECT_DOUBLE_EQ(a2a.time.attention, ring.time.attention);
  EXPECT_LT(a2a.time.cp_exposed, ring.time.cp_exposed);
  const Layout& l = a2a.layout;  // a ring block: B · T/cp tokens' keys and values of the 32 kv heads
  const double block = static_cast<double>(l.micro_batch) * 32768 / 8 * 2 * 32 * 128 * l.wire.activations;
  const double hops = 8 * block * static_cast<double>(layers_per_stage(j.model, l.pp) * micro_batches_per_step(j, l));
  EXPECT_LT(a2a.time.cp_exposed, hops / cp_link_bandwidth(j, l));
  EXPECT_LT(a2a.time.total, ring.time.total);
}

TEST(PlanCp, RingWinsWithFewKvHeads) {
  // LLaMA-2 70B (64 heads, 8 kv heads) at 32k tokens on 32 H100: a rank's kv heads after tp are
  // few, so the ring's blocks are small and hide behind the block attention, while the
  // all-to-all moves every query head too and hides nothing.
  Job j = llama7b(32768, 32, 32);
  j.model = model_preset("llama2-70b");
  j.gpu = find_gpu("h100-sxm");
  const PlanResult ring = best(j, 4, 2);
  EXPECT_EQ(ring.layout.cp_attention, CpAttention::kRing) << ring.layout.describe();
  ASSERT_TRUE(all_to_all_heads_fit(j.model, 4, 2));  // the all-to-all was a candidate
  const PlanResult a2a = with_schedule(j, ring.layout, CpAttention::kAllToAll);
  EXPECT_LT(rank_traffic(j, ring.layout).cp, rank_traffic(j, a2a.layout).cp);
  EXPECT_LT(ring.time.cp_exposed, ring.time.cp_comm);  // part of the ring is hidden
  EXPECT_DOUBLE_EQ(a2a.time.cp_exposed, a2a.time.cp_comm);
  EXPECT_LT(ring.time.cp_exposed, a2a.time.cp_exposed);
  EXPECT_LT(ring.time.total, a2a.time.total);
}

TEST(PlanCp, AllToAllOnlyWhereTheHeadsSplit) {
  // 70B at tp 8 has 8 query heads and 1 kv head a rank: cp = 16 cannot split 8 heads.
  Job j = llama7b(262144, 128, 128);
  j.model = model_preset("llama2-70b");
  EXPECT_FALSE(all_to_all_heads_fit(j.model, 8, 16));
  EXPECT_TRUE(all_to_all_heads_fit(j.model, 8, 8));
  SearchOptions o = as_the_cli();
  o.fixed.tp = 8, o.fixed.cp = 16, o.top = 1000;
  for (const PlanResult& r : search_layouts(j, o).best) EXPECT_EQ(r.layout.cp_attention, CpAttention::kRing);
  Layout l = layout(1, 8, 16, CpAttention::kAllToAll);
  EXPECT_THROW(validate_layout(j, l), Error);
}

}  // namespace
}  // namespace ft::plan
