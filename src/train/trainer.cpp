#include "train/trainer.h"

#include <omp.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>

#include "ckpt/checkpointer.h"
#include "data/objstore/object_store.h"
#include "fault/exit_codes.h"
#include "fault/gpu_fault.h"
#include "fault/heartbeat.h"
#include "fault/inject.h"
#include "fault/training_faults.h"
#include "kernels/ops.h"
#include "model/activation_sizes.h"
#include "obs/gpu_select.h"
#include "obs/progress.h"
#include "obs/telemetry.h"
#include "optim/grad_clip.h"
#include "parallel/context_parallel/ring_attention.h"
#include "parallel/context_parallel/ulysses_attention.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "plan/gpu_peak.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "train/micro_batch_executor.h"
#include "train/pipeline_executor.h"
#include "train/rank_metrics.h"
#include "train/sniffer.h"
#include "train/step_sums.h"
#include "train/stop_request.h"
#include "train/threads.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/local_rank.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {

namespace {
// The rank's context: the CPU, or the GPU of its local rank modulo the GPUs this process sees
// (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK; CUDA_VISIBLE_DEVICES applies). "cuda"
// without a usable GPU is an error naming why (make_exec_context).
ExecContext rank_context(Device d) {
  if (d == Device::kCPU) return make_exec_context(d);
  const int n = device_count(d);
  return make_exec_context(d, n > 0 ? local_rank_from_env() % n : 0);
}
}  // namespace

Trainer::Trainer(const Config& cfg, Mesh& mesh)
    : cfg_(cfg), mesh_(mesh), ctx_(rank_context(cfg.train.compute_device())), schedule_(cfg.optim, cfg.train.steps) {
  choose_compute();      // threads; the CPU, precision and GEMM said first
  plan_micro_batches();  // this rank's share of the batch and its micro-batches
  parallelize();         // mesh → tensor parallel → pipeline partition → data parallel → model → executor
  set_up_precision();    // bf16 weight copy, fp16 loss scaler
  open_data();           // training and validation loaders
  start_monitoring();    // run directory, telemetry, progress line, fault handling, MFU's peak
  choose_graphs();       // train.cuda_graphs: by the device, the layout and the step's launches
  resume();              // ckpt.resume; throws when the checkpoint does not fit this run
  open_run_files();      // config.json, metrics.jsonl: only for an accepted run
  log_layout();
}

// What this rank computes on, decided once and said first: the CPU, the precision, threads.
void Trainer::choose_compute() {
  const TrainConfig& t = cfg_.train;
  const ThreadChoice threads = choose_threads(t.threads, mesh_.world(), backend_of(ctx_));
  omp_set_num_threads(threads.threads);
  if (t.precision_is_auto()) settle_auto_precision();
  // The host's backend (the CPU's) says what it is; then, for a device, which one and its ops.
  const std::vector<std::string> host = split(cpu_backend().describe(cpu_context()), '\n');
  log_info("{}", host.at(0));
  log_info("precision {} ({}); {} thread{} per rank ({})", precision_label(t.precision), t.precision_reason,
           threads.threads, threads.threads == 1 ? "" : "s", threads.source);
  for (size_t i = 1; i < host.size(); ++i) log_info("{}", host[i]);
  if (!ctx_.on_host())
    log_info("device {}:{} (local rank {}, {} visible); ops: {}", device_name(ctx_.device), ctx_.device_index,
             local_rank_from_env(), device_count(ctx_.device), backend_of(ctx_).ops->backend);
  if (t.device == "auto" && ctx_.on_host())
    log_info("train.device = \"auto\": no usable GPU ({}); training on the CPU",
             device_unavailable_reason(Device::kCUDA));
  if (mesh_.world_rank() == 0) {
    for (const auto& n : cfg_.config_notes) log_info("config: {}", n);
    for (const auto& w : cfg_.config_warnings) log_warn("config: {}", w);
  }
}

// train.precision = "auto", decided once the device and the threads are known, by the device's
// backend: on a GPU by its compute capability (bf16 from 8.0), on a CPU by rank 0's measured GEMM
// peaks (measured once per machine: the other ranks take rank 0's); every rank runs what rank 0
// chose.
void Trainer::settle_auto_precision() {
  PrecisionChoice c;
  if (!ctx_.on_host() || mesh_.world_rank() == 0) c = backend_of(ctx_).auto_precision(ctx_, omp_get_max_threads());
  int chosen = static_cast<int>(c.precision);
  mesh_.world().broadcast(&chosen, sizeof chosen, 0);
  c.precision = static_cast<Precision>(chosen);
  if (mesh_.world_rank() != 0 && ctx_.on_host()) c.reason = "auto: as world rank 0 measured";
  cfg_.train.settle_auto_precision(c.precision, c.reason);
}

void Trainer::plan_micro_batches() {
  const TrainConfig& t = cfg_.train;
  batching_ = split_batch(t.batch_size, t.micro_batch_size, cfg_.parallel);
  if (t.seq_len > cfg_.model.max_seq_len) {
    throw Error(fmt::format("train.seq_len = {} exceeds model.max_seq_len = {}", t.seq_len, cfg_.model.max_seq_len),
                "raise model.max_seq_len or shorten the sequences");
  }
}

