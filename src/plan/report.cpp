#include "plan/report.h"

#include <fmt/format.h>

#include <cmath>

#include "util/strings.h"

namespace ft::plan {

namespace {

constexpr double kGiB = 1073741824.0;

std::string count(double v) {
  const char* suffix[] = {"", " k", " M", " G", " T", " P"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.3g}{}", v, suffix[i]);
}

std::string params(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f} M", n / 1e6);
  return fmt::format("{:.0f} k", n / 1e3);
}

std::string money(double usd) {
  if (usd >= 1e6) return fmt::format("${:.2f} M", usd / 1e6);
  if (usd >= 1e3) return fmt::format("${:.1f} k", usd / 1e3);
  return fmt::format("${:.0f}", usd);
}

// What one checkpoint interval costs the run: failures, saves, goodput, days, GPU-hours (money).
std::string run_loss_line(const Job& job, const PlanResult& r, const RunLoss& l) {
  const double lost_gpu_hours = (l.failure_s + l.save_overhead_s) * static_cast<double>(r.gpus) / 3600.0;
  std::string s = fmt::format(
      "{:.2f} interruptions x {} = {} lost, {} saves x {} = {}; goodput {:.2f}%, {:.2f} days, {} GPU-hours lost",
      l.interruptions, human_duration(l.goodput.lost_s_per_interruption), human_duration(l.failure_s), count(l.saves),
      human_duration(l.goodput.save_s), human_duration(l.save_overhead_s), 100 * l.goodput.goodput, l.wall_s / 86400,
      count(lost_gpu_hours));
  if (job.price_per_gpu_hour > 0) s += fmt::format(" ({})", money(lost_gpu_hours * job.price_per_gpu_hour));
  return s;
}

// Failures and checkpoints over the run: the expected interruptions, the save time, and what the
// chosen interval and Young/Daly's optimum cost.
std::string format_checkpoints(const Job& job, const PlanResult& r) {
  const CheckpointPlan& c = r.checkpoints;
  const Resilience& res = job.resilience;
  std::string s = fmt::format(
      "failures   {:.3g} interruptions per day expected ({} GPUs x {:.2e} per GPU-day{}), each costing the "
      "restart ({}) plus half the checkpoint interval\n",
      c.at_chosen.goodput.interruptions_per_day, r.gpus, res.failures_per_gpu_day,
      std::isfinite(c.mtbf_s) ? fmt::format(": MTBF {:.2f} days", c.mtbf_s / 86400) : "",
      human_duration(res.restart_s));
  s += fmt::format("checkpoint {:.1f} GB ({:g} bytes per parameter: fp32 weights, AdamW m and v), ", c.bytes / 1e9,
                   kCheckpointBytesPerParam);
  s += c.save_measured ? fmt::format("save {} (measured)\n", human_duration(c.save_s))
                       : fmt::format(
                             "save {} predicted ({:.1f} GB / {:.1f} GB/s: {} nodes x {:g} GB/s; --ckpt-save-s to use a "
                             "measured one)\n",
                             human_duration(c.save_s), c.bytes / 1e9, c.storage_bw / 1e9,
                             (r.gpus + job.gpus_per_node - 1) / job.gpus_per_node, res.storage_write_bw_per_node / 1e9);
  s += fmt::format("  chosen   every {} steps = {}: {}\n", count(c.interval_steps), human_duration(c.interval_s),
                   run_loss_line(job, r, c.at_chosen));
  if (c.optimal_interval_s > 0)
    s += fmt::format("  optimal  Young/Daly sqrt(2 x {:.3g} s x {:.3g} s) = {} = {} steps: {}\n", c.save_s, c.mtbf_s,
                     human_duration(c.optimal_interval_s), count(c.optimal_interval_s / r.time.total),
                     run_loss_line(job, r, c.at_optimal));
  else
    s += "  optimal  no failures expected: any interval\n";
  return s;
}

}  // namespace

std::string format_job(const Job& job) {
  const ModelConfig& m = job.model;
  std::string s = fmt::format("model   {} ({} parameters; {} layers, dim {}, {} heads / {} kv, ffn {}, vocab {})\n",
                              m.preset, params(static_cast<double>(m.num_params())), m.n_layers, m.dim, m.n_heads,
                              m.n_kv_heads, m.ffn_dim, m.vocab_size);
  s += fmt::format("data    seq_len {}, global batch {} sequences = {} tokens per step{}\n", job.seq_len,
                   job.global_batch, count(static_cast<double>(job.global_batch * job.seq_len)),
                   job.tokens > 0 ? fmt::format(", {} tokens to train", count(job.tokens)) : "");
  s +=
      fmt::format("cluster {} x {} ({} nodes x {} per node): {}\n", job.num_gpus(), job.gpu.name,
                  (job.num_gpus() + job.gpus_per_node - 1) / job.gpus_per_node, job.gpus_per_node, job.gpu.description);
  return s;
}

