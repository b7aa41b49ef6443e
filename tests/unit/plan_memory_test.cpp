// The planner's memory model against the published formulas it implements: the ZeRO paper's
// model-state bytes (Rajbhandari et al. 2020, Fig. 1) and Korthikanti et al. 2022's activation
// counts, and the CPU trainer's activation layout.
#include <gtest/gtest.h>

#include "model/activation_sizes.h"
#include "model/layout_sizes.h"
#include "model/param_layout.h"
#include "plan/memory_estimate.h"

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

// ZeRO paper, Fig. 1: Psi = 7.5 B parameters, N_d = 64, mixed-precision Adam (K = 12):
// baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB per device.
TEST(PlanMemory, ZeroPaperModelStates) {
  const double psi = 7.5e9, nd = 64;
  const StateBytes b = state_bytes_per_param(Precision::kBF16);
  EXPECT_DOUBLE_EQ(b.weights + b.gradients + b.optimizer, 16.0);
  const double expected[4] = {120.0, 31.4, 16.6, 1.9};
  for (int z = 0; z < 4; ++z) {
    const double bytes =
        psi * (b.weights / (z >= 3 ? nd : 1) + b.gradients / (z >= 2 ? nd : 1) + b.optimizer / (z >= 1 ? nd : 1));
    EXPECT_NEAR(bytes / 1e9, expected[z], 0.05) << "ZeRO stage " << z;
  }
}

// The same through estimate_memory: model states of a real model by ZeRO stage.
TEST(PlanMemory, EstimateShardsModelStatesByZeroStage) {
  ModelConfig m = model_preset("llama2-7b");
  Job j = job_for(m, 64, 2048, 64);
  const double psi = static_cast<double>(m.num_params());
  for (int z = 0; z < 4; ++z) {
    Layout l;
    l.dp = 64;
    l.zero = z;
    MemoryBreakdown mb = estimate_memory(j, l);
    const double states = mb.parameters + mb.gradients + mb.optimizer_state;
    const double want = psi * (2.0 / (z >= 3 ? 64 : 1) + 2.0 / (z >= 2 ? 64 : 1) + 12.0 / (z >= 1 ? 64 : 1));
    EXPECT_NEAR(states / want, 1.0, 1e-9) << "zero " << z;
  }
  // Tensor parallelism splits the matrices; only the norm weights stay replicated.
  Layout l;
  l.tp = 8;
  l.dp = 8;
  MemoryBreakdown mb = estimate_memory(j, l);
  EXPECT_NEAR(mb.parameters / (2.0 * psi / 8), 1.0, 1e-3);
}

// Korthikanti et al. 2022 for a LLaMA block: the replicated part (norm and GEMM inputs) is
// split only by sequence parallelism, the rest by tensor parallelism; full recompute keeps the
// block input; without flash attention the softmax output (2·a·s per token) is kept.
TEST(PlanMemory, KorthikantiActivationStructure) {
  ModelConfig m = model_preset("llama2-7b");  // h = 4096, a = 32, F = 11008, MHA
  const double s = 4096, b = 2, t = s * b, h = 4096, a = 32, f = 11008;
  const double per_token = 8 * h + 2 * 3 * h + 2 * h + 4 * a + 6 * f;  // 16-bit, flash attention
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 1, false, ActRecompute::kNone), t * per_token);
  // Selective recompute (the trainer's): the two norm outputs (GEMM inputs) and the SwiGLU
  // product are recomputed, not kept.
  const double selective = per_token - 2 * 2 * h - 2 * f;
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 1, false, ActRecompute::kSelective), t * selective);
  // TP without SP: 8h replicated (the paper's 10sbh less its two dropout masks).
  const double tp8 = gpu_layer_activation_bytes(m, t, 4096, 8, false, ActRecompute::kNone);
  EXPECT_DOUBLE_EQ(tp8, t * (8 * h + (per_token - 8 * h) / 8));
  // TP + SP: everything divided by t (eq. 4).
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 8, true, ActRecompute::kNone), t * per_token / 8);
  // Full recompute: 2sbh, / t with SP.
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 8, true, ActRecompute::kFull), 2 * t * h / 8);
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 8, false, ActRecompute::kFull), 2 * t * h);
  // Unfused attention keeps the softmax output: 2·a·s²·b bytes.
  const double math = gpu_layer_activation_bytes(m, t, 4096, 1, false, ActRecompute::kNone, false);
  EXPECT_DOUBLE_EQ(math - t * per_token, 2 * a * s * s * b);
  // ... which selective recompute keeps too (it recomputes element-wise results only).
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 1, false, ActRecompute::kSelective, false),
                   t * selective + 2 * a * s * s * b);
}

