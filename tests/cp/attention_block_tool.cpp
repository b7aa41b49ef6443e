// The context-parallel block attention (backends/cpu/attention_block.h) on inputs from a file,
// for attention_block_torch_test.py, which checks it against PyTorch. It plays one rank of a ring:
// the rank's queries meet nblocks key/value blocks one after the other (merged by log-sum-exp),
// then the backward accumulates dq over the blocks and each block's dk, dv.
//
//   attention_block_tool IN OUT
// IN (little-endian): int64 B, Tq, Tk, H, Hkv, D, nblocks; int64 pos_q (Tq); per block int64
//   pos_k (Tk); float32 qkv (B, Tq, (H + 2 Hkv) D); per block float32 kv (B, Tk, 2 Hkv D);
//   float32 dout (B, Tq, H D).
// OUT: float32 out (B, Tq, H D), lse (B, H, Tq), dq (B, Tq, H D), per block dkv (B, Tk, 2 Hkv D).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cpu/attention_block.h"

namespace {

template <typename T>
std::vector<T> read(std::FILE* f, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  if (std::fread(v.data(), sizeof(T), v.size(), f) != v.size()) {
    std::fprintf(stderr, "attention_block_tool: input too short\n");
    std::exit(2);
  }
  return v;
}

void write(std::FILE* f, const std::vector<float>& v) {
  std::fwrite(v.data(), sizeof(float), v.size(), f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: attention_block_tool IN OUT\n");
    return 2;
  }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) return 2;
  const std::vector<int64_t> s = read<int64_t>(in, 7);
  const int64_t B = s[0], Tq = s[1], Tk = s[2], H = s[3], Hkv = s[4], D = s[5], nb = s[6];
  const int64_t row = (H + 2 * Hkv) * D, kv_n = B * Tk * 2 * Hkv * D;
  const std::vector<int64_t> pos_q = read<int64_t>(in, Tq);
  std::vector<std::vector<int64_t>> pos_k;
  for (int64_t i = 0; i < nb; ++i) pos_k.push_back(read<int64_t>(in, Tk));
  std::vector<float> qkv = read<float>(in, B * Tq * row);
  std::vector<std::vector<float>> kv;
  for (int64_t i = 0; i < nb; ++i) kv.push_back(read<float>(in, kv_n));
  const std::vector<float> dout = read<float>(in, B * Tq * H * D);
  std::fclose(in);

  std::vector<float> out(static_cast<size_t>(B * Tq * H * D)), lse(static_cast<size_t>(B * H * Tq));
  ft::cpu::attention_block_init(out.data(), lse.data(), B, Tq, H, D);
  for (int64_t i = 0; i < nb; ++i)
    ft::cpu::attention_block_forward(out.data(), lse.data(), qkv.data(), kv[static_cast<size_t>(i)].data(),
                                     pos_q.data(), pos_k[static_cast<size_t>(i)].data(), B, Tq, Tk, H, Hkv, D);
  std::vector<float> delta(lse.size()), dqkv(qkv.size(), 0.0f);
  ft::cpu::attention_block_delta(delta.data(), dout.data(), out.data(), B, Tq, H, D);
  std::vector<std::vector<float>> dkv(static_cast<size_t>(nb), std::vector<float>(static_cast<size_t>(kv_n), 0.0f));
  for (int64_t i = 0; i < nb; ++i)
    ft::cpu::attention_block_backward(dqkv.data(), dkv[static_cast<size_t>(i)].data(), dout.data(), qkv.data(),
                                      kv[static_cast<size_t>(i)].data(), lse.data(), delta.data(), pos_q.data(),
                                      pos_k[static_cast<size_t>(i)].data(), B, Tq, Tk, H, Hkv, D);
  std::vector<float> dq;
  for (int64_t t = 0; t < B * Tq; ++t) dq.insert(dq.end(), dqkv.begin() + t * row, dqkv.begin() + t * row + H * D);
  std::FILE* o = std::fopen(argv[2], "wb");
  if (!o) return 2;
  write(o, out);
  write(o, lse);
  write(o, dq);
  for (const auto& d : dkv) write(o, d);
  std::fclose(o);
  return 0;
}
