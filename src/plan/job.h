// What the planner plans: a Job (model, data, hardware, money) and a Layout (how the ranks are
// arranged and what each keeps). LayoutSpec is a partial layout: the fields a user or a
// published record fixed; the search fills in the rest.
//
//   Job job;  job.model = model_preset("llama2-7b");  job.seq_len = 4096;
//   job.global_batch = 1024;  job.gpu = find_gpu("a100-80gb");  job.nodes = 16;
//   Layout l;  l.tp = 8;  l.dp = 16;  l.micro_batch = 1;
//   validate_layout(job, l);   // ft::Error naming what does not divide and the nearest valid value
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/layout_sizes.h"
#include "model/model_config.h"
#include "parallel/parallel_config.h"
#include "plan/catalog.h"
#include "plan/goodput.h"
#include "plan/moe.h"
#include "util/saturating.h"

namespace ft::plan {

// Bytes per element each kind of traffic carries on the wire (parallel/wires.h names the kinds).
// The defaults are this trainer's with its defaults: fp32 everywhere. layout_for_run reads a
// config's (plan/traffic.h); published runs (records) carry 16-bit activations and weights.
struct WireBytes {
  double activations = 4;  // tp all-reduces / reduce-scatters / gradient gathers, pipeline sends
  double gemm_inputs = 4;  // sequence parallelism's all-gathers of normed GEMM inputs
  double attention = 4;    // context parallelism's K/V blocks, heads and their gradients
  double weights = 4;      // ZeRO weight all-gathers
  double grads = 4;        // data-parallel gradient reduction
  bool operator==(const WireBytes&) const = default;
};

// How fp8 (or fp4) GEMM inputs are scaled, which decides the cast passes' bytes (plan/time.cpp)
// and the GEMM rate: per-tensor E4M3/E5M2 with delayed scaling (amax from the history, fused
// into the cast: Transformer Engine's default), with current scaling (an extra amax pass before
// each cast: torchao's Float8 linears, "FP8-CS"), MXFP8 (a scale per 32 elements, Blackwell,
// fp8 rate) or NVFP4 (fp4 with a scale per 16 elements and a per-tensor amax, Blackwell, fp4 rate).
enum class Fp8Recipe { kDelayed, kCurrent, kMXFP8, kNVFP4 };
const char* fp8_recipe_name(Fp8Recipe r);                 // "delayed", "current", "mxfp8", "nvfp4"
Fp8Recipe fp8_recipe_from_name(const std::string& name);  // throws ft::Error naming the options

struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t cp = 1;                                 // context parallel: each sequence split over cp ranks
  CpAttention cp_attention = CpAttention::kRing;  // its attention schedule (plan/context_parallel.h)
  int64_t vp = 1;                                 // virtual pipeline stages per rank (interleaved 1F1B)
  int64_t ep = 1;           // expert parallel: the routed experts split over ep of the dp·cp ranks
  int64_t micro_batch = 1;  // sequences per forward/backward on one rank
  int zero = 0;             // 0 none, 1 optimizer states, 2 + gradients, 3 + parameters
  ActRecompute recompute = ActRecompute::kNone;
  bool sequence_parallel = false;  // Megatron SP: norms/dropout split over the TP ranks
  Precision precision = Precision::kBF16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // with precision fp8
  bool flash_attention = true;
  // A device-wide synchronize at every checkpointed layer (DeepSpeed's activation checkpointing
  // with `synchronize`, GPT-NeoX's "synchronize-each-layer"): it waits for the collectives in
  // flight too, so the data-parallel ones overlap no compute.
  bool sync_each_layer = false;
  // Pipeline sends split over the tp ranks, each over its own NIC, and all-gathered over NVLink on
  // the receiving stage (Megatron-LM's scatter/gather, Narayanan et al. 2021 Sec. 4.1); with
  // sequence parallelism a send is a tp shard anyway. This trainer sends whole activations.
  bool pp_scatter_gather = false;
  WireBytes wire;  // what the collectives carry per element

  // The dense peak the layout's GEMMs run at: the precision's, the fp4 peak under NVFP4.
  double gemm_peak(const GpuSpec& g) const;

  // dp × tp × pp × cp; INT64_MAX when the product passes it (degrees no job can have).
  int64_t world() const;
  std::string describe() const;  // "dp=16 tp=8 pp=1 mb=1 zero=1 recompute=selective sp bf16"
};