// Under 1F1B the first stage holds pp micro-batches of its L/pp layers: L layers' worth; the
// interleaved schedule adds (1 + (p-1)/(p·v)) (Korthikanti Sec. 4.2.3).
TEST(PlanMemory, PipelineInFlight) {
  ModelConfig m = model_preset("llama2-13b");
  Job j = job_for(m, 64, 4096, 512);
  Layout l;
  l.tp = 8;
  l.pp = 8;
  l.dp = 1;
  l.micro_batch = 1;
  l.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(j, l), 8.0);
  const double one_layer = gpu_layer_activation_bytes(m, 4096, 4096, 8, true, ActRecompute::kNone);
  MemoryBreakdown mb = estimate_memory(j, l);
  EXPECT_NEAR(mb.activations / (one_layer * m.n_layers), 1.0, 1e-9);
  l.vp = 5;  // 40 layers / 8 stages / 5 chunks
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(j, l), 8.0 * (1.0 + 7.0 / 40.0));
  // Fewer micro-batches than stages: only those are in flight.
  Job small = j;
  small.global_batch = 4;
  l.vp = 1;
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(small, l), 4.0);
  // Interleaved with as many micro-batches as stages (Llama 3 405B: pp 16, 16 per step): the
  // warm-up would exceed the m·vp chunks, so the schedule runs all forwards, then all backwards:
  // m micro-batches of the stage's layers, not m·(1 + (p−1)/(p·v)).
  Job eight = j;
  eight.global_batch = 8;
  l.vp = 5;
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(eight, l), 8.0);
  // Stage s of the interleaved schedule: (2(p − s − 1) + (v − 1)p + 1)/v chunks' worth; the last
  // stage holds (v − 1)p + 1 chunks, more than 1F1B's one micro-batch.
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(j, l, 7), (4.0 * 8.0 + 1.0) / 5.0);
  l.vp = 1;
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(j, l, 7), 1.0);
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(j, l, 3), 5.0);
}

// A split that pp does not divide: the last stage (head), then the first (embedding) holds one
// block fewer — Llama 3 405B's 126 layers on 16 stages: 7, 8 x 14, 7.
TEST(PlanMemory, UnevenStagesLightenTheEnds) {
  ModelConfig m = model_preset("llama2-13b");
  m.n_layers = 126;
  EXPECT_EQ(stage_layers(m, 16, 0), 7);
  EXPECT_EQ(stage_layers(m, 16, 1), 8);
  EXPECT_EQ(stage_layers(m, 16, 15), 7);
  m.n_layers = 127;
  EXPECT_EQ(stage_layers(m, 16, 0), 8);
  EXPECT_EQ(stage_layers(m, 16, 15), 7);
  m.n_layers = 128;
  EXPECT_EQ(stage_layers(m, 16, 0), 8);
  EXPECT_EQ(stage_layers(m, 16, 15), 8);
  EXPECT_EQ(stage_layers(m, 1, 0), 128);
}

TEST(PlanMemory, FitsAndCapacity) {
  Job j = job_for(model_preset("llama2-70b"), 8, 4096, 8, "a100-40gb");
  Layout l;
  l.dp = 8;
  MemoryBreakdown mb = estimate_memory(j, l);
  EXPECT_FALSE(mb.fits());  // 70 B x 16 bytes on 8 GPUs of 40 GiB
  EXPECT_GT(mb.total(), 16.0 * 68e9 / 8);
  l.zero = 3;
  l.recompute = ActRecompute::kFull;
  j.gpu = find_gpu("b200");
  EXPECT_TRUE(estimate_memory(j, l).fits());
}

// The "cpu" device sums the trainer's own buffers: model/activation_sizes.h for activations,
// the fp32 arena of ParamLayout for parameters, gradients and AdamW (m, v), sharded by ZeRO.
// (tests/unit/plan_trainer_memory_test.cpp compares with a real run's allocator.)
TEST(PlanMemory, CpuDeviceSumsTheTrainersBuffers) {
  ModelConfig m = model_preset("tiny");
  Job j = job_for(m, 1, 32, 8, "cpu");
  Layout l;
  l.micro_batch = 8;
  l.precision = Precision::kF32;
  const double arena = static_cast<double>(ParamLayout::llama(m, 1).total());
  EXPECT_EQ(arena, m.num_params());
  MemoryBreakdown mb = estimate_memory(j, l);
  EXPECT_DOUBLE_EQ(mb.parameters, 4 * arena);
  EXPECT_DOUBLE_EQ(mb.gradients, 4 * arena);
  EXPECT_DOUBLE_EQ(mb.optimizer_state, 8 * arena);
  const int64_t chunk = loss_chunk_tokens(m, 0, 8 * 32);
  EXPECT_DOUBLE_EQ(mb.activations, static_cast<double>(kept_activation_bytes(m, 8, 32, chunk, Recompute::kNone) +
                                                       scratch_activation_bytes(m, 8, 32)));
  EXPECT_DOUBLE_EQ(mb.workspace, 2.0 * 4 * 4096 * 8);  // RoPE cos and sin tables
  EXPECT_EQ(mb.fragmentation + mb.runtime, 0.0);
  for (Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    l.recompute = r;
    EXPECT_DOUBLE_EQ(estimate_memory(j, l).activations, static_cast<double>(kept_activation_bytes(m, 8, 32, chunk, r) +
                                                                            scratch_activation_bytes(m, 8, 32)));
  }
  // Selective keeps less than none and more than full.
  EXPECT_LT(kept_activation_bytes(m, 8, 32, chunk, Recompute::kSelective),
            kept_activation_bytes(m, 8, 32, chunk, Recompute::kNone));
  EXPECT_GT(kept_activation_bytes(m, 8, 32, chunk, Recompute::kSelective),
            kept_activation_bytes(m, 8, 32, chunk, Recompute::kFull));
  // ZeRO-3 over 2 ranks: the shard of the padded arena.
  j.gpus = 2;
  l.dp = 2;
  l.micro_batch = 4;
  l.zero = 3;
  l.recompute = ActRecompute::kNone;
  mb = estimate_memory(j, l);
  EXPECT_DOUBLE_EQ(mb.parameters, 4.0 * static_cast<double>(ParamLayout::llama(m, 2).total()) / 2);
  EXPECT_DOUBLE_EQ(mb.optimizer_state, 2 * mb.parameters);
  EXPECT_GT(mb.communication, 0.0);
}

}  // namespace
}  // namespace ft::plan