// Parallelism is applied from outside the single-device model (Llama), in this order — each step
// needs what the ones before it decided:
//   1. the mesh: its degrees are the configuration's (pp × dp × cp × tp ranks, one group per axis);
//   2. tensor parallelism: this rank's shard of every unit ({tp rank, tp, sequence parallel})
//      and the TpGroup through which the model's collectives go over mesh.tp();
//   3. the pipeline partition: the plan (chunks, schedules) and the units of this rank's stage;
//   4. data parallelism: the ZeRO engine (parallel.zero) holding the layout of those units' tp
//      shards, each unit padded to a multiple of dp · cp, sharded over mesh.dp_cp() (the cp ranks
//      of a replica hold the same weights); it initialises the weights from the seed;
//   5. the model on the engine's layout, with the TpGroup and (cp > 1) the attention over mesh.cp()
//      (RingAttention or UlyssesAttention, parallel.cp_attention);
//   6. the executor that runs the rank's share of a batch through it: the stage's pipeline
//      schedule (pp > 1), or the plain loop over the micro-batches.
void Trainer::parallelize() {
  const TrainConfig& t = cfg_.train;
  const ParallelConfig& par = cfg_.parallel;
  // 1. The mesh and its transport (parallel.comm: NCCL, or MPI staging a device's buffers).
  FT_CHECK(mesh_.degrees().dp == par.dp && mesh_.degrees().pp == par.pp && mesh_.degrees().tp == par.tp &&
               mesh_.degrees().cp == par.cp,
           "the mesh ({}) does not have the configured degrees", mesh_.describe());
  mesh_.use_comm(par, ctx_);  // parallel.comm: NCCL for a GPU rank's buffers, or MPI (staged on a GPU)
  // 2. Tensor parallelism.
  const bool sp = par.sequence_parallel && par.tp > 1;
  const TpShard shard{.rank = mesh_.coord().tp, .size = par.tp, .sequence_parallel = sp};
  tp_ = std::make_unique<TpGroup>(ctx_, mesh_.tp(), sp);
  // 3. The pipeline partition.
  std::optional<PipelinePlan> plan;
  std::vector<int> units;  // empty: every unit
  if (par.pp > 1) {
    plan = PipelinePlan::make(cfg_.model, t.seq_len, par, batching_.count);
    units = plan->partition.stage_units(static_cast<int>(mesh_.coord().pp));
  }
  // 4. Data parallelism.
  engine_ = make_param_engine(ctx_, par, cfg_.optim, ParamLayout::llama(cfg_.model, par.dp * par.cp, units, shard),
                              mesh_.dp_cp(), mesh_.tp(), mesh_.pp(), t.seed);
  // 5. The model.
  if (par.cp > 1 && par.cp_attention == CpAttention::kRing)
    cp_ = std::make_unique<RingAttention>(ctx_, mesh_.cp(), t.seq_len);
  if (par.cp > 1 && par.cp_attention == CpAttention::kAllToAll)
    cp_ = std::make_unique<UlyssesAttention>(ctx_, mesh_.cp(), t.seq_len);
  model_ = std::make_unique<Llama>(ctx_, cfg_.model, engine_->layout(), t.precision, par.tp > 1 ? tp_.get() : nullptr,
                                   cp_.get());
  // 6. The executor.
  // The loss's chunk of a micro-batch's tokens: this rank's, T / cp of each sequence.
  const int64_t chunk =
      loss_chunk_tokens(cfg_.model, t.loss_chunk_tokens, batching_.size * t.seq_len / par.cp, t.precision);
  if (plan) {
    executor_ = std::make_unique<PipelineExecutor>(ctx_, std::move(*plan), mesh_, *model_, *engine_, batching_,
                                                   t.seq_len, chunk);
  } else {
    executor_ = std::make_unique<MicroBatchExecutor>(ctx_, *model_, *engine_, batching_, t.seq_len, chunk);
  }
  // The step's scalars in one allocation, so that they come back in one copy.
  const int64_t losses = executor_->loss_slots().size(), norms = engine_->norm_slot_count();
  step_scalars_ = DeviceScalars(ctx_, losses + norms);
  executor_->use_loss_slots(step_scalars_.slice(0, losses));
  engine_->use_norm_slots(step_scalars_.slice(losses, norms));
}

std::pair<double, double> Trainer::read_back_step_scalars() const {
  const std::vector<double> v = step_scalars_.read_back();
  const size_t losses = static_cast<size_t>(executor_->loss_slots().size());
  double loss = 0, norm2 = 0;  // each part added in order from its first slot, as read_back_sum() adds
  for (size_t i = 0; i < v.size(); ++i) (i < losses ? loss : norm2) += v[i];
  return {loss, norm2};
}

void Trainer::set_up_precision() {
  const TrainConfig& t = cfg_.train;
  if (t.precision == Precision::kBF16) engine_->keep_bf16_weights();  // rounded once per update
  if (t.precision == Precision::kF16) {
    loss_scaler_ = std::make_unique<LossScaler>(cfg_.optim.loss_scale_init, 2.0, 0.5, cfg_.optim.loss_scale_window);
  }
}

void Trainer::open_data() {
  const TrainConfig& t = cfg_.train;
  const int64_t dp_rank = mesh_.coord().dp, dp = cfg_.parallel.dp;
  BatchSpec spec = t.batch_spec();
  // Context parallelism: each cp rank of a replica reads only its zig-zag chunks of the samples.
  if (cfg_.parallel.cp > 1) spec.chunks = zigzag_ranges(t.seq_len, cfg_.parallel.cp, mesh_.coord().cp);
  train_data_ = make_loader(cfg_.data, spec, cfg_.model.vocab_size, dp_rank, dp, Split::kTrain);
  streamed_ = cfg_.data.source == DataSource::kDataset && ObjectUrl::is_object_url(cfg_.data.path);
  if (t.eval_interval > 0) {
    // null: a mixture
    val_data_ = make_loader(cfg_.data, spec, cfg_.model.vocab_size, dp_rank, dp, Split::kValidation);
    val_sources_ = make_validation_sources(cfg_.data, spec, cfg_.model.vocab_size, dp_rank, dp);
  }
}

