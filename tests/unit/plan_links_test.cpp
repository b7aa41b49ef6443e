// The data-parallel link model (plan/research/links.h) against arithmetic done here from its definition:
// ring all-reduce time, buckets as the ZeRO-0 engine forms them, overlap, compression.
#include <gtest/gtest.h>

#include "config/config.h"
#include "model/param_layout.h"
#include "plan/research/links.h"
#include "util/error.h"

namespace ft::plan {
namespace {

Config cfg_for(const std::vector<std::string>& extra) {
  std::vector<std::string> sets = {"model.preset=\"llama-20m\"", "parallel.dp=4", "train.batch_size=4",
                                   "train.seq_len=128"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_config("", sets);
}

TEST(PlanLinks, RingAllReduceIsTwoPMinusOneMessagesOfAnNth) {
  LinkSpec l{.bandwidth = 1e8, .latency = 1e-4, .payload = 1.0};
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(4e8, 4, l), 6 * (1e-4 + 1.0));
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(4e8, 1, l), 0.0);
}

TEST(PlanLinks, OverlapOffIsOneBucketAfterBackwardAllExposed) {
  const LinkSpec l{.bandwidth = 1.25e8, .latency = 50e-6};
  Config c = cfg_for({"parallel.bucket_mb=100000"});
  LinkStep p = predict_step_over_links(c, find_gpu("cpu"), l, 2.0);
  ASSERT_EQ(p.buckets.size(), 1u);
  const double elems = static_cast<double>(ParamLayout::llama(c.model, 4).total());
  EXPECT_DOUBLE_EQ(p.buckets[0].elements, elems);
  EXPECT_NEAR(p.buckets[0].ready, p.forward + p.backward, 1e-9);  // the embedding's unit ends backward
  EXPECT_NEAR(p.exposed, ring_all_reduce_s(4 * elems, 4, l), 1e-12);
  EXPECT_NEAR(p.step, 2.0 + p.exposed + p.control, 1e-12);
  EXPECT_NEAR(p.forward + p.backward + p.optimizer, 2.0, 1e-12);
}

TEST(PlanLinks, BucketsOverlapBackwardBf16HalvesPowerSgdIsSmall) {
  const LinkSpec l{.bandwidth = 1.25e8, .latency = 50e-6};
  const GpuSpec cpu = find_gpu("cpu");
  LinkStep off = predict_step_over_links(cfg_for({"parallel.bucket_mb=100000"}), cpu, l, 2.0);
  LinkStep on = predict_step_over_links(cfg_for({}), cpu, l, 2.0);
  LinkStep bf16 = predict_step_over_links(cfg_for({"parallel.grad_compression=\"bf16\""}), cpu, l, 2.0);
  LinkStep psgd = predict_step_over_links(cfg_for({"parallel.grad_compression=\"powersgd\""}), cpu, l, 2.0);
  ASSERT_GT(on.buckets.size(), 1u);
  EXPECT_LT(on.buckets.front().ready, on.forward + on.backward);  // the first bucket starts inside backward
  EXPECT_LT(on.exposed, off.exposed);
  EXPECT_NEAR(on.comm, off.comm, 1e-3 * off.comm + 6 * 50e-6 * static_cast<double>(on.buckets.size()));
  // bf16: the same buckets with half the bytes; the latency terms stay.
  double latency = 0;
  for (size_t i = 0; i < bf16.buckets.size(); ++i) latency += 6 * 50e-6;
  EXPECT_NEAR(bf16.comm - latency, (on.comm - latency) / 2, 1e-9);
  EXPECT_LT(psgd.comm, 0.05 * on.comm);
  EXPECT_DOUBLE_EQ(psgd.exposed, psgd.comm);  // synchronous
  EXPECT_LT(psgd.step, bf16.step);
  EXPECT_LT(bf16.step, on.step);
  // fp16 (with fp16 training; a GPU with fp16 peak flops): the same 2 bytes an element as bf16,
  // the same communication time.
  const GpuSpec a100 = find_gpu("a100-80gb");
  LinkStep bf16_gpu = predict_step_over_links(cfg_for({"parallel.grad_compression=\"bf16\""}), a100, l, 2.0);
  LinkStep fp16 = predict_step_over_links(cfg_for({"parallel.grad_compression=\"fp16\"", "train.precision=\"fp16\""}),
                                          a100, l, 2.0);
  EXPECT_EQ(fp16.compression, "fp16");
  EXPECT_DOUBLE_EQ(fp16.comm, bf16_gpu.comm);
}

TEST(PlanLinks, LayoutsItDoesNotCoverAreRefused) {
  const LinkSpec l{.bandwidth = 1.25e8, .latency = 50e-6};
  EXPECT_THROW(predict_step_over_links(cfg_for({"parallel.zero=1"}), find_gpu("cpu"), l, 1.0), Error);
  EXPECT_THROW(predict_step_over_links(cfg_for({}), find_gpu("cpu"), l, 0.0), Error);
  EXPECT_THROW(predict_step_over_links(cfg_for({}), find_gpu("cpu"), LinkSpec{}, 1.0), Error);
}

}  // namespace
}  // namespace ft::plan
