// fp32 <-> fp16 against numpy's float16 (Debian's /usr/bin/python3), bit for bit, on every path
// that converts: each of tensor/f16_convert.h's paths this CPU has (scalar, F16C, AVX-512), the
// scalar ft::f32_to_f16 / f16_to_f32, ft::convert, and the to_fp16 / from_fp16 ops of the CPU
// backend and the reference. The edges: the midpoint between every pair of neighbouring fp16
// values and one fp32 step either side of it (ties to even), the overflow boundary (65504, 65520),
// subnormal fp16 results and what flushes to 0, fp32 subnormals, ±0, ±inf, quiet and signalling
// NaNs, and random values of every magnitude. A NaN must come out a NaN of the same sign (its
// payload bits are not part of the contract: numpy keeps them, F16C quiets a signalling NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "tensor/f16_convert.h"

namespace ft {
namespace {

template <typename T>
void write_raw(const std::string& path, const std::vector<T>& v) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
std::vector<T> read_raw(const std::string& path, size_t n) {
  std::vector<T> v(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
  EXPECT_EQ(static_cast<size_t>(f.gcount()), n * sizeof(T)) << path;
  return v;
}

// numpy converts: float32 values of `in` to float16 bits (to16), and every fp16 pattern to
// float32 bits (to32).
void numpy_convert(const std::string& in, const std::string& to16, const std::string& to32) {
  const std::string script =
      "import sys, numpy as np\n"
      "x = np.fromfile(sys.argv[1], dtype=np.float32)\n"
      "with np.errstate(over=\"ignore\", invalid=\"ignore\", under=\"ignore\"):\n"
      "  x.astype(np.float16).view(np.uint16).tofile(sys.argv[2])\n"
      "  np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32).tofile(sys.argv[3])\n";
  const std::string cmd = "/usr/bin/python3 -c '" + script + "' " + in + " " + to16 + " " + to32;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

std::vector<float> edge_cases() {
  std::vector<float> x;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {  // every finite non-negative fp16 and the next one up
    const double lo = f16_to_f32(static_cast<uint16_t>(h)), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: 11 bits + 1 fit fp32's 24
    for (float v : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  const float edges[] = {65504.0f,
                         65519.99f,
                         65520.0f,
                         65535.0f,
                         65536.0f,
                         1e6f,
                         3.4e38f,
                         INFINITY,
                         std::ldexp(1.0f, -24),
                         std::ldexp(1.0f, -25),
                         std::nextafter(std::ldexp(1.0f, -25), 1.0f),
                         std::ldexp(1.0f, -26),
                         std::ldexp(1.0f, -14),
                         std::nextafter(std::ldexp(1.0f, -14), 0.0f),
                         1e-30f,
                         1e-40f /* an fp32 subnormal */,
                         0.0f};
  for (float v : edges) {
    x.push_back(v);
    x.push_back(-v);
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0x7fffffffu, 0x7fc01234u})
    for (uint32_t sign : {0u, 0x80000000u}) x.push_back(std::bit_cast<float>(nan | sign));
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-30, 17);
  for (int i = 0; i < 100000; ++i) x.push_back(std::ldexp(mant(rng), exp(rng)) * (i % 2 ? -1.0f : 1.0f));
  return x;
}

bool f16_matches(uint16_t got, uint16_t want) {
  const bool got_nan = (got & 0x7fffu) > 0x7c00u, want_nan = (want & 0x7fffu) > 0x7c00u;
  if (got_nan || want_nan) return got_nan && want_nan && (got & 0x8000u) == (want & 0x8000u);
  return got == want;
}

bool f32_matches(float got, float want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) && std::signbit(got) == std::signbit(want);
  return std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
}

struct Converter {
  std::string name;
  std::function<void(uint16_t*, const float*, size_t)> to16;
  std::function<void(float*, const uint16_t*, size_t)> to32;
};

std::vector<Converter> converters() {
  std::vector<Converter> out;
  for (F16Path p : available_f16_paths())
    out.push_back({std::string("f16_convert ") + f16_path_name(p),
                   [p](uint16_t* d, const float* s, size_t n) { f32_to_f16_array(p, d, s, n); },
                   [p](float* d, const uint16_t* s, size_t n) { f16_to_f32_array(p, d, s, n); }});
  out.push_back({"f32_to_f16 / f16_to_f32",
                 [](uint16_t* d, const float* s, size_t n) {
                   for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(s[i]);
                 },
                 [](float* d, const uint16_t* s, size_t n) {
                   for (size_t i = 0; i < n; ++i) d[i] = f16_to_f32(s[i]);
                 }});
  out.push_back({"convert", [](uint16_t* d, const float* s, size_t n) { convert(d, DType::kF16, s, DType::kF32, n); },
                 [](float* d, const uint16_t* s, size_t n) { convert(d, DType::kF32, s, DType::kF16, n); }});
  for (const OpTable* t : {&cpu::op_table(), &ref::op_table()}) {
    out.push_back(
        {std::string("op to_fp16 / from_fp16 (") + t->backend + ")",
         [t](uint16_t* d, const float* s, size_t n) { t->to_fp16(cpu_context(), d, s, static_cast<int64_t>(n)); },
         [t](float* d, const uint16_t* s, size_t n) { t->from_fp16(cpu_context(), d, s, static_cast<int64_t>(n)); }});
  }
  return out;
}

TEST(F16Numpy, EveryPathConvertsAsNumpysFloat16) {
  const std::string dir = testing::scratch_dir("f16_numpy");
  const std::vector<float> x = edge_cases();
  write_raw(dir + "/x.f32", x);
  numpy_convert(dir + "/x.f32", dir + "/want16.u16", dir + "/want32.f32");
  const std::vector<uint16_t> want16 = read_raw<uint16_t>(dir + "/want16.u16", x.size());
  const std::vector<float> want32 = read_raw<float>(dir + "/want32.f32", 65536);
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);

  for (const Converter& c : converters()) {
    std::vector<uint16_t> got16(x.size());
    c.to16(got16.data(), x.data(), x.size());
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (!f16_matches(got16[i], want16[i]) && bad++ < 5)
        ADD_FAILURE() << c.name << ": fp16(" << x[i] << ", bits 0x" << std::hex << std::bit_cast<uint32_t>(x[i])
                      << ") = 0x" << got16[i] << ", numpy 0x" << want16[i] << std::dec;
    EXPECT_EQ(bad, 0u) << c.name << ": of " << x.size();
    const size_t bad16 = bad;
    std::vector<float> got32(65536);
    c.to32(got32.data(), all.data(), all.size());
    bad = 0;
    for (size_t h = 0; h < 65536; ++h)
      if (!f32_matches(got32[h], want32[h]) && bad++ < 5)
        ADD_FAILURE() << c.name << ": fp32(fp16 0x" << std::hex << h << ") = " << std::dec << got32[h] << ", numpy "
                      << want32[h];
    EXPECT_EQ(bad, 0u) << c.name;
    if (bad16 == 0 && bad == 0)
      std::printf("%-40s %zu fp32 -> fp16 and 65536 fp16 -> fp32 equal to numpy\n", c.name.c_str(), x.size());
  }
}

// The vector paths and the scalar tail meet at every length and offset (the CPU op splits blocks
// over threads too): the same bits as the scalar conversion.
TEST(F16Numpy, VectorBodiesAndTailsAgreeAtEveryLength) {
  std::vector<float> x(300);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (float& v : x) v = d(rng);
  for (F16Path p : available_f16_paths())
    for (size_t off = 0; off < 3; ++off)
      for (size_t n = 0; n + off <= x.size(); n += 7) {
        std::vector<uint16_t> got(n + 1, 0xabcd), want(n);
        f32_to_f16_array(p, got.data(), x.data() + off, n);
        for (size_t i = 0; i < n; ++i) want[i] = f32_to_f16(x[off + i]);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << f16_path_name(p) << " n " << n;
        ASSERT_EQ(got[n], 0xabcd) << f16_path_name(p) << " wrote past n = " << n;
      }
}

}  // namespace
}  // namespace ft