// Monitoring: every rank serves its own /metrics (metrics.port + local rank) with its mesh
// coordinates as labels; rank 0 writes TensorBoard events; the progress line is rank 0's.
void Trainer::start_monitoring() {
  const TrainConfig& t = cfg_.train;
  const bool rank0 = mesh_.world_rank() == 0;
  if (rank0) std::filesystem::create_directories(t.run_dir);
  obs::RankInfo rank{.rank = mesh_.world_rank(),
                     .world_size = mesh_.world_size(),
                     .local_rank = local_rank_from_env(),
                     .dp = static_cast<int>(mesh_.coord().dp),
                     .tp = static_cast<int>(mesh_.coord().tp),
                     .pp = static_cast<int>(mesh_.coord().pp),
                     .cuda_device = ctx_.on_host() ? -1 : ctx_.device_index,
                     .host = this_host()};
  telemetry_ = std::make_unique<obs::Telemetry>(cfg_.metrics, rank, t.run_dir, t.steps);
  if (rank0) progress_ = std::make_unique<obs::ProgressLine>(t.steps, t.log_interval);
  faults_ = std::make_unique<TrainingFaults>(cfg_.fault, t.run_dir, mesh_.world_rank(), mesh_.coord().dp,
                                             batching_.local_batch, &telemetry_->registry());
  if (faults_->restarts() > 0) telemetry_->set_restarts(faults_->restarts());
  if (mesh_.world_size() > 1) telemetry_->set_rank_hosts(gather_strings(mesh_.world(), this_host()));
  if (cfg_.sniff.interval > 0)
    sniff_ = std::make_unique<Sniffer>(cfg_.sniff, mesh_, ctx_, t.precision, *telemetry_, t.run_dir);
  flops_per_token_ = cfg_.model.train_flops_per_token(t.seq_len);
  // MFU's denominator, found by rank 0 (the others wait): the backend's own peak (on a CPU this
  // machine's fastest GEMM peak at this rank's threads, measured once and recorded in the peak
  // file); for a backend without one (a GPU) its dense peak from the planner's catalog
  // (plan/gpu_peak.h).
  double peak = 0;
  if (rank0) peak = backend_of(ctx_).peak_flops ? backend_peak_flops() : gpu_peak_flops();
  mesh_.world().broadcast(&peak, sizeof peak, 0);
  peak_flops_ = peak;
}

double Trainer::backend_peak_flops() {
  const PeakFlops p = backend_of(ctx_).peak_flops(ctx_, cfg_.train.precision, omp_get_max_threads());
  log_info("{}", p.source);
  peak_recorded_in_ = p.recorded_in;
  return p.flops;
}

void Trainer::choose_graphs() {
  const TrainConfig& t = cfg_.train;
  const double step_flops = flops_per_token_ * static_cast<double>(t.batch_size * t.seq_len);
  GraphChoice c = decide_cuda_graphs(t.cuda_graphs, ctx_, cfg_.parallel, executor_->capturable(), step_flops,
                                     step_launches(cfg_.model.n_layers, batching_.count), peak_flops_);
  // The update is captured apart, after the host has judged the step (the guard: non-finite
  // values, loss spikes, fp16 overflow) and found its clip coefficient: a skipped step does not
  // replay it. Its per-step values reach the device through AdamW's scalar buffer, so it is
  // captured once whatever the loss scale.
  GraphChoice u = c;
  if (!engine_->update_capturable()) u = {false, false, "the engine's update has collectives"};
  if (!ctx_.on_host() && mesh_.world_rank() == 0)
    log_info("{}{}", c.reason, c.capture && u.capture ? " (the forward/backward and the update)" : "");
  graph_ = std::make_unique<StepGraph>(ctx_, std::move(c), "the step's forward/backward");
  update_graph_ = std::make_unique<StepGraph>(ctx_, std::move(u), "the update");
}

void Trainer::queue_forward_backward(const Batch& batch, float grad_scale) {
  if (!graph_->enabled()) {
    executor_->train_queued(batch, grad_scale);  // the loss sums stay on the device
    engine_->queue_gradient_norm();              // and so do the gradient's sums of squares
    return;
  }
  executor_->stage(batch);  // host work: outside the graph
  graph_->run(grad_scale, [&] {
    executor_->queue_staged(grad_scale);
    engine_->queue_gradient_norm();
  });
}

void Trainer::update(double lr, float grad_scale) {
  engine_->begin_update(lr, grad_scale);  // host: the step count and its scalars into pinned memory
  update_graph_->run(0.0f, [&] { engine_->queue_update(); });  // nothing by value: no key
  engine_->end_update();
}

double Trainer::gpu_peak_flops() const {
  std::string why;
  const std::string name = obs::cuda_device_name(ctx_.device_index, &why);
  const plan::MfuPeak peak = plan::gpu_mfu_peak(name, cfg_.train.precision, /*measured_flops=*/0);
  if (name.empty()) log_info("GPU name unknown ({})", why);
  log_info("{}", peak.flops > 0 ? "MFU against " + peak.source : peak.source);
  return peak.flops;
}

namespace {

// What the checkpointer needs of the run beyond ckpt.* (ckpt/checkpointer.h).
CheckpointRun checkpoint_run(const Config& cfg) {
  Config copy = cfg;
  return {.run_dir = cfg.train.run_dir,
          .steps = cfg.train.steps,
          .zero = cfg.parallel.zero,
          .powersgd = cfg.parallel.grad_compression == GradCompression::kPowerSGD,
          .model = cfg.model,
          .batch_size = cfg.train.batch_size,
          .seq_len = cfg.train.seq_len,
          .config = copy.to_json(),
          .store_endpoint = cfg.data.endpoint};
}

}  // namespace

