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
    r.goodput = expected_goodput(r.gpus, job.resilience);
    r.wall_seconds_with_failures = r.wall_seconds / r.goodput.goodput;
    r.gpu_hours = r.wall_seconds * gpus / 3600.0;
    r.cost_usd = r.gpu_hours * job.price_per_gpu_hour;
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

nlohmann::json to_json(const PlanResult& r) {
  const Layout& l = r.layout;
  nlohmann::json mem = nlohmann::json::object();
  for (auto& [k, v] : r.memory.items()) mem[k + "_gb"] = v / 1e9;
  mem["total_gb"] = r.memory.total() / 1e9;
  mem["capacity_gb"] = r.memory.capacity / 1e9;
  mem["fits"] = r.memory.fits();
  const StepTime& t = r.time;
  return {
      {"layout",
       {{"dp", l.dp},
        {"tp", l.tp},
        {"pp", l.pp},
        {"cp", l.cp},
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
  };
}

}  // namespace ft::plan
