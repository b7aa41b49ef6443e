#include "plan/plan.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace ft::plan {

PlanResult evaluate(const Job& job, const Layout& l) {
  PlanResult r;
  r.layout = l;
  r.gpus = job.num_gpus();
  r.memory = estimate_memory(job, l);
  r.time = estimate_step_time(job, l);
  const double gpus = static_cast<double>(job.num_gpus());
  r.tokens_per_step = static_cast<double>(job.global_batch) * static_cast<double>(job.seq_len);
  r.tokens_per_s = r.tokens_per_step / r.time.total;
  r.tokens_per_s_per_gpu = r.tokens_per_s / gpus;
  r.model_flops_per_token = job.model.train_flops_per_token(job.seq_len);
  r.hardware_flops_per_token = hardware_flops_per_token(job, l);
  const double peak = l.gemm_peak(job.gpu);
  r.tflops_per_gpu = r.tokens_per_s_per_gpu * r.model_flops_per_token / 1e12;
  r.mfu = r.tokens_per_s_per_gpu * r.model_flops_per_token / peak;
  r.hfu = r.tokens_per_s_per_gpu * r.hardware_flops_per_token / peak;
  if (job.tokens > 0) {
    r.steps = std::ceil(job.tokens / r.tokens_per_step);
    r.wall_seconds = r.steps * r.time.total;
    const int64_t nodes = r.gpus / job.gpus_per_node + (r.gpus % job.gpus_per_node != 0);  // no overflow
    double params = static_cast<double>(job.model.num_params());  // the checkpoint holds every expert
    if (job.moe.enabled())
      params += static_cast<double>(job.model.n_layers) * moe_extra_params_per_layer(job.moe, job.model.dim, 1, 1);
    r.checkpoints = plan_checkpoints(params, nodes, r.gpus, r.time.total, r.wall_seconds, job.resilience);
    r.goodput = r.checkpoints.at_chosen.goodput;
    r.wall_seconds_with_failures = r.checkpoints.at_chosen.wall_s;
    r.gpu_hours = r.wall_seconds * gpus / 3600.0;
    r.cost_usd = r.gpu_hours * job.price_per_gpu_hour;
    r.price_per_gpu_hour = job.price_per_gpu_hour;
  }
  return r;
}

nlohmann::json to_json(const Job& job) {
  const ModelConfig& m = job.model;
  return {{"model",
           {{"preset", m.preset},
            {"dim", m.dim},
            {"n_layers", m.n_layers},
            {"n_heads", m.n_heads},
            {"n_kv_heads", m.n_kv_heads},
            {"ffn_dim", m.ffn_dim},
            {"vocab_size", m.vocab_size},
            {"params", m.num_params()}}},
          {"seq_len", job.seq_len},
          {"global_batch", job.global_batch},
          {"tokens", job.tokens},
          {"gpu", job.gpu.name},
          {"gpus", job.num_gpus()},
          {"gpus_per_node", job.gpus_per_node},
          {"price_per_gpu_hour", job.price_per_gpu_hour}};
}

namespace {

nlohmann::json to_json(const RunLoss& l, int64_t gpus, double price) {
  const double lost_gpu_hours = (l.failure_s + l.save_overhead_s) * static_cast<double>(gpus) / 3600.0;
  return {{"interval_s", l.interval_s},
          {"interruptions", l.interruptions},
          {"lost_s_per_interruption", l.goodput.lost_s_per_interruption},
          {"failure_s", l.failure_s},
          {"saves", l.saves},
          {"save_overhead_s", l.save_overhead_s},
          {"goodput", l.goodput.goodput},
          {"wall_days", l.wall_s / 86400.0},
          {"lost_gpu_hours", lost_gpu_hours},
          {"lost_usd", lost_gpu_hours * price}};
}

nlohmann::json checkpoints_json(const PlanResult& r) {
  const CheckpointPlan& c = r.checkpoints;
  nlohmann::json j = {{"bytes", c.bytes},
                      {"storage_write_bw", c.storage_bw},
                      {"save_s", c.save_s},
                      {"save_measured", c.save_measured},
                      {"interval_s", c.interval_s},
                      {"interval_steps", c.interval_steps},
                      {"mtbf_s", std::isfinite(c.mtbf_s) ? nlohmann::json(c.mtbf_s) : nlohmann::json(nullptr)},
                      {"optimal_interval_s", c.optimal_interval_s},
                      {"at_chosen", to_json(c.at_chosen, r.gpus, r.price_per_gpu_hour)}};
  if (c.optimal_interval_s > 0) {
    j["optimal_interval_steps"] = c.optimal_interval_s / r.time.total;
    j["at_optimal"] = to_json(c.at_optimal, r.gpus, r.price_per_gpu_hour);
  }
  return j;
}

}  // namespace

