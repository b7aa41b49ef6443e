// fluxtrain bench-peak — measures what this CPU's GEMMs reach, chooses the fp32 library, records
// the peaks (the MFU denominators) and the choice.
//
//   fluxtrain bench-peak [--threads N] [--size 2048] [--seconds 1] [--clock wall|cpu]
//                        [--model llama-125m] [--tokens 2048] [--head-rows 256] [--no-record]
//
// fp32: each library (oneDNN dnnl_sgemm, OpenBLAS, BLIS; a missing one is a row saying why) on a
// size³ square and on the model's GEMM shapes (every linear layer's forward and backward GEMMs at
// a micro-batch of `tokens` rows, the LM head at `head-rows`); the fastest on the shapes (oneDNN
// unless another is more than 3% faster) becomes the library ops::matmul uses on this CPU, ISA
// and thread count. Then bf16 (native, or emulated —
// labelled), fp16 (emulated) through the ops the model calls, and oneDNN's own matmul primitives
// for comparison. Never aborts on what the CPU lacks: a measurement that cannot run is a row with
// the reason. Prints the CPU's instruction sets, the table, and the ratios last.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/peak.h"
#include "cli/command.h"
#include "model/model_config.h"
#include "util/cpu_info.h"
#include "util/error.h"

namespace {

using ft::PeakRecord;
using ft::cpu::GemmLibrary;

struct Row {
  std::string what, prec, kernel, used_by;
  double square = 0, shapes = 0;  // GFLOP/s; 0 = not measured
  std::string failed;             // why it could not run
  std::string note;               // a caveat (the kernels forced by the environment, ...)
};

// Runs f; a failure becomes the row's reason instead of ending the benchmark.
std::optional<PeakRecord> attempt(Row& row, const std::function<PeakRecord()>& f) {
  try {
    PeakRecord r = f();
    row.square = r.gflops;
    if (row.kernel.empty()) row.kernel = r.impl;
    return r;
  } catch (const std::exception& e) {
    row.failed = e.what();
    return std::nullopt;
  }
}

void print_row(const Row& r, int threads) {
  auto num = [](double g) { return g > 0 ? fmt::format("{:9.1f}", g) : fmt::format("{:>9}", "-"); };
  std::printf("%-10s %-5s %-52s %-17s %s %s %s\n", r.what.c_str(), r.prec.c_str(), r.kernel.substr(0, 52).c_str(),
              r.used_by.c_str(), num(r.square).c_str(), num(r.shapes).c_str(),
              num(r.square > 0 ? r.square / threads : 0).c_str());
  if (!r.failed.empty()) std::printf("           cannot run: %s\n", r.failed.c_str());
  if (!r.note.empty()) std::printf("           note: %s\n", r.note.c_str());
}

constexpr double kMargin = 1.03;

int run_bench_peak(int argc, char** argv) {
  CLI::App app{
      "Measure the GEMM peaks (GFLOP/s) of fp32 (oneDNN, OpenBLAS, BLIS), bf16 and fp16; choose the "
      "fp32 library on the model's shapes; record them"};
  int threads = omp_get_max_threads();
  ft::PeakOptions opt;
  std::string clock = "wall", model = "llama-125m";
  int64_t tokens = 2048, head_rows = 256;
  bool no_record = false;
  app.add_option("--threads", threads, "OpenMP threads (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::PositiveNumber);
  app.add_option("--size", opt.size, "M = N = K of the square GEMM")->check(CLI::Range(int64_t{16}, int64_t{32768}));
  app.add_option("--seconds", opt.min_seconds, "minimum time per measurement (the best run is kept)")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--clock", clock,
                 "wall: wall time (recorded); cpu: process CPU time / threads, for a machine shared with "
                 "other work (printed only, never recorded)")
      ->check(CLI::IsMember({"wall", "cpu"}));
  app.add_option("--model", model, "model preset whose GEMM shapes choose the fp32 library")
      ->check(CLI::IsMember(ft::model_preset_names()));
  app.add_option("--tokens", tokens, "rows of the layers' GEMMs (tokens of a micro-batch)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--head-rows", head_rows, "rows of the LM head's GEMMs (tokens of a loss chunk)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_flag("--no-record", no_record, "print only; do not write the peak file");
  FT_PARSE(app, argc, argv);
  opt.cpu_clock = clock == "cpu";
  if (opt.cpu_clock) no_record = true;

  const std::string path = ft::peak_file_path();
  if (!no_record) ft::check_peak_file(path);  // a bad peak file fails now, not after measuring

  const ft::ModelConfig mc = ft::model_preset(model);
  const auto shapes =
      ft::llama_gemm_shapes(mc.dim, mc.n_heads, mc.n_kv_heads, mc.ffn_dim, mc.vocab_size, tokens, head_rows);
  const std::string shapes_desc = fmt::format("{}, {} tokens, head {} rows", model, tokens, head_rows);
  const ft::CpuInfo& cpu = ft::cpu_info();
  std::printf("CPU \"%s\": %s\n", cpu.model.c_str(), cpu.describe().c_str());
  std::printf("binary compiled for: %s; oneDNN ISA: %s\n", ft::compiled_isa().c_str(),
              ft::cpu::onednn_isa_name().c_str());
  std::printf("GEMM: %lld^3 square and %s (%zu GEMMs), %d thread(s), %s clock\n\n", static_cast<long long>(opt.size),
              shapes_desc.c_str(), shapes.size(), threads, clock.c_str());

  // fp32: every library, square and model shapes.
  std::vector<Row> rows;
  std::optional<GemmLibrary> best;
  PeakRecord best_square;
  std::map<std::string, double> shape_gflops;
  for (GemmLibrary lib : ft::cpu::kGemmLibraries) {
    ft::cpu::GemmLibraryStatus st = ft::cpu::gemm_library_status(lib);
    Row row{ft::cpu::gemm_library_name(lib), "f32", st.detail, "", 0, 0, "", ""};
    if (!st.available) {
      row.failed = st.note;
      rows.push_back(row);
      continue;
    }
    auto sq = attempt(row, [&] { return ft::measure_f32_library(lib, threads, opt); });
    if (sq) {
      try {
        row.shapes = ft::measure_shapes_gflops(lib, shapes, threads, opt);
        shape_gflops[ft::cpu::gemm_library_name(lib)] = row.shapes;
        // oneDNN (the default, measured first) is replaced only by a library more than
        // kMargin faster: run-to-run noise must not flip the choice.
        const double bar =
            best ? shape_gflops[ft::cpu::gemm_library_name(*best)] * (*best == GemmLibrary::kOneDnn ? kMargin : 1.0)
                 : 0.0;
        if (!best || row.shapes > bar) {
          best = lib;
          best_square = *sq;
        }
      } catch (const std::exception& e) {
        row.failed = e.what();
      }
    }
    if (row.failed.empty()) row.note = st.note;
    rows.push_back(row);
  }
  if (best) {
    for (Row& r : rows)
      if (r.what == ft::cpu::gemm_library_name(*best)) r.used_by = "ops::matmul";
  }
  Row prim{"oneDNN", "f32", "", "-", 0, 0, "", ""};
  attempt(prim, [&] { return ft::measure_matmul_primitive_f32(threads, opt); });
  prim.kernel = "matmul primitive " + prim.kernel;
  rows.push_back(prim);

  // Record the fp32 choice first: the bf16 and fp16 emulated paths run on it.
  std::optional<PeakRecord> f32;
  if (best) {
    f32 = best_square;
    f32->gemm = ft::cpu::gemm_library_name(*best);
    f32->shapes = shapes_desc;
    f32->shape_gflops = shape_gflops;
    f32->impl = "sgemm";
  }
  if (!no_record && f32) {
    ft::record_peak(path, *f32);
    ft::cpu::reset_f32_gemm_library();
  }

  Row bf16{"bf16", "bf16", "", "ops::matmul_bf16", 0, 0, "", ""};
  auto bf16_rec = attempt(bf16, [&] { return ft::measure_gemm_peak(ft::Precision::kBF16, threads, opt); });
  if (bf16_rec && bf16_rec->emulated) bf16.what = "emulated";
  if (bf16_rec && !bf16_rec->emulated) bf16.what = "native";
  rows.push_back(bf16);
  if (!ft::cpu::onednn_has_native_bf16()) {  // oneDNN's own bf16 emulation, where it has one (avx512_core)
    Row onednn16{"oneDNN", "bf16", "", "-", 0, 0, "", ""};
    attempt(onednn16, [&] { return ft::measure_bf16_onednn(threads, opt); });
    onednn16.kernel = "matmul primitive " + onednn16.kernel;
    rows.push_back(onednn16);
  }
  Row f16{"emulated", "f16", "", "ops::matmul f16", 0, 0, "", ""};
  auto f16_rec = attempt(f16, [&] { return ft::measure_gemm_peak(ft::Precision::kF16, threads, opt); });
  rows.push_back(f16);

  std::printf("%-10s %-5s %-52s %-17s %9s %9s %9s\n", "library", "prec", "kernel", "used by", "square", "shapes",
              "/thread");
  for (const Row& r : rows) print_row(r, threads);
  if (!ft::cpu::onednn_has_native_bf16())
    std::printf("\nbf16 is emulated (%s): operands widened to fp32, the fp32 GEMM\n",
                ft::cpu::bf16_emulation_reason().c_str());

  if (!no_record) {
    for (const auto& r : {bf16_rec, f16_rec}) {
      if (!r) continue;
      ft::record_peak(path, *r);
    }
    std::printf("\nrecorded in %s for %d thread(s), ISA %s:", path.c_str(), threads,
                ft::cpu::onednn_isa_name().c_str());
    if (f32) std::printf(" f32 %.1f (%s)", f32->gflops, f32->gemm.c_str());
    if (bf16_rec) std::printf(", bf16 %.1f%s", bf16_rec->gflops, bf16_rec->emulated ? " (emulated)" : "");
    if (f16_rec) std::printf(", f16 %.1f (emulated)", f16_rec->gflops);
    std::printf(" GFLOP/s\n");
  }
  std::printf("\n");
  const double onednn = shape_gflops.count("onednn") ? shape_gflops["onednn"] : 0;
  for (const auto& [name, g] : shape_gflops)
    if (name != "onednn" && onednn > 0)
      std::printf("f32 %s / onednn on the model's shapes: %.2f\n", name.c_str(), g / onednn);
  if (f32 && bf16_rec) std::printf("bf16 / f32 (square): %.2f\n", bf16_rec->gflops / f32->gflops);
  if (f32 && f16_rec) std::printf("f16 / f32 (square): %.2f\n", f16_rec->gflops / f32->gflops);
  if (best) std::printf("fp32 library for ops::matmul: %s\n", ft::cpu::gemm_library_name(*best));
  return 0;
}

ft::cli::Register register_bench_peak(
    "bench-peak", "measure the GEMM peaks (fp32 per library, bf16, fp16), choose the fp32 library, record them",
    run_bench_peak);

}  // namespace
