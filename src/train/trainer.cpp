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

Trainer::Trainer(const Config& cfg)
    : cfg_(cfg), layout_(ParamLayout::llama(cfg.model)), schedule_(cfg.optim, cfg.train.steps) {
  const TrainConfig& t = cfg_.train;
  omp_set_num_threads(t.threads > 0 ? t.threads : default_threads());

  micro_batch_ = t.micro_batch_size > 0 ? t.micro_batch_size : t.batch_size;
  if (t.batch_size % micro_batch_ != 0) {
    throw Error(fmt::format("train.micro_batch_size = {} does not divide the per-rank batch of {} sequences",
                            micro_batch_, t.batch_size),
                "pick a micro-batch size that divides train.batch_size / parallel.dp");
  }
  micro_batches_ = t.batch_size / micro_batch_;
  if (t.seq_len > cfg_.model.max_seq_len) {
    throw Error(fmt::format("train.seq_len = {} exceeds model.max_seq_len = {}", t.seq_len, cfg_.model.max_seq_len),
                "raise model.max_seq_len or shorten the sequences");
  }

  params_ = std::make_unique<FlatParams>(layout_);
  layout_.init(params_->weight_arena(), t.seed);
  model_ = std::make_unique<Llama>(cfg_.model, layout_, t.precision);
  optimizer_ = std::make_unique<AdamW>(cfg_.optim, layout_, 0, layout_.total());
  train_data_ = make_loader(cfg_.data, t, cfg_.model.vocab_size, 0, 1, Split::kTrain);
  if (t.eval_interval > 0) val_data_ = make_loader(cfg_.data, t, cfg_.model.vocab_size, 0, 1, Split::kValidation);
  acts_.allocate(cfg_.model, micro_batch_, t.seq_len,
                 loss_chunk_tokens(cfg_.model, t.loss_chunk_tokens, micro_batch_ * t.seq_len));

  std::filesystem::create_directories(t.run_dir);
  write_file_atomic(t.run_dir + "/config.json", cfg_.to_json().dump(2) + "\n");
  metrics_ = std::make_unique<MetricsLog>(t.run_dir, true, false);
  // Monitoring. Single process for now: rank 0 of 1 (the mesh will supply rank, local rank,
  // dp/tp/pp coordinates and the GPU index when the trainer runs on many ranks).
  telemetry_ = std::make_unique<obs::Telemetry>(cfg_.metrics, obs::RankInfo{}, t.run_dir, t.steps);
  progress_ = std::make_unique<obs::ProgressLine>(t.steps, t.log_interval);
  flops_per_token_ = cfg_.model.train_flops_per_token(t.seq_len);
  log_info("model {}: {} parameters ({:.1f}M), {} layers, dim {}, {} heads ({} kv), ffn {}, vocab {}",
           cfg_.model.preset, layout_.total(), static_cast<double>(layout_.total()) / 1e6, cfg_.model.n_layers,
           cfg_.model.dim, cfg_.model.n_heads, cfg_.model.n_kv_heads, cfg_.model.ffn_dim, cfg_.model.vocab_size);
  log_info("data: {}; batch {} x {} tokens in {} micro-batch(es); {} threads; precision {}",
           train_data_->describe(), t.batch_size, t.seq_len, micro_batches_, omp_get_max_threads(),
           t.precision == Precision::kBF16 ? "bf16" : "fp32");
}

Trainer::~Trainer() = default;

double Trainer::forward_backward_micro_batches(const Batch& batch) {
  const float grad_scale = 1.0f / static_cast<float>(cfg_.train.batch_size * cfg_.train.seq_len);
  double loss_sum = 0;
  for (int64_t mb = 0; mb < micro_batches_; ++mb) {
    loss_sum += model_->forward_backward(*params_, acts_, batch.sequence(mb * micro_batch_), grad_scale);
  }
  return loss_sum;
}

StepStats Trainer::step() {
  const double t0 = now_seconds();
  StepStats s;
  s.lr = schedule_.at(step_);
  Batch batch = train_data_->next();
  s.data_wait_s = now_seconds() - t0;

  params_->zero_grads();
  double loss_sum = forward_backward_micro_batches(batch);
  s.loss = loss_sum / static_cast<double>(cfg_.train.batch_size * cfg_.train.seq_len);
  if (!std::isfinite(s.loss)) {
    throw Error(fmt::format("loss is {} at step {}", std::isnan(s.loss) ? "NaN" : "Inf", step_ + 1),
                "lower optim.lr, enable optim.grad_clip, or check the data; the run stopped before the update");
  }
  s.grad_norm = std::sqrt(grad_sum_squares(params_->grad_arena(), params_->size()));
  float clip = clip_coefficient(s.grad_norm, cfg_.optim.grad_clip);
  optimizer_->step(params_->weight_arena(), params_->grad_arena(), s.lr, clip);

  s.step = ++step_;
  tokens_ += cfg_.train.batch_size * cfg_.train.seq_len;
  s.tokens = tokens_;
  s.step_s = now_seconds() - t0;
  s.tokens_per_s = static_cast<double>(cfg_.train.batch_size * cfg_.train.seq_len) / s.step_s;
  s.mfu = peak_flops_ > 0 ? s.tokens_per_s * flops_per_token_ / peak_flops_ : 0;
  return s;
}

double Trainer::evaluate() {
  double sum = 0;
  const int64_t tokens_per_batch = cfg_.train.batch_size * cfg_.train.seq_len;
  for (int64_t i = 0; i < cfg_.train.eval_batches; ++i) {
    Batch b = val_data_->next();
    for (int64_t mb = 0; mb < micro_batches_; ++mb)
      sum += model_->forward_loss(*params_, acts_, b.sequence(mb * micro_batch_));
  }
  val_data_->restore({});  // every validation reads the same batches
  return sum / static_cast<double>(tokens_per_batch * cfg_.train.eval_batches);
}

void Trainer::log_step(const StepStats& s) {
  nlohmann::json j = {{"step", s.step},          {"loss", s.loss},     {"lr", s.lr},
                      {"grad_norm", s.grad_norm}, {"tokens", s.tokens}, {"tokens_per_s", s.tokens_per_s},
                      {"step_s", s.step_s},      {"mfu", s.mfu},       {"data_wait_s", s.data_wait_s}};
  telemetry_->on_step({.step = s.step, .loss = s.loss, .lr = s.lr, .grad_norm = s.grad_norm,
                       .tokens = cfg_.train.batch_size * cfg_.train.seq_len, .tokens_per_s = s.tokens_per_s,
                       .step_s = s.step_s, .mfu = peak_flops_ > 0 ? s.mfu : NAN, .data_wait_s = s.data_wait_s});
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
  progress_->update({.step = s.step, .loss = s.loss, .tokens_per_s = s.tokens_per_s, .mfu = peak_flops_ > 0 ? s.mfu : NAN,
                     .step_s = s.step_s, .lr = s.lr, .grad_norm = s.grad_norm});
}

void Trainer::run() {
  start_time_ = now_seconds();
  while (step_ < cfg_.train.steps) log_step(step());
  progress_->finish();
  log_info("done: {} steps, {} tokens in {}; metrics in {}", step_, tokens_,
           human_duration(now_seconds() - start_time_), metrics_->path());
}

}  // namespace ft
