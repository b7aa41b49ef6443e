// Layout search and the errors for bad input: every listed layout divides the job, keeps tensor
// parallelism inside a node, fits and is ranked; impossible requests name the nearest valid one.
#include <gtest/gtest.h>

#include <set>

#include "plan/search.h"
#include "util/error.h"

namespace ft::plan {
namespace {

Job llama7b_on_128_a100() {
  Job j;
  j.model = model_preset("llama2-7b");
  j.seq_len = 4096;
  j.global_batch = 1024;
  j.gpu = find_gpu("a100-80gb");
  j.gpus_per_node = 8;
  j.nodes = 16;
  j.tokens = 2e12;
  j.price_per_gpu_hour = 2.0;
  return j;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(PlanSearch, Llama7bOn128A100IsSensible) {
  Job j = llama7b_on_128_a100();
  SearchOptions o;
  o.top = 10;
  SearchResult s = search_layouts(j, o);
  ASSERT_EQ(s.best.size(), 10u);
  EXPECT_GT(s.fitting, 100);
  for (size_t i = 0; i < s.best.size(); ++i) {
    const PlanResult& r = s.best[i];
    EXPECT_EQ(r.layout.world(), 128);
    EXPECT_LE(r.layout.tp, 8) << "tensor parallelism stays inside a node";
    EXPECT_TRUE(r.memory.fits());
    EXPECT_EQ(j.global_batch % (r.layout.dp * r.layout.micro_batch), 0);
    if (i > 0) {  // better() takes times within 0.1% as equal and puts the lower ZeRO stage first
      EXPECT_GE(r.time.total * (1 + 1e-3), s.best[i - 1].time.total);
    }
  }
  // A 7B model needs no pipeline on 80 GB GPUs, and reaches a realistic MFU.
  EXPECT_EQ(s.best[0].layout.pp, 1);
  EXPECT_GT(s.best[0].mfu, 0.4);
  EXPECT_LT(s.best[0].mfu, 0.7);
  // 2 T tokens at that speed: weeks, and the cost follows.
  EXPECT_GT(s.best[0].wall_seconds / 86400, 20);
  EXPECT_LT(s.best[0].wall_seconds / 86400, 80);
  EXPECT_NEAR(s.best[0].cost_usd, s.best[0].gpu_hours * 2.0, 1e-6);
}

TEST(PlanSearch, RankByCostCanUseFewerNodes) {
  Job j = llama7b_on_128_a100();
  SearchOptions o;
  o.rank_by = RankBy::kCost;
  o.vary_nodes = true;
  o.top = 5;
  SearchResult s = search_layouts(j, o);
  ASSERT_FALSE(s.best.empty());
  std::set<int64_t> sizes;
  for (auto& r : s.best) sizes.insert(r.gpus);
  const PlanResult& cheapest = s.best[0];
  SearchOptions by_time;
  const PlanResult fastest = search_layouts(j, by_time).best[0];
  EXPECT_LE(cheapest.cost_usd, fastest.cost_usd * (1 + 1e-9));
  EXPECT_LE(cheapest.gpus, 128);
}

TEST(PlanSearch, FixedFieldsAreKept) {
  Job j = llama7b_on_128_a100();
  SearchOptions o;
  o.fixed.tp = 4;
  o.fixed.recompute = ActRecompute::kFull;
  for (auto& r : search_layouts(j, o).best) {
    EXPECT_EQ(r.layout.tp, 4);
    EXPECT_EQ(r.layout.dp * r.layout.pp, 32);
    EXPECT_EQ(r.layout.recompute, ActRecompute::kFull);
  }
}

TEST(PlanSearch, UnknownGpuListsKnownTypes) {
  std::string e = error_of([] { find_gpu("a200"); });
  EXPECT_NE(e.find("unknown GPU type 'a200'"), std::string::npos) << e;
  for (const char* name : {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "cpu"})
    EXPECT_NE(e.find(name), std::string::npos) << name << ": " << e;
}

TEST(PlanSearch, LayoutsThatDoNotDivide) {
  Job j = llama7b_on_128_a100();
  Layout l;
  l.tp = 3;
  l.dp = 42;
  std::string e = error_of([&] { validate_layout(j, l); });
  EXPECT_NE(e.find("tp = 3 does not divide the model"), std::string::npos) << e;
  EXPECT_NE(e.find("nearest valid tp: 2"), std::string::npos) << e;

  l = Layout{};
  l.pp = 5;
  e = error_of([&] { validate_layout(j, l); });
  EXPECT_NE(e.find("does not divide n_layers = 32"), std::string::npos) << e;
  EXPECT_NE(e.find("nearest valid pp: 4"), std::string::npos) << e;

  l = Layout{};
  l.tp = 8;
  l.pp = 8;
  l.dp = 4;
  e = error_of([&] { validate_layout(j, l); });
  EXPECT_NE(e.find("= 256 but the job has 128 GPUs"), std::string::npos) << e;
  EXPECT_NE(e.find("use dp = 128 / 64 = 2"), std::string::npos) << e;
}

TEST(PlanSearch, BatchThatDoesNotSplit) {
  Job j = llama7b_on_128_a100();
  Layout l;
  l.dp = 128;
  l.micro_batch = 3;
  std::string e = error_of([&] { validate_layout(j, l); });
  EXPECT_NE(e.find("8 sequences per replica, which do not split into micro-batches of 3"), std::string::npos) << e;
  EXPECT_NE(e.find("nearest valid micro-batch: 2"), std::string::npos) << e;
  j.global_batch = 1000;
  l.micro_batch = 1;
  e = error_of([&] { validate_layout(j, l); });
  EXPECT_NE(e.find("does not split over dp = 128"), std::string::npos) << e;
  EXPECT_NE(e.find("896 or 1024"), std::string::npos) << e;
}

TEST(PlanSearch, ModelThatFitsNoLayoutNamesTheNearestSetup) {
  Job j;
  j.model = model_preset("llama2-70b");
  j.seq_len = 4096;
  j.global_batch = 64;
  j.gpu = find_gpu("a100-40gb");
  j.gpus_per_node = 8;
  j.nodes = 1;
  SearchOptions o;
  std::string e = error_of([&] { best_layout_or_throw(j, o); });
  EXPECT_NE(e.find("does not fit on 8 x a100-40gb"), std::string::npos) << e;
  EXPECT_NE(e.find("it fits on"), std::string::npos) << e;
  EXPECT_NE(e.find("b200"), std::string::npos) << e;
}

TEST(PlanSearch, GpuWithoutThePrecision) {
  std::string e = error_of([] { find_gpu("a100-80gb").peak(Precision::kF8); });
  EXPECT_NE(e.find("has no fp8 tensor cores"), std::string::npos) << e;
  EXPECT_NE(e.find("bf16"), std::string::npos) << e;
}

}  // namespace
}  // namespace ft::plan
