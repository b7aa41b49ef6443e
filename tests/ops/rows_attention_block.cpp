// Rows: attention_block_forward, attention_block_backward and their bf16 forms (context parallelism's
// block attention).
// Positions: "cp" > 0 — the zig-zag chunks of query rank "rq" against key rank "rk" of a sequence
// of T tokens split over cp ranks (model/context_split.h: Tq = Tk = T / cp); "cp" = 0 — queries
// at 3i + 1 against keys at 2j (Tq != Tk, interleaved). Blocks the queries see whole, in part and
// not at all; tiles of 32 rows crossed; GQA and MHA; D = 16/24/64/128. The forward writes
// (acc 0: only blocks every query sees a key of, so no lse is −inf) or merges into random
// (out, lse) (acc 1); the backward adds into small random dq, dk, dv (so += is told from =), with
// out and lse as a merge left them. The CPU kernel is checked against PyTorch by
// cp_attention_block_torch.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

#include "model/context_split.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"
#include "tensor/dtype.h"

namespace ft::test::rows {
namespace {

Shape zigzag(int64_t B, int64_t T, int64_t cp, int64_t rq, int64_t rk, int64_t H, int64_t Hkv, int64_t D) {
  return {{"B", B},       {"T", T},       {"cp", cp}, {"rq", rq},   {"rk", rk},
          {"Tq", T / cp}, {"Tk", T / cp}, {"H", H},   {"Hkv", Hkv}, {"D", D}};
}
Shape interleaved(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D) {
  return {{"B", B},   {"T", 0},   {"cp", 0}, {"rq", 0},    {"rk", 0},
          {"Tq", Tq}, {"Tk", Tk}, {"H", H},  {"Hkv", Hkv}, {"D", D}};
}

std::vector<int32_t> positions(const Shape& s, bool keys) {
  std::vector<int32_t> p;
  if (s["cp"] > 0) {
    for (int64_t x : zigzag_positions(s["T"], s["cp"], keys ? s["rk"] : s["rq"])) p.push_back(static_cast<int32_t>(x));
    return p;
  }
  const int64_t n = keys ? s["Tk"] : s["Tq"];
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(keys ? 2 * i : 3 * i + 1));
  return p;
}

// Blocks every query sees part of (the first query sees the first key).
std::vector<Shape> seen_shapes() {
  return {zigzag(1, 8, 2, 0, 0, 2, 1, 16),   zigzag(2, 20, 2, 1, 1, 4, 4, 16),  zigzag(1, 160, 2, 1, 0, 2, 1, 64),
          zigzag(2, 136, 4, 3, 1, 4, 2, 24), zigzag(1, 96, 2, 0, 0, 2, 2, 128), interleaved(2, 45, 70, 4, 2, 16),
          interleaved(1, 9, 3, 3, 1, 64)};
}
// Also blocks some or all queries see nothing of (merged: left as they were).
std::vector<Shape> all_shapes() {
  std::vector<Shape> out = seen_shapes();
  for (const Shape& s :
       {zigzag(1, 160, 2, 0, 1, 2, 1, 64), zigzag(2, 136, 4, 1, 3, 4, 2, 24), zigzag(1, 16, 4, 0, 1, 2, 1, 16)})
    out.push_back(s);
  return out;
}

int64_t qkv_size(const Shape& s) {
  return s["B"] * s["Tq"] * (s["H"] + 2 * s["Hkv"]) * s["D"];
}
int64_t kv_size(const Shape& s) {
  return s["B"] * s["Tk"] * 2 * s["Hkv"] * s["D"];
}
int64_t out_size(const Shape& s) {
  return s["B"] * s["Tq"] * s["H"] * s["D"];
}
int64_t lse_size(const Shape& s) {
  return s["B"] * s["H"] * s["Tq"];
}
double block_flops(const Shape& s) {
  return 4.0 * s["B"] * s["H"] * s["Tq"] * s["Tk"] * s["D"];
}

// The block forward merged into (out, lse) in double (the gradient check's loss): as
// ref::attention_block_forward with accumulate = true.
void block_forward64(std::vector<double>& out, std::vector<double>& lse, const std::vector<double>& qkv,
                     const std::vector<double>& kv, const std::vector<int32_t>& pq, const std::vector<int32_t>& pk,
                     const Shape& s) {
  const int64_t B = s["B"], Tq = s["Tq"], Tk = s["Tk"], H = s["H"], Hkv = s["Hkv"], D = s["D"];
  const int64_t row = (H + 2 * Hkv) * D, kv_row = 2 * Hkv * D, group = H / Hkv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const double* q = qkv.data() + (b * Tq + i) * row + h * D;
        const double* k = kv.data() + b * Tk * kv_row + (h / group) * D;
        std::vector<double> sc;
        for (int64_t j = 0; j < Tk && pk[static_cast<size_t>(j)] <= pq[static_cast<size_t>(i)]; ++j)
          sc.push_back(std::inner_product(q, q + D, k + j * kv_row, 0.0) / std::sqrt(static_cast<double>(D)));
        if (sc.empty()) continue;
        double& l = lse[static_cast<size_t>((b * H + h) * Tq + i)];
        double mx = l;
        for (double x : sc) mx = std::max(mx, x);
        double sum = std::exp(l - mx);
        for (double x : sc) sum += std::exp(x - mx);
        const double l_new = mx + std::log(sum);
        for (int64_t d = 0; d < D; ++d) {
          double& o = out[static_cast<size_t>((b * Tq + i) * H * D + h * D + d)];
          double acc = std::exp(l - l_new) * o;
          for (size_t j = 0; j < sc.size(); ++j)
            acc += std::exp(sc[j] - l_new) * k[static_cast<int64_t>(j) * kv_row + Hkv * D + d];
          o = acc;
        }
        l = l_new;
      }
}

