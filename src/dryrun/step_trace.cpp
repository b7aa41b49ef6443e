#include "dryrun/step_trace.h"

#include "backends/trace/trace_backend.h"
#include "dryrun/fake_comm.h"
#include "kernels/ops.h"
#include "model/activation_sizes.h"
#include "model/llama.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/micro_batches.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "tensor/device_scalars.h"
#include "tensor/memory.h"
#include "train/micro_batch_executor.h"
#include "util/error.h"

namespace ft {

plan::OpTrace trace_training_step(const Config& config) {
  Config cfg = config;
  const ParallelConfig& par = cfg.parallel;
  if (par.dp != 1 || par.tp != 1 || par.pp != 1)
    throw Error(fmt::format("the step trace is of one GPU; this config's layout is dp {} x tp {} x pp {}", par.dp,
                            par.tp, par.pp),
                "--set parallel.dp=1 --set parallel.tp=1 --set parallel.pp=1");
  trace::register_recording_gpu();
  const ExecContext ctx = make_exec_context(Device::kCUDA, 0);
  if (cfg.train.precision_is_auto()) {  // as the trainer settles it on this GPU (compute capability 9.0: bf16)
    const PrecisionChoice c = backend_of(ctx).auto_precision(ctx, 1);
    cfg.train.settle_auto_precision(c.precision, c.reason);
  }
  const TrainConfig& t = cfg.train;
  if (t.precision != Precision::kF32 && t.precision != Precision::kBF16)
    throw Error(
        fmt::format("the step trace prices fp32 and bf16 steps; train.precision is {}", precision_label(t.precision)),
        "--set train.precision=\"bf16\"");

  // What Trainer::parallelize builds for one rank (train/trainer.cpp), in its order.
  Mesh mesh = fake_mesh(par, 0);
  auto engine = make_param_engine(ctx, par, cfg.optim, ParamLayout::llama(cfg.model, 1, {}, TpShard{}), mesh.dp(),
                                  mesh.tp(), mesh.pp(), t.seed);
  Llama model(ctx, cfg.model, engine->layout(), t.precision, nullptr);
  const MicroBatching mb = split_batch(t.batch_size, t.micro_batch_size, par);
  const int64_t chunk = loss_chunk_tokens(cfg.model, t.loss_chunk_tokens, mb.size * t.seq_len, t.precision);
  MicroBatchExecutor exec(ctx, model, *engine, mb, t.seq_len, chunk);
  if (t.precision == Precision::kBF16) engine->keep_bf16_weights();  // Trainer::set_up_precision
  const int64_t losses = exec.loss_slots().size(), norms = engine->norm_slot_count();
  DeviceScalars scalars(ctx, losses + norms);
  exec.use_loss_slots(scalars.slice(0, losses));
  engine->use_norm_slots(scalars.slice(losses, norms));

  // Token 0 everywhere: any valid batch moves the same bytes.
  Batch batch{.batch = t.batch_size, .seq_len = t.seq_len, .tokens = {}};
  batch.tokens.assign(static_cast<size_t>(t.batch_size * (t.seq_len + 1)), 0);
  const float grad_scale = 1.0f / static_cast<float>(t.batch_size * t.seq_len);
  // Trainer::step's device work: forward and backward, the norm, the one read-back, the update.
  auto step = [&] {
    exec.train_queued(batch, grad_scale);
    engine->queue_gradient_norm();
    const std::vector<double> v = scalars.read_back();
    double norm2 = 0;
    for (size_t i = static_cast<size_t>(losses); i < v.size(); ++i) norm2 += v[i];
    engine->reduce_gradient_norm(norm2);
    engine->optimizer_step(cfg.optim.lr, 1.0f);
  };
  step();  // warm-up: buffers made on first use are not part of the steady state
  trace::start_recording();
  step();
  plan::OpTrace out;
  out.ops = trace::stop_recording();
  out.device = trace::kRecordingGpuName;
  out.tokens = t.batch_size * t.seq_len;
  out.precision = t.precision;
  out.model_flops = cfg.model.train_flops_per_token(t.seq_len) * static_cast<double>(out.tokens);
  out.peak_device_bytes = static_cast<double>(MemoryTracker::global().total_peak(Device::kCUDA));
  return out;
}

}  // namespace ft