void Trainer::resume() {
  ckpt_ = std::make_unique<Checkpointer>(cfg_.ckpt, checkpoint_run(cfg_), mesh_, *engine_,
                                         train_data_->tokenizer_hash(), telemetry_.get());
  ckpt_->set_guard_state([this] { return faults_->guard_state(); });  // the loss-spike window, in every save
  stop_ = std::make_unique<StopRequest>(cfg_.train.stop_after_minutes);
  if (auto r = ckpt_->resume(); r.resumed) {  // ckpt.resume: weights, moments, step, data position
    step_ = r.step, tokens_ = r.tokens;
    if (r.has_loader) train_data_->restore(r.loader);
    // The guard judges the next steps as an uninterrupted run would (an imported model has no history).
    if (r.has_loader) faults_->restore_guard(r.step_guard, r.dir, r.step);
    if (loss_scaler_ && r.loss_scale > 0) loss_scaler_->restore(r.loss_scale, r.loss_scale_clean_steps);
    telemetry_->set_restarts(r.restarts);
  }
}

// The run is accepted (a refused resume threw): only now its files are written.
void Trainer::open_run_files() {
  const bool rank0 = mesh_.world_rank() == 0;
  cfg_.ckpt.encrypt = ckpt_->encrypting();  // a run resumed from encrypted checkpoints stays encrypted
  if (rank0) write_file_atomic(cfg_.train.run_dir + "/config.json", cfg_.to_json().dump(2) + "\n");
  metrics_ = std::make_unique<MetricsLog>(cfg_.train.run_dir, rank0, /*append=*/!cfg_.ckpt.resume.empty());
}

void Trainer::log_layout() const {
  const TrainConfig& t = cfg_.train;
  const ParallelConfig& par = cfg_.parallel;
  log_info("model {}: {} parameters ({:.1f}M), {} layers, dim {}, {} heads ({} kv), ffn {}, vocab {}",
           cfg_.model.preset, cfg_.model.num_params(), static_cast<double>(cfg_.model.num_params()) / 1e6,
           cfg_.model.n_layers, cfg_.model.dim, cfg_.model.n_heads, cfg_.model.n_kv_heads, cfg_.model.ffn_dim,
           cfg_.model.vocab_size);
  log_info("layout: {} rank(s), dp {} (zero {}), tp {}{}, pp {} over {}; data: {}", mesh_.world_size(), par.dp,
           par.zero, par.tp, par.sequence_parallel && par.tp > 1 ? " (sequence parallel)" : "", par.pp,
           mesh_.transport(), train_data_->describe());
  if (par.cp > 1)
    log_info("context parallel: cp {} ({} attention), {} of each sample's {} tokens per rank (zig-zag chunks)", par.cp,
             cp_attention_name(par.cp_attention), t.seq_len / par.cp, t.seq_len);
  log_info("batch {} x {} tokens, {} per rank in {} micro-batch(es)", t.batch_size, t.seq_len, batching_.local_batch,
           batching_.count);
  executor_->log_plan();
}

Trainer::~Trainer() = default;

std::array<double, 3> Trainer::sum_over_ranks(double loss_sum, double local_norm2, double data_hash) {
  return sum_step_over_ranks(*engine_, mesh_, loss_sum, local_norm2, data_hash);
}

GuardVerdict Trainer::judge_step(const StepStats& s, double local_loss_sum) {
  if (loss_scaler_) {
    // The gradient norm is the same on every rank (reduced over all of them), so is this verdict.
    const bool overflow =
        std::isfinite(s.loss) && !std::isfinite(s.grad_norm) && loss_scaler_->scale() > loss_scaler_->min_scale();
    loss_scaler_->update(overflow);
    if (overflow) {
      GuardVerdict v;
      v.action = GuardAction::kSkip;
      v.reason = "fp16_overflow";
      v.message = fmt::format("step {}: fp16 gradients overflowed at loss scale {}; update skipped, scale now {}",
                              step_ + 1, s.loss_scale, loss_scaler_->scale());
      if (mesh_.world_rank() == 0) log_warn("{}", v.message);
      return v;
    }
  }
  return faults_->judge(mesh_.world(), step_ + 1, s.loss, s.grad_norm, local_loss_sum);
}