// Fields a caller fixed; unset ones are chosen by the search.
struct LayoutSpec {
  std::optional<int64_t> dp, tp, pp, cp, vp, micro_batch;
  int64_t ep = 1;  // expert parallelism is given, never searched
  // With cp > 1: the schedule; unset, the search tries both (all-to-all where the heads allow it)
  // and a plain default is the ring.
  std::optional<CpAttention> cp_attention;
  std::optional<int> zero;
  std::optional<ActRecompute> recompute;
  std::optional<bool> sequence_parallel;
  Precision precision = Precision::kBF16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  bool flash_attention = true;
  bool sync_each_layer = false;
  bool pp_scatter_gather = false;
  WireBytes wire;
  // Fill every unset field with a plain default (dp from the GPU count, others 1/none).
  Layout with_defaults(int64_t num_gpus) const;
  // dp, tp, pp, micro-batch, ZeRO stage and recompute given (cp, vp default to 1, sp to tp > 1).
  bool complete() const;
};

struct Job {
  ModelConfig model;
  int64_t seq_len = 2048;
  int64_t global_batch = 0;  // sequences per optimizer step
  double tokens = 0;         // tokens to train (0: only per-step figures)
  GpuSpec gpu;
  int64_t gpus_per_node = 8;
  int64_t nodes = 1;
  int64_t gpus = 0;               // total GPUs; 0 = gpus_per_node × nodes
  double price_per_gpu_hour = 0;  // USD; 0 = no cost figures
  int64_t loss_chunk_tokens = 0;  // trainer's chunked LM head (cpu device only)
  MoeSpec moe;                    // experts: model is then the active model (plan/moe.h)
  // Fused attention written for Hopper (cuDNN's fused flash attention, FlashAttention-3), priced
  // at GpuSpec::eff.attention_hopper; false: FlashAttention-2's class, at eff.attention.
  bool hopper_attention = false;
  // Forward matmul FLOPs that a selective policy recomputes in backward, as a share of the
  // layers' forward matmuls (torchtitan's "op" policy: every second matmul of a block); a record
  // that states such a policy sets it. Full recompute is Layout::recompute.
  double recompute_matmul_share = 0;
  // Share of the blocks checkpointed whole, the others keeping every activation (torchtitan's
  // layer-selective policy, selective_ac_option = n: every n-th block, 1/n); a record that states
  // such a policy sets it. Full recompute is Layout::recompute.
  double recompute_layer_share = 0;
  // Asynchronous tensor parallelism (PyTorch's AsyncTP, Megatron's TP communication overlap): the
  // TP all-gathers and reduce-scatters are split into chunks that run beside the GEMMs consuming
  // and producing them, so they hide behind the GEMMs as other overlapped communication does.
  bool async_tp = false;
  Resilience resilience;  // failures, restarts, checkpoints (plan/goodput.h)

  // gpus, else gpus_per_node × nodes; INT64_MAX when that product passes it (validate_job refuses
  // more than kMaxGpus, naming the options).
  int64_t num_gpus() const;
};

// The planner's ceilings, far beyond any cluster or batch published: past them the sizes derived
// from a job (tokens per micro-batch, divisor hints) would overflow 64-bit counts or take minutes.
inline constexpr int64_t kMaxGpus = int64_t{1} << 24;
inline constexpr int64_t kMaxStepTokens = int64_t{1} << 40;  // global batch × seq_len, as the trainer's
inline constexpr double kMaxTokens = 1e30;                   // --tokens
inline constexpr double kMaxPrice = 1e6;                     // --price, USD per GPU-hour

// Throws ft::Error when the layout cannot run the job: the product of the degrees, tensor
// parallelism vs heads and ffn, pipeline stages vs layers, the batch vs micro-batches. The
// message names the numbers; the hint gives the nearest valid alternative. Published runs may
// use stages of unequal depth (allow_uneven_stages); the planner then times the deepest stage.
void validate_layout(const Job& job, const Layout& l, bool allow_uneven_stages = false);
// Whether all-to-all attention can split a rank's heads over cp ranks, as the trainer requires
// (parallel/context_parallel/ulysses_attention.h): the query heads after tensor parallelism divisible
// by cp, the key/value heads divisible by cp or dividing it (each then replicated).
bool all_to_all_heads_fit(const ModelConfig& m, int64_t tp, int64_t cp);
// Also checks job-level inputs (positive sizes, seq_len within the model's RoPE table).
void validate_job(const Job& job);

// Micro-batches each pipeline runs per step: global_batch / (dp · micro_batch).
int64_t micro_batches_per_step(const Job& job, const Layout& l);

}  // namespace ft::plan
