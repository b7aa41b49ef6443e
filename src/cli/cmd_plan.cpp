// fluxtrain plan — memory, time and cost of a training run on a GPU cluster; layout search;
// claim checking; prediction of published runs; calibration from our own runs.
//
//   fluxtrain plan --model llama2-7b --gpu a100-80gb --nodes 16 --seq-len 4096 --global-batch 1024
//                  --tokens 2T --price 2.0 --search
//   fluxtrain plan --config configs/tiny.toml --gpu cpu
//   fluxtrain plan --check configs/claims/case-study.json [--json]
//   fluxtrain plan --from-record run.json --json
//   fluxtrain plan --calibrate runs/t1 [--out cpu.toml]
//   fluxtrain plan --config cfg.toml --gpu cpu --link-gbits 1 --link-latency-us 50 --compute-s 1.7
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command.h"
#include "config/config.h"
#include "plan/calibrate.h"
#include "plan/check.h"
#include "plan/fit.h"
#include "plan/links.h"
#include "plan/record.h"
#include "plan/report.h"
#include "plan/search.h"
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
    if (used == t.size() && v >= 0) return v * mult;
  } catch (...) {
  }
  throw ft::Error(fmt::format("{} {}: expected a count such as 2e12, 300B or 4.2T", flag, text));
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

