// Trainer: the step loop. Everything it needs is built in the constructor from one Config —
// parallelism applied in one documented order (parallelize()) — and step() reads as the
// algorithm, the same for every layout: get batch, forward/backward over this rank's micro-batches
// (the StepExecutor: the plain loop or the pipeline schedule), reduce, clip, update. run() is the
// loop around it: stop requests, validation when due, the metrics row, checkpoints.
//
//   Mesh mesh = Mesh::single();            // or Mesh::create_mpi(...) under mpirun
//   Trainer t(load_config("configs/tiny.toml", {}), mesh);
//   t.run();                               // train.steps steps; metrics in <run_dir>/metrics.jsonl
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "config/config.h"
#include "data/loader/loader.h"
#include "fault/step_guard.h"
#include "model/activations.h"
#include "model/context_split.h"
#include "model/llama.h"
#include "obs/badput.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/comm/comm.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/mesh.h"
#include "parallel/micro_batches.h"
#include "parallel/tensor_parallel/tensor_parallel.h"
#include "tensor/device_scalars.h"
#include "tensor/exec_context.h"
#include "train/metrics_log.h"
#include "train/step_executor.h"
#include "train/step_graph.h"
#include "util/clock.h"

namespace ft {

class Checkpointer;

namespace obs {
class Telemetry;
class ProgressLine;
}  // namespace obs

class TrainingFaults;
class StopRequest;

// How Trainer::run ended (an error is an ft::Error instead). cmd_train turns it into the exit code
// (fault/exit_codes.h).
enum class RunEnd {
  kFinished,        // train.steps done; the last step checkpointed when checkpoints are on
  kStopped,         // stopped on request (signal, time budget) after checkpointing the last step
  kStoppedUnsaved,  // stopped on request without a checkpoint of the last step
};

struct StepStats {
  int64_t step = 0;  // 1-based number of the step just taken
  double loss = 0;   // mean token loss of the global batch (nats)
  double lr = 0;
  double grad_norm = 0;  // before clipping
  int64_t tokens = 0;    // cumulative training tokens
  // Which data the step saw: the sum over the global batch's sequences of a 32-bit hash of each
  // one's tokens, whatever the layout — equal between runs exactly when they read the same
  // batches (a resumed run continues the data order without a repeat or a gap).
  int64_t data_hash = 0;
  // The training thread's host waits on communication during the step (comm_host_waits(), comm.h).
  int64_t comm_host_waits = 0;
  double step_s = 0, tokens_per_s = 0, mfu = 0, data_wait_s = 0;
  double cpu_s = 0;        // CPU seconds the process used during the step (all its threads)
  double comm_wait_s = 0;  // time the step waited for gradient communication
  double compute_s = 0;    // wall time minus data wait minus every wait on a communicator
  CommStats comm;          // this rank's data-parallel traffic during the step
  CommStats comm_pp;       // this rank's pipeline traffic (activations and their gradients)
  CommStats comm_tp;       // this rank's tensor-parallel traffic
  CommStats comm_cp;       // this rank's context-parallel traffic (the ring's blocks or the all-to-alls, loss sums)
  RankFigures executor;    // what the step's executor measured (StepExecutor::stats: a pipeline stage's times)
  GuardVerdict guard;      // update, or skipped / rolled back by the training guards (fault/)
  double loss_scale = 0;   // fp16: the loss scale this step's backward used (0 = no scaling)
};

class Trainer {
 public:
  Trainer(const Config& cfg, Mesh& mesh);
  ~Trainer();

