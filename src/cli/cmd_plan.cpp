// fluxtrain plan — memory, time and cost of a training run on a GPU cluster; layout search;
// claim checking; prediction of published runs; calibration from our own runs.
//
//   fluxtrain plan --model llama2-7b --gpu a100-80gb --nodes 16 --seq-len 4096 --global-batch 1024
//                  --tokens 2T --price 2.0 --search
//   fluxtrain plan --config configs/tiny.toml --gpu cpu
//   fluxtrain plan --check configs/claims/case-study.json [--json]
//   fluxtrain plan --case configs/claims/case-study.json --price 2 [--ckpt-save-s 20] [--json]
//   fluxtrain plan --from-record run.json --json
//   fluxtrain plan --calibrate runs/t1 [--out cpu.toml]
//   fluxtrain plan --config cfg.toml --gpu cpu --link-gbits 1 --link-latency-us 50 --compute-s 1.7
//   fluxtrain plan --step-trace configs/llama-20m.toml --set train.precision="bf16" [--json]
//   fluxtrain plan --profile --config configs/llama-20m.toml --nproc 2 --out cpu.json
//   fluxtrain plan --profile-file cpu.json --config configs/llama-20m.toml --set parallel.dp=2 [--json]
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command.h"
#include "cli/plan_profile.h"
#include "config/config.h"
#include "config/plan_job.h"
#include "dryrun/step_trace.h"
#include "plan/report.h"
#include "plan/research/calibrate.h"
#include "plan/research/case_study.h"
#include "plan/research/claims.h"
#include "plan/research/cross_validate.h"
#include "plan/research/fit.h"
#include "plan/research/links.h"
#include "plan/research/record.h"
#include "plan/roofline.h"
#include "plan/search.h"
#include "plan/traffic.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/output_path.h"
#include "util/strings.h"

