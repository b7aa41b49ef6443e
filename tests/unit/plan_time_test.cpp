// The time model's pieces against the formulas they come from: the pipeline bubble of 1F1B and
// interleaved schedules (Narayanan et al. 2021, Sec. 2.2), NCCL's bus-bandwidth model for the
// tensor-parallel all-reduces, Megatron's FLOPs per iteration (eq. 3) and PaLM's MFU.
#include <gtest/gtest.h>

#include <cmath>

#include "config/config.h"
#include "config/plan_job.h"
#include "plan/plan.h"
#include "plan/traffic.h"
#include "util/error.h"

namespace ft::plan {
namespace {

Job job_for(const ModelConfig& m, int64_t gpus, int64_t seq, int64_t batch, const char* gpu = "a100-80gb") {
  Job j;
  j.model = m;
  j.seq_len = seq;
  j.global_batch = batch;
  j.gpu = find_gpu(gpu);
  j.gpus = gpus;
  j.gpus_per_node = 8;
  j.nodes = (gpus + 7) / 8;
  return j;
}

// Bubble = (p - 1) / (v·m) of the ideal pipeline time (the paper's Sec. 2.2.1-2.2.2).
TEST(PlanTime, PipelineBubble) {
  Job j = job_for(model_preset("llama2-13b"), 64, 4096, 64);
  for (int64_t vp : {1, 2, 5}) {
    Layout l;
    l.tp = 8;
    l.pp = 4;
    l.dp = 2;
    l.vp = vp;
    l.micro_batch = 2;
    l.sequence_parallel = true;
    validate_layout(j, l);
    StepTime t = estimate_step_time(j, l);
    const double m = 64.0 / (2 * 2);  // 16 micro-batches per pipeline
    EXPECT_EQ(t.micro_batches, 16);
    const double ideal = t.gemm + t.attention + t.memory + t.tp_comm;
    EXPECT_NEAR(t.bubble / ideal, 3.0 / (static_cast<double>(vp) * m), 1e-12) << "vp " << vp;
  }
}

// The dominant terms partition the step: they add up to its total, largest first.
TEST(PlanTime, DominantTermsAddUpToTheStep) {
  Job j = job_for(model_preset("llama2-13b"), 64, 4096, 64);
  Layout l;
  l.tp = 8;
  l.pp = 4;
  l.dp = 2;
  l.micro_batch = 2;
  l.sequence_parallel = true;
  const StepTime t = estimate_step_time(j, l);
  const std::vector<StepTerm> terms = dominant_terms(t);
  double sum = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    sum += terms[i].seconds;
    if (i > 0) {
      EXPECT_GE(terms[i - 1].seconds, terms[i].seconds);
    }
  }
  EXPECT_NEAR(sum, t.total, 1e-9 * t.total);
  EXPECT_EQ(terms.front().name, "GEMMs");  // a 13B model at 4k tokens: the matrix multiplies
  EXPECT_GE(terms.size(), 6u);             // bubble, TP and pipeline sends are all there
}

// FP8 casts counted by hand for LLaMA-2 7B (h 4096, SwiGLU width 11008, q+k+v 12288): forward
// GEMM inputs 2h + h/t + F/t (QKV and MLP inputs, attention output, SwiGLU product), backward
// output gradients 2h + (qkv + 2F)/t. The peaks: B200 "FP8 72 PFLOPS, FP4 144 PFLOPS" per 8 GPUs
// with sparsity (HGX B200 datasheet) -> 4500 and 9000 dense per GPU; H100 has no block-scaled
// formats.
TEST(PlanTime, Fp8RecipesPriceGemmsAndCasts) {
  const ModelConfig m = model_preset("llama2-7b");
  EXPECT_DOUBLE_EQ(fp8_cast_elements_per_token(m, 1), 3 * 4096 + 11008 + 2 * 4096 + 12288 + 2 * 11008);
  EXPECT_DOUBLE_EQ(fp8_cast_elements_per_token(m, 2), 2 * 4096 + 2048 + 5504 + 2 * 4096 + (12288 + 2 * 11008) / 2);
  EXPECT_DOUBLE_EQ(fp8_cast_bytes_per_element(Fp8Recipe::kCurrent) - fp8_cast_bytes_per_element(Fp8Recipe::kDelayed),
                   2.0);  // the amax read of a 16-bit tensor

  Job j = job_for(m, 1, 4096, 4, "b200");
  Layout l;
  l.micro_batch = 1;
  l.precision = Precision::kF8;
  auto at = [&](Fp8Recipe r) {
    l.fp8_recipe = r;
    validate_layout(j, l);
    return estimate_step_time(j, l);
  };
  EXPECT_DOUBLE_EQ(l.gemm_peak(j.gpu), 4500e12);
  const StepTime delayed = at(Fp8Recipe::kDelayed), current = at(Fp8Recipe::kCurrent);
  const StepTime mx = at(Fp8Recipe::kMXFP8), fp4 = at(Fp8Recipe::kNVFP4);
  EXPECT_DOUBLE_EQ(l.gemm_peak(j.gpu), 9000e12);
  EXPECT_DOUBLE_EQ(delayed.gemm, current.gemm);  // same fp8 rate, only the casts differ
  EXPECT_DOUBLE_EQ(delayed.gemm, mx.gemm);       // MXFP8 runs at the FP8 rate
  // Current scaling adds 2 bytes per cast element: 4 micro-batches of 4096 tokens, 32 layers, and
  // each micro-batch casts the layers' weights (4h² attention + 3hF MLP each).
  const double weights = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008;
  const double extra_bytes = 4.0 * 32 * (4096 * fp8_cast_elements_per_token(m, 1) + weights) * 2.0;
  EXPECT_NEAR(current.memory - delayed.memory, extra_bytes * j.gpu.eff.memory_traffic / j.gpu.hbm_bw,
              1e-9 * delayed.memory);
  // NVFP4 halves the layers' GEMM time (the 16-bit LM head stays): between 1/2 and 1 of MXFP8's.
  EXPECT_LT(fp4.gemm, mx.gemm);
  EXPECT_GT(fp4.gemm, 0.5 * mx.gemm);

  Job hopper = job_for(m, 1, 4096, 4, "h100-sxm");
  l.fp8_recipe = Fp8Recipe::kMXFP8;
  try {
    validate_layout(hopper, l);
    ADD_FAILURE() << "MXFP8 on an H100 should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block-scaled"), std::string::npos) << e.what();
  }
}

