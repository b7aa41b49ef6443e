#include "dryrun/step_trace.h"

#include <algorithm>
#include <optional>

#include "backends/timing/timing_backend.h"
#include "backends/trace/trace_backend.h"
#include "dryrun/cp_op_trace.h"
#include "dryrun/fake_comm.h"
#include "fault/training_faults.h"
#include "kernels/ops.h"
#include "model/activation_sizes.h"
#include "model/llama.h"
#include "parallel/context_parallel/ring_attention.h"
#include "parallel/context_parallel/ulysses_attention.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "parallel/tensor_parallel/tensor_parallel.h"
#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "tensor/device_scalars.h"
#include "tensor/memory.h"
#include "train/micro_batch_executor.h"
#include "train/pipeline_executor.h"
#include "train/step_sums.h"
#include "train/stop_request.h"
#include "util/error.h"

namespace ft {

plan::OpTrace trace_training_step(const Config& config, const StepTraceOptions& o) {
  Config cfg = config;
  const ParallelConfig& par = cfg.parallel;
  Mesh::validate(par, par.world_size());
  if (o.world_rank < 0 || o.world_rank >= par.world_size())
    throw Error(fmt::format("rank {} is not in the layout's {} rank(s)", o.world_rank, par.world_size()),
                "trace a rank from 0 to dp x cp x tp x pp - 1");
  if (o.repeats < 1) throw Error(fmt::format("repeats = {} must be at least 1", o.repeats));
  const Device device = o.timed_on_host ? Device::kCPU : Device::kCUDA;
  if (o.timed_on_host)
    timing::register_timed_cpu();
  else
    trace::register_recording_gpu();
  const ExecContext ctx = make_exec_context(device, 0);
  if (cfg.train.precision_is_auto()) {  // as the trainer settles it on this GPU (compute capability 9.0: bf16)
    const PrecisionChoice c = backend_of(ctx).auto_precision(ctx, 1);
    cfg.train.settle_auto_precision(c.precision, c.reason);
  }
  const TrainConfig& t = cfg.train;
  if (o.ops && t.precision != Precision::kF32 && t.precision != Precision::kBF16)
    throw Error(
        fmt::format("the step trace prices fp32 and bf16 steps; train.precision is {}", precision_label(t.precision)),
        "--set train.precision=\"bf16\"");

  // What Trainer::parallelize builds for this rank (train/trainer.cpp), in its order: the mesh
  // (fake groups of the layout's sizes), tensor parallelism, the pipeline partition, the ZeRO
  // engine, the model, the executor.
  // Timed: what a fake group receives reads as zeros (the ring's and the all-to-all's blocks from
  // the other cp ranks), so the timed ops compute on finite numbers.
  Mesh mesh = fake_mesh(par, o.world_rank, /*zero_received=*/o.timed_on_host);
  const MicroBatching mb = split_batch(t.batch_size, t.micro_batch_size, par);
  const bool sp = par.sequence_parallel && par.tp > 1;
  const TpShard shard{.rank = mesh.coord().tp, .size = par.tp, .sequence_parallel = sp};
  TpGroup tp(ctx, mesh.tp(), sp);
  std::optional<PipelinePlan> plan;
  std::vector<int> units;  // empty: every unit
  if (par.pp > 1) {
    plan = PipelinePlan::make(cfg.model, t.seq_len, par, mb.count);
    units = plan->partition.stage_units(static_cast<int>(mesh.coord().pp));
  }
  auto engine = make_param_engine(ctx, par, cfg.optim, ParamLayout::llama(cfg.model, par.dp * par.cp, units, shard),
                                  mesh.dp_cp(), mesh.tp(), mesh.pp(), t.seed);
  // Context parallelism: the schedule's own code over the fake cp group. Traced: transfers only
  // (ContextSplit::dry): its sends are the step's; its attention (the CPU's in a run) is recorded
  // beside it as the GPU would compute it (dryrun/cp_op_trace.h) when the ops are traced. Timed on
  // the host: the schedule runs for real, its block attention ops timed like every other op, on
  // the blocks the fake group "receives" (zeros), masked by their true positions.
  const bool cp_dry = !o.timed_on_host;
  std::unique_ptr<ContextSplit> cp;
  if (par.cp > 1 && par.cp_attention == CpAttention::kRing)
    cp = std::make_unique<RingAttention>(ctx, mesh.cp(), t.seq_len, cp_dry);
  if (par.cp > 1 && par.cp_attention == CpAttention::kAllToAll)
    cp = std::make_unique<UlyssesAttention>(ctx, mesh.cp(), t.seq_len, cp_dry);
  std::unique_ptr<CpOpRecorder> cp_ops;
  if (cp && o.ops && cp_dry) cp_ops = std::make_unique<CpOpRecorder>(*cp, par.cp_attention);
  ContextSplit* split = cp_ops ? cp_ops.get() : cp.get();
  Llama model(ctx, cfg.model, engine->layout(), t.precision, par.tp > 1 ? &tp : nullptr, split);
  const int64_t chunk = loss_chunk_tokens(cfg.model, t.loss_chunk_tokens, mb.size * t.seq_len / par.cp, t.precision);
  std::unique_ptr<StepExecutor> exec;
  if (plan)
    exec = std::make_unique<PipelineExecutor>(ctx, std::move(*plan), mesh, model, *engine, mb, t.seq_len, chunk);
  else
    exec = std::make_unique<MicroBatchExecutor>(ctx, model, *engine, mb, t.seq_len, chunk);
  if (t.precision == Precision::kBF16) engine->keep_bf16_weights();  // Trainer::set_up_precision
  const int64_t losses = exec->loss_slots().size(), norms = engine->norm_slot_count();
  DeviceScalars scalars(ctx, losses + norms);
  exec->use_loss_slots(scalars.slice(0, losses));
  engine->use_norm_slots(scalars.slice(losses, norms));
  StopRequest stop(0);

  // Token 0 everywhere: any valid batch moves the same bytes. The rank's share of the batch.
  Batch batch{.batch = mb.local_batch, .seq_len = t.seq_len, .tokens = {}};
  batch.tokens.assign(static_cast<size_t>(mb.local_batch * (t.seq_len + 1)), 0);
  const float grad_scale = 1.0f / static_cast<float>(t.batch_size * t.seq_len);
  // Trainer::step's device work and collectives: forward and backward, the norm, the one
  // read-back, the sums over the ranks, the guards' agreement, the update; then the step
  // boundary's stop agreement (Trainer::train's loop).
  auto step = [&] {
    exec->train_queued(batch, grad_scale);
    engine->queue_gradient_norm();
    const std::vector<double> v = scalars.read_back();
    double loss = 0, norm2 = 0;
    for (size_t i = 0; i < v.size(); ++i) (i < static_cast<size_t>(losses) ? loss : norm2) += v[i];
    const auto sums = sum_step_over_ranks(*engine, mesh, loss, norm2, 0.0);
    TrainingFaults::rank0_values(mesh.world(), sums[0], sums[1]);
    engine->optimizer_step(cfg.optim.lr, 1.0f);
    (void)stop.agreed(mesh.world());
  };
  step();  // warm-up: buffers made on first use are not part of the steady state
  plan::OpTrace out;
  log_collectives(mesh, &out.collectives);
  if (o.timed_on_host) {
    std::vector<double> steps, op_sums;  // each timed step's own time and its ops' seconds summed
    for (int i = 0; i < o.repeats; ++i) {
      if (i == 1) log_collectives(mesh, nullptr);  // one step's collectives
      timing::start_timing();
      const timing::StepClock clock;
      step();
      steps.push_back(clock.seconds());
      std::vector<plan::OpRecord> ops = timing::stop_timing();
      double sum = 0;
      for (const plan::OpRecord& r : ops) sum += r.seconds;
      op_sums.push_back(sum);
      if (i == 0) {
        out.ops = std::move(ops);
      } else {
        FT_CHECK(ops.size() == out.ops.size(), "a timed step made another number of op calls than the first");
        for (size_t k = 0; k < ops.size(); ++k) out.ops[k].seconds = std::min(out.ops[k].seconds, ops[k].seconds);
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    };
    out.step_seconds = median(steps);
    out.step_ops_seconds = median(op_sums);
  } else {
    if (o.ops) trace::start_recording();
    if (cp_ops) cp_ops->take();  // the warm-up's
    step();
    if (o.ops) out.ops = trace::stop_recording();
    if (cp_ops)
      for (plan::OpRecord& r : cp_ops->take()) out.ops.push_back(std::move(r));
  }
  log_collectives(mesh, nullptr);
  // What the rank sends on its cp group, as the dry run replays the same calls (dryrun/dry_run.cpp).
  for (const plan::CollRecord& c : out.collectives)
    if (c.group == "cp" && c.op != plan::CollOp::kRecv)
      out.cp_bytes += static_cast<double>(
          FakeCommunicator::bytes_sent(c, static_cast<int>(mesh.coord().cp), static_cast<int>(par.cp)));
  out.device = o.timed_on_host ? "this CPU" : trace::kRecordingGpuName;
  out.tokens = mb.local_batch * t.seq_len / par.cp;  // the rank's share of the batch
  out.precision = t.precision;
  out.model_flops = cfg.model.train_flops_per_token(t.seq_len) * static_cast<double>(out.tokens);
  out.peak_device_bytes = static_cast<double>(MemoryTracker::global().total_peak(device));
  return out;
}

}  // namespace ft