  // Trains to train.steps, or until a stop request (stop_request.h) at a step boundary. Throws
  // when the run resumed beyond train.steps, when its last updates were skipped for non-finite
  // values, or when its final checkpoint was not written: the exit code says whether the last
  // state is safely on disk.
  RunEnd run();
  StepStats step();
  // Validation: the overall mean token loss over train.eval_batches validation batches (a
  // mixture's: the weighted mean of its sources'), bits per character, and each source's
  // (data.mixture sources, or the dataset's languages; data/loader/loader.h make_validation_sources).
  struct Evaluation {
    double loss = NAN, bpc = NAN;
    struct Source {
      std::string name;
      double loss = NAN, bpc = NAN;
    };
    std::vector<Source> sources;
    // Inside run(), a stop request (signal, time budget) interrupts a validation between batches,
    // so that the step just trained is checkpointed within fault.preempt_grace_s: why, or nullopt.
    std::optional<std::string> stopped;
  };
  Evaluation evaluate_all();
  double evaluate() { return evaluate_all().loss; }

  const Config& config() const { return cfg_; }
  ParamEngine& params() { return *engine_; }
  Mesh& mesh() { return mesh_; }
  Llama& model() { return *model_; }
  int64_t steps_done() const { return step_; }

 private:
  // The constructor's steps, in order.
  void choose_compute();         // threads; says what this rank computes on
  void settle_auto_precision();  // train.precision = "auto": by the device and the measured peaks
  void plan_micro_batches();     // the micro-batches of this rank's share of the batch; the sequence length
  // Parallelism applied to the single-device model, in this order (each step reads the ones
  // before it): mesh → tensor parallel → pipeline partition → data parallel (the ZeRO engine) →
  // the model on the engine's layout → the executor. See the definition and docs/architecture.md.
  void parallelize();
  void set_up_precision();        // bf16: the engine's bf16 weight copy; fp16: the loss scaler
  void open_data();               // the training loader; the validation loaders when train.eval_interval > 0
  void start_monitoring();        // run directory, telemetry, progress line, fault handling, MFU's peak
  double backend_peak_flops();    // the device backend's own peak (the CPU: its fastest GEMM; said once)
  double gpu_peak_flops() const;  // this rank's GPU's dense peak (0 = MFU unavailable, said once)
  void choose_graphs();           // train.cuda_graphs: whether the step's forward/backward is a CUDA graph
  void resume();                  // the checkpointer and the stop request; ckpt.resume
  void open_run_files();          // config.json and metrics.jsonl: only once the run is accepted
  void log_layout() const;

  // fp16: an overflow (non-finite gradients from a finite loss while the scale can still
  // shrink) skips the update and halves the scale; otherwise the training guards judge the step.
  GuardVerdict judge_step(const StepStats& s, double local_loss_sum);
  // Mean token loss of train.eval_batches batches; NAN when a stop interrupted it (eval_stop_ says why).
  double evaluate(DataLoader& loader);
  bool validation_due(int64_t step) const;
  // After repeated loss spikes: back to the newest valid checkpoint, keeping the data position
  // (the window since the checkpoint is skipped). False when there is no checkpoint.
  bool roll_back();
  // From this rank's figures: the loss summed over every rank, the squared gradient norm (the
  // engine reduces it: ParamEngine::reduce_gradient_norm) and the batch's data hash
  // (StepStats::data_hash: this rank's sequences, counted by the first stage) over the dp ranks.
  std::array<double, 3> sum_over_ranks(double loss_sum, double local_norm2, double data_hash);
  // The step's scalars back on the host in one copy: this rank's loss sum (the executor's slots
  // added in order) and its gradient's sum of squares (the engine's slots added in order).
  std::pair<double, double> read_back_step_scalars() const;
  // The executor's forward/backward and the gradient's sums of squares, queued (nothing read
  // back): eagerly, or through the step's CUDA graph (graph_).
  void queue_forward_backward(const Batch& batch, float grad_scale);
  // The AdamW update with this step's values: its device work eagerly, or through the update's
  // CUDA graph (update_graph_), between the engine's host halves.
  void update(double lr, float grad_scale);
  // The step's row of metrics.jsonl (and its figures to telemetry); collective over the world
  // in multi-rank runs (per_rank).
  nlohmann::json metrics_row(const StepStats& s);
  // The validation due after `step` into the row, unless a stop request interrupts it.
  void validate_step(int64_t step, nlohmann::json& row);
  // A validation's figures into the row, telemetry and the log.
  void add_validation(int64_t step, const Evaluation& e, nlohmann::json& row);
  void log_step(const StepStats& s, const nlohmann::json& row);  // metrics.jsonl, progress line
  // The job's badput so far into the row (productive_s, badput, goodput) and to telemetry.
  void add_badput(int64_t step, nlohmann::json& row);
  // The enclosed work charged to `kind` of the job's badput (obs/badput.h).
  template <typename F>
  void timed_as(obs::BadputKind kind, F&& work);
  // After the loop: the checkpoint and the verdict (see run()).
  RunEnd end_run(const std::optional<std::string>& stop, int64_t nonfinite_tail, const std::string& tail_reason);
  // Every rank's memory and executor figures into j["per_rank"] (collective over the world).
  void add_rank_metrics(const StepStats& s, nlohmann::json& j);