int run_plan(int argc, char** argv) {
  CLI::App app{
      "Plan a training run: memory and time per GPU, throughput, wall-clock, GPU-hours and cost;\n"
      "search layouts; check claimed figures; predict published runs; calibrate from our runs"};
  std::string config, model, gpu = "", gpu_file, tokens_text, check_file, record_file, calibrate_dir, fit_file,
                             validate_file, rank = "time", recompute, precision, out_file;
  std::vector<std::string> sets, extra_runs;
  int64_t nodes = 0, gpus_per_node = 0, gpus = 0, seq_len = 0, global_batch = 0;
  std::optional<int64_t> dp, tp, pp, cp, vp, micro_batch;
  std::optional<int> zero;
  double price = 0;
  bool search = false, json_out = false, list = false, vary_nodes = false, no_sp = false, no_flash = false;
  size_t top = 10;
  int iterations = 150;
  double link_gbits = 0, link_latency_us = 0, compute_s = 0;

  app.add_option("--config", config, "the trainer's TOML file (model, seq_len, batch, layout)");
  app.add_option("--set", sets, "override KEY=VALUE of the config (repeatable)");
  app.add_option("--model", model, "model preset (tiny, llama-125m, llama2-7b, llama2-13b, llama2-70b, ...)");
  app.add_option("--gpu", gpu, "GPU type: a100-40gb, a100-80gb, h100-sxm, h200, b200, cpu (--list-gpus)");
  app.add_option("--gpu-file", gpu_file, "TOML with [gpu] overrides (another GPU, calibrated efficiency)");
  app.add_option("--nodes", nodes, "number of nodes")->check(ft::cli::at_least(1));
  app.add_option("--gpus-per-node", gpus_per_node, "GPUs per node (default: the GPU's usual 8)")
      ->check(ft::cli::at_least(1));
  app.add_option("--gpus", gpus, "total GPUs (instead of --nodes)")->check(ft::cli::at_least(1));
  app.add_option("--seq-len", seq_len, "tokens per sequence")->check(ft::cli::at_least(1));
  app.add_option("--global-batch", global_batch, "sequences per optimizer step")->check(ft::cli::at_least(1));
  app.add_option("--tokens", tokens_text, "tokens to train: 2e12, 300B, 4.2T");
  app.add_option("--price", price, "USD per GPU-hour");
  app.add_option("--dp", dp, "data-parallel degree")->check(ft::cli::at_least(1));
  app.add_option("--tp", tp, "tensor-parallel degree")->check(ft::cli::at_least(1));
  app.add_option("--pp", pp, "pipeline stages")->check(ft::cli::at_least(1));
  app.add_option("--cp", cp, "context-parallel degree")->check(ft::cli::at_least(1));
  app.add_option("--vp", vp, "virtual stages per rank (interleaved 1F1B)")->check(ft::cli::at_least(1));
  app.add_option("--micro-batch", micro_batch, "sequences per micro-batch")->check(ft::cli::at_least(1));
  app.add_option("--zero", zero, "ZeRO stage 0-3")->check(CLI::Range(0, 3));
  app.add_option("--recompute", recompute, "activation recompute: none, selective, full");
  app.add_option("--precision", precision, "bf16 (default), fp16, fp8, fp32");
  app.add_flag("--no-sp", no_sp, "no sequence parallelism with tp > 1");
  app.add_flag("--no-flash", no_flash, "attention without a fused (flash) kernel");
  app.add_flag("--search", search, "rank every layout that fits");
  app.add_option("--rank", rank, "search order: time or cost");
  app.add_option("--top", top, "layouts to print with --search")->check(ft::cli::at_least(1));
  app.add_flag("--vary-nodes", vary_nodes, "with --search, also try fewer nodes");
  app.add_option("--check", check_file, "check the claimed figures in a JSON record");
  app.add_option("--from-record", record_file, "predict a published run (one JSON record, or an array)");
  app.add_option("--calibrate", calibrate_dir, "fit the efficiency from a run directory's metrics.jsonl");
  app.add_option("--also", extra_runs, "with --calibrate: more run directories to fit together");
  app.add_option("--out", out_file, "with --calibrate: write the fitted [gpu] TOML here");
  app.add_option("--validate", validate_file, "print predicted vs published for a file of records");
  app.add_option("--fit-records", fit_file, "fit the catalog's efficiencies to a file of records");
  app.add_option("--iterations", iterations, "with --fit-records: Nelder-Mead iterations")->check(ft::cli::at_least(1));
  app.add_option("--link-gbits", link_gbits,
                 "with --config: predict the data-parallel step over links of this many Gbit/s per host "
                 "and direction (needs --compute-s)");
  app.add_option("--link-latency-us", link_latency_us, "with --link-gbits: one-way latency of a message (us)");
  app.add_option("--compute-s", compute_s,
                 "with --link-gbits: the step's compute time measured on one host (metrics.jsonl compute_s)");
  app.add_flag("--json", json_out, "print JSON");
  app.add_flag("--list-gpus", list, "print the GPU catalog");
  FT_PARSE(app, argc, argv);

  if (list) {
    json arr = json::array();
    for (const auto& g : gpu_catalog()) {
      if (!json_out)
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
    if (json_out) print_json(arr);
    return 0;
  }
  if (!check_file.empty()) {
    CheckResult c = check_claims(read_json_file(check_file));
    if (json_out)
      print_json(to_json(c));
    else
      std::printf("claims in %s\n%s", check_file.c_str(), format_check(c).c_str());
    return 0;
  }
  if (!record_file.empty()) {
    json rec = read_json_file(record_file);
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
    if (json_out) {
      print_json(p);
    } else {
      std::printf(
          "%s on %lld x %s: %s\n  %.4g tokens/s per GPU, %.1f TFLOP/s per GPU (%s), MFU %.1f%%, "
          "step %.3f s, "
          "%.1f GB per GPU%s\n",
          p["id"].get<std::string>().c_str(), static_cast<long long>(p["gpus"].get<int64_t>()),
          p["gpu"].get<std::string>().c_str(), p["layout"].dump().c_str(), p["tokens_per_s_per_gpu"].get<double>(),
          p["tflops_per_gpu"].get<double>(), p["tflops_convention"].get<std::string>().c_str(),
          100 * p["mfu"].get<double>(), p["step_time_s"].get<double>(), p["memory_per_gpu_gb"].get<double>(),
          p["fits"].get<bool>() ? "" : " (does not fit)");
      if (!p["comparison"].is_null())
        std::printf("  published %s = %.4g, predicted %.4g (%+.1f%%)\n",
                    p["comparison"]["metric"].get<std::string>().c_str(), p["comparison"]["published"].get<double>(),
                    p["comparison"]["predicted"].get<double>(), 100 * p["comparison"]["error"].get<double>());
    }
    return 0;
  }
  if (!validate_file.empty()) {
    Validation v = validate_records(read_json_file(validate_file));
    if (json_out) {
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
    } else {
      std::fputs(format_validation(v).c_str(), stdout);
    }
    return 0;
  }
  if (!fit_file.empty()) {
    FitResult f = fit_records(read_json_file(fit_file), iterations);
    std::printf("before: median %.1f%%, p90 %.1f%%, trimmed squared log error %.5f\n", 100 * f.before.median_abs_error,
                100 * f.before.p90_abs_error, f.before.fit_loss);
    std::printf("after:  median %.1f%%, p90 %.1f%%, trimmed squared log error %.5f\n", 100 * f.after.median_abs_error,
                100 * f.after.p90_abs_error, f.after.fit_loss);
    for (auto& [family, e] : f.eff)
      std::printf(
          "%-5s gemm %.3f attention %.3f gemm_fp8 %.3f memory_traffic %.3f fp8_cast %.3f overlap "
          "%.3f\n",
          family.c_str(), e.gemm, e.attention, e.gemm_fp8, e.memory_traffic, e.fp8_cast, e.overlap);
    return 0;
  }

  GpuSpec device = find_gpu(gpu.empty() ? (calibrate_dir.empty() ? "a100-80gb" : "cpu") : gpu);
  if (!gpu_file.empty()) apply_gpu_overrides(device, gpu_file);

  if (!calibrate_dir.empty()) {
    std::vector<RunMeasurement> runs = {read_run(calibrate_dir, config, sets)};
    for (const auto& d : extra_runs) runs.push_back(read_run(d, "", {}));
    Calibration c = calibrate(runs, device);
    if (!out_file.empty()) {
      std::vector<std::string> inputs;  // the files it reads (the calibration may live in a run directory)
      for (const std::string& d : std::vector<std::string>{calibrate_dir})
        inputs.insert(inputs.end(), {d + "/metrics.jsonl", d + "/config.json"});
      for (const std::string& d : extra_runs) inputs.insert(inputs.end(), {d + "/metrics.jsonl", d + "/config.json"});
      ft::check_output_path(out_file, ft::OutputRule{.flag = "--out",
                                                     .kind = "calibration written by `fluxtrain plan --calibrate`",
                                                     .inputs = inputs,
                                                     .is_ours =
                                                         [](const std::string& p) {
                                                           return ft::file_starts_with(
                                                               p, "# written by `fluxtrain plan --calibrate`");
                                                         },
                                                     .replaces_own = true});
      ft::write_file_atomic(out_file, calibration_toml(c, device));
    }
    if (json_out)
      print_json(to_json(c));
    else
      std::fputs(format_calibration(c, device.name).c_str(), stdout);
    return 0;
  }

  if (link_gbits != 0 || compute_s != 0) {
    if (config.empty() && sets.empty())
      throw ft::Error("--link-gbits needs the trainer's configuration", "add --config FILE (and --set KEY=VALUE)");
    if (!(link_gbits > 0) || !(compute_s > 0))
      throw ft::Error(fmt::format("--link-gbits {} and --compute-s {}: both must be positive", link_gbits, compute_s),
                      "e.g. --link-gbits 1 --link-latency-us 50 --compute-s 1.7");
    std::vector<std::string> all_sets = sets;
    if (!model.empty()) all_sets.insert(all_sets.begin(), "model.preset=" + model);
    ft::Config cfg = ft::load_config(config, all_sets);
    LinkSpec link{.bandwidth = link_gbits * 1e9 / 8, .latency = link_latency_us * 1e-6};
    LinkStep p = predict_step_over_links(cfg, device, link, compute_s);
    if (json_out)
      print_json(to_json(p, link));
    else
      std::fputs(format_link_step(p, link, cfg.parallel.dp).c_str(), stdout);
    return 0;
  }

  // The job: the trainer's config (if any), then the flags.
  Job job;
  job.gpu = device;
  LayoutSpec spec;
  const bool from_config = !config.empty() || !sets.empty();
  if (from_config) {
    std::vector<std::string> all_sets = sets;
    if (!model.empty()) all_sets.insert(all_sets.begin(), "model.preset=" + model);
    ft::Config cfg = ft::load_config(config, all_sets);
    job = job_for_run(cfg, device);
    Layout l = layout_for_run(cfg);
    spec.dp = l.dp;
    spec.tp = l.tp;
    spec.pp = l.pp;
    spec.micro_batch = l.micro_batch;
    spec.recompute = l.recompute;
    spec.precision = l.precision;
    spec.zero = l.zero;
    spec.sequence_parallel = l.sequence_parallel;  // the config's, not the planner's default
  } else {
    job.model = ft::model_preset(model.empty() ? "llama2-7b" : model);
    job.seq_len = std::min<int64_t>(2048, job.model.max_seq_len);
    job.global_batch = 1024;
    job.gpus_per_node = device.gpus_per_node;
    job.nodes = 1;
  }
  if (seq_len > 0) job.seq_len = seq_len;
  if (global_batch > 0) job.global_batch = global_batch;
  if (gpus_per_node > 0) job.gpus_per_node = gpus_per_node;
  if (nodes > 0) {
    job.nodes = nodes;
    job.gpus = 0;
  }
  if (gpus > 0) {
    job.gpus = gpus;
    job.nodes = (gpus + job.gpus_per_node - 1) / job.gpus_per_node;
  }
  if (!tokens_text.empty()) job.tokens = parse_count(tokens_text, "--tokens");
  job.price_per_gpu_hour = price;
  if (job.seq_len > job.model.max_seq_len) job.model.max_seq_len = job.seq_len;
  validate_job(job);

  for (auto [dst, src] : {std::pair{&spec.dp, dp},
                          {&spec.tp, tp},
                          {&spec.pp, pp},
                          {&spec.cp, cp},
                          {&spec.vp, vp},
                          {&spec.micro_batch, micro_batch}})
    if (src) *dst = *src;
  if (zero) spec.zero = *zero;
  if (!recompute.empty()) spec.recompute = parse_recompute(recompute);
  if (!precision.empty()) spec.precision = precision_from_name(precision);
  if (no_sp) spec.sequence_parallel = false;
  spec.flash_attention = !no_flash;
  if (!dp && (tp || pp || cp) && from_config) spec.dp.reset();  // re-derive dp

  SearchOptions o;
  o.fixed = spec;
  o.top = top;
  o.vary_nodes = vary_nodes;
  if (rank == "cost")
    o.rank_by = RankBy::kCost;
  else if (rank != "time")
    throw ft::Error(fmt::format("--rank {}: unknown order", rank), "use time or cost");

  if (search) {
    if (from_config) {  // the config's layout is what the search varies
      SearchOptions all = o;
      all.fixed = LayoutSpec{};
      all.fixed.precision = spec.precision;
      for (auto [dst, src] : {std::pair{&all.fixed.dp, dp},
                              {&all.fixed.tp, tp},
                              {&all.fixed.pp, pp},
                              {&all.fixed.cp, cp},
                              {&all.fixed.vp, vp},
                              {&all.fixed.micro_batch, micro_batch}})
        if (src) *dst = *src;
      if (zero) all.fixed.zero = *zero;
      if (!recompute.empty()) all.fixed.recompute = parse_recompute(recompute);
      o = all;
    }
    SearchResult s = search_layouts(job, o);
    if (s.best.empty()) best_layout_or_throw(job, o);  // throws with the nearest setup that fits
    if (json_out) {
      json arr = json::array();
      for (auto& r : s.best) arr.push_back(to_json(r));
      print_json({{"job", to_json(job)}, {"evaluated", s.evaluated}, {"fitting", s.fitting}, {"best", arr}});
    } else {
      std::fputs(format_search(job, s, o.rank_by).c_str(), stdout);
    }
    return 0;
  }

  // A complete layout is evaluated as given (even when it does not fit); otherwise the best
  // layout with the given fields fixed.
  PlanResult r;
  if (spec.complete()) {
    Layout l = spec.with_defaults(job.num_gpus());
    validate_layout(job, l);
    r = evaluate(job, l);
  } else {
    r = best_layout_or_throw(job, o);
  }
  if (json_out) {
    json j = to_json(r);
    j["job"] = to_json(job);
    print_json(j);
  } else {
    std::fputs(format_plan(job, r).c_str(), stdout);
    if (!r.memory.fits()) std::printf("\nthis layout does not fit; `fluxtrain plan --search` lists the ones that do\n");
  }
  return 0;
}

ft::cli::Register reg("plan", "memory, time and cost of a training run; layout search; claim checking", run_plan);

}  // namespace
