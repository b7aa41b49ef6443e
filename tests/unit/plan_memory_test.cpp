// The planner's memory model against the published formulas it implements: the ZeRO paper's
// model-state bytes (Rajbhandari et al. 2020, Fig. 1) and Korthikanti et al. 2022's activation
// counts, and the CPU trainer's activation layout.
#include <gtest/gtest.h>

#include "model/sizes.h"
#include "plan/memory.h"

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
  const StateBytes b = state_bytes_per_param(Precision::kBf16);
  EXPECT_DOUBLE_EQ(b.weights + b.gradients + b.optimizer, 16.0);
  const double expected[4] = {120.0, 31.4, 16.6, 1.9};
  for (int z = 0; z < 4; ++z) {
    const double bytes = psi * (b.weights / (z >= 3 ? nd : 1) + b.gradients / (z >= 2 ? nd : 1) +
                                b.optimizer / (z >= 1 ? nd : 1));
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
  // Selective recompute with flash attention: nothing left to drop.
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 1, false, ActRecompute::kSelective), t * per_token);
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
  // ... which selective recompute drops again (the paper's Sec. 5).
  EXPECT_DOUBLE_EQ(gpu_layer_activation_bytes(m, t, 4096, 1, false, ActRecompute::kSelective, false), t * per_token);
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

// The CPU trainer's layout (the lead's specification, docs/planner.md): per block per
// micro-batch of N = B·T tokens: xn1 N·C, rstd1 N, qkv N·(H+2Hkv)·D, att_out N·H·D, lse B·H·T,
// x_mid N·C, xn2 N·C, rstd2 N, gate_up N·2F, h N·F; residual buffers; final norm; backward
// scratch; logits chunk in the workspace.
TEST(PlanMemory, CpuTrainerLayout) {
  ModelConfig m = model_preset("tiny");  // C 64, L 4, H 4, Hkv 2, D 16, F 160, V 256
  StepShape s;
  s.micro_batch = 2;
  s.seq_len = 32;
  const int64_t N = 64, C = 64, D = 16, H = 4, Hkv = 2, F = 160, V = 256, L = 4;
  const int64_t block = N * C + N + N * (H + 2 * Hkv) * D + N * H * D + 2 * H * 32 + N * C + N * C + N + N * 2 * F + N * F;
  const int64_t scratch = 2 * N * C + N * 2 * F + N * F + N * (H + 2 * Hkv) * D + N * H * D + N * C;
  const int64_t residual = (L + 1) * N * C, final_norm = N * C + N;
  TrainerMemory t = cpu_trainer_memory(m, s);
  EXPECT_EQ(t.activations, 4 * (L * block + residual + final_norm + scratch));
  EXPECT_EQ(t.parameters, 4 * m.num_params());
  EXPECT_EQ(t.gradients, 4 * m.num_params());
  EXPECT_EQ(t.optimizer_state, 8 * m.num_params());
  EXPECT_EQ(t.workspace, 4 * N * V);  // the auto chunk (32 MiB of logits) exceeds the 64 tokens
  // Full recompute: one block's set, all residual buffers.
  s.recompute = true;
  EXPECT_EQ(cpu_trainer_memory(m, s).activations, 4 * (block + residual + final_norm + scratch));
  // A configured chunk.
  s.loss_chunk_tokens = 16;
  EXPECT_EQ(cpu_trainer_memory(m, s).workspace, 4 * 16 * V);
  // The planner's "cpu" device reports exactly these numbers.
  Job j = job_for(m, 1, 32, 2, "cpu");
  j.loss_chunk_tokens = 16;
  Layout l;
  l.micro_batch = 2;
  l.recompute = ActRecompute::kFull;
  l.precision = Precision::kFp32;
  MemoryBreakdown mb = estimate_memory(j, l);
  EXPECT_DOUBLE_EQ(mb.total(), static_cast<double>(cpu_trainer_memory(m, s).total()));
}

}  // namespace
}  // namespace ft::plan