  Config cfg_;
  Mesh& mesh_;
  ExecContext ctx_;              // where this rank's ops run: made once here, passed to the model, engine and optimizer
  MicroBatching batching_;       // this rank's share of the batch in micro-batches
  std::unique_ptr<TpGroup> tp_;  // tensor parallelism: the model's collectives over mesh.tp()
  std::unique_ptr<ContextSplit> cp_;  // context parallelism: attention over mesh.cp() (parallel.cp > 1)
  std::unique_ptr<ParamEngine> engine_;
  std::unique_ptr<LossScaler> loss_scaler_;  // fp16 only
  std::unique_ptr<Llama> model_;
  std::unique_ptr<StepExecutor> executor_;   // forward and backward: the micro-batch loop or the pipeline
  std::unique_ptr<StepGraph> graph_;         // train.cuda_graphs: forward/backward captured and replayed
  std::unique_ptr<StepGraph> update_graph_;  // and the update (ZeRO 0/3 engines: no collectives in it)
  // The step's scalars on the device: the executor's loss slots, then the engine's norm slots.
  DeviceScalars step_scalars_;
  LrSchedule schedule_;
  std::unique_ptr<DataLoader> train_data_, val_data_;
  std::vector<ValidationSource> val_sources_;  // per-source validation (mixture sources, languages)
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<obs::Telemetry> telemetry_;  // Prometheus endpoint, GPU health, TensorBoard
  std::unique_ptr<obs::ProgressLine> progress_;
  std::unique_ptr<TrainingFaults> faults_;  // guards, heartbeat, fault injection (fault/training_faults.h)
  std::unique_ptr<Checkpointer> ckpt_;      // saving (ckpt.interval) and resuming (ckpt.resume)
  std::unique_ptr<StopRequest> stop_;       // signals and train.stop_after_minutes, agreed over the world
  bool eval_stoppable_ = false;             // run() is validating: a stop is checked between batches
  std::optional<std::string> eval_stop_;    // the stop that interrupted the current validation
  int64_t step_ = 0, tokens_ = 0;
  bool streamed_ = false;          // data.path is an s3:// or gs:// URL
  uint64_t fetched_reported_ = 0;  // shard bytes already counted on /metrics
  double flops_per_token_ = 0, peak_flops_ = 0;
  bool peak_doubted_ = false;     // MFU over 100% was said once (a peak measured on a busy machine)
  std::string peak_recorded_in_;  // where the backend recorded its measured peak (PeakFlops::recorded_in)
  double start_time_ = 0;
  obs::Badput badput_ = obs::Badput::from_env(unix_time_seconds());  // every second of the job, by kind
};

template <typename F>
void Trainer::timed_as(obs::BadputKind kind, F&& work) {
  badput_.enter(kind, unix_time_seconds());
  work();
  badput_.enter(obs::BadputKind::kOther, unix_time_seconds());
}

}  // namespace ft