// Scale: NCCL's tuning model (network hop ~14 us, base ~8.4 us) gives 8.4 + 2·⌈log2 512⌉·14 =
// 260.4 us for a tree all-reduce over 512 nodes (a ring would take 2·511 hops), 36.4 us over two;
// buckets of 25 M elements. Llama 3's cluster: pods of 3,072 GPUs, 1:7 between pods; a DP group
// of 512 ranks 8 apart spans 4,096 GPUs, so its bandwidth term grows 7x, its latency does not.
TEST(PlanTime, DataParallelLatencyAndSpine) {
  const GpuSpec h100 = find_gpu("h100-sxm");
  EXPECT_NEAR(collective_latency(h100, 512), 260.4e-6, 1e-12);
  EXPECT_NEAR(collective_latency(h100, 2), 36.4e-6, 1e-12);
  EXPECT_EQ(collective_latency(h100, 1), 0.0);

  Job j = job_for(model_preset("llama2-70b"), 4096, 4096, 1024, "h100-sxm");
  Layout l;
  l.tp = 8;
  l.dp = 512;
  l.micro_batch = 1;
  l.zero = 1;
  l.sequence_parallel = true;
  validate_layout(j, l);
  EXPECT_DOUBLE_EQ(dp_collectives(j, l, 2, 1.3e9), 2.0 * 52);  // ⌈1.3e9 / 25e6⌉ buckets, RS + AG
  Layout z3 = l;
  z3.zero = 3;
  EXPECT_DOUBLE_EQ(dp_collectives(j, z3, 2, 1.3e9), 3.0 * 80 * 2);  // per layer and micro-batch

  const double t1 = estimate_step_time(j, l).dp_comm;
  j.gpu.pod_gpus = 3072;
  j.gpu.spine_oversubscription = 7;
  const double t7 = estimate_step_time(j, l).dp_comm;
  const double bandwidth_part = (t7 - t1) / 6.0;
  const double params_local = static_cast<double>(rank_params(j.model, 8, 1, true, true));
  EXPECT_NEAR(t1 - bandwidth_part, 2.0 * std::ceil(params_local / 25e6) * 260.4e-6, 1e-9);
  j.gpu.pod_gpus = 4096;  // the group fits in one pod: full bandwidth
  EXPECT_DOUBLE_EQ(estimate_step_time(j, l).dp_comm, t1);
}