namespace {

using namespace ft::plan;
using nlohmann::json;

// "4.2T", "300B", "1.5e12", "2M" -> count.
double parse_count(const std::string& text, const char* flag) {
  std::string t(ft::trim(text));
  double mult = 1;
  if (!t.empty()) {
    switch (std::toupper(static_cast<unsigned char>(t.back()))) {
      case 'K':
        mult = 1e3;
        break;
      case 'M':
        mult = 1e6;
        break;
      case 'B':
      case 'G':
        mult = 1e9;
        break;
      case 'T':
        mult = 1e12;
        break;
      default:
        break;
    }
    if (mult != 1) t.pop_back();
  }
  try {
    size_t used = 0;
    double v = std::stod(t, &used);
    if (used == t.size() && v >= 0 && std::isfinite(v * mult)) return v * mult;
  } catch (...) {
  }
  throw ft::Error(fmt::format("{} {}: expected a count such as 2e12, 300B or 4.2T", flag, text),
                  "a finite number >= 0, with an optional K, M, B (or G) or T suffix");
}

json read_json_file(const std::string& path) {
  try {
    return json::parse(ft::read_file(path));
  } catch (const json::exception& e) {
    throw ft::Error(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
}

void print_json(const json& j) {
  std::printf("%s\n", j.dump(2).c_str());
}

ft::ActRecompute parse_recompute(const std::string& s) {
  if (s == "none") return ft::ActRecompute::kNone;
  if (s == "selective") return ft::ActRecompute::kSelective;
  if (s == "full") return ft::ActRecompute::kFull;
  throw ft::Error(fmt::format("--recompute {}: unknown mode", s), "use none, selective or full");
}

// What `fluxtrain plan` was asked on its command line.
struct PlanArgs {
  std::string config, model, gpu, gpu_file, tokens_text, check_file, record_file, calibrate_dir, fit_file,
      validate_file, cross_validate_file, rank = "time", recompute, precision, fp8_recipe, out_file, step_trace,
                                          case_file, cp_attention;
  std::vector<std::string> sets, extra_runs;
  int64_t nodes = 0, gpus_per_node = 0, gpus = 0, seq_len = 0, global_batch = 0;
  std::optional<int64_t> dp, tp, pp, cp, vp, micro_batch;
  std::optional<int> zero;
  double price = 0;
  bool search = false, json_out = false, list = false, vary_nodes = false, no_sp = false, no_flash = false;
  size_t top = 10;
  int iterations = 150;
  int folds = 5;
  double link_gbits = 0, link_latency_us = 0, compute_s = 0;
  double failures_per_gpu_day = kFailuresPerGpuDay;
  std::optional<double> restart_min, ckpt_interval_min, storage_gbs;  // unset: 10, 60, 2 (or the case's)
  std::optional<int64_t> ckpt_every_steps;
  double ckpt_save_s = 0;
  bool profile = false;
  ft::cli::ProfileArgs prof;
};

void add_plan_options(CLI::App& app, PlanArgs& a) {
  app.add_option("--config", a.config, "the trainer's TOML file (model, seq_len, batch, layout)");
  app.add_option("--set", a.sets, "override KEY=VALUE of the config (repeatable)");
  app.add_option("--model", a.model, "model preset (tiny, llama-125m, llama2-7b, llama2-13b, llama2-70b, ...)");
  app.add_option("--gpu", a.gpu, "GPU type: a100-40gb, a100-80gb, h100-sxm, h200, b200, cpu (--list-gpus)");
  app.add_option("--gpu-file", a.gpu_file, "TOML with [gpu] overrides (another GPU, calibrated efficiency)");
  app.add_option("--nodes", a.nodes, "number of nodes")->check(ft::cli::at_least(1));
  app.add_option("--gpus-per-node", a.gpus_per_node, "GPUs per node (default: the GPU's usual 8)")
      ->check(ft::cli::at_least(1));
  app.add_option("--gpus", a.gpus, "total GPUs (instead of --nodes)")->check(ft::cli::at_least(1));
  app.add_option("--seq-len", a.seq_len, "tokens per sequence")->check(ft::cli::at_least(1));
  app.add_option("--global-batch", a.global_batch, "sequences per optimizer step")->check(ft::cli::at_least(1));
  app.add_option("--tokens", a.tokens_text, "tokens to train: 2e12, 300B, 4.2T");
  app.add_option("--price", a.price, "USD per GPU-hour");
  app.add_option("--dp", a.dp, "data-parallel degree")->check(ft::cli::at_least(1));
  app.add_option("--tp", a.tp, "tensor-parallel degree")->check(ft::cli::at_least(1));
  app.add_option("--pp", a.pp, "pipeline stages")->check(ft::cli::at_least(1));
  app.add_option("--cp", a.cp, "context-parallel degree")->check(ft::cli::at_least(1));
  app.add_option("--cp-attention", a.cp_attention,
                 "context-parallel attention schedule: ring or all_to_all (parallel.cp_attention)");
  app.add_option("--vp", a.vp, "virtual stages per rank (interleaved 1F1B)")->check(ft::cli::at_least(1));
  app.add_option("--micro-batch", a.micro_batch, "sequences per micro-batch")->check(ft::cli::at_least(1));
  app.add_option("--zero", a.zero, "ZeRO stage 0-3")->check(CLI::Range(0, 3));
  app.add_option("--recompute", a.recompute, "activation recompute: none, selective, full");
  app.add_option("--precision", a.precision, "bf16 (default), fp16, fp8, fp32");
  app.add_option("--fp8-recipe", a.fp8_recipe,
                 "with --precision fp8: delayed (default), current, mxfp8 or nvfp4 (block-scaled, Blackwell)");
  app.add_option("--failures-per-gpu-day", a.failures_per_gpu_day,
                 "interruptions per GPU per day (default: Llama 3's 419 in 54 days on 16,384 GPUs)");
  app.add_option("--restart-min", a.restart_min,
                 "minutes an interruption costs before training resumes (default 10; a case's recovery_s)");
  app.add_option("--ckpt-interval-min", a.ckpt_interval_min, "minutes between checkpoints (default 60)");
  app.add_option("--ckpt-every-steps", a.ckpt_every_steps, "checkpoint every N optimizer steps (instead of minutes)")
      ->check(ft::cli::at_least(1));
  app.add_option("--ckpt-save-s", a.ckpt_save_s,
                 "measured seconds one checkpoint costs the run (checkpoints.jsonl: sync_s, or stall_s when "
                 "asynchronous); default: predicted from the checkpoint's bytes and --storage-gbs");
  app.add_option("--storage-gbs", a.storage_gbs,
                 "write bandwidth of the checkpoint storage per node, GB/s (default 2: an assumption)");
  app.add_option("--case", a.case_file,
                 "a customer's case (claims JSON, configs/claims/case-study.json): plan its job, print its claims "
                 "beside the plan and why the impossible ones are");
  app.add_flag("--no-sp", a.no_sp, "no sequence parallelism with tp > 1");
  app.add_flag("--no-flash", a.no_flash, "attention without a fused (flash) kernel");
  app.add_flag("--search", a.search, "rank every layout that fits");
  app.add_option("--rank", a.rank, "search order: time or cost");
  app.add_option("--top", a.top, "layouts to print with --search")->check(ft::cli::at_least(1));
  app.add_flag("--vary-nodes", a.vary_nodes, "with --search, also try fewer nodes");
  app.add_option("--check", a.check_file, "check the claimed figures in a JSON record");
  app.add_option("--from-record", a.record_file, "predict a published run (one JSON record, or an array)");
  app.add_option("--calibrate", a.calibrate_dir, "fit the efficiency from a run directory's metrics.jsonl");
  app.add_option("--also", a.extra_runs, "with --calibrate: more run directories to fit together");
  app.add_option("--out", a.out_file,
                 "with --calibrate: write the fitted [gpu] TOML here; with --profile: the profile");
  app.add_option("--validate", a.validate_file, "print predicted vs published for a file of records");
  app.add_option("--fit-records", a.fit_file, "fit the catalog's efficiencies to a file of records");
  app.add_option("--iterations", a.iterations, "with --fit-records, --cross-validate: Nelder-Mead iterations")
      ->check(ft::cli::at_least(1));
  app.add_option("--cross-validate", a.cross_validate_file,
                 "error by class of run (dense, FP8, MoE, > 4k GPUs, < 1B), in-sample and cross-validated: fit on "
                 "all folds but one, predict that one");
  app.add_option("--folds", a.folds, "with --cross-validate: number of folds (2 = halves)")
      ->check(ft::cli::at_least(2));
  app.add_option("--link-gbits", a.link_gbits,
                 "with --config: predict the data-parallel step over links of this many Gbit/s per host "
                 "and direction (needs --compute-s)");
  app.add_option("--link-latency-us", a.link_latency_us, "with --link-gbits: one-way latency of a message (us)");
  app.add_option("--compute-s", a.compute_s,
                 "with --link-gbits: the step's compute time measured on one host (metrics.jsonl compute_s)");
  app.add_option("--step-trace", a.step_trace,
                 "trace one real training step of this config (with --set) on a recording GPU and price it on the "
                 "H200's roofline: time by op, non-GEMM share, predicted MFU");
  app.add_flag("--profile", a.profile,
               "time the config's real step op by op on this CPU (and with --nproc N each mesh axis's collectives "
               "over N ranks); write the profile to --out");
  app.add_option("--profile-file", a.prof.profile_file,
                 "predict the config's layout's step time from a profile written by --profile");
  app.add_option("--nproc", a.prof.nproc,
                 "with --profile: ranks to time the collectives over (mpirun), and processes to time the ops in "
                 "at once (the contention of that many ranks on this host)")
      ->check(ft::cli::at_least(2));
  app.add_option("--profile-threads", a.prof.threads,
                 "with --profile: thread counts to time the ops at (default 1 "
                 "and every CPU)");
  app.add_option("--threads", a.prof.predict_threads,
                 "with --profile-file: threads per rank (default: train.threads, else CPUs / ranks)");
  app.add_option("--repeats", a.prof.repeats, "with --profile: timed steps (each op keeps its least)")
      ->check(ft::cli::at_least(1));
  app.add_option("--profile-collectives", a.prof.collectives_out)->group("");  // one rank of --profile's mpirun
  app.add_option("--profile-ops-rank", a.prof.ops_rank_dir)->group("");        // one of --profile's op timers
  app.add_flag("--json", a.json_out, "print JSON");
  app.add_flag("--list-gpus", a.list, "print the GPU catalog");
}

// --list-gpus
int run_list_gpus(const PlanArgs& a) {
  json arr = json::array();
  for (const auto& g : gpu_catalog()) {
    if (!a.json_out)
      std::printf(
          "%-10s %-52s 16-bit %7.1f TFLOP/s  %6.1f GiB  %5.2f TB/s  NVLink %4.0f GB/s  net %5.1f "
          "GB/s\n",
          g.name.c_str(), g.description.c_str(), std::max(g.peak_bf16, g.peak_fp16) / 1e12,
          g.memory_bytes / 1073741824.0, g.hbm_bw / 1e12, g.nvlink_bw / 1e9, g.network_bw / 1e9);
    arr.push_back({{"name", g.name},
                   {"description", g.description},
                   {"peak_bf16_tflops", g.peak_bf16 / 1e12},
                   {"peak_fp8_tflops", g.peak_fp8 / 1e12},
                   {"memory_gib", g.memory_bytes / 1073741824.0},
                   {"hbm_tbs", g.hbm_bw / 1e12},
                   {"nvlink_gbs", g.nvlink_bw / 1e9},
                   {"network_gbs", g.network_bw / 1e9}});
  }
  if (a.json_out) print_json(arr);
  return 0;
}

// --check FILE: the claimed figures of a record against the model.
int run_check(const PlanArgs& a) {
  CheckResult c = check_claims(read_json_file(a.check_file));
  if (a.json_out)
    print_json(to_json(c));
  else
    std::printf("claims in %s\n%s", a.check_file.c_str(), format_check(c).c_str());
  return 0;
}

// --from-record FILE: the prediction of a published run (or, for an array, of each).
int run_from_record(const PlanArgs& a) {
  json rec = read_json_file(a.record_file);
  if (rec.is_array()) {
    json out = json::array();
    for (const auto& r : rec) {
      try {
        out.push_back(predict_record(r));
      } catch (const ft::Error& e) {
        out.push_back({{"id", r.value("id", std::string())}, {"error", e.what()}});
      }
    }
    print_json(out);
    return 0;
  }
  json p = predict_record(rec);
  if (a.json_out) {
    print_json(p);
    return 0;
  }
  std::printf(
      "%s on %lld x %s: %s\n  %.4g tokens/s per GPU, %.1f TFLOP/s per GPU (%s), MFU %.1f%%, "
      "step %.3f s, "
      "%.1f GB per GPU%s\n",
      p["id"].get<std::string>().c_str(), static_cast<long long>(p["gpus"].get<int64_t>()),
      p["gpu"].get<std::string>().c_str(), p["layout"].dump().c_str(), p["tokens_per_s_per_gpu"].get<double>(),
      p["tflops_per_gpu"].get<double>(), p["tflops_convention"].get<std::string>().c_str(),
      100 * p["mfu"].get<double>(), p["step_time_s"].get<double>(), p["memory_per_gpu_gb"].get<double>(),
      p["fits"].get<bool>() ? "" : " (does not fit)");
  std::string terms;
  for (const auto& t : p["dominant_terms"])
    terms += fmt::format("{}{} {:.0f}%", terms.empty() ? "" : ", ", t["term"].get<std::string>(),
                         100 * t["share"].get<double>());
  std::printf("  step time by term: %s\n", terms.c_str());
  if (!p["comparison"].is_null())
    std::printf("  published %s = %.4g, predicted %.4g (%+.1f%%)\n",
                p["comparison"]["metric"].get<std::string>().c_str(), p["comparison"]["published"].get<double>(),
                p["comparison"]["predicted"].get<double>(), 100 * p["comparison"]["error"].get<double>());
  return 0;
}

// --validate FILE: predicted vs published for every record of a file.
int run_validate(const PlanArgs& a) {
  Validation v = validate_records(read_json_file(a.validate_file));
  if (!a.json_out) {
    std::fputs(format_validation(v).c_str(), stdout);
    return 0;
  }
  json rows = json::array();
  for (auto& r : v.rows)
    rows.push_back({{"id", r.id},
                    {"metric", r.metric},
                    {"predicted", r.predicted},
                    {"published", r.published},
                    {"error", r.error},
                    {"fits", r.fits},
                    {"layout", r.layout}});
  print_json({{"rows", rows}, {"median_abs_error", v.median_abs_error}, {"p90_abs_error", v.p90_abs_error}});
  return 0;
}

// --fit-records FILE: the catalog's efficiencies fitted to a file of records.
int run_fit_records(const PlanArgs& a) {
  FitResult f = fit_records(read_json_file(a.fit_file), a.iterations);
  std::printf("before: median %.1f%%, p90 %.1f%%, trimmed squared log error %.5f\n", 100 * f.before.median_abs_error,
              100 * f.before.p90_abs_error, f.before.fit_loss);
  std::printf("after:  median %.1f%%, p90 %.1f%%, trimmed squared log error %.5f\n", 100 * f.after.median_abs_error,
              100 * f.after.p90_abs_error, f.after.fit_loss);
  for (auto& [family, e] : f.eff)
    std::printf("%-5s gemm %.3f attention %.3f attention_hopper %.3f gemm_fp8 %.3f memory_traffic %.3f overlap %.3f\n",
                family.c_str(), e.gemm, e.attention, e.attention_hopper, e.gemm_fp8, e.memory_traffic, e.overlap);
  return 0;
}

// --cross-validate FILE: the error table by class, in-sample and over held-out folds.
int run_cross_validate(const PlanArgs& a) {
  const json records = read_json_file(a.cross_validate_file);
  const CrossValidation cv = cross_validate(records, a.folds, a.iterations);
  if (!a.json_out) {
    std::printf("%zu records; fits of %d Nelder-Mead iterations on %d folds by a hash of the id\n", cv.held_out.size(),
                a.iterations, cv.folds);
    std::fputs(format_cross_validation(cv).c_str(), stdout);
    return 0;
  }
  auto classes = [](const std::vector<ClassError>& cs) {
    json out = json::array();
    for (const auto& c : cs) out.push_back({{"class", c.name}, {"n", c.n}, {"median", c.median}, {"p90", c.p90}});
    return out;
  };
  json rows = json::array();
  for (size_t i = 0; i < cv.held_out.size(); ++i) {
    const RecordRow& r = cv.held_out[i];
    rows.push_back({{"id", r.id},
                    {"fold", cv.fold_of[i]},
                    {"predicted", r.predicted},
                    {"published", r.published},
                    {"error", r.error}});
  }
  print_json({{"folds", cv.folds},
              {"in_sample", classes(cv.in_sample_classes)},
              {"held_out", classes(cv.held_out_classes)},
              {"held_out_rows", rows}});
  return 0;
}

// The GPU the plan is for: --gpu (default a100-80gb; cpu for --calibrate), then --gpu-file.
GpuSpec target_gpu(const PlanArgs& a) {
  GpuSpec device = find_gpu(a.gpu.empty() ? (a.calibrate_dir.empty() ? "a100-80gb" : "cpu") : a.gpu);
  if (!a.gpu_file.empty()) apply_gpu_overrides(device, a.gpu_file);
  return device;
}

// --calibrate DIR [--also DIR...] [--out FILE]: the device's efficiency fitted to our own runs.
int run_calibrate(const PlanArgs& a, const GpuSpec& device) {
  std::vector<RunMeasurement> runs = {read_run(a.calibrate_dir, a.config, a.sets)};
  for (const auto& d : a.extra_runs) runs.push_back(read_run(d, "", {}));
  Calibration c = calibrate(runs, device);
  if (!a.out_file.empty()) {
    std::vector<std::string> inputs;  // the files it reads (the calibration may live in a run directory)
    for (const std::string& d : std::vector<std::string>{a.calibrate_dir})
      inputs.insert(inputs.end(), {d + "/metrics.jsonl", d + "/config.json"});
    for (const std::string& d : a.extra_runs) inputs.insert(inputs.end(), {d + "/metrics.jsonl", d + "/config.json"});
    ft::check_output_path(a.out_file, ft::OutputRule{.flag = "--out",
                                                     .kind = "calibration written by `fluxtrain plan --calibrate`",
                                                     .inputs = inputs,
                                                     .is_ours =
                                                         [](const std::string& p) {
                                                           return ft::file_starts_with(
                                                               p, "# written by `fluxtrain plan --calibrate`");
                                                         },
                                                     .replaces_own = true});
    ft::write_file_atomic(a.out_file, calibration_toml(c, device));
  }
  if (a.json_out)
    print_json(to_json(c));
  else
    std::fputs(format_calibration(c, device.name).c_str(), stdout);
  return 0;
}

// The trainer's configuration: --config and --set, with --model as the first --set.
ft::Config load_trainer_config(const PlanArgs& a) {
  std::vector<std::string> all_sets = a.sets;
  if (!a.model.empty()) all_sets.insert(all_sets.begin(), "model.preset=" + a.model);
  return ft::load_config(a.config, all_sets);
}

// --link-gbits / --compute-s: the configured data-parallel step over links of a given speed.
int run_links(const PlanArgs& a, const GpuSpec& device) {
  if (a.config.empty() && a.sets.empty())
    throw ft::Error("--link-gbits needs the trainer's configuration", "add --config FILE (and --set KEY=VALUE)");
  if (!(a.link_gbits > 0) || !(a.compute_s > 0))
    throw ft::Error(fmt::format("--link-gbits {} and --compute-s {}: both must be positive", a.link_gbits, a.compute_s),
                    "e.g. --link-gbits 1 --link-latency-us 50 --compute-s 1.7");
  ft::Config cfg = load_trainer_config(a);
  LinkSpec link{.bandwidth = a.link_gbits * 1e9 / 8, .latency = a.link_latency_us * 1e-6};
  LinkStep p = predict_step_over_links(cfg, device, link, a.compute_s);
  if (a.json_out)
    print_json(to_json(p, link));
  else
    std::fputs(format_link_step(p, link, cfg.parallel.dp).c_str(), stdout);
  return 0;
}

// What is planned: the job, and the layout fields the configuration and the flags fix.
struct PlanRequest {
  Job job;
  LayoutSpec spec;
  bool from_config = false;
};

// --cp-attention: the values of parallel.cp_attention.
ft::CpAttention parse_cp_attention(const std::string& s) {
  for (ft::CpAttention c : {ft::CpAttention::kRing, ft::CpAttention::kAllToAll})
    if (s == ft::cp_attention_name(c)) return c;
  throw ft::Error(
      fmt::format("--cp-attention {}: expected ring or all_to_all (the values of parallel.cp_attention)", s),
      "--cp-attention ring passes key/value blocks around the cp ranks; all_to_all scatters the heads");
}

// The layout flags a --search over a configuration's run keeps fixed too.
void apply_layout_flags(const PlanArgs& a, LayoutSpec& spec) {
  for (auto [dst, src] : {std::pair{&spec.dp, a.dp},
                          {&spec.tp, a.tp},
                          {&spec.pp, a.pp},
                          {&spec.cp, a.cp},
                          {&spec.vp, a.vp},
                          {&spec.micro_batch, a.micro_batch}})
    if (src) *dst = *src;
  if (a.zero) spec.zero = *a.zero;
  if (!a.recompute.empty()) spec.recompute = parse_recompute(a.recompute);
  if (!a.cp_attention.empty()) spec.cp_attention = parse_cp_attention(a.cp_attention);
}

// The job: the trainer's config (if any), then the flags.
PlanRequest plan_request(const PlanArgs& a, const GpuSpec& device) {
  PlanRequest r;
  Job& job = r.job;
  LayoutSpec& spec = r.spec;
  job.gpu = device;
  r.from_config = !a.config.empty() || !a.sets.empty();
  if (r.from_config) {
    ft::Config cfg = load_trainer_config(a);
    job = job_for_run(cfg, device);
    Layout l = layout_for_run(cfg);
    spec.dp = l.dp;
    spec.tp = l.tp;
    spec.pp = l.pp;
    spec.cp = l.cp;
    spec.cp_attention = l.cp_attention;
    spec.micro_batch = l.micro_batch;
    spec.recompute = l.recompute;
    spec.precision = l.precision;
    spec.zero = l.zero;
    spec.sequence_parallel = l.sequence_parallel;  // the config's, not the planner's default
    spec.wire = l.wire;
  } else if (!a.case_file.empty()) {
    job = case_job(read_json_file(a.case_file));  // its GPU unless --gpu / --gpu-file name another
    if (!a.gpu.empty() || !a.gpu_file.empty()) job.gpu = device;
  } else {
    job.model = ft::model_preset(a.model.empty() ? "llama2-7b" : a.model);
    job.seq_len = std::min<int64_t>(2048, job.model.max_seq_len);
    job.global_batch = 1024;
    job.gpus_per_node = device.gpus_per_node;
    job.nodes = 1;
  }
  if (a.seq_len > 0) job.seq_len = a.seq_len;
  if (a.global_batch > 0) job.global_batch = a.global_batch;
  if (a.gpus_per_node > 0) job.gpus_per_node = a.gpus_per_node;
  if (a.nodes > 0) {
    job.nodes = a.nodes;
    job.gpus = 0;
  }
  if (a.gpus > 0) {
    job.gpus = a.gpus;
    job.nodes = a.gpus / job.gpus_per_node + (a.gpus % job.gpus_per_node != 0);  // rounded up, no overflow
  }
  if (!a.tokens_text.empty()) job.tokens = parse_count(a.tokens_text, "--tokens");
  job.price_per_gpu_hour = a.price;
  Resilience& res = job.resilience;
  res.failures_per_gpu_day = a.failures_per_gpu_day;
  if (a.restart_min) res.restart_s = *a.restart_min * 60;
  if (a.ckpt_interval_min) {
    res.ckpt_interval_s = *a.ckpt_interval_min * 60;
    res.ckpt_every_steps = 0;
  }
  if (a.ckpt_every_steps) res.ckpt_every_steps = *a.ckpt_every_steps;
  if (a.ckpt_interval_min && a.ckpt_every_steps)
    throw ft::Error("--ckpt-interval-min and --ckpt-every-steps both given", "give the interval one way");
  res.save_s = a.ckpt_save_s;
  if (a.storage_gbs) res.storage_write_bw_per_node = *a.storage_gbs * 1e9;
  expected_goodput(job.num_gpus(), res);              // names a bad --restart-min / --ckpt-interval-min
  plan_checkpoints(1, 1, job.num_gpus(), 1, 0, res);  // names a bad --ckpt-save-s / --storage-gbs
  if (job.seq_len > job.model.max_seq_len) job.model.max_seq_len = job.seq_len;
  validate_job(job);

  apply_layout_flags(a, spec);
  if (!a.precision.empty()) spec.precision = precision_from_name(a.precision);
  if (!a.fp8_recipe.empty()) {
    spec.fp8_recipe = fp8_recipe_from_name(a.fp8_recipe);
    if (spec.precision != ft::Precision::kF8)
      throw ft::Error(fmt::format("--fp8-recipe {} needs --precision fp8", a.fp8_recipe), "add --precision fp8");
  }
  // This trainer's wires (parallel/wires.h): the config's, else its defaults at the precision asked.
  if (!r.from_config)
    spec.wire = wire_bytes_of(ft::trainer_wires(ft::ParallelConfig{}, spec.precision == ft::Precision::kBF16));
  if (a.no_sp) spec.sequence_parallel = false;
  spec.flash_attention = !a.no_flash;
  if (!a.dp && (a.tp || a.pp || a.cp) && r.from_config) spec.dp.reset();  // re-derive dp
  return r;
}

SearchOptions search_options(const PlanArgs& a, const PlanRequest& r) {
  SearchOptions o;
  o.fixed = r.spec;
  o.top = a.top;
  o.vary_nodes = a.vary_nodes;
  if (a.rank == "cost")
    o.rank_by = RankBy::kCost;
  else if (a.rank != "time")
    throw ft::Error(fmt::format("--rank {}: unknown order", a.rank), "use time or cost");
  return o;
}

// --search: every layout that fits, best first.
int run_search(const PlanArgs& a, const PlanRequest& r, SearchOptions o) {
  if (r.from_config) {  // the config's layout is what the search varies: only the flags stay fixed
    o.fixed = LayoutSpec{};
    o.fixed.precision = r.spec.precision;
    o.fixed.fp8_recipe = r.spec.fp8_recipe;
    o.fixed.wire = r.spec.wire;
    apply_layout_flags(a, o.fixed);
  }
  SearchResult s = search_layouts(r.job, o);
  if (s.best.empty()) best_layout_or_throw(r.job, o);  // throws with the nearest setup that fits
  if (a.json_out) {
    json arr = json::array();
    for (auto& l : s.best) arr.push_back(to_json(l));
    print_json({{"job", to_json(r.job)}, {"evaluated", s.evaluated}, {"fitting", s.fitting}, {"best", arr}});
  } else {
    std::fputs(format_search(r.job, s, o.rank_by).c_str(), stdout);
  }
  return 0;
}

// The estimate of one layout: a complete layout is evaluated as given (even when it does not
// fit); otherwise the best layout with the given fields fixed.
int run_estimate(const PlanArgs& a, const PlanRequest& r, const SearchOptions& o) {
  PlanResult p;
  if (r.spec.complete()) {
    Layout l = r.spec.with_defaults(r.job.num_gpus());
    validate_layout(r.job, l);
    p = evaluate(r.job, l);
  } else {
    p = best_layout_or_throw(r.job, o);
  }
  if (!a.case_file.empty()) {
    const json claims = read_json_file(a.case_file);
    if (a.json_out)
      print_json(case_to_json(claims, r.job, p));
    else
      std::printf("%s%s", format_plan(r.job, p).c_str(), format_case(claims, r.job, p).c_str());
  } else if (a.json_out) {
    json j = to_json(p);
    j["job"] = to_json(r.job);
    print_json(j);
  } else {
    std::fputs(format_plan(r.job, p).c_str(), stdout);
    if (!p.memory.fits()) std::printf("\nthis layout does not fit; `fluxtrain plan --search` lists the ones that do\n");
  }
  return 0;
}

// --step-trace FILE: one real step's ops, recorded on the recording GPU, priced on the H200.
int run_step_trace(const PlanArgs& a) {
  if (!a.gpu.empty() && find_gpu(a.gpu).name != "h200")
    throw ft::Error(fmt::format("--step-trace with --gpu {}: only the H200 has a roofline", a.gpu),
                    "leave out --gpu (or use --gpu h200)");
  const ft::Config cfg = ft::load_config(a.step_trace, a.sets);
  const OpTrace t = ft::trace_training_step(cfg);
  const StepPrice p = price_step(t, h200_roofline());
  if (a.json_out) {
    json j = to_json(p);
    j["config"] = a.step_trace;
    j["model"] = cfg.model.preset;
    j["parameters"] = cfg.model.num_params();
    j["batch"] = cfg.train.batch_size;
    j["seq_len"] = cfg.train.seq_len;
    j["precision"] = ft::precision_label(cfg.train.precision);
    j["op_calls"] = t.ops.size();
    j["cp"] = cfg.parallel.cp;
    if (cfg.parallel.cp > 1) j["cp_attention"] = ft::cp_attention_name(cfg.parallel.cp_attention);
    print_json(j);
    return 0;
  }
  std::printf(
      "step trace: %s (%.2fB parameters, dim %lld, %lld layers), batch %lld x %lld tokens, %s, one GPU\n"
      "%zu op calls of the second training step recorded on the recording GPU (%s); priced on the H200 roofline "
      "(docs/kernels.md, \"Reading a step trace\")\n\n%s",
      cfg.model.preset.c_str(), static_cast<double>(cfg.model.num_params()) / 1e9,
      static_cast<long long>(cfg.model.dim), static_cast<long long>(cfg.model.n_layers),
      static_cast<long long>(cfg.train.batch_size), static_cast<long long>(cfg.train.seq_len),
      ft::precision_label(cfg.train.precision), t.ops.size(), t.device.c_str(), format_step_price(p).c_str());
  return 0;
}

int run_plan(int argc, char** argv) {
  CLI::App app{
      "Plan a training run: memory and time per GPU, throughput, wall-clock, GPU-hours and cost;\n"
      "search layouts; check claimed figures; predict published runs; calibrate from our runs"};
  PlanArgs a;
  add_plan_options(app, a);
  FT_PARSE(app, argc, argv);

  if (a.list) return run_list_gpus(a);
  if (!a.check_file.empty()) return run_check(a);
  if (!a.record_file.empty()) return run_from_record(a);
  if (!a.validate_file.empty()) return run_validate(a);
  if (!a.fit_file.empty()) return run_fit_records(a);
  if (!a.cross_validate_file.empty()) return run_cross_validate(a);
  if (!a.step_trace.empty()) return run_step_trace(a);
  if (a.profile || !a.prof.profile_file.empty() || !a.prof.collectives_out.empty() || !a.prof.ops_rank_dir.empty()) {
    ft::cli::ProfileArgs p = a.prof;
    p.config = a.config;
    p.sets = a.sets;
    p.out = a.out_file;
    p.json = a.json_out;
    if (!p.collectives_out.empty()) return ft::cli::run_profile_collectives(p);
    if (!p.ops_rank_dir.empty()) return ft::cli::run_profile_ops_rank(p);
    return a.profile ? ft::cli::run_profile(p) : ft::cli::run_profile_file(p);
  }
  const GpuSpec device = target_gpu(a);
  if (!a.calibrate_dir.empty()) return run_calibrate(a, device);
  if (a.link_gbits != 0 || a.compute_s != 0) return run_links(a, device);
  const PlanRequest r = plan_request(a, device);
  const SearchOptions o = search_options(a, r);
  return a.search ? run_search(a, r, o) : run_estimate(a, r, o);
}

ft::cli::Register register_plan("plan", "memory, time and cost of a training run; layout search; claim checking",
                                run_plan);

}  // namespace
