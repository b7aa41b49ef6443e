#include "obs/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "obs/svg_plot.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/strings.h"

namespace ft::obs {
namespace {

using Field = double MetricsRecord::*;

PlotSeries series_of(const std::vector<MetricsRecord>& recs, Field f, std::string name, std::string color,
                     bool sparse) {
  PlotSeries s{std::move(name), std::move(color), {}, false};
  for (const auto& r : recs) {
    double v = r.*f;
    if (sparse && std::isnan(v)) continue;  // evaluation fields exist on evaluation steps only
    s.points.push_back({static_cast<double>(r.step), v});
  }
  s.markers = sparse && s.points.size() <= 60;
  return s;
}

// The finite values of a field.
std::vector<double> values(const std::vector<MetricsRecord>& recs, Field f) {
  std::vector<double> v;
  for (const auto& r : recs)
    if (std::isfinite(r.*f)) v.push_back(r.*f);
  return v;
}

std::string fmt_or_dash(double v, const char* spec = "{:.4g}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : "&ndash;";
}

std::string summary_table(const std::vector<MetricsRecord>& recs, const JobSummary& job) {
  auto row = [](const std::string& k, const std::string& v) {
    return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", k, v);
  };
  std::string t = "<table class=\"summary\">\n";
  t += row("steps logged",
           recs.empty() ? "0" : fmt::format("{} (steps {} to {})", recs.size(), recs.front().step, recs.back().step));
  double last_loss = NAN;
  int64_t last_loss_step = 0;
  size_t nonfinite = 0;
  for (const auto& r : recs) {
    if (std::isfinite(r.loss))
      last_loss = r.loss, last_loss_step = r.step;
    else
      ++nonfinite;
  }
  t += row("last training loss",
           std::isfinite(last_loss) ? fmt::format("{:.4f} at step {}", last_loss, last_loss_step) : "&ndash;");
  if (nonfinite) t += row("steps without a finite loss", std::to_string(nonfinite));
  auto best = [&](Field f, const char* what) {
    double b = INFINITY;
    int64_t at = 0;
    for (const auto& r : recs)
      if (std::isfinite(r.*f) && r.*f < b) b = r.*f, at = r.step;
    t += row(what, std::isfinite(b) ? fmt::format("{:.4f} at step {}", b, at) : "&ndash; (not in metrics.jsonl)");
  };
  best(&MetricsRecord::val_loss, "best validation loss");
  best(&MetricsRecord::val_bpc, "best validation bits/char");
  std::map<std::string, std::pair<double, int64_t>> best_source;  // last value per source
  for (const auto& r : recs)
    for (auto& [name, v] : r.val_bpc_by_source) best_source[name] = {v, r.step};
  for (auto& [name, vs] : best_source)
    t +=
        row("validation bits/char, " + html_escape(name), fmt::format("{:.4f} at step {} (last)", vs.first, vs.second));
  auto tps = values(recs, &MetricsRecord::tokens_per_s);
  double median = NAN;
  if (!tps.empty()) {
    std::nth_element(tps.begin(), tps.begin() + static_cast<long>(tps.size() / 2), tps.end());
    median = tps[tps.size() / 2];
  }
  t += row("median tokens/s", fmt_or_dash(median, "{:.5g}"));
  auto mfu = values(recs, &MetricsRecord::mfu);
  double mean_mfu = NAN;
  if (!mfu.empty()) {
    mean_mfu = 0;
    for (double v : mfu) mean_mfu += v;
    mean_mfu /= static_cast<double>(mfu.size());
  }
  t += row("mean MFU", std::isfinite(mean_mfu) ? fmt::format("{:.1f}%", 100 * mean_mfu) : "&ndash;");
  double wall = 0, wait = 0;
  for (const auto& r : recs) {
    if (std::isfinite(r.step_s)) wall += r.step_s;
    if (std::isfinite(r.data_wait_s)) wait += r.data_wait_s;
  }
  t += row("time in logged steps", wall > 0 ? human_duration(wall) : "&ndash;");
  if (wall > 0) t += row("waiting for data", fmt::format("{:.1f}% of step time", 100 * wait / wall));
  if (!recs.empty() && std::isfinite(recs.back().tokens))
    t += row("tokens trained", fmt::format("{:.4g}M", recs.back().tokens / 1e6));
  // Goodput: the supervisor's figure for the whole job, else rank 0's at its last step.
  if (job.present && std::isfinite(job.goodput))
    t += row("goodput", fmt::format("{:.1f}% ({} of productive training in {} since the job began)", 100 * job.goodput,
                                    human_duration(job.productive_s), human_duration(job.wall_s)));
  else if (!recs.empty() && std::isfinite(recs.back().goodput))
    t += row("goodput", fmt::format("{:.1f}% (rank 0 at step {})", 100 * recs.back().goodput, recs.back().step));
  if (job.badput)
    t += row("badput", html_escape(fmt::format("{:.1f} s productive of {:.1f} s; {}", job.badput->productive_s,
                                               job.badput->wall_s(), badput_summary(*job.badput))));
  double straggled = 0;
  int64_t straggler_steps = 0;
  for (const auto& r : recs)
    if (std::isfinite(r.straggler_cost_s)) straggled += r.straggler_cost_s, ++straggler_steps;
  if (straggler_steps > 0)
    t += row("waiting for stragglers",
             fmt::format("{:.1f} s over {} step(s){}", straggled, straggler_steps,
                         wall > 0 ? fmt::format(" ({:.1f}% of step time)", 100 * straggled / wall) : std::string()));
  if (job.present) {
    t += row("restarts", std::to_string(job.restarts));
    for (size_t i = 0; i < job.failures.size(); ++i) t += row(i == 0 ? "failures" : "", html_escape(job.failures[i]));
    if (!job.recovery_s.empty()) {
      std::string s;
      for (double v : job.recovery_s) s += (s.empty() ? "" : ", ") + fmt::format("{:.1f} s", v);
      t += row("recovery times", s);
    }
  }
  return t + "</table>\n";
}

}  // namespace

JobSummary read_job_summary(const std::string& path) {
  JobSummary out;
  std::ifstream in(path);
  if (!in) return out;
  out.present = true;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object()) continue;
    const std::string ev = e.value("event", "");
    if (ev == "finished") {
      out.goodput = e.value("goodput", NAN);
      out.productive_s = e.value("productive_s", NAN);
      out.wall_s = e.value("wall_s", NAN);
      out.restarts = e.value("restarts", 0);
      if (e.contains("badput")) try {
          out.badput = BadputTotals::from_json(e["badput"], path);
        } catch (const Error&) {
        }
    } else if (ev == "failure") {
      std::string who;
      if (e.contains("ranks") && !e["ranks"].empty()) who = " rank " + e["ranks"].dump();
      if (e.contains("host")) who += " on " + e.value("host", "");
      out.failures.push_back(fmt::format("attempt {}: {}{}", e.value("attempt", 0), e.value("kind", ""), who));
    } else if (ev == "recovered") {
      out.recovery_s.push_back(e.value("recovery_s", NAN));
    }
  }
  return out;
}

