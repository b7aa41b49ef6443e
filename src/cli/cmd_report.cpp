// fluxtrain report RUN_DIR — one self-contained HTML file with the run's curves (obs/run_report.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/command.h"
#include "obs/run_report.h"
#include "util/fs.h"
#include "util/output_path.h"

namespace {

int run_report(int argc, char** argv) {
  CLI::App app{"Write an HTML report (summary and plots) of a run from RUN_DIR/metrics.jsonl"};
  std::string run_dir, out;
  app.add_option("run_dir", run_dir, "run directory (train.run_dir of the run)")->required();
  app.add_option("-o,--out", out, "output file (default RUN_DIR/report.html)");
  FT_PARSE(app, argc, argv);
  if (!out.empty()) {  // the default, RUN_DIR/report.html, is the report's own place
    ft::check_output_path(
        out,
        ft::OutputRule{
            .flag = "--out",
            .kind = "fluxtrain report",
            .inputs = {run_dir + "/metrics.jsonl"},
            .is_ours =
                [](const std::string& p) {
                  return ft::file_starts_with(
                      p, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>fluxtrain report");
                },
            .replaces_own = true});
  }
  std::string path = ft::obs::write_run_report(run_dir, out);
  std::printf("%s\n", path.c_str());
  return 0;
}

ft::cli::Register register_report("report", "write an HTML report with plots of a run's metrics", run_report);

}  // namespace