namespace {
// This rank's part of StepStats::data_hash: a 20-bit hash of each (position, token) of its
// sequences summed over the positions it owns (data/loader/sample_chunks.h), so that the cp ranks'
// parts add up to the whole sequences'. < 2^20 · (seq_len + 1) per sequence: sums stay exact in a double.
double batch_data_hash(const Batch& b) {
  double h = 0;
  for (int64_t i = 0; i < b.batch; ++i) {
    const int32_t* row = b.sequence(i);
    uint64_t s = 0;
    for_each_owned_position(b.chunks, b.seq_len, [&](int64_t p) {
      s += mix64((static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(row[p])) >> 44;
    });
    h += static_cast<double>(s);
  }
  return h;
}
}  // namespace

StepStats Trainer::step() {
  const double t0 = now_seconds(), cpu0 = process_cpu_seconds(), blocked0 = comm_blocked_seconds();
  const int64_t host_waits0 = comm_host_waits();
  const CommStats comm0 = mesh_.dp_cp().stats(), pp0 = mesh_.pp().stats(), tp0 = mesh_.tp().stats();
  const CommStats cp0 = mesh_.cp().stats();
  const double tokens_per_step = static_cast<double>(cfg_.train.batch_size * cfg_.train.seq_len);
  StepStats s;
  s.lr = schedule_.at(step_);
  const int64_t first_sample = train_data_->state().next_sample;
  Batch batch = train_data_->next();
  s.data_wait_s = now_seconds() - t0;
  faults_->record_samples(step_ + 1, first_sample);
  const InjectedFault inject = faults_->injection(first_sample, cfg_.train.batch_size);  // tests only

  // fp16: the backward runs on the loss times the loss scale; gradients are unscaled in the update.
  const double scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  const float grad_factor = inject.grad_factor * static_cast<float>(scale);
  const float grad_scale = grad_factor / static_cast<float>(cfg_.train.batch_size * cfg_.train.seq_len);
  queue_forward_backward(batch, grad_scale);                            // nothing read back yet
  const auto [local_loss_sum, local_norm2] = read_back_step_scalars();  // the step's one read-back
  // The ring's work on the stream is done with it: its overlap timers settle (RingAttention).
  if (auto* ring = dynamic_cast<RingAttention*>(cp_.get())) ring->settle_overlap();
  const double loss_sum = local_loss_sum * inject.loss_factor;
  auto [global_loss_sum, grad_norm2, data_hash] = sum_over_ranks(loss_sum, local_norm2, batch_data_hash(batch));
  s.data_hash = static_cast<int64_t>(data_hash);
  s.loss = global_loss_sum / tokens_per_step;
  s.grad_norm = std::sqrt(grad_norm2) / scale;
  s.loss_scale = loss_scaler_ ? scale : 0;
  // Non-finite values and loss spikes skip the update (or stop the run: fault.nan_policy).
  s.guard = judge_step(s, loss_sum);
  if (s.guard.action == GuardAction::kStop) {
    throw Error(s.guard.message,
                "lower optim.lr, enable optim.grad_clip, or check the data; the run stopped before "
                "the update (fault.nan_policy, fault.max_consecutive_skips)");
  }
  if (!s.guard.skipped()) {
    const double clip = clip_coefficient(s.grad_norm, cfg_.optim.grad_clip);
    update(s.lr, static_cast<float>(clip / scale));
  }

  s.step = ++step_;
  tokens_ += static_cast<int64_t>(tokens_per_step);
  s.tokens = tokens_;
  s.step_s = now_seconds() - t0;
  s.cpu_s = process_cpu_seconds() - cpu0;
  s.tokens_per_s = tokens_per_step / s.step_s;
  s.mfu = plan::mfu(s.tokens_per_s, flops_per_token_, peak_flops_, mesh_.world_size());
  s.comm_wait_s = engine_->last_wait_s();
  s.compute_s = std::max(0.0, s.step_s - s.data_wait_s - (comm_blocked_seconds() - blocked0));
  s.comm_host_waits = comm_host_waits() - host_waits0;
  s.comm = mesh_.dp_cp().stats() - comm0;
  s.comm_pp = mesh_.pp().stats() - pp0;
  s.comm_tp = mesh_.tp().stats() - tp0;
  s.comm_cp = mesh_.cp().stats() - cp0;
  s.executor = executor_->stats();
  return s;
}

Trainer::Evaluation Trainer::evaluate_all() {
  Evaluation e;
  eval_stop_.reset();
  if (const int ms = FaultInjector::delays().eval_batch_ms; ms > 0 && mesh_.world_rank() == 0)
    log_info("test: validation after step {} started; each batch waits {} ms (FLUXTRAIN_EVAL_TEST_DELAY_MS)", step_,
             ms);
  const double ln2 = std::log(2.0);
  if (val_data_) {
    e.loss = evaluate(*val_data_);
    if (double cpt = val_data_->chars_per_token(); cpt > 0) e.bpc = e.loss / ln2 / cpt;
  }
  double weights = 0, loss = 0, chars = 0;  // a mixture: Σ w·loss and Σ w·chars/token
  for (ValidationSource& v : val_sources_) {
    if (eval_stop_) break;
    const double l = evaluate(*v.loader), cpt = v.loader->chars_per_token();
    e.sources.push_back({v.name, l, cpt > 0 ? l / ln2 / cpt : NAN});
    weights += v.weight, loss += v.weight * l, chars += v.weight * cpt;
  }
  if (!val_data_ && weights > 0) {
    e.loss = loss / weights;
    if (chars > 0) e.bpc = loss / ln2 / chars;
  }
  e.stopped = eval_stop_;
  return e;
}

double Trainer::evaluate(DataLoader& loader) {
  BatchLoss loss;
  const int delay_ms = FaultInjector::delays().eval_batch_ms;
  for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
    // Every rank asks at the same batch (a collective), so all of them leave together.
    if (eval_stoppable_ && (eval_stop_ = stop_->agreed(mesh_.world()))) break;
    executor_->evaluate(loader.next(), loss);
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
  loader.restore({});  // every validation reads the same batches
  if (eval_stop_) return NAN;
  double sum = loss.sum;
  mesh_.pp().all_reduce(&sum, 1);                            // the last stage computed the loss
  if (cfg_.parallel.cp > 1) mesh_.cp().all_reduce(&sum, 1);  // each cp rank has its chunks' losses
  mesh_.dp().all_reduce(&sum, 1);
  return sum / static_cast<double>(cfg_.train.batch_size * cfg_.train.seq_len * cfg_.train.eval_batches);
}

bool Trainer::validation_due(int64_t step) const {
  const int64_t every = cfg_.train.eval_interval;
  return every > 0 && (step % every == 0 || step == cfg_.train.steps);
}

nlohmann::json Trainer::metrics_row(const StepStats& s) {
  nlohmann::json j = {{"step", s.step},
                      {"loss", s.loss},
                      {"lr", s.lr},
                      {"grad_norm", s.grad_norm},
                      {"tokens", s.tokens},
                      {"tokens_per_s", s.tokens_per_s},
                      {"step_s", s.step_s},
                      {"mfu", s.mfu},
                      {"data_wait_s", s.data_wait_s},
                      {"comm_wait_s", s.comm_wait_s},
                      {"data_hash", s.data_hash},
                      {"cpu_s", s.cpu_s},
                      {"compute_s", s.compute_s},
                      {"comm_host_waits", s.comm_host_waits},
                      {"data_read_bytes", train_data_->bytes_read()}};
  telemetry_->on_step({.step = s.step,
                       .loss = s.loss,
                       .lr = s.lr,
                       .grad_norm = s.grad_norm,
                       .tokens = cfg_.train.batch_size * cfg_.train.seq_len,
                       .tokens_per_s = s.tokens_per_s,
                       .step_s = s.step_s,
                       .mfu = peak_flops_ > 0 ? s.mfu : NAN,
                       .data_wait_s = s.data_wait_s,
                       .skipped = s.guard.skipped(),
                       .loss_scale = s.loss_scale > 0 ? s.loss_scale : NAN});
  faults_->add_to_metrics(s.guard, j);
  if (s.loss_scale > 0) j["loss_scale"] = s.loss_scale;
  static_assert(kNumCollKinds == obs::kNumCommOps, "obs::CommOp mirrors CollKind");
  for (size_t k = 0; k < kNumCollKinds; ++k) {
    std::string kind = coll_kind_name(static_cast<CollKind>(k));
    if (s.comm.calls[k] != 0) {
      telemetry_->comm(static_cast<obs::CommOp>(k), static_cast<uint64_t>(s.comm.bytes_sent[k]), s.comm.seconds[k],
                       s.comm.calls[k]);
      j["comm_" + kind + "_bytes"] = s.comm.bytes_sent[k];
      j["comm_" + kind + "_s"] = s.comm.seconds[k];
    }
    if (s.comm_tp.calls[k] != 0) {  // tensor-parallel traffic: tp_<kind>_bytes, tp_<kind>_s
      j["tp_" + kind + "_bytes"] = s.comm_tp.bytes_sent[k];
      j["tp_" + kind + "_s"] = s.comm_tp.seconds[k];
    }
  }
  const MemoryTracker& mem = MemoryTracker::global();
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    auto cat = static_cast<MemCategory>(c);
    if (mem.peak(cat) > 0) j[std::string("mem_") + mem_category_name(cat) + "_bytes"] = mem.peak(cat);
  }
  j["mem_peak_bytes"] = mem.total_peak();
  for (size_t d = 1; d < kNumDevices; ++d) {  // accelerators: mem_cuda_<category>_bytes, mem_cuda_peak_bytes
    const auto dev = static_cast<Device>(d);
    if (mem.total_peak(dev) == 0) continue;
    for (size_t c = 0; c < kNumMemCategories; ++c) {
      auto cat = static_cast<MemCategory>(c);
      if (mem.peak(cat, dev) > 0)
        j[fmt::format("mem_{}_{}_bytes", device_name(dev), mem_category_name(cat))] = mem.peak(cat, dev);
    }
    j[fmt::format("mem_{}_peak_bytes", device_name(dev))] = mem.total_peak(dev);
  }
  j["rss_peak_bytes"] = process_peak_rss_bytes();
  if (streamed_) {  // shard bytes this rank fetched from object storage so far
    const uint64_t fetched = train_data_->fetched_bytes();
    telemetry_->data_fetched(fetched - fetched_reported_);
    fetched_reported_ = fetched;
    j["data_fetched_bytes"] = fetched;
  }
  if (mesh_.world_size() > 1) add_rank_metrics(s, j);
  return j;
}

