#include "train/trainer.h"

#include <omp.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "model/activation_sizes.h"
#include "obs/progress.h"
#include "obs/telemetry.h"
#include "optim/grad_clip.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {
namespace {

int default_threads() {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int ranks = local ? std::max(1, std::atoi(local)) : 1;
  return std::max(1, cores / ranks);
}

}  // namespace

Trainer::Trainer(const Config& cfg, Mesh& mesh) : cfg_(cfg), mesh_(mesh), schedule_(cfg.optim, cfg.train.steps) {
  const TrainConfig& t = cfg_.train;
  omp_set_num_threads(t.threads > 0 ? t.threads : default_threads());
  const int64_t dp = mesh_.degrees().dp;
  if (t.batch_size % dp != 0) {
    throw Error(fmt::format("train.batch_size = {} is not divisible by parallel.dp = {}", t.batch_size, dp),
                fmt::format("use a global batch that is a multiple of {}", dp));
  }
  local_batch_ = t.batch_size / dp;
  micro_batch_ = t.micro_batch_size > 0 ? t.micro_batch_size : local_batch_;
  if (local_batch_ % micro_batch_ != 0) {
    throw Error(fmt::format("train.micro_batch_size = {} does not divide the per-rank batch of {} sequences "
                            "(train.batch_size {} / parallel.dp {})",
                            micro_batch_, local_batch_, t.batch_size, dp),
                "pick a micro-batch size that divides train.batch_size / parallel.dp");
  }
  micro_batches_ = local_batch_ / micro_batch_;
  if (t.seq_len > cfg_.model.max_seq_len) {
    throw Error(fmt::format("train.seq_len = {} exceeds model.max_seq_len = {}", t.seq_len, cfg_.model.max_seq_len),
                "raise model.max_seq_len or shorten the sequences");
  }

  const int64_t tp = mesh_.degrees().tp;
  const bool sp = cfg_.parallel.sequence_parallel && tp > 1;
  if (sp && (micro_batch_ * t.seq_len) % tp != 0) {
    throw Error(fmt::format("parallel.sequence_parallel splits the {} x {} tokens of a micro-batch over "
                            "parallel.tp = {} ranks, which does not divide them",
                            micro_batch_, t.seq_len, tp),
                "make train.micro_batch_size x train.seq_len a multiple of parallel.tp");
  }
  tp_ = std::make_unique<TpGroup>(mesh_.tp(), sp);
  engine_ = make_param_engine(cfg_.parallel, cfg_.optim, cfg_.model, mesh_.dp(), mesh_.tp(), t.seed);
  model_ = std::make_unique<Llama>(cfg_.model, engine_->layout(), t.precision, tp > 1 ? tp_.get() : nullptr);
  const int64_t dp_rank = mesh_.coord().dp;
  train_data_ = make_loader(cfg_.data, t, cfg_.model.vocab_size, dp_rank, dp, Split::kTrain);
  if (t.eval_interval > 0) val_data_ = make_loader(cfg_.data, t, cfg_.model.vocab_size, dp_rank, dp, Split::kValidation);
  acts_.allocate(cfg_.model, micro_batch_, t.seq_len,
                 loss_chunk_tokens(cfg_.model, t.loss_chunk_tokens, micro_batch_ * t.seq_len), TpSplit{tp, sp});

  const bool rank0 = mesh_.world_rank() == 0;
  if (rank0) {
    std::filesystem::create_directories(t.run_dir);
    write_file_atomic(t.run_dir + "/config.json", cfg_.to_json().dump(2) + "\n");
  }
  metrics_ = std::make_unique<MetricsLog>(t.run_dir, rank0, false);
  // Monitoring: every rank serves its own /metrics (metrics.port + local rank) with its mesh
  // coordinates as labels; rank 0 writes TensorBoard events; the progress line is rank 0's.
  obs::RankInfo rank{.rank = mesh_.world_rank(), .world_size = mesh_.world_size(),
                     .local_rank = obs::local_rank_from_env(), .dp = static_cast<int>(mesh_.coord().dp),
                     .tp = static_cast<int>(mesh_.coord().tp), .pp = static_cast<int>(mesh_.coord().pp)};
  telemetry_ = std::make_unique<obs::Telemetry>(cfg_.metrics, rank, t.run_dir, t.steps);
  if (rank0) progress_ = std::make_unique<obs::ProgressLine>(t.steps, t.log_interval);
  flops_per_token_ = cfg_.model.train_flops_per_token(t.seq_len);
  log_info("model {}: {} parameters ({:.1f}M), {} layers, dim {}, {} heads ({} kv), ffn {}, vocab {}",
           cfg_.model.preset, cfg_.model.num_params(), static_cast<double>(cfg_.model.num_params()) / 1e6,
           cfg_.model.n_layers, cfg_.model.dim, cfg_.model.n_heads, cfg_.model.n_kv_heads, cfg_.model.ffn_dim,
           cfg_.model.vocab_size);
  log_info("layout: {} rank(s), dp {} (zero {}), tp {}{}, pp {}; data: {}", mesh_.world_size(), dp,
           cfg_.parallel.zero, tp, sp ? " (sequence parallel)" : "", mesh_.degrees().pp, train_data_->describe());
  log_info("batch {} x {} tokens, {} per rank in {} micro-batch(es); {} threads per rank; precision {}", t.batch_size,
           t.seq_len, local_batch_, micro_batches_, omp_get_max_threads(),
           t.precision == Precision::kBF16 ? "bf16" : "fp32");
}

