// Telemetry: the one object the trainer talks to about monitoring. It owns the metrics registry,
// the /metrics HTTP endpoint, the NVML GPU sampler and (rank 0) the TensorBoard event file.
//
//   obs::Telemetry tel(cfg.metrics, {.rank = r, .world_size = n, .local_rank = lr, .dp = d, .tp = t,
//                                    .pp = p, .cuda_device = ctx.device_index /* -1 on a CPU rank */},
//                      cfg.train.run_dir, cfg.train.steps);
//   tel.set_checkpoint_interval_steps(cfg.ckpt.interval);
//   for (...) {
//     tel.on_step({.step = s, .loss = loss, .lr = lr, .grad_norm = gn, .tokens = batch_tokens,
//                  .tokens_per_s = tps, .step_s = dt, .mfu = mfu, .data_wait_s = wait});
//     if (eval) tel.on_eval(s, val_loss, val_bpc);
//     if (saved) tel.on_checkpoint(s, seconds, ok);
//   }
//   tel.comm(obs::CommOp::kAllReduce, bytes, seconds, calls);   // per step, from the communicator's stats
//   tel.on_context_parallel(cp_bytes, ring_hidden_ratio);         // per step, with parallel.cp > 1
//
// Every series carries the constant labels run, rank, dp, tp, pp (and host, when RankInfo names it). Each rank serves
// its own endpoint on metrics.port + local rank (docs/formats.md, "Metrics", says why). on_step and comm() are
// lock-free atomic updates plus, on rank 0, one buffered TensorBoard append.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "obs/badput.h"
#include "obs/metrics_config.h"
#include "obs/registry.h"
#include "obs/sniff.h"
#include "obs/straggler.h"

namespace ft::obs {

class MetricsServer;
class GpuSampler;
class TensorBoardWriter;

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;          // index among the ranks of this node (decides the port)
  int dp = 0, tp = 0, pp = 0;  // coordinates in the mesh
  int gpu = -1;                // NVML index of this rank's GPU; -1 = CPU rank (local rank 0 then samples every GPU)
  int cuda_device = -1;        // or: the CUDA device the rank drives, mapped to NVML through CUDA_VISIBLE_DEVICES
  std::string host = "";       // the `host` label of every series ("" = no such label)
};

struct StepStats {
  int64_t step = 0;   // completed optimizer step (1-based)
  double loss = NAN;  // nats per token
  double lr = NAN;
  double grad_norm = NAN;     // before clipping
  int64_t tokens = 0;         // tokens of the global batch in this step
  double tokens_per_s = NAN;  // job-wide
  double step_s = NAN;        // wall time of this step
  double mfu = NAN;           // 0..1
  double data_wait_s = 0;     // time spent waiting for this step's batch
  bool skipped = false;       // update skipped (non-finite gradients, loss spike)
  double loss_scale = NAN;    // fp16 dynamic loss scale; NaN = not used
};

// The kinds of communication, in the order of parallel/comm/comm.h's CollKind (the trainer casts one to
// the other; a unit test checks the names agree).
enum class CommOp : uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSendRecv, kBarrier, kCount };
inline constexpr size_t kNumCommOps = static_cast<size_t>(CommOp::kCount);
const char* comm_op_name(CommOp op);  // "all_reduce", ...

class Telemetry {
 public:
  // Throws ft::Error when the metrics port cannot be bound (naming it).
  Telemetry(const MetricsConfig& cfg, const RankInfo& rank, const std::string& run_dir, int64_t total_steps);
  ~Telemetry();
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  void on_step(const StepStats& s);
  void on_eval(int64_t step, double val_loss, double val_bits_per_char);
  // One data source's validation (a mixture's source or a language): gauges labelled source=name.
  void on_eval_source(int64_t step, const std::string& name, double val_loss, double val_bits_per_char);
  // Shard bytes fetched from object storage since the last call.
  void data_fetched(uint64_t bytes);
  void on_checkpoint(int64_t step, double seconds, bool ok);
  // This rank's file of a checkpoint uploaded to an object store (ckpt.dir = "s3://...").
  void on_checkpoint_upload(uint64_t bytes, double seconds);
  // A save skipped by ckpt.when_busy = "skip" (two earlier ones still uploading).
  void on_checkpoint_skipped();
  void set_checkpoint_interval_steps(int64_t steps);  // 0 = checkpoints off
  void comm(CommOp op, uint64_t bytes, double seconds, int64_t calls = 1);
  // Context parallelism, per step: the bytes the cp communicator sent (fluxtrain_cp_bytes_total)
  // and the ring's hidden share so far (fluxtrain_cp_ring_hidden_ratio; NaN: not a ring, or no
  // backward yet — the gauge is left as it is). The series exist from the first call on.
  void on_context_parallel(uint64_t bytes, double ring_hidden_ratio);
  void set_restarts(int64_t n);  // times the run was resumed (from the checkpoint manifest)
  // Rank 0 of a multi-rank run: the host of every world rank, once; then per step every rank's
  // compute time (metrics.jsonl per_rank.compute_s). Names stragglers in the log and in
  // fluxtrain_straggler_slowdown / fluxtrain_straggler_seconds_total; the report goes to metrics.jsonl.
  void set_rank_hosts(std::vector<std::string> hosts);
  StragglerReport on_rank_compute(int64_t step, const std::vector<double>& compute_s);
  // Rank 0: a sniff test's verdict (obs/sniff.h) — every rank's times as
  // fluxtrain_sniff_{gemm,link,all_reduce}_seconds, the ranks named slow as fluxtrain_sniff_slow (a
  // rank no longer named is cleared).
  void on_sniff(const SniffReport& r);
  // The job's badput so far (obs/badput.h): fluxtrain_badput_seconds_total{kind},
  // fluxtrain_productive_seconds and fluxtrain_goodput_ratio.
  void on_badput(const BadputTotals& t);

  // Why the rank must stop for its GPU ("" while healthy): an uncorrectable ECC error, a fatal XID
  // or a failed row remap that the GPU sampler saw (obs/gpu_sampler.h).
  std::string gpu_fault() const;

  Registry& registry() { return *registry_; }
  int port() const;                      // port of the /metrics endpoint, -1 when it is off
  std::string tensorboard_path() const;  // "" when not written here

 private:
  struct Series;
  MetricsConfig cfg_;
  RankInfo rank_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<Series> m_;
  std::unique_ptr<TensorBoardWriter> tb_;
  std::unique_ptr<GpuSampler> gpus_;
  std::unique_ptr<MetricsServer> server_;
  int64_t ckpt_interval_steps_ = 0;
  double ema_step_s_ = -1;
  std::array<double, kNumBadputKinds> badput_reported_{};
  std::unique_ptr<StragglerDetector> stragglers_;
  std::vector<Labels> sniff_slow_;  // the fluxtrain_sniff_slow series set by the last on_sniff
};

}  // namespace ft::obs