void Trainer::validate_step(int64_t step, nlohmann::json& row) {
  eval_stoppable_ = true;
  const Evaluation e = evaluate_all();
  eval_stoppable_ = false;
  if (!e.stopped) return add_validation(step, e, row);
  // The stop itself is taken at the loop's next boundary (the request stays set): the step just
  // trained is checkpointed there, its validation is not recorded.
  if (mesh_.world_rank() == 0)
    log_warn("validation after step {} interrupted: stop requested ({}); the step is checkpointed without it", step,
             *e.stopped);
}

void Trainer::add_validation(int64_t step, const Evaluation& e, nlohmann::json& j) {
  j["val_loss"] = e.loss;
  j["val_bits_per_token"] = e.loss / std::log(2.0);
  if (!std::isnan(e.bpc)) j["val_bpc"] = e.bpc;
  telemetry_->on_eval(step, e.loss, e.bpc);
  std::string per_source;
  for (const Evaluation::Source& v : e.sources) {  // val_loss_ru, val_bpc_ru, ...
    j["val_loss_" + v.name] = v.loss;
    if (!std::isnan(v.bpc)) j["val_bpc_" + v.name] = v.bpc;
    telemetry_->on_eval_source(step, v.name, v.loss, v.bpc);
    per_source += fmt::format(", {} {:.4f} ({:.3f} bits/char)", v.name, v.loss, v.bpc);
  }
  log_info("step {:>6} | validation loss {:.4f}{}", step, e.loss, per_source);
}

void Trainer::add_badput(int64_t step, nlohmann::json& row) {
  const obs::BadputTotals t = badput_.totals(unix_time_seconds());
  row["productive_s"] = badput_.step_productive_s(step);
  row["goodput"] = t.goodput();
  row["badput"] = t.to_json();
  telemetry_->on_badput(t);
}

void Trainer::log_step(const StepStats& s, const nlohmann::json& row) {
  metrics_->write(row);
  // A step cannot run its GEMMs faster than the machine's peak: over 100% the recorded peak is
  // wrong (measured on a busy machine), said once with how to fix it.
  if (progress_ && !peak_recorded_in_.empty() && s.mfu > 1.0 && !peak_doubted_) {
    peak_doubted_ = true;
    log_warn(
        "MFU {:.0f}% at step {}: the recorded GEMM peak ({:.3g} GFLOP/s) is below what this run reaches, so it was "
        "likely measured while the machine was busy (peak file {}); re-measure it on an idle machine with "
        "`fluxtrain bench-peak`",
        s.mfu * 100, s.step, peak_flops_ / 1e9, peak_recorded_in_);
  }
  if (progress_)
    progress_->update({.step = s.step,
                       .loss = s.loss,
                       .tokens_per_s = s.tokens_per_s,
                       .mfu = peak_flops_ > 0 ? s.mfu : NAN,
                       .step_s = s.step_s,
                       .lr = s.lr,
                       .grad_norm = s.grad_norm});
}