// Tensor parallelism: 4 all-reduces of the b·s·h activations per layer (6 with full recompute) and
// one each at the vocabulary-parallel embedding and head, each taking 2(t-1)/t · S / busbw on
// NVLink (nccl-tests PERFORMANCE.md), plus the cross-entropy's row statistics (3 doubles a token)
// and the gradient norm (a double). S is 4 bytes an element on this trainer's wire (fp32, the
// default of Layout::wire) and 2 on a published run's (16-bit activations).
TEST(PlanTime, TensorParallelAllReduces) {
  ModelConfig m = model_preset("llama2-7b");
  Job j = job_for(m, 8, 2048, 8);
  for (const WireBytes& wire : {WireBytes{}, published_wires(Precision::kBF16)}) {
    Layout l;
    l.tp = 8;
    l.dp = 1;
    l.micro_batch = 1;
    l.wire = wire;
    StepTime t = estimate_step_time(j, l);
    const double bytes = 2048.0 * 4096 * wire.activations;
    const double busbw = j.gpu.nvlink_bw * j.gpu.eff.collective;
    const double ring = 2.0 * 7 / 8 / busbw;
    const double per_allreduce = ring * bytes;
    const double xent = ring * 3 * 2048 * 8, norm = ring * 8;
    // 8 micro-batches x (32 layers x 4 + 2)
    EXPECT_NEAR(t.tp_comm, 8 * ((32 * 4 + 2) * per_allreduce + xent) + norm, 1e-9) << wire.activations;
    l.recompute = ActRecompute::kFull;
    EXPECT_NEAR(estimate_step_time(j, l).tp_comm, 8 * ((32 * 6 + 2) * per_allreduce + xent) + norm, 1e-9);
  }
}

// Megatron eq. 3 counts 96·B·s·l·h²·(1 + s/6h + V/16lh) FLOPs per iteration with full
// recompute for a GPT (4h MLP). Our hardware FLOPs for the SwiGLU block of the same size
// (3·h·8h/3 = 8h² MLP parameters) agree except for the LM head, which eq. 3 does not recompute.
TEST(PlanTime, HardwareFlopsMatchMegatronEq3) {
  ModelConfig m = model_preset("llama2-7b");
  m.ffn_dim = 4096 * 8 / 3 + 1;  // 10923: 3·h·F ~ 8h²
  m.n_kv_heads = m.n_heads;
  Job j = job_for(m, 8, 2048, 8);
  Layout l;
  l.dp = 8;
  l.recompute = ActRecompute::kFull;
  const double s = 2048, L = 32, h = 4096, V = 32000;
  const double eq3_per_token = 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  const double ours = hardware_flops_per_token(j, l) - 2.0 * V * h;  // minus the head's recompute
  EXPECT_NEAR(ours / eq3_per_token, 1.0, 2e-3);
  // Without recompute: model FLOPs, 72·B·s·l·h²·(1 + s/6h + V/12lh) (Korthikanti et al.).
  l.recompute = ActRecompute::kNone;
  const double model_eq = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  EXPECT_NEAR(hardware_flops_per_token(j, l) / model_eq, 1.0, 2e-3);
}

// MFU = tokens/s · FLOPs per token / (GPUs · peak) (PaLM App. B): PaLM 540B at 238.3 k
// tokens/s on 6144 TPU v4 is 45.7% without attention FLOPs. Our PlanResult follows the same
// definition with the model's FLOPs per token.
TEST(PlanTime, MfuDefinition) {
  EXPECT_NEAR(238.3e3 * 6 * 540e9 / (6144 * 275e12), 0.457, 5e-4);
  Job j = job_for(model_preset("llama2-7b"), 16, 4096, 256);
  Layout l;
  l.dp = 16;
  l.micro_batch = 2;
  PlanResult r = evaluate(j, l);
  EXPECT_NEAR(r.mfu, r.tokens_per_s * j.model.train_flops_per_token(4096) / (16 * 312e12), 1e-12);
  EXPECT_NEAR(r.tokens_per_s, 256.0 * 4096 / r.time.total, 1e-6);
  // Compute time cannot beat the GEMM efficiency: MFU stays below eff.gemm.
  EXPECT_LT(r.mfu, j.gpu.eff.gemm);
  EXPECT_GT(r.mfu, 0.3);
}

