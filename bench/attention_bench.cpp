// Causal attention, forward + backward: fluxtrain's tiled CPU kernels against PyTorch's
// attention (bench/attention_torch.py, run as a subprocess in the same run), with the
// machine's fp32 GEMM rate (oneDNN sgemm) measured alongside as the peak to compare with.
//
//   build/bench/attention_bench                  # llama-125m shapes at T = 512 and T = 2048
//   build/bench/attention_bench 1 4096 32 8 128  # one shape: B T H Hkv D
//   FT_BENCH_PYTHON=/usr/bin/python3 FT_BENCH_REPS=5 build/bench/attention_bench
//
// FLOPs count the causal half only (as FlashAttention does): forward 4·B·H·T²·D / 2,
// backward 2.5× forward. PyTorch computes the full T×T products; we credit it the same count,
// so GFLOP/s ratios are time ratios.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace {

struct Shape {
  int64_t B, T, H, Hkv, D;
  const char* label;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds used by the whole process: on a shared, loaded machine the single-thread
// rate per CPU-second is steadier than wall time (the benchmark may be descheduled).
double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Timing {
  double wall = 1e30, cpu = 1e30;  // best of the repeats, each
};

template <typename Fn>
Timing best_of(int reps, Fn fn) {
  fn();  // warm-up
  Timing t;
  for (int r = 0; r < reps; ++r) {
    const double w0 = now(), c0 = cpu_now();
    fn();
    t.wall = std::min(t.wall, now() - w0);
    t.cpu = std::min(t.cpu, cpu_now() - c0);
  }
  return t;
}

std::vector<float> random_vec(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// oneDNN sgemm C(n, n) = A B with the current thread count: GFLOP per wall second and per
// CPU second.
std::pair<double, double> gemm_gflops(int64_t n, int reps) {
  auto a = random_vec(n * n, 1), b = random_vec(n * n, 2);
  std::vector<float> c(n * n);
  Timing t = best_of(reps, [&] { dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); });
  const double flop = 2.0 * static_cast<double>(n * n * n);
  return {flop / t.wall * 1e-9, flop / t.cpu * 1e-9};
}

struct PeerTimes {
  double fwd = 0, fwdbwd = 0;
  int threads = 0;
  bool ok = false;
};

PeerTimes run_torch(const Shape& s, int reps, int max_threads) {
  const char* py = std::getenv("FT_BENCH_PYTHON");
  std::string cmd = std::string(py ? py : "/usr/bin/python3") + " " FT_BENCH_DIR "/attention_torch.py " +
                    std::to_string(s.B) + " " + std::to_string(s.T) + " " + std::to_string(s.H) + " " +
                    std::to_string(s.Hkv) + " " + std::to_string(s.D) + " " + std::to_string(reps) + " " +
                    std::to_string(max_threads) + " 2>&1";
  PeerTimes p;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return p;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "fwd_s=%lf fwdbwd_s=%lf threads=%d", &p.fwd, &p.fwdbwd, &p.threads) == 3)
      p.ok = true;
    else
      std::fputs(line, stderr);
  }
  pclose(f);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes = {{4, 512, 12, 12, 64, "llama-125m T=512"}, {1, 2048, 12, 12, 64, "llama-125m T=2048"}};
  if (argc == 6)
    shapes = {{std::atoll(argv[1]), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]),
               "custom"}};
  const char* reps_env = std::getenv("FT_BENCH_REPS");
  const int reps = reps_env ? std::atoi(reps_env) : 5;
  const int threads = omp_get_max_threads();

  omp_set_num_threads(1);
  const auto [peak1, peak1_cpu] = gemm_gflops(2048, reps);
  omp_set_num_threads(threads);
  const double peakn = gemm_gflops(2048, reps).first;
  std::printf(
      "oneDNN sgemm 2048^3: %.1f GFLOP/s on 1 thread (%.1f per CPU-second), %.1f on %d "
      "threads\n",
      peak1, peak1_cpu, peakn, threads);

  std::vector<std::pair<const char*, double>> ratios;
  for (const Shape& s : shapes) {
    const int64_t row = (s.H + 2 * s.Hkv) * s.D;
    auto qkv = random_vec(s.B * s.T * row, 3);
    auto dout = random_vec(s.B * s.T * s.H * s.D, 4);
    std::vector<float> out(s.B * s.T * s.H * s.D), lse(s.B * s.H * s.T), dqkv(qkv.size());
    const double fwd_flop = 4.0 * s.B * s.H * s.T * s.T * s.D / 2, bwd_flop = 2.5 * fwd_flop;
    auto fwd = [&] {
      ft::cpu::attention_forward(ft::cpu_context(), out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.Hkv, s.D);
    };
    auto bwd = [&] {
      ft::cpu::attention_backward(ft::cpu_context(), dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B,
                                  s.T, s.H, s.Hkv, s.D);
    };
    std::printf("\n%s: B=%lld T=%lld H=%lld Hkv=%lld D=%lld\n", s.label, static_cast<long long>(s.B),
                static_cast<long long>(s.T), static_cast<long long>(s.H), static_cast<long long>(s.Hkv),
                static_cast<long long>(s.D));
    for (int th : {1, threads}) {
      omp_set_num_threads(th);
      const Timing tf = best_of(reps, fwd), tb = best_of(reps, bwd);
      const double peak = th == 1 ? peak1 : peakn;
      std::printf(
          "  fluxtrain %d thread(s): fwd %7.2f ms %6.1f GFLOP/s (%2.0f%% of sgemm) | "
          "bwd %7.2f ms %6.1f GFLOP/s (%2.0f%%) | fwd+bwd %6.1f GFLOP/s\n",
          th, tf.wall * 1e3, fwd_flop / tf.wall * 1e-9, 100 * fwd_flop / tf.wall * 1e-9 / peak, tb.wall * 1e3,
          bwd_flop / tb.wall * 1e-9, 100 * bwd_flop / tb.wall * 1e-9 / peak,
          (fwd_flop + bwd_flop) / (tf.wall + tb.wall) * 1e-9);
      if (th == 1)
        std::printf(
            "    per CPU-second: fwd %6.1f GFLOP (%2.0f%% of sgemm's %.1f) | bwd %6.1f "
            "GFLOP (%2.0f%%)\n",
            fwd_flop / tf.cpu * 1e-9, 100 * fwd_flop / tf.cpu * 1e-9 / peak1_cpu, peak1_cpu, bwd_flop / tb.cpu * 1e-9,
            100 * bwd_flop / tb.cpu * 1e-9 / peak1_cpu);
      if (th == threads) {
        PeerTimes p = run_torch(s, reps, threads);
        if (!p.ok) {
          std::printf("  PyTorch: unavailable (see messages above)\n");
          continue;
        }
        const double ours = tf.wall + tb.wall;
        std::printf(
            "  PyTorch %d thread(s):   fwd %7.2f ms %6.1f GFLOP/s | fwd+bwd %7.2f ms "
            "%6.1f GFLOP/s\n",
            p.threads, p.fwd * 1e3, fwd_flop / p.fwd * 1e-9, p.fwdbwd * 1e3, (fwd_flop + bwd_flop) / p.fwdbwd * 1e-9);
        ratios.push_back({s.label, p.fwdbwd / ours});
        std::printf("  fwd+bwd speed-up over PyTorch: %.1fx\n", p.fwdbwd / ours);
      }
    }
    omp_set_num_threads(threads);
  }
  std::printf("\nratio (fluxtrain / PyTorch fwd+bwd throughput):");
  for (const auto& [label, r] : ratios) std::printf("  %s: %.1fx", label, r);
  if (ratios.empty()) std::printf(" none (PyTorch unavailable)");
  std::printf("\n");
  return 0;
}