std::string render_report_html(const std::string& title, const std::vector<MetricsRecord>& recs,
                               const JobSummary& job) {
  std::vector<Plot> plots;
  plots.push_back({"Loss",
                   "step",
                   "cross-entropy (nats/token)",
                   {series_of(recs, &MetricsRecord::loss, "train", "#1f77b4", false),
                    series_of(recs, &MetricsRecord::val_loss, "validation", "#d62728", true)}});
  Plot bpc{"Validation bits per character",
           "step",
           "bits/char",
           {series_of(recs, &MetricsRecord::val_bpc, "validation", "#d62728", true)}};
  std::map<std::string, PlotSeries> by_source;  // val_bpc_<source>: one curve each
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  for (const auto& r : recs) {
    for (auto& [name, v] : r.val_bpc_by_source) {
      auto [it, fresh] = by_source.try_emplace(name, PlotSeries{name, colors[by_source.size() % 7], {}, true});
      it->second.points.push_back({static_cast<double>(r.step), v});
    }
  }
  for (auto& [name, series] : by_source) {
    series.markers = series.points.size() <= 60;
    bpc.series.push_back(std::move(series));
  }
  plots.push_back(std::move(bpc));
  plots.push_back({"Throughput",
                   "step",
                   "tokens/s",
                   {series_of(recs, &MetricsRecord::tokens_per_s, "tokens/s", "#2ca02c", false)}});
  plots.push_back(
      {"Learning rate", "step", "learning rate", {series_of(recs, &MetricsRecord::lr, "lr", "#9467bd", false)}});
  plots.push_back({"Gradient norm (before clipping)",
                   "step",
                   "L2 norm",
                   {series_of(recs, &MetricsRecord::grad_norm, "grad norm", "#8c564b", false)}});

  std::string h = fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>fluxtrain report: {0}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; background: #fafafa; }}
h1 {{ font-size: 20px; margin: 0 0 4px 0; }}
p.sub {{ color: #666; margin: 0 0 16px 0; }}
table.summary {{ border-collapse: collapse; margin-bottom: 20px; background: #fff; }}
table.summary th {{ text-align: left; font-weight: normal; color: #555; padding: 3px 16px 3px 8px; }}
table.summary td {{ padding: 3px 8px; font-variant-numeric: tabular-nums; }}
table.summary tr {{ border-bottom: 1px solid #eee; }}
.plots {{ display: flex; flex-wrap: wrap; gap: 16px; }}
.plots svg {{ border: 1px solid #ddd; background: #fff; }}
</style></head><body>
<h1>fluxtrain run report</h1>
<p class="sub">{0}</p>
)",
                              html_escape(title));
  h += summary_table(recs, job);
  h += "<div class=\"plots\">\n";
  for (const auto& p : plots) h += render_svg(p);
  h += "</div>\n<p class=\"sub\">Written by <code>fluxtrain report</code> from metrics.jsonl.</p>\n</body></html>\n";
  return h;
}

std::string write_run_report(const std::string& run_dir, const std::string& out_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(run_dir, ec))
    throw Error(fmt::format("report: run directory {} does not exist", run_dir),
                "pass the train.run_dir of a run, e.g. `fluxtrain report runs/latest`");
  if (!fs::is_directory(run_dir, ec))
    throw Error(fmt::format("report: {} is not a directory", run_dir), "pass the run directory, not a file in it");
  std::string jsonl = (fs::path(run_dir) / "metrics.jsonl").string();
  if (!fs::exists(jsonl, ec))
    throw Error(fmt::format("report: {} has no metrics.jsonl", run_dir),
                "is it a fluxtrain run directory? `fluxtrain train` writes metrics.jsonl into train.run_dir");
  auto recs = read_metrics_jsonl(jsonl);
  std::string out = out_path.empty() ? (fs::path(run_dir) / "report.html").string() : out_path;
  JobSummary job = read_job_summary((fs::path(run_dir) / "supervisor.jsonl").string());
  if (!job.badput) {
    try {
      const std::string b = (fs::path(run_dir) / "badput.json").string();
      job.badput = fs::exists(b) ? std::optional(BadputTotals::from_json(nlohmann::json::parse(read_file(b)), b))
                                 : last_badput_row(jsonl);
    } catch (const std::exception&) {  // a damaged badput.json: the report goes without it
    }
  }
  write_file_atomic(out, render_report_html(fs::absolute(run_dir).lexically_normal().string(), recs, job));
  return out;
}

}  // namespace ft::obs