// The totals: steps, wall-clock, GPU-hours and cost follow from the step time.
TEST(PlanTime, TotalsFromStepTime) {
  Job j = job_for(model_preset("llama2-7b"), 128, 2048, 1024);
  j.tokens = 2e12;
  j.price_per_gpu_hour = 2.0;
  Layout l;
  l.dp = 128;
  l.micro_batch = 4;
  l.zero = 1;
  PlanResult r = evaluate(j, l);
  EXPECT_DOUBLE_EQ(r.steps, std::ceil(2e12 / (1024.0 * 2048)));
  EXPECT_DOUBLE_EQ(r.wall_seconds, r.steps * r.time.total);
  EXPECT_DOUBLE_EQ(r.gpu_hours, r.wall_seconds * 128 / 3600);
  EXPECT_DOUBLE_EQ(r.cost_usd, r.gpu_hours * 2.0);
}

// Data parallelism across nodes: the gradient all-reduce of ZeRO-0/1 hides behind the last
// backward when the NICs are fast enough; a slow network exposes it.
TEST(PlanTime, DataParallelOverlap) {
  Job j = job_for(model_preset("llama2-7b"), 64, 2048, 64);
  Layout l;
  l.dp = 64;
  l.micro_batch = 1;
  l.zero = 1;
  StepTime fast = estimate_step_time(j, l);
  j.gpu.network_bw = 1e9;  // 8 Gb/s per GPU
  StepTime slow = estimate_step_time(j, l);
  EXPECT_GT(slow.dp_exposed, 0.0);
  EXPECT_GT(slow.total, fast.total);
  // The bandwidth terms scale with the NICs; the latency of the collectives (8 nodes: a tree of
  // 2·3 hops) does not.
  const double latency = dp_collectives(j, l, 1, static_cast<double>(rank_params(j.model, 1, 1, true, true))) *
                         collective_latency(j.gpu, 8);
  EXPECT_NEAR((slow.dp_comm - latency) / (fast.dp_comm - latency), (8 * 25e9) / (8 * 1e9), 1e-9);
}

// A run of ours is priced as it runs: bf16 and fp16 attention through cuDNN's fused kernel
// (attention_hopper on an H100), fp32 attention and cp's block attention at our own kernels'
// attention efficiency; the attention term moves by their ratio, nothing else does.
TEST(PlanTime, OurRunsAttentionIsPricedAsOurBackendRunsIt) {
  const std::string cfg_path = std::string(FT_SOURCE_DIR) + "/configs/llama-125m.toml";
  auto job_of = [&](std::vector<std::string> sets) {
    return job_for_run(load_config(cfg_path, sets), find_gpu("h100-sxm"));
  };
  const Job bf16 = job_of({"train.precision=\"bf16\""});
  const Job fp32 = job_of({"train.precision=\"fp32\""});
  EXPECT_TRUE(bf16.hopper_attention);
  EXPECT_FALSE(fp32.hopper_attention);
  EXPECT_TRUE(job_of({"train.precision=\"fp16\""}).hopper_attention);
  EXPECT_FALSE(job_of({"train.precision=\"bf16\"", "parallel.cp=2"}).hopper_attention);

  Job fa2 = bf16;
  fa2.hopper_attention = false;
  const Layout l = layout_for_run(load_config(cfg_path, {"train.precision=\"bf16\""}));
  const StepTime cudnn = estimate_step_time(bf16, l), ours = estimate_step_time(fa2, l);
  ASSERT_GT(ours.attention, 0);
  EXPECT_NEAR(cudnn.attention, ours.attention * bf16.gpu.eff.attention / bf16.gpu.eff.attention_hopper,
              1e-9 * ours.attention);
  EXPECT_DOUBLE_EQ(cudnn.gemm, ours.gemm);
}

}  // namespace
}  // namespace ft::plan
