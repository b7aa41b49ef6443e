// Op-level micro benchmark: the fast CPU ops (ft::cpu) against the scalar reference (ft::ref) on
// the shapes of one llama-125m micro-batch (4 × 512 tokens, C 768, F 2048, 12 heads of 64, vocab
// 32000 in chunks of 256 tokens). Prints time, effective memory bandwidth of the fast op, and the
// speed-up over the reference last. GEMM: `fluxtrain bench-peak`.
//
//   build/bench/bench_ops [--reps 5] [--clock wall|cpu]
// --clock cpu times by process CPU time / threads: robust to other processes on a shared machine
// (exact for one thread; pessimistic for several, as waiting threads spin).
#include <omp.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<float> randoms(size_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool g_cpu_clock = false;

double now_ms() {
  if (g_cpu_clock) {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (static_cast<double>(t.tv_sec) * 1e3 + 1e-6 * static_cast<double>(t.tv_nsec)) / omp_get_max_threads();
  }
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

double best_ms(const std::function<void()>& f, int reps) {
  f();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_ms();
    f();
    best = std::min(best, now_ms() - t0);
  }
  return best;
}

int g_reps = 5;

// bytes: what the op must read and write at least once.
void row(const char* op, const std::string& shape, double bytes, const std::function<void()>& fast,
         const std::function<void()>& ref) {
  double t_fast = best_ms(fast, g_reps);
  double t_ref = best_ms(ref, std::max(1, g_reps / 2));
  std::printf("%-20s %-26s %10.3f %10.3f %9.1f %9.1fx\n", op, shape.c_str(), t_ref, t_fast, bytes / t_fast * 1e-6,
              t_ref / t_fast);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) g_reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--clock") == 0) g_cpu_clock = std::strcmp(argv[i + 1], "cpu") == 0;
  }
  const int64_t B = 4, T = 512, N = B * T, C = 768, F = 2048, H = 12, D = 64, V = 32000, NX = 256;
  const int64_t P = 16 << 20;  // AdamW / sum_squares elements
  std::printf("ops: fast CPU vs reference, llama-125m micro-batch shapes, %d thread(s), %s clock, best of %d\n\n",
              omp_get_max_threads(), g_cpu_clock ? "cpu" : "wall", g_reps);
  std::printf("%-20s %-26s %10s %10s %9s %10s\n", "op", "shape", "ref ms", "cpu ms", "cpu GB/s", "speed-up");

  using namespace ft;
  const double f4 = sizeof(float);
  {
    std::vector<int32_t> tok(N);
    std::mt19937 rng(1);
    for (auto& t : tok) t = static_cast<int32_t>(rng() % V);
    auto table = randoms(V * C, -1, 1, 2);
    std::vector<float> out(N * C), dtable(V * C);
    auto dout = randoms(N * C, -1, 1, 3);
    std::string s = "N 2048, C 768, V 32000";
    row(
        "embedding_forward", s, 2.0 * N * C * f4,
        [&] { cpu::embedding_forward(cpu_context(), out.data(), tok.data(), table.data(), N, C, 0, V); },
        [&] { ref::embedding_forward(cpu_context(), out.data(), tok.data(), table.data(), N, C, 0, V); });
    row(
        "embedding_backward", s, 3.0 * N * C * f4,
        [&] { cpu::embedding_backward(cpu_context(), dtable.data(), dout.data(), tok.data(), N, C, 0, V); },
        [&] { ref::embedding_backward(cpu_context(), dtable.data(), dout.data(), tok.data(), N, C, 0, V); });
  }
  {
    auto x = randoms(N * C, -2, 2, 4), w = randoms(C, 0.5f, 1.5f, 5), dout = randoms(N * C, -1, 1, 6);
    std::vector<float> out(N * C), rstd(N), dx(N * C), dw(C);
    std::string s = "N 2048, C 768";
    row(
        "rmsnorm_forward", s, 2.0 * N * C * f4,
        [&] { cpu::rmsnorm_forward(cpu_context(), out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f); },
        [&] { ref::rmsnorm_forward(cpu_context(), out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f); });
    row(
        "rmsnorm_backward", s, 3.0 * N * C * f4,
        [&] {
          cpu::rmsnorm_backward(cpu_context(), dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N,
                                C);
        },
        [&] {
          ref::rmsnorm_backward(cpu_context(), dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N,
                                C);
        });
  }
  {
    std::vector<float> cs(T * D / 2), sn(T * D / 2);
    cpu::rope_tables(cpu_context(), cs.data(), sn.data(), T, D, 10000.0f);
    auto qkv = randoms(N * 3 * H * D, -1, 1, 7);
    std::string s = "B 4, T 512, H 12, D 64";
    double bytes = 2.0 * N * 2 * H * D * f4;  // q and k heads read and written
    row(
        "rope_forward", s, bytes,
        [&] { cpu::rope_forward(cpu_context(), qkv.data(), cs.data(), sn.data(), B, T, H, H, D, 0); },
        [&] { ref::rope_forward(cpu_context(), qkv.data(), cs.data(), sn.data(), B, T, H, H, D, 0); });
    row(
        "rope_backward", s, bytes,
        [&] { cpu::rope_backward(cpu_context(), qkv.data(), cs.data(), sn.data(), B, T, H, H, D, 0); },
        [&] { ref::rope_backward(cpu_context(), qkv.data(), cs.data(), sn.data(), B, T, H, H, D, 0); });
  }
  {
    auto gu = randoms(N * 2 * F, -4, 4, 8), dout = randoms(N * F, -1, 1, 9);
    std::vector<float> out(N * F), dgu(N * 2 * F);
    std::string s = "N 2048, F 2048";
    row(
        "swiglu_forward", s, 3.0 * N * F * f4, [&] { cpu::swiglu_forward(cpu_context(), out.data(), gu.data(), N, F); },
        [&] { ref::swiglu_forward(cpu_context(), out.data(), gu.data(), N, F); });
    row(
        "swiglu_backward", s, 5.0 * N * F * f4,
        [&] { cpu::swiglu_backward(cpu_context(), dgu.data(), dout.data(), gu.data(), N, F); },
        [&] { ref::swiglu_backward(cpu_context(), dgu.data(), dout.data(), gu.data(), N, F); });
  }
  {
    auto logits = randoms(NX * V, -8, 8, 10);
    std::vector<int32_t> tgt(NX);
    for (int64_t n = 0; n < NX; ++n) tgt[n] = static_cast<int32_t>((n * 7919) % V);
    std::vector<float> loss(NX), lse(NX), dl(NX * V);
    std::string s = "N 256, V 32000";
    row(
        "xent_forward", s, 1.0 * NX * V * f4,
        [&] { cpu::xent_forward(cpu_context(), loss.data(), lse.data(), logits.data(), tgt.data(), NX, V); },
        [&] { ref::xent_forward(cpu_context(), loss.data(), lse.data(), logits.data(), tgt.data(), NX, V); });
    row(
        "xent_backward", s, 2.0 * NX * V * f4,
        [&] { cpu::xent_backward(cpu_context(), dl.data(), logits.data(), lse.data(), tgt.data(), NX, V, 1.0f / NX); },
        [&] { ref::xent_backward(cpu_context(), dl.data(), logits.data(), lse.data(), tgt.data(), NX, V, 1.0f / NX); });
  }
  {
    auto x = randoms(N * C, -1, 1, 11), y = randoms(N * C, -1, 1, 12);
    row(
        "add_inplace", "n 2048*768", 3.0 * N * C * f4,
        [&] { cpu::add_inplace(cpu_context(), y.data(), x.data(), N * C); },
        [&] { ref::add_inplace(cpu_context(), y.data(), x.data(), N * C); });
    auto big = randoms(P, -1, 1, 13);
    double sink = 0;
    row(
        "sum_squares", "n 16M", 1.0 * P * f4, [&] { cpu::sum_squares(cpu_context(), &sink, big.data(), P); },
        [&] { ref::sum_squares(cpu_context(), &sink, big.data(), P); });
    auto p = randoms(P, -1, 1, 14), m = randoms(P, -0.01f, 0.01f, 15), v = randoms(P, 0, 1e-4f, 16);
    auto g = randoms(P, -1, 1, 17);
    std::vector<uint16_t> pb(P);
    int64_t step = 1;
    row(
        "adamw_step", "n 16M, bf16 copy", (7.0 * f4 + 2) * P,
        [&] {
          cpu::adamw_step(cpu_context(), p.data(), m.data(), v.data(), pb.data(), g.data(), P, 1e-3f, 0.9f, 0.95f,
                          1e-8f, 0.1f, step++, 1.0f);
        },
        [&] {
          ref::adamw_step(cpu_context(), p.data(), m.data(), v.data(), pb.data(), g.data(), P, 1e-3f, 0.9f, 0.95f,
                          1e-8f, 0.1f, step++, 1.0f);
        });
  }
  return 0;
}