void Trainer::add_rank_metrics(const StepStats& s, nlohmann::json& j) {
  const MemoryTracker& mem = MemoryTracker::global();
  RankFigures values = {{"mem_parameters_bytes", mem.peak(MemCategory::kParameters)},
                        {"mem_activations_bytes", mem.peak(MemCategory::kActivations)},
                        {"compute_s", s.compute_s},
                        {"comm_host_waits", static_cast<double>(s.comm_host_waits)},
                        {"data_read_bytes", static_cast<double>(train_data_->bytes_read())}};
  if (streamed_) values.push_back({"data_fetched_bytes", static_cast<double>(fetched_reported_)});
  values.insert(values.end(), s.executor.begin(), s.executor.end());  // a pipeline stage's times and traffic
  if (cfg_.parallel.tp > 1) {
    double tp_bytes = 0;
    for (int64_t b : s.comm_tp.bytes_sent) tp_bytes += static_cast<double>(b);
    values.push_back({"tp_bytes", tp_bytes});
  }
  if (cfg_.parallel.cp > 1) {  // what the cp communicator counted (the dry run's cp bytes per rank)
    const auto* ring = dynamic_cast<const RingAttention*>(cp_.get());
    const double hidden = ring ? ring->overlap().hidden_share() : std::numeric_limits<double>::quiet_NaN();
    values.push_back({"cp_bytes", static_cast<double>(s.comm_cp.total_bytes())});
    if (ring) values.push_back({"cp_ring_hidden_ratio", hidden});  // the same list on every rank
    telemetry_->on_context_parallel(static_cast<uint64_t>(s.comm_cp.total_bytes()), hidden);
  }
  nlohmann::json r = gather_per_rank(mesh_.world(), values);
  if (mesh_.world_rank() == 0) {  // stragglers: named in the log, Prometheus and here
    obs::StragglerReport rep = telemetry_->on_rank_compute(s.step, r["compute_s"].get<std::vector<double>>());
    if (!rep.current.empty()) {
      j["stragglers"] = nlohmann::json::array();
      for (const obs::Straggler& x : rep.current) j["stragglers"].push_back(obs::to_json(x));
      j["straggler_cost_s"] = rep.cost_s;
      badput_.straggled(s.step, rep.cost_s);
    }
  }
  executor_->summarize(r, j);  // a pipeline's measured bubble
  j["per_rank"] = std::move(r);
}

bool Trainer::roll_back() {
  badput_.enter(obs::BadputKind::kRestart, unix_time_seconds());  // recovery, until the next step
  ckpt_->finish();  // the save in flight is committed (or discarded) on every rank first
  Config c = cfg_;
  c.ckpt.resume = "auto", c.ckpt.interval = 0;  // load the newest valid checkpoint, save nothing
  Checkpointer loader(c.ckpt, checkpoint_run(c), mesh_, *engine_, train_data_->tokenizer_hash(), nullptr);
  Checkpointer::Resumed r = loader.resume();
  if (!r.resumed) {
    if (mesh_.world_rank() == 0)
      log_warn("no checkpoint to roll back to under {}; the spikes were only skipped", loader.root());
    return false;
  }
  // The loader stays where it is: the batches read since the checkpoint are skipped, not replayed.
  faults_->rolled_back(step_, r.step, r.loader.next_sample, train_data_->state().next_sample);
  badput_.roll_back(r.step);  // the steps after the checkpoint are redone: their time was lost
  step_ = r.step, tokens_ = r.tokens;
  return true;
}

// The GPU sampler saw this rank's GPU fail (an uncorrectable ECC error, a fatal XID, a failed row
// remap): the rank stops at once, without a checkpoint (the GPU's results are not to be trusted);
// `fluxtrain train` reports it and the supervisor restarts from the last checkpoint without the host.
void Trainer::stop_on_gpu_fault() {
  const std::string why = telemetry_->gpu_fault();
  if (why.empty()) return;
  throw GpuFault(fmt::format("rank {} on host {} after step {}: {}", mesh_.world_rank(), this_host(), step_, why),
                 "the host is excluded from the restart (fault.elastic); reset or service the GPU (nvidia-smi -q, "
                 "the XID catalog) before it rejoins");
}

// Sniff tests (obs.sniff_interval): due after this step, or the start-up one not yet written — the
// "sniff" object goes into this step's metrics row (rank 0).
void Trainer::sniff_into(int64_t step, nlohmann::json& row) {
  if (!sniff_) return;
  nlohmann::json j = sniff_->due(step) ? sniff_->run(step) : nlohmann::json();
  if (!sniff_pending_.is_null()) row["sniff_start"] = std::move(sniff_pending_), sniff_pending_ = nullptr;
  if (!j.is_null()) row["sniff"] = std::move(j);
}