std::string format_plan(const Job& job, const PlanResult& r) {
  std::string s = format_job(job);
  s += fmt::format("layout  {}\n", r.layout.describe());
  if (r.layout.tp > job.gpus_per_node)
    s += fmt::format("note    tp = {} spans nodes of {} GPUs: its all-reduces run over the network\n", r.layout.tp,
                     job.gpus_per_node);
  s += "\n";
  const bool small = r.memory.total() < kGiB;
  const double unit = small ? 1048576.0 : kGiB;
  s += fmt::format("memory per {}             {}\n", job.gpu.is_cpu ? "rank" : "GPU ", small ? "MiB" : "GiB");
  for (auto& [k, v] : r.memory.items()) s += fmt::format("  {:<20} {:9.2f}\n", k, v / unit);
  s += fmt::format("  {:<20} {:9.2f} of {:.1f}  {}\n\n", "total", r.memory.total() / unit, r.memory.capacity / unit,
                   r.memory.fits() ? "fits" : "DOES NOT FIT");
  const StepTime& t = r.time;
  s += fmt::format("time per step ({} micro-batches)   s\n", t.micro_batches);
  auto row = [&](const char* name, double v) {
    if (v > 0) s += fmt::format("  {:<28} {:9.4f}\n", name, v);
  };
  row("GEMMs", t.gemm);
  row("attention", t.attention);
  row("memory-bound ops", t.memory);
  row("tensor-parallel comm", t.tp_comm);
  row("context-parallel exposed", t.cp_exposed);
  row("pipeline bubble", t.bubble);
  row("pipeline sends", t.pp_comm);
  row("data-parallel comm exposed", t.dp_exposed);
  row("optimizer", t.optimizer);
  s += fmt::format("  {:<28} {:9.4f}", "step", t.total);
  s += t.dp_comm > 0 ? fmt::format("   (data-parallel comm {:.4f} s, {:.0f}% hidden)\n", t.dp_comm,
                                   100 * (1 - t.dp_exposed / t.dp_comm))
                     : "\n";
  if (t.cp_comm > 0)
    s += fmt::format("  (context-parallel comm {:.4f} s, {} attention, {:.0f}% hidden)\n", t.cp_comm,
                     cp_attention_name(r.layout.cp_attention), 100 * (1 - t.cp_exposed / t.cp_comm));
  s += fmt::format("\nthroughput {} tokens/s ({} per GPU), {:.1f} TFLOP/s per GPU, MFU {:.1f}%, HFU {:.1f}%\n",
                   count(r.tokens_per_s), count(r.tokens_per_s_per_gpu), r.tflops_per_gpu, 100 * r.mfu, 100 * r.hfu);
  if (job.tokens > 0) {
    s += fmt::format("training   {} tokens: {} steps, {} ({:.2f} days), {} GPU-hours", count(job.tokens),
                     count(r.steps), human_duration(r.wall_seconds), r.wall_seconds / 86400, count(r.gpu_hours));
    s += job.price_per_gpu_hour > 0
             ? fmt::format(", {} at ${:.2f}/GPU-hour\n", money(r.cost_usd), job.price_per_gpu_hour)
             : " (pass --price for the cost)\n";
    s += format_checkpoints(job, r);
  }
  return s;
}

std::string format_search(const Job& job, const SearchResult& sr, RankBy by) {
  std::string s = format_job(job);
  s += fmt::format("searched {} layouts, {} fit; best {} by {}:\n\n", sr.evaluated, sr.fitting, sr.best.size(),
                   by == RankBy::kTime ? "step time" : "cost per token");
  s += fmt::format("{:>2}  {:<5} {:<54} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>8} {:>9} {:>6}", "#", "GPUs", "layout",
                   "param", "grad", "optim", "activ", "other", "total", "step s", "tok/s/GPU", "MFU");
  const bool totals = job.tokens > 0;
  if (totals) s += fmt::format(" {:>8} {:>10}", "days", job.price_per_gpu_hour > 0 ? "cost" : "GPU-hours");
  s += "\n";
  int rank = 1;
  for (const auto& r : sr.best) {
    const MemoryBreakdown& m = r.memory;
    const double other = m.workspace + m.communication + m.runtime + m.fragmentation;
    s += fmt::format(
        "{:>2}  {:<5} {:<54} {:6.1f} {:6.1f} {:6.1f} {:6.1f} {:6.1f} {:7.1f} {:8.3f} {:>9} "
        "{:5.1f}%",
        rank++, r.gpus, r.layout.describe(), m.parameters / kGiB, m.gradients / kGiB, m.optimizer_state / kGiB,
        m.activations / kGiB, other / kGiB, m.total() / kGiB, r.time.total, count(r.tokens_per_s_per_gpu), 100 * r.mfu);
    if (totals)
      s += fmt::format(" {:8.2f} {:>10}", r.wall_seconds / 86400,
                       job.price_per_gpu_hour > 0 ? money(r.cost_usd) : count(r.gpu_hours));
    s += "\n";
  }
  s += "\nmemory columns: GiB per GPU (other = logits workspace, communication buffers, runtime, "
       "fragmentation)\n";
  return s;
}

}  // namespace ft::plan
