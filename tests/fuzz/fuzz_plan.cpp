// libFuzzer target: `fluxtrain plan`'s options as the job and layout they make (cmd_plan.cpp): any
// model preset and catalog GPU, any sizes, token count and price (NaN and infinities included),
// any degrees, micro-batch, ZeRO stage, recompute and precision. validate_job / validate_layout
// accept them or throw ft::Error; what they accept evaluates to figures that are finite and >= 0
// (no negative duration, no "$inf") and prints as JSON — never a crash, a trap or a hang.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "plan/catalog.h"
#include "plan/plan.h"
#include "util/error.h"

namespace {

// Sizes as a user types them: small ones mostly, any int64 sometimes.
int64_t size_of(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return in.ConsumeIntegralInRange<int64_t>(1, 16);
    case 1:
      return int64_t{1} << in.ConsumeIntegralInRange<int>(0, 20);
    case 2:
      return in.ConsumeIntegralInRange<int64_t>(1, int64_t{1} << 40);
    default:
      return in.ConsumeIntegral<int64_t>();
  }
}

double number_of(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return 0;
    case 1:
      return std::pow(10.0, in.ConsumeIntegralInRange<int>(0, 30));
    default:
      return in.ConsumeFloatingPoint<double>();  // NaN, infinities, denormals, negatives
  }
}

void check(double x) {
  if (!std::isfinite(x) || x < 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> models = ft::model_preset_names();
  static const std::vector<ft::plan::GpuSpec>& gpus = ft::plan::gpu_catalog();
  FuzzedDataProvider in(data, size);
  ft::plan::Job job;
  ft::plan::Layout l;
  try {
    job.model = ft::model_preset(models[in.ConsumeIntegralInRange<size_t>(0, models.size() - 1)]);
    job.gpu = gpus[in.ConsumeIntegralInRange<size_t>(0, gpus.size() - 1)];
    job.seq_len = size_of(in);
    job.global_batch = size_of(in);
    job.gpus_per_node = size_of(in);
    job.nodes = size_of(in);
    job.gpus = in.ConsumeBool() ? size_of(in) : 0;
    job.tokens = number_of(in);
    job.price_per_gpu_hour = number_of(in);
    l.dp = size_of(in), l.tp = size_of(in), l.pp = size_of(in), l.micro_batch = size_of(in);
    l.zero = in.ConsumeIntegralInRange<int>(0, 3);
    l.recompute = static_cast<ft::ActRecompute>(in.ConsumeIntegralInRange<int>(0, 2));
    l.sequence_parallel = in.ConsumeBool() && l.tp > 1;
    l.precision = static_cast<ft::Precision>(in.ConsumeIntegralInRange<int>(0, 3));
    ft::plan::validate_job(job);
    ft::plan::validate_layout(job, l);
  } catch (const ft::Error&) {
    return 0;  // refused in words
  }
  ft::plan::PlanResult r;
  try {
    r = ft::plan::evaluate(job, l);
  } catch (const ft::Error&) {
    return 0;
  }
  for (double x : {r.tokens_per_step, r.tokens_per_s, r.model_flops_per_token, r.mfu, r.steps, r.wall_seconds,
                   r.gpu_hours, r.cost_usd})
    check(x);
  (void)ft::plan::to_json(r).dump();
  return 0;
}