Trainer::~Trainer() = default;

double Trainer::forward_backward_micro_batches(const Batch& batch) {
  const float grad_scale = 1.0f / static_cast<float>(cfg_.train.batch_size * cfg_.train.seq_len);
  double loss_sum = 0;
  for (int64_t mb = 0; mb < micro_batches_; ++mb) {
    engine_->begin_micro_batch(static_cast<int>(mb));
    loss_sum += model_->forward_backward(*engine_, acts_, batch.sequence(mb * micro_batch_), grad_scale);
  }
  return loss_sum;
}

StepStats Trainer::step() {
  const double t0 = now_seconds();
  const CommStats comm0 = mesh_.dp().stats(), tp0 = mesh_.tp().stats();
  const double tokens_per_step = static_cast<double>(cfg_.train.batch_size * cfg_.train.seq_len);
  StepStats s;
  s.lr = schedule_.at(step_);
  Batch batch = train_data_->next();
  s.data_wait_s = now_seconds() - t0;

  engine_->begin_step(static_cast<int>(micro_batches_));
  double loss_sum = forward_backward_micro_batches(batch);
  double grad_norm2 = engine_->finish_gradients();
  mesh_.dp().all_reduce(&loss_sum, 1);
  s.loss = loss_sum / tokens_per_step;
  if (!std::isfinite(s.loss)) {
    throw Error(fmt::format("loss is {} at step {}", std::isnan(s.loss) ? "NaN" : "Inf", step_ + 1),
                "lower optim.lr, enable optim.grad_clip, or check the data; the run stopped before the update");
  }
  s.grad_norm = std::sqrt(grad_norm2);
  engine_->optimizer_step(s.lr, clip_coefficient(s.grad_norm, cfg_.optim.grad_clip));

  s.step = ++step_;
  tokens_ += static_cast<int64_t>(tokens_per_step);
  s.tokens = tokens_;
  s.step_s = now_seconds() - t0;
  s.tokens_per_s = tokens_per_step / s.step_s;
  s.mfu = peak_flops_ > 0 ? s.tokens_per_s * flops_per_token_ / (peak_flops_ * mesh_.world_size()) : 0;
  s.comm_wait_s = engine_->last_wait_s();
  s.comm = mesh_.dp().stats() - comm0;
  s.tp_comm = mesh_.tp().stats() - tp0;
  return s;
}