RunEnd Trainer::run() {
  start_time_ = now_seconds();
  faults_->set_start_step(step_);
  faults_->beat("ready", step_);
  if (step_ > cfg_.train.steps) {
    throw Error(fmt::format("the run resumed at step {}, beyond train.steps = {}: there is nothing to train", step_,
                            cfg_.train.steps),
                "raise train.steps to train on (the learning-rate schedule follows it), or evaluate the checkpoint "
                "with `fluxtrain eval`");
  }
  if (step_ == cfg_.train.steps && step_ > 0 && mesh_.world_rank() == 0)
    log_info("the run resumed at step {} = train.steps: it is complete, nothing to train", step_);
  if (sniff_) sniff_pending_ = sniff_->run(step_);  // at start-up: before anything slow shows in a step
  std::optional<std::string> stop;
  int64_t nonfinite_tail = 0;  // the last updates skipped for a non-finite loss, in a row
  std::string tail_reason;
  try {
    while (step_ < cfg_.train.steps) {
      if ((stop = stop_->agreed(mesh_.world()))) break;  // a signal or the time budget, at a step boundary
      badput_.step_begins(unix_time_seconds());
      StepStats s = step();
      badput_.step_ends(unix_time_seconds(), s.step, s.data_wait_s, s.guard.skipped());
      const bool rolled_back = s.guard.action == GuardAction::kRollback && roll_back();
      nlohmann::json row = metrics_row(s);
      sniff_into(s.step, row);
      if (validation_due(s.step)) timed_as(obs::BadputKind::kEval, [&] { validate_step(s.step, row); });
      add_badput(s.step, row);
      log_step(s, row);
      if (loss_scaler_) ckpt_->set_loss_scale(loss_scaler_->scale(), loss_scaler_->clean_steps_in_a_row());
      if (!rolled_back)
        timed_as(obs::BadputKind::kCheckpoint, [&] { ckpt_->after_step(step_, tokens_, train_data_->state()); });
      faults_->beat("train", step_);
      stop_on_gpu_fault();
      const bool nonfinite =
          s.guard.skipped() && (s.guard.reason.rfind("nan", 0) == 0 || s.guard.reason.rfind("inf", 0) == 0);
      nonfinite_tail = nonfinite ? nonfinite_tail + 1 : 0;
      if (nonfinite) tail_reason = s.guard.reason;
    }
    if (stop) {
      if (mesh_.world_rank() == 0)
        log_warn("stop requested ({}) after step {}: checkpointing it, then exiting", *stop, step_);
      timed_as(obs::BadputKind::kCheckpoint, [&] { ckpt_->save_now(step_, tokens_, train_data_->state()); });
    }
    timed_as(obs::BadputKind::kCheckpoint, [&] { ckpt_->finish(); });
  } catch (const CommError& e) {  // a peer died or hangs: say at which step (docs/operations.md)
    throw CommError(fmt::format("step {}: {}", step_ + 1, e.what()), e.hint());
  }
  return end_run(stop, nonfinite_tail, tail_reason);
}

RunEnd Trainer::end_run(const std::optional<std::string>& stop, int64_t nonfinite_tail,
                        const std::string& tail_reason) {
  const bool rank0 = mesh_.world_rank() == 0;
  const obs::BadputTotals badput = badput_.totals(unix_time_seconds());  // badput.json: what the run cost
  telemetry_->on_badput(badput);
  if (rank0) write_file_atomic(cfg_.train.run_dir + "/badput.json", badput.to_json().dump(2) + "\n");
  const bool checkpoints = cfg_.ckpt.interval > 0;
  const int64_t on_disk = ckpt_->committed();
  // Step 0 needs no checkpoint at the end of a run: the initial state is a function of the seed.
  // A stop there has none all the same: exit 5, never "its checkpoint is committed" (exit 4).
  const bool saved = checkpoints && on_disk == step_;
  const std::string newest = on_disk >= 0 ? fmt::format("the newest checkpoint on disk is step {}", on_disk)
                                          : std::string("no checkpoint of this run is on disk");
  if (progress_) progress_->finish();
  StopRequest::done();  // whatever ended the run, the watchdog of fault.preempt_grace_s stands down
  if (stop) {
    faults_->beat("stopped", step_);
    if (step_ == 0) {
      if (rank0)
        log_error(
            "stopped ({}) before the first step: nothing was trained and no checkpoint was written; a new "
            "start begins at step 0 (exit code {})",
            *stop, kExitStoppedUnsaved);
      return RunEnd::kStoppedUnsaved;
    }
    if (saved) {
      if (rank0)
        log_info(
            "stopped ({}) after step {}: its checkpoint is committed under {}; `--resume auto` continues from it "
            "(exit code {})",
            *stop, step_, ckpt_->root(), kExitStopped);
      return RunEnd::kStopped;
    }
    if (rank0)
      log_error("stopped ({}) after step {} without a checkpoint of it ({}); {} (exit code {})", *stop, step_,
                checkpoints ? "its save failed: see above" : "checkpoints are off: ckpt.interval = 0", newest,
                kExitStoppedUnsaved);
    return RunEnd::kStoppedUnsaved;
  }
  if (nonfinite_tail > 0) {
    throw Error(
        fmt::format("the last {} update(s), steps {}..{}, were skipped for a non-finite value ({}): the final "
                    "state is that of step {}, not a trained step {}",
                    nonfinite_tail, step_ - nonfinite_tail + 1, step_, tail_reason, step_ - nonfinite_tail, step_),
        "lower optim.lr, keep optim.grad_clip on, or check the data (fault.nan_policy = \"stop\" stops at "
        "the first non-finite loss)");
  }
  if (checkpoints && !saved && step_ > 0) {
    throw Error(fmt::format("the final checkpoint, step {}, was not written (its error is above); {}", step_, newest),
                fmt::format("fix the cause (space under {}?) and run again with --resume auto", ckpt_->root()));
  }
  faults_->beat("done", step_);
  if (auto* ring = dynamic_cast<RingAttention*>(cp_.get())) log_info("{}", ring->describe_overlap());
  log_info("done: {} steps, {} tokens in {}; goodput {:.1f}% ({}); metrics in {}", step_, tokens_,
           human_duration(now_seconds() - start_time_), 100 * badput.goodput(), obs::badput_summary(badput),
           metrics_->path());
  return RunEnd::kFinished;
}

}  // namespace ft