class AttentionBlockForward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    std::vector<Shape> out;
    for (const Shape& s : seen_shapes()) out.push_back(s.with("acc", 0));
    for (const Shape& s : all_shapes()) out.push_back(s.with("acc", 1));
    return out;
  }
  // One llama-125m micro-batch at cp 2: 4 × 256 of 512 tokens, 12 heads of 64, a later rank's block.
  Shape bench_shape() const override { return zigzag(4, 512, 2, 1, 0, 12, 12, 64).with("acc", 1); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_f32("qkv", qkv_size(s), seed + 1 + s["Tq"], -3.4f, 3.4f);
    c.in_f32("kv", kv_size(s), seed + 2 + s["Tk"], -3.4f, 3.4f);
    c.in_i32("pos_q", positions(s, false));
    c.in_i32("pos_k", positions(s, true));
    if (s["acc"] != 0) {
      c.inout_f32("out", out_size(s), seed + 3, Tol::rel_max(1e-5));
      c.inout_f32("lse", lse_size(s), seed + 4, Tol::rel_max(2e-6), -1.0f, 3.0f);
    } else {
      c.out_f32("out", out_size(s), Tol::rel_max(1e-5));
      c.out_f32("lse", lse_size(s), Tol::rel_max(2e-6));
    }
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_block_forward(ctx, c.f32("out"), c.f32("lse"), c.f32("qkv"), c.f32("kv"), c.i32("pos_q"),
                                c.i32("pos_k"), c["B"], c["Tq"], c["Tk"], c["H"], c["Hkv"], c["D"], c["acc"] != 0);
  }
  Cost cost(const Shape& s) const override {
    return {kF32Bytes * (out_size(s) + kv_size(s) + 2 * (out_size(s) + lse_size(s))), block_flops(s)};
  }
};

std::vector<Shape> block_grad_shapes() {
  return {zigzag(1, 8, 2, 1, 0, 2, 1, 16), interleaved(1, 5, 4, 2, 2, 16)};
}

// The backward rows' gradient check (both precisions): loss = Σ dout ∘ out, out the merge of (out0,
// lse0) with the block; its gradient is the block's share of dq (the query heads of dqkv; the key and
// value heads of qkv are not read: 0) and dk, dv.
double block_loss64(const Case& c, const Inputs64& in) {
  const Shape& s = c.shape();
  std::vector<double> out = in64(in, "out0"), lse = in64(in, "lse0");
  block_forward64(out, lse, in64(in, "qkv"), in64(in, "kv"), positions(s, false), positions(s, true), s);
  return dot64(in64(in, "dout"), out);
}