double Trainer::evaluate() {
  double sum = 0;
  for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
    Batch b = val_data_->next();
    for (int64_t mb = 0; mb < micro_batches_; ++mb)
      sum += model_->forward_loss(*engine_, acts_, b.sequence(mb * micro_batch_));
  }
  val_data_->restore({});  // every validation reads the same batches
  mesh_.dp().all_reduce(&sum, 1);
  return sum / static_cast<double>(cfg_.train.batch_size * cfg_.train.seq_len * cfg_.train.eval_batches);
}

void Trainer::log_step(const StepStats& s) {
  nlohmann::json j = {{"step", s.step},          {"loss", s.loss},     {"lr", s.lr},
                      {"grad_norm", s.grad_norm}, {"tokens", s.tokens}, {"tokens_per_s", s.tokens_per_s},
                      {"step_s", s.step_s},      {"mfu", s.mfu},       {"data_wait_s", s.data_wait_s},
                      {"comm_wait_s", s.comm_wait_s}};
  telemetry_->on_step({.step = s.step, .loss = s.loss, .lr = s.lr, .grad_norm = s.grad_norm,
                       .tokens = cfg_.train.batch_size * cfg_.train.seq_len, .tokens_per_s = s.tokens_per_s,
                       .step_s = s.step_s, .mfu = peak_flops_ > 0 ? s.mfu : NAN, .data_wait_s = s.data_wait_s});
  static_assert(kNumCollKinds == obs::kNumCommOps, "obs::CommOp mirrors CollKind");
  for (size_t k = 0; k < kNumCollKinds; ++k) {
    std::string kind = coll_kind_name(static_cast<CollKind>(k));
    if (s.comm.calls[k] != 0) {
      telemetry_->comm(static_cast<obs::CommOp>(k), static_cast<uint64_t>(s.comm.bytes_sent[k]), s.comm.seconds[k],
                       s.comm.calls[k]);
      j["comm_" + kind + "_bytes"] = s.comm.bytes_sent[k];
      j["comm_" + kind + "_s"] = s.comm.seconds[k];
    }
    if (s.tp_comm.calls[k] != 0) {  // tensor-parallel traffic: tp_<kind>_bytes, tp_<kind>_s
      j["tp_" + kind + "_bytes"] = s.tp_comm.bytes_sent[k];
      j["tp_" + kind + "_s"] = s.tp_comm.seconds[k];
    }
  }
  const MemoryTracker& mem = MemoryTracker::global();
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    auto cat = static_cast<MemCategory>(c);
    if (mem.peak(cat) > 0) j[std::string("mem_") + mem_category_name(cat) + "_bytes"] = mem.peak(cat);
  }
  j["mem_peak_bytes"] = mem.total_peak();
  j["rss_peak_bytes"] = process_peak_rss_bytes();
  const int64_t every = cfg_.train.eval_interval;
  if (every > 0 && (s.step % every == 0 || s.step == cfg_.train.steps)) {
    double val = evaluate();
    j["val_loss"] = val;
    j["val_bits_per_token"] = val / std::log(2.0);
    double bpc = NAN;
    if (double cpt = val_data_->chars_per_token(); cpt > 0) j["val_bpc"] = bpc = val / std::log(2.0) / cpt;
    telemetry_->on_eval(s.step, val, bpc);
    log_info("step {:>6} | validation loss {:.4f}", s.step, val);
  }
  metrics_->write(j);
  if (progress_) progress_->update({.step = s.step, .loss = s.loss, .tokens_per_s = s.tokens_per_s, .mfu = peak_flops_ > 0 ? s.mfu : NAN,
                     .step_s = s.step_s, .lr = s.lr, .grad_norm = s.grad_norm});
}

void Trainer::run() {
  start_time_ = now_seconds();
  while (step_ < cfg_.train.steps) log_step(step());
  if (progress_) progress_->finish();
  log_info("done: {} steps, {} tokens in {}; metrics in {}", step_, tokens_,
           human_duration(now_seconds() - start_time_), metrics_->path());
}

}  // namespace ft