nlohmann::json to_json(const PlanResult& r) {
  const Layout& l = r.layout;
  nlohmann::json mem = nlohmann::json::object();
  for (auto& [k, v] : r.memory.items()) mem[k + "_gb"] = v / 1e9;
  mem["total_gb"] = r.memory.total() / 1e9;
  mem["capacity_gb"] = r.memory.capacity / 1e9;
  mem["fits"] = r.memory.fits();
  const StepTime& t = r.time;
  nlohmann::json out = {
      {"layout",
       {{"dp", l.dp},
        {"tp", l.tp},
        {"pp", l.pp},
        {"cp", l.cp},
        {"cp_attention", cp_attention_name(l.cp_attention)},
        {"vp", l.vp},
        {"micro_batch", l.micro_batch},
        {"zero", l.zero},
        {"recompute", act_recompute_name(l.recompute)},
        {"sequence_parallel", l.sequence_parallel && l.tp > 1},
        {"precision", precision_label(l.precision)},
        {"ep", l.ep},
        {"fp8_recipe", l.precision == Precision::kF8 ? fp8_recipe_name(l.fp8_recipe) : "none"},
        {"flash_attention", l.flash_attention},
        {"wire_bytes",
         {{"activations", l.wire.activations},
          {"gemm_inputs", l.wire.gemm_inputs},
          {"attention", l.wire.attention},
          {"weights", l.wire.weights},
          {"grads", l.wire.grads}}}}},
      {"memory", mem},
      {"step",
       {{"total_s", t.total},
        {"micro_batches", t.micro_batches},
        {"gemm_s", t.gemm},
        {"attention_s", t.attention},
        {"memory_bound_s", t.memory},
        {"tp_comm_s", t.tp_comm},
        {"pp_comm_s", t.pp_comm},
        {"bubble_s", t.bubble},
        {"dp_comm_s", t.dp_comm},
        {"dp_exposed_s", t.dp_exposed},
        {"optimizer_s", t.optimizer},
        {"ep_comm_s", t.ep_comm}}},
      {"gpus", r.gpus},
      {"step_time_s", t.total},
      {"tokens_per_s", r.tokens_per_s},
      {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
      {"tflops_per_gpu", r.tflops_per_gpu},
      {"mfu", r.mfu},
      {"hfu", r.hfu},
      {"memory_per_gpu_gb", r.memory.total() / 1e9},
      {"steps", r.steps},
      {"wall_days", r.wall_seconds / 86400.0},
      {"interruptions_per_day", r.goodput.interruptions_per_day},
      {"goodput", r.goodput.goodput},
      {"wall_days_with_failures", r.wall_seconds_with_failures / 86400.0},
      {"gpu_hours", r.gpu_hours},
      {"cost_usd", r.cost_usd},
      {"checkpoints", r.steps > 0 ? checkpoints_json(r) : nlohmann::json(nullptr)},
  };
  if (l.sync_each_layer) out["layout"]["sync_each_layer"] = true;  // published runs only (records)
  return out;
}

}  // namespace ft::plan