// The same gradient in double, from the merged (out, lse) in double.
std::map<std::string, std::vector<double>> block_grads64(const Case& c, const Inputs64& in) {
  const Shape& s = c.shape();
  const int64_t B = s["B"], Tq = s["Tq"], Tk = s["Tk"], H = s["H"], Hkv = s["Hkv"], D = s["D"];
  const int64_t row = (H + 2 * Hkv) * D, kv_row = 2 * Hkv * D, group = H / Hkv;
  const std::vector<double>&qkv = in64(in, "qkv"), &kv = in64(in, "kv"), &dout = in64(in, "dout");
  const std::vector<int32_t> pq = positions(s, false), pk = positions(s, true);
  std::vector<double> out = in64(in, "out0"), lse = in64(in, "lse0");
  block_forward64(out, lse, qkv, kv, pq, pk, s);
  std::vector<double> dqkv(qkv.size(), 0.0), dkv(kv.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t qo = (b * Tq + i) * row + h * D, oo = (b * Tq + i) * H * D + h * D;
        const int64_t ko = b * Tk * kv_row + (h / group) * D, vo = ko + Hkv * D;
        const double delta = std::inner_product(&dout[oo], &dout[oo] + D, &out[oo], 0.0);
        const double l = lse[static_cast<size_t>((b * H + h) * Tq + i)];
        for (int64_t j = 0; j < Tk && pk[static_cast<size_t>(j)] <= pq[static_cast<size_t>(i)]; ++j) {
          const double p = std::exp(std::inner_product(&qkv[qo], &qkv[qo] + D, &kv[ko + j * kv_row], 0.0) * scale - l);
          const double ds = p * (std::inner_product(&dout[oo], &dout[oo] + D, &kv[vo + j * kv_row], 0.0) - delta);
          for (int64_t d = 0; d < D; ++d) {
            dqkv[qo + d] += ds * scale * kv[ko + j * kv_row + d];
            dkv[ko + j * kv_row + d] += ds * scale * qkv[qo + d];
            dkv[vo + j * kv_row + d] += p * dout[oo + d];
          }
        }
      }
  return {{"dqkv", dqkv}, {"dkv", dkv}};
}

class AttentionBlockBackward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return all_shapes(); }
  Shape bench_shape() const override { return zigzag(4, 512, 2, 1, 0, 12, 12, 64); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    const float* qkv = c.in_f32("qkv", qkv_size(s), seed + 11 + s["Tq"], -3.4f, 3.4f);
    const float* kv = c.in_f32("kv", kv_size(s), seed + 12 + s["Tk"], -3.4f, 3.4f);
    c.in_f32("dout", out_size(s), seed + 13, -1.7f, 1.7f);
    const std::vector<int32_t> pq = positions(s, false), pk = positions(s, true);
    c.in_i32("pos_q", pq);
    c.in_i32("pos_k", pk);
    // (out, lse) as the ring leaves them: an earlier block's state (out0, lse0: the gradient
    // check's constants) with this block merged in.
    std::vector<float> out = random_floats(out_size(s), seed + 14), lse = random_floats(lse_size(s), seed + 15);
    c.in_f32("out0", out);
    c.in_f32("lse0", lse);
    ref::attention_block_forward(cpu_context(), out.data(), lse.data(), qkv, kv, pq.data(), pk.data(), s["B"], s["Tq"],
                                 s["Tk"], s["H"], s["Hkv"], s["D"], true);
    c.in_f32("out", out);
    c.in_f32("lse", lse);
    c.inout_f32("dqkv", qkv_size(s), seed + 16, Tol::rel_max(1e-5), -1e-3f, 1e-3f);
    c.inout_f32("dkv", kv_size(s), seed + 17, Tol::rel_max(1e-5), -1e-3f, 1e-3f);
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_block_backward(ctx, c.f32("dqkv"), c.f32("dkv"), c.f32("dout"), c.f32("qkv"), c.f32("kv"),
                                 c.f32("out"), c.f32("lse"), c.i32("pos_q"), c.i32("pos_k"), c["B"], c["Tq"], c["Tk"],
                                 c["H"], c["Hkv"], c["D"]);
  }
  Cost cost(const Shape& s) const override {
    return {kF32Bytes * (4 * out_size(s) + 2 * kv_size(s) + lse_size(s)), 2.5 * block_flops(s)};
  }

  std::vector<GradOf> grads() const override { return {{"dqkv", "qkv", true}, {"dkv", "kv", true}}; }
  std::vector<Shape> grad_shapes() const override { return block_grad_shapes(); }
  double loss64(const Case& c, const Inputs64& in) const override { return block_loss64(c, in); }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    return block_grads64(c, in);
  }
  Tol grad_tol() const override { return Tol::rel_max(5e-6); }
};

// The bf16 forms: the same shapes with q, k, v (and dout, out) in bf16; out, lse and dq in fp32 as
// the fp32 rows (the device widens exactly, as the reference does), dk and dv in bf16 (two steps of
// the largest).
std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

class AttentionBlockForwardBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return AttentionBlockForward().test_shapes(); }
  Shape bench_shape() const override { return zigzag(4, 512, 2, 1, 0, 12, 12, 64).with("acc", 1); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_bf16("qkv", random_floats(qkv_size(s), seed + 21 + s["Tq"], -3.4f, 3.4f));
    c.in_bf16("kv", random_floats(kv_size(s), seed + 22 + s["Tk"], -3.4f, 3.4f));
    c.in_i32("pos_q", positions(s, false));
    c.in_i32("pos_k", positions(s, true));
    if (s["acc"] != 0) {
      c.inout_f32("out", out_size(s), seed + 23, Tol::rel_max(1e-5));
      c.inout_f32("lse", lse_size(s), seed + 24, Tol::rel_max(2e-6), -1.0f, 3.0f);
    } else {
      c.out_f32("out", out_size(s), Tol::rel_max(1e-5));
      c.out_f32("lse", lse_size(s), Tol::rel_max(2e-6));
    }
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_block_forward_bf16(ctx, c.f32("out"), c.f32("lse"), c.bf16("qkv"), c.bf16("kv"), c.i32("pos_q"),
                                     c.i32("pos_k"), c["B"], c["Tq"], c["Tk"], c["H"], c["Hkv"], c["D"], c["acc"] != 0);
  }
  Cost cost(const Shape& s) const override {
    return {kBf16Bytes * (out_size(s) + kv_size(s)) + kF32Bytes * 2 * (out_size(s) + lse_size(s)), block_flops(s)};
  }
};

class AttentionBlockBackwardBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return all_shapes(); }
  Shape bench_shape() const override { return zigzag(4, 512, 2, 1, 0, 12, 12, 64); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    // Inputs in ±1.7 (the fp32 row: ±3.4): softer scores, so that the gradient check's gradients are
    // not all near zero beside the error of the bf16 out its delta (dout · out) is computed from.
    const std::vector<float> qkv = rounded(random_floats(qkv_size(s), seed + 31 + s["Tq"], -1.7f, 1.7f));
    const std::vector<float> kv = rounded(random_floats(kv_size(s), seed + 32 + s["Tk"], -1.7f, 1.7f));
    c.in_bf16("qkv", qkv);
    c.in_bf16("kv", kv);
    c.in_bf16("dout", random_floats(out_size(s), seed + 33, -1.7f, 1.7f));
    const std::vector<int32_t> pq = positions(s, false), pk = positions(s, true);
    c.in_i32("pos_q", pq);
    c.in_i32("pos_k", pk);
    // (out, lse) as the ring leaves them (an earlier block's state with this block merged in), out
    // rounded to bf16 as the ring writes it.
    std::vector<float> out = random_floats(out_size(s), seed + 34), lse = random_floats(lse_size(s), seed + 35);
    c.in_f32("out0", out);
    c.in_f32("lse0", lse);
    ref::attention_block_forward(cpu_context(), out.data(), lse.data(), qkv.data(), kv.data(), pq.data(), pk.data(),
                                 s["B"], s["Tq"], s["Tk"], s["H"], s["Hkv"], s["D"], true);
    c.in_bf16("out", out);
    c.in_f32("lse", lse);
    c.inout_f32("dqkv", qkv_size(s), seed + 36, Tol::rel_max(1e-5), -1e-3f, 1e-3f);
    // dk, dv: sums of many terms rounded to bf16 once; an element that nearly cancels may land a step
    // away from the reference's, so relative to the largest (two bf16 steps of it, 2^-7).
    c.inout_bf16("dkv", random_floats(kv_size(s), seed + 37, -1e-3f, 1e-3f), Tol::rel_max(7.8e-3));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_block_backward_bf16(ctx, c.f32("dqkv"), c.bf16("dkv"), c.bf16("dout"), c.bf16("qkv"), c.bf16("kv"),
                                      c.bf16("out"), c.f32("lse"), c.i32("pos_q"), c.i32("pos_k"), c["B"], c["Tq"],
                                      c["Tk"], c["H"], c["Hkv"], c["D"]);
  }
  Cost cost(const Shape& s) const override {
    return {kBf16Bytes * (3 * out_size(s) + 2 * kv_size(s)) + kF32Bytes * (2 * out_size(s) + lse_size(s)),
            2.5 * block_flops(s)};
  }

  // The fp32 row's check: the op reads the merged out in bf16 (delta) and writes dk, dv in bf16,
  // so about a bf16 step of the largest gradient.
  std::vector<GradOf> grads() const override { return {{"dqkv", "qkv", true}, {"dkv", "kv", true}}; }
  std::vector<Shape> grad_shapes() const override { return block_grad_shapes(); }
  double loss64(const Case& c, const Inputs64& in) const override { return block_loss64(c, in); }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    return block_grads64(c, in);
  }
  Tol grad_tol() const override { return Tol::rel_max(1e-2); }
};

}  // namespace

const OpCase& attention_block_forward() {
  static const AttentionBlockForward row;
  return row;
}
const OpCase& attention_block_backward() {
  static const AttentionBlockBackward row;
  return row;
}

const OpCase& attention_block_forward_bf16() {
  static const AttentionBlockForwardBf16 row;
  return row;
}
const OpCase& attention_block_backward_bf16() {
  static const AttentionBlockBackwardBf16 row;
  return row;
}

}  // namespace ft::test::rows
