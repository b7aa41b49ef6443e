// The op bench: every row of the op harness (tests/ops, one per op of kernels/op_decls.inc) on its
// llama-125m micro-batch shape (4 × 512 tokens, C 768, F 2048, 12 heads of 64, vocabulary 32000
// in chunks of 256 tokens, 16 M parameters for the optimizer ops), through the CPU backend,
// against this machine's peaks measured in the same run: the GEMM peak of backends/cpu/peak.h (fp32,
// and bf16 for the bf16 GEMM) and a bandwidth peak (the best of a read, a copy, an in-place scale
// and a STREAM triad over arrays of 256 MiB). Per op: the
// time, the bytes and FLOPs it must move at least once per second, which roof binds, and last the
// fraction of that roof reached: max(bytes / bandwidth, FLOPs / GEMM peak) / time. Each timed run
// starts with cold caches (256 MiB touched before it), as the bandwidth streams do: the bytes an
// op moves come from memory, as a micro-batch's tensors (far larger than the caches) do in training.
//
//   build/bench/bench_ops [--reps 5] [--clock wall|cpu] [--ref] [--only NAME]
// --clock cpu times by process CPU time / threads: robust to other processes on a shared machine
// (exact for one thread; pessimistic for several, as waiting threads spin). --ref also times the
// scalar reference (ops of more than 2 GFLOP excepted) and prints the speed-up. --only runs the
// ops whose name contains NAME.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/peak.h"
#include "ops/op_cases.h"

namespace {

using Clock = std::chrono::steady_clock;

bool g_cpu_clock = false;
int g_reps = 5;

double now_s() {
  if (g_cpu_clock) {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec)) / omp_get_max_threads();
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Touches every cache line of 256 MiB with ordinary loads and stores (memset's non-temporal stores
// would bypass the caches), so that what an op reads next comes from memory, not from a cache its
// previous run filled: a micro-batch's tensors are far larger than the caches.
void flush_caches() {
  static std::vector<char> junk(256 << 20);
  for (size_t i = 0; i < junk.size(); i += 64) junk[i] = static_cast<char>(junk[i] + 1);
}

double best_s(const std::function<void()>& f, int reps, bool cold = true) {
  f();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    if (cold) flush_caches();
    const double t0 = now_s();
    f();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

// The memory bandwidth roof: the best of four streams over arrays of 64 M floats (256 MiB each, far
// beyond any cache), bytes counted as the ops count theirs (each array once, an array updated in
// place twice): a read-only sum, a copy, an in-place scale and a triad a = b + s · c.
double bandwidth_bytes_per_s() {
  const int64_t n = 64 << 20;
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  float* __restrict pa = a.data();
  const float* __restrict pb = b.data();
  const float* __restrict pc = c.data();
  const int reps = std::max(5, g_reps);
  volatile float sink = 0;
  auto read = [&] {  // 16 independent sums: vectorised without reassociating
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      float acc[16] = {};
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += pb[i + j];
      for (float x : acc) total += x;
    }
    sink = total;
  };
  auto copy = [&] { std::memcpy(pa, pb, n * sizeof(float)); };
  auto scale = [&] {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pa[i] * 0.5f;
  };
  auto triad = [&] {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 0.5f * pc[i];
  };
  const double bytes = 4.0 * static_cast<double>(n);
  const double r = bytes / best_s(read, reps, false), cp = 2 * bytes / best_s(copy, reps, false),
               sc = 2 * bytes / best_s(scale, reps, false), tr = 3 * bytes / best_s(triad, reps, false);
  std::printf("bandwidth: read %.1f, copy %.1f, scale in place %.1f, triad %.1f GB/s\n", r * 1e-9, cp * 1e-9, sc * 1e-9,
              tr * 1e-9);
  return std::max({r, cp, sc, tr});
}

}  // namespace

int main(int argc, char** argv) {
  bool with_ref = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      g_reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--clock") == 0 && i + 1 < argc)
      g_cpu_clock = std::strcmp(argv[++i], "cpu") == 0;
    else if (std::strcmp(argv[i], "--ref") == 0)
      with_ref = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_ops [--reps N] [--clock wall|cpu] [--ref] [--only NAME]\n");
      return 2;
    }
  }
  using namespace ft;
  using namespace ft::test;
  const int threads = omp_get_max_threads();
  std::printf(
      "ops: every op of the harness, cpu backend, llama-125m micro-batch shapes, %d thread(s), %s clock, "
      "best of %d\n",
      threads, g_cpu_clock ? "cpu" : "wall", g_reps);

  // The roofs, measured now, under the same load as the ops.
  const double bandwidth = bandwidth_bytes_per_s();
  std::map<Precision, double> peak;  // FLOP/s
  PeakOptions popt;
  popt.cpu_clock = g_cpu_clock;
  for (Precision p : {Precision::kF32, Precision::kBF16}) peak[p] = measure_gemm_peak(p, threads, popt).gflops * 1e9;
  std::printf(
      "peaks: bandwidth %.1f GB/s (the best stream), GEMM %.1f GFLOP/s fp32, %.1f GFLOP/s bf16 "
      "(backends/cpu/peak.h)\n\n",
      bandwidth * 1e-9, peak[Precision::kF32] * 1e-9, peak[Precision::kBF16] * 1e-9);

  int shape_width = 5;
  for (const OpRow& r : op_rows())
    shape_width = std::max(shape_width, static_cast<int>(r.row().bench_shape().str().size()));
  std::printf("%-21s %-*s %9s %8s %9s %5s", "op", shape_width, "shape", "ms", "GB/s", "GFLOP/s", "bound");
  if (with_ref) std::printf(" %10s %8s", "ref ms", "speed-up");
  std::printf(" %8s\n", "of peak");
  for (const OpRow& r : op_rows()) {
    const char* name = op_name(r.id);
    if (!only.empty() && std::string(name).find(only) == std::string::npos) continue;
    const OpCase& row = r.row();
    const Shape s = row.bench_shape();
    Case c = row.make(s, 1);
    const double t = best_s([&] { row.run(cpu::op_table(), cpu_context(), c); }, g_reps);
    const Cost cost = row.cost(s);
    const double mem_time = cost.bytes / bandwidth;
    const double flop_time = peak.count(cost.flops_at) ? cost.flops / peak[cost.flops_at] : 0.0;
    const bool flop_bound = flop_time > mem_time;
    std::printf("%-21s %-*s %9.3f %8.1f %9.1f %5s", name, shape_width, s.str().c_str(), t * 1e3, cost.bytes / t * 1e-9,
                cost.flops / t * 1e-9, flop_bound ? "flop" : "mem");
    if (with_ref) {
      if (cost.flops > 2e9) {
        std::printf(" %10s %8s", "-", "-");
      } else {
        Case cr = row.make(s, 1);
        const double tr = best_s([&] { row.run(ref::op_table(), cpu_context(), cr); }, std::max(1, g_reps / 2));
        std::printf(" %10.3f %7.1fx", tr * 1e3, tr / t);
      }
    }
    std::printf(" %8.3f\n", std::max(mem_time, flop_time) / t);
    std::fflush(stdout);
  }
  return 0;
}
