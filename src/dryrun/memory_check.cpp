#include "dryrun/memory_check.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "config/plan_job.h"
#include "parallel/micro_batches.h"
#include "plan/catalog.h"
#include "plan/memory_estimate.h"
#include "tensor/device_runtime.h"
#include "util/error.h"
#include "util/memory_limit.h"
#include "util/strings.h"

namespace ft {
namespace {

struct Alternative {
  std::string sets;  // "--set train.micro_batch_size=2"
  double total = 0;  // bytes on this machine (or per machine across several)
  std::string where;
};

// Bytes of local_ranks ranks: all of each rank's footprint, or on a GPU its device part only.
std::optional<double> need_or_none(const Config& c, int local_ranks, bool device) {
  try {
    c.validate();
    const MemoryNeed need = memory_need(c);
    return (device ? need.device() : need.per_rank) * local_ranks;
  } catch (const Error&) {
    return std::nullopt;  // the variant is no valid run (a micro-batch that does not divide, ...)
  }
}

// The cheapest change that fits in `limit`: on this machine a smaller micro-batch, then selective
// recompute (element-wise work only), then full recompute (each with the largest micro-batch that
// fits), then a higher ZeRO stage; else ZeRO-3 with one rank on each of more machines (GPUs
// when `device`: then only the device footprint counts).
std::optional<Alternative> what_fits(const Config& cfg, int local_ranks, double limit, bool device = false) {
  const char* here = device ? "on this GPU" : "on this machine";
  const MicroBatching mb = split_batch(cfg.train.batch_size, cfg.train.micro_batch_size, cfg.parallel);
  std::vector<Recompute> modes = {cfg.model.recompute};
  if (cfg.model.recompute == Recompute::kNone) modes.push_back(Recompute::kSelective);
  if (cfg.model.recompute != Recompute::kFull) modes.push_back(Recompute::kFull);
  for (Recompute mode : modes) {
    const bool recompute = mode != cfg.model.recompute;
    for (int64_t m = mb.size; m >= 1; --m) {
      if (mb.local_batch % m != 0 || (m == mb.size && !recompute)) continue;
      Config c = cfg;
      c.model.recompute = mode;
      c.train.micro_batch_size = m;
      c.parallel.micro_batches = 0;
      if (auto need = need_or_none(c, local_ranks, device); need && *need <= limit) {
        std::string sets = recompute ? fmt::format("--set model.recompute=\"{}\"", recompute_name(mode)) : "";
        if (m != mb.size) sets += fmt::format("{}--set train.micro_batch_size={}", sets.empty() ? "" : " ", m);
        return Alternative{sets, *need, here};
      }
    }
  }
  // The same ranks with their state sharded further (ZeRO), on this machine.
  for (int64_t zero = cfg.parallel.zero + 1; zero <= 3 && cfg.parallel.dp > 1; ++zero) {
    Config c = cfg;
    c.parallel.zero = zero;
    if (auto need = need_or_none(c, local_ranks, device); need && *need <= limit)
      return Alternative{fmt::format("--set parallel.zero={}", zero), *need, here};
  }
  // One rank per machine, the state sharded over them (the activations of one micro-batch each).
  for (int64_t dp = 2; dp <= 1024; dp *= 2) {
    if (cfg.train.batch_size % dp != 0) break;
    for (bool recompute : {false, true}) {
      Config c = cfg;
      c.parallel.dp = dp * cfg.parallel.dp;
      c.parallel.zero = 3;
      c.train.micro_batch_size = 1;
      c.parallel.micro_batches = 0;
      if (recompute) c.model.recompute = Recompute::kFull;
      if (auto need = need_or_none(c, 1, device); need && *need <= limit) {
        return Alternative{fmt::format("--set parallel.dp={} --set parallel.zero=3 --set train.micro_batch_size=1{}",
                                       c.parallel.dp, recompute ? " --set model.recompute=\"full\"" : ""),
                           *need,
                           fmt::format("per rank, one rank on each of {} {} like this one", c.parallel.world_size(),
                                       device ? "GPUs" : "machines")};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

MemoryNeed memory_need(const Config& cfg) {
  const plan::Job job = plan::job_for_run(cfg, plan::find_gpu("cpu"));
  const plan::Layout layout = plan::layout_for_run(cfg);
  MemoryNeed out;
  for (int64_t stage = 0; stage < cfg.parallel.pp; ++stage) {
    const plan::MemoryBreakdown m = plan::estimate_stage_memory(job, layout, stage);
    // Checkpoint staging (ckpt/checkpointer.h): weights and both moments of the rank's dp piece.
    const double shard_optimizer =
        cfg.parallel.zero >= 1 ? m.optimizer_state : m.optimizer_state / static_cast<double>(cfg.parallel.dp);
    const double staging = cfg.ckpt.interval > 0 ? 1.5 * shard_optimizer : 0;
    if (m.total() + staging > out.per_rank) {
      out.per_rank = m.total() + staging;
      out.model_state = m.parameters + m.gradients + m.optimizer_state;
      out.activations = m.activations;
      out.staging = staging;
    }
  }
  return out;
}

namespace {

std::string gib(double b) {
  return human_bytes(b);
}

// A CUDA run: each visible GPU's free memory (DeviceRuntime::memory_info) against the device
// footprint of the ranks that will share it (rank r trains on GPU r % count).
void check_device_memory_fits(const Config& cfg, int ranks) {
  const int count = device_count(Device::kCUDA);
  if (count <= 0) return;  // the trainer refuses the device with the driver's reason
  const MemoryNeed need = memory_need(cfg);
  for (int d = 0; d < std::min(count, ranks); ++d) {
    const std::optional<DeviceMemoryInfo> info = device_memory_info(Device::kCUDA, d);
    if (!info) continue;  // the driver cannot say: nothing to compare with
    const int sharing = (ranks - d + count - 1) / count;
    const double total = need.device() * sharing;
    if (total <= static_cast<double>(info->free)) continue;
    const std::optional<Alternative> alt = what_fits(cfg, sharing, static_cast<double>(info->free), true);
    throw Error(
        fmt::format("cuda:{} ({}): the run needs {} per rank{} (model state {}, activations {}), {} free of {}; {}", d,
                    info->name, gib(need.device()),
                    sharing > 1 ? fmt::format(" x {} ranks on this GPU = {}", sharing, gib(total)) : std::string(),
                    gib(need.model_state), gib(need.activations), gib(static_cast<double>(info->free)),
                    gib(static_cast<double>(info->total)),
                    alt ? fmt::format("it would fit with {} ({} {})", alt->sets, gib(alt->total), alt->where)
                        : std::string("no micro-batch, recompute or ZeRO-3 layout makes it fit")),
        "`fluxtrain train --dry-run` shows the accounting; free the GPU (nvidia-smi lists what holds it), or set "
        "train.memory_check = false to start anyway (the run may fail with out of device memory)");
  }
}

// Host RAM: all of each rank's footprint on the CPU; on a GPU run only its host side, the pinned
// checkpoint staging buffers.
void check_host_memory_fits(const Config& cfg, int ranks, bool gpu_run, const std::optional<MemoryLimit>& host_limit) {
  const MemoryLimit limit = host_limit ? *host_limit : available_memory();
  if (limit.bytes <= 0) return;  // nothing known to compare with
  const MemoryNeed need = memory_need(cfg);
  const double per_rank = gpu_run ? need.staging : need.per_rank;
  const double total = per_rank * ranks;
  if (total <= limit.bytes) return;
  const std::string times =
      ranks > 1 ? fmt::format(" x {} ranks on this machine = {}", ranks, gib(total)) : std::string();
  if (gpu_run)
    throw Error(fmt::format("{} needs about {} of pinned host memory per rank{} (checkpoint staging), more than the {} "
                            "this process may use ({})",
                            cfg.model.preset, gib(per_rank), times, gib(limit.bytes), limit.source),
                "raise the limit, checkpoint less state per rank (a higher parallel.zero), or set "
                "train.memory_check = false to start anyway");
  const std::optional<Alternative> alt = what_fits(cfg, ranks, limit.bytes);
  throw Error(
      fmt::format("{} needs about {} per rank{} (model state {}, activations {}{}), more than the {} this process may "
                  "use ({}); {}",
                  cfg.model.preset, gib(need.per_rank), times, gib(need.model_state), gib(need.activations),
                  need.staging > 0 ? fmt::format(", checkpoint staging {}", gib(need.staging)) : "", gib(limit.bytes),
                  limit.source,
                  alt ? fmt::format("it would fit with {} ({} {})", alt->sets, gib(alt->total), alt->where)
                      : std::string("no micro-batch, recompute or ZeRO-3 layout makes it fit")),
      "`fluxtrain train --dry-run --gpu cpu` shows the accounting; raise the limit, or set train.memory_check = false "
      "to start anyway (the OOM killer may end the run)");
}

}  // namespace

void check_memory_fits(const Config& cfg, int local_ranks, const std::optional<MemoryLimit>& host_limit) {
  if (!cfg.train.memory_check) return;
  const int ranks = std::max(local_ranks, 1);
  const bool gpu_run = cfg.train.compute_device() == Device::kCUDA;
  if (gpu_run) check_device_memory_fits(cfg, ranks);
  check_host_memory_fits(cfg, ranks, gpu_run, host_limit);
}

}  // namespace ft
