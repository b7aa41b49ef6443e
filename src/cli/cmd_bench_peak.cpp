// fluxtrain bench-peak — measures the GEMM peak (the MFU denominator) and records it.
//
//   fluxtrain bench-peak [--threads N] [--size 2048] [--seconds 1] [--clock wall|cpu] [--no-record]
//
// Runs a size³ GEMM through the ops the model uses (oneDNN: fp32 dnnl_sgemm, bf16 matmul primitive
// on AMX where present), oneDNN's fp32 matmul primitive, then OpenBLAS sgemm as the peer
// (OPENBLAS_CORETYPE=SkylakeX unless set); prints a table with the ratios last and writes the
// numbers of the ops the model uses to the peak file (see kernels/peak.h).
#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>

#include "cli/command.h"
#include "kernels/peak.h"

namespace {

int run_bench_peak(int argc, char** argv) {
  CLI::App app{"Measure the GEMM peak (GFLOP/s) with oneDNN (fp32, bf16) and OpenBLAS (fp32); record it"};
  int threads = omp_get_max_threads();
  ft::PeakOptions opt;
  std::string clock = "wall";
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
  app.add_flag("--no-record", no_record, "print only; do not write the peak file");
  FT_PARSE(app, argc, argv);
  opt.cpu_clock = clock == "cpu";
  if (opt.cpu_clock) no_record = true;

  const std::string path = ft::peak_file_path();
  if (!no_record) ft::read_peak(path, "", 0, ft::Precision::kF32);  // a bad peak file fails now, not after measuring

  ft::PeakRecord f32 = ft::measure_gemm_peak(ft::Precision::kF32, threads, opt);
  ft::PeakRecord f32_prim = ft::measure_matmul_primitive_f32(threads, opt);
  ft::PeakRecord bf16 = ft::measure_gemm_peak(ft::Precision::kBF16, threads, opt);
  ft::BlasPeerResult blas = ft::measure_openblas_sgemm(threads, opt);  // last: it keeps its threads

  std::printf("GEMM peak: %lld^3, %d thread(s), %s clock, CPU \"%s\"\n\n", static_cast<long long>(opt.size), threads,
              clock.c_str(), f32.cpu.c_str());
  std::printf("%-13s %-5s %-42s %-16s %9s %11s\n", "library", "prec", "kernel", "used by", "GFLOP/s", "per thread");
  auto row = [&](const std::string& lib, const char* prec, const std::string& kernel, const char* used, double g) {
    std::printf("%-13s %-5s %-42s %-16s %9.1f %11.1f\n", lib.c_str(), prec, kernel.c_str(), used, g, g / threads);
  };
  row(f32.library, "f32", "dnnl_sgemm " + f32.impl.substr(0, f32.impl.find(' ')), "ops::matmul", f32.gflops);
  row(f32_prim.library, "f32", "matmul " + f32_prim.impl, "-", f32_prim.gflops);
  row(bf16.library, "bf16", "matmul " + bf16.impl, "ops::matmul_bf16", bf16.gflops);
  if (blas.available) row("OpenBLAS", "f32", "cblas_sgemm, core " + blas.core, "-", blas.gflops);
  if (blas.available) {
    std::printf("OpenBLAS: OPENBLAS_CORETYPE=%s%s\n", blas.coretype_env.empty() ? "(unset)" : blas.coretype_env.c_str(),
                blas.env_set_by_us ? " (set by fluxtrain before loading it)" : "");
  }
  if (!blas.note.empty()) std::printf("note: %s\n", blas.note.c_str());

  if (!no_record) {
    ft::record_peak(path, f32);
    ft::record_peak(path, bf16);
    std::printf("\nrecorded f32 %.1f and bf16 %.1f GFLOP/s for %d thread(s) in %s\n", f32.gflops, bf16.gflops,
                threads, path.c_str());
  }
  std::printf("\nbf16 / f32: %.2f\n", bf16.gflops / f32.gflops);
  std::printf("f32 matmul primitive / dnnl_sgemm: %.2f\n", f32_prim.gflops / f32.gflops);
  if (blas.available) std::printf("f32 OpenBLAS / dnnl_sgemm: %.2f\n", blas.gflops / f32.gflops);
  return 0;
}

ft::cli::Register reg("bench-peak", "measure the GEMM peak (oneDNN fp32/bf16 vs OpenBLAS) and record it",
                      run_bench_peak);

}  // namespace
