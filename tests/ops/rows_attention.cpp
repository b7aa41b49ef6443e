// Rows: attention_forward, attention_backward (causal, grouped-query), their bf16 forms (bf16
// q, k, v, out and gradients: judged relative to the values' size at bf16's resolution),
// kv_cache_write, attention_decode. Shapes: T = 1, T below, at and above the 64-wide blocks, GQA and MHA,
// D = 16/64/128 and D = 24 (not a multiple of the 16-float vectors). Errors are judged relative
// to the size of the values (max |got − want| / max |want|). The thread-count schedules, the
// decode-equals-forward identities and the scratch bound are tests/unit/attention_test.cpp.
#include "kernels/ref/ref_impl.h"
#include "ops/op_cases.h"
#include "ops/rows_util.h"
#include "tensor/dtype.h"

namespace ft::test::rows {
namespace {

Shape attn(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  return {{"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"D", D}};
}

std::vector<Shape> attention_shapes() {
  return {attn(1, 1, 2, 1, 16),   attn(2, 5, 4, 4, 16),    attn(1, 64, 2, 1, 64),  attn(2, 67, 4, 2, 16),
          attn(1, 130, 3, 3, 64), attn(1, 100, 4, 1, 128), attn(2, 129, 2, 2, 24), attn(1, 200, 6, 2, 64)};
}

// One llama-125m micro-batch: 4 × 512 tokens, 12 heads of 64.
Shape attention_bench() {
  return attn(4, 512, 12, 12, 64);
}

int64_t qkv_size(const Shape& s) {
  return s["B"] * s["T"] * (s["H"] + 2 * s["Hkv"]) * s["D"];
}
int64_t out_size(const Shape& s) {
  return s["B"] * s["T"] * s["H"] * s["D"];
}
int64_t lse_size(const Shape& s) {
  return s["B"] * s["H"] * s["T"];
}

// Causal: each head's q kᵀ and P v over half of the (T, T) scores.
double causal_flops(const Shape& s) {
  return 2.0 * s["B"] * s["H"] * s["T"] * s["T"] * s["D"];
}

// The backward rows' gradient check: loss = Σ dout ∘ attention(qkv) in double, and its gradient.
double attention_loss64(const Case& c, const Inputs64& in) {
  const Shape& s = c.shape();
  std::vector<double> out(static_cast<size_t>(out_size(s))), lse(static_cast<size_t>(lse_size(s)));
  ref_impl::attention_forward(out.data(), lse.data(), in64(in, "qkv").data(), s["B"], s["T"], s["H"], s["Hkv"], s["D"]);
  return dot64(in64(in, "dout"), out);
}
std::vector<double> attention_grad64(const Case& c, const Inputs64& in) {
  const Shape& s = c.shape();
  const std::vector<double>& qkv = in64(in, "qkv");
  std::vector<double> out(static_cast<size_t>(out_size(s))), lse(static_cast<size_t>(lse_size(s)));
  ref_impl::attention_forward(out.data(), lse.data(), qkv.data(), s["B"], s["T"], s["H"], s["Hkv"], s["D"]);
  std::vector<double> d(static_cast<size_t>(qkv_size(s)));
  ref_impl::attention_backward(d.data(), in64(in, "dout").data(), qkv.data(), out.data(), lse.data(), s["B"], s["T"],
                               s["H"], s["Hkv"], s["D"]);
  return d;
}

class AttentionForward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    std::vector<Shape> out;
    for (const Shape& s : attention_shapes()) {
      out.push_back(s.with("amp", 1));
      out.push_back(s.with("amp", 4));  // peaked softmax, large score range
    }
    return out;
  }
  Shape bench_shape() const override { return attention_bench().with("amp", 1); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    const float a = 1.7f * static_cast<float>(s["amp"]);
    c.in_f32("qkv", qkv_size(s), seed + 1 + s["T"], -a, a);
    c.out_f32("out", out_size(s), Tol::rel_max(1e-5));
    c.out_f32("lse", lse_size(s), Tol::rel_max(2e-6));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_forward(ctx, c.f32("out"), c.f32("lse"), c.f32("qkv"), c["B"], c["T"], c["H"], c["Hkv"], c["D"]);
  }
  Cost cost(const Shape& s) const override {
    return {kF32Bytes * (qkv_size(s) + out_size(s) + lse_size(s)), causal_flops(s)};
  }
};

// dqkv of Σ dout ∘ attention(qkv).
class AttentionBackward final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return attention_shapes(); }
  Shape bench_shape() const override { return attention_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    const float* qkv = c.in_f32("qkv", qkv_size(s), seed + 11 + s["T"], -3.4f, 3.4f);
    c.in_f32("dout", out_size(s), seed + 12 + s["T"], -1.7f, 1.7f);
    std::vector<float> out(static_cast<size_t>(out_size(s))), lse(static_cast<size_t>(lse_size(s)));
    ref::attention_forward(cpu_context(), out.data(), lse.data(), qkv, s["B"], s["T"], s["H"], s["Hkv"], s["D"]);
    c.in_f32("out", out);
    c.in_f32("lse", lse);
    c.out_f32("dqkv", qkv_size(s), Tol::rel_max(1e-5));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_backward(ctx, c.f32("dqkv"), c.f32("dout"), c.f32("qkv"), c.f32("out"), c.f32("lse"), c["B"], c["T"],
                           c["H"], c["Hkv"], c["D"]);
  }
  Cost cost(const Shape& s) const override {
    // q kᵀ recomputed, dP = dO vᵀ, dV, dQ, dK: five products over the causal half.
    return {kF32Bytes * (2 * qkv_size(s) + 2 * out_size(s) + lse_size(s)), 2.5 * causal_flops(s)};
  }

  std::vector<GradOf> grads() const override { return {{"dqkv", "qkv", false}}; }
  std::vector<Shape> grad_shapes() const override { return {attn(1, 6, 4, 2, 16), attn(2, 3, 2, 2, 16)}; }
  double loss64(const Case& c, const Inputs64& in) const override { return attention_loss64(c, in); }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    return {{"dqkv", attention_grad64(c, in)}};
  }
  // Relative to the largest gradient, as the attention kernels' errors are.
  Tol grad_tol() const override { return Tol::rel_max(5e-6); }
};

// Rounded to bf16 and widened back (exact): what a bf16 buffer of these values holds.
std::vector<float> bf16_values(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}
// One bf16 step of the largest value, plus the fp32 kernels' own error.
Tol bf16_rel() {
  return Tol::rel_max(1e-2);
}

class AttentionForwardBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return attention_shapes(); }
  Shape bench_shape() const override { return attention_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    c.in_bf16("qkv", random_floats(qkv_size(s), seed + 61 + s["T"], -3.4f, 3.4f));
    c.out_bf16("out", out_size(s), bf16_rel());
    c.out_f32("lse", lse_size(s), Tol::rel_max(2e-6));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_forward_bf16(ctx, c.bf16("out"), c.f32("lse"), c.bf16("qkv"), c["B"], c["T"], c["H"], c["Hkv"],
                               c["D"]);
  }
  Cost cost(const Shape& s) const override {
    return {kBf16Bytes * (qkv_size(s) + out_size(s)) + kF32Bytes * lse_size(s), causal_flops(s)};
  }
};

class AttentionBackwardBf16 final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override { return attention_shapes(); }
  Shape bench_shape() const override { return attention_bench(); }
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    const std::vector<float> qkv = bf16_values(random_floats(qkv_size(s), seed + 62 + s["T"], -3.4f, 3.4f));
    c.in_bf16("qkv", qkv);
    c.in_bf16("dout", random_floats(out_size(s), seed + 63 + s["T"], -1.7f, 1.7f));
    // The forward's out (rounded to bf16, as the bf16 forward writes it) and lse, from the reference.
    std::vector<float> out(static_cast<size_t>(out_size(s))), lse(static_cast<size_t>(lse_size(s)));
    ref::attention_forward(cpu_context(), out.data(), lse.data(), qkv.data(), s["B"], s["T"], s["H"], s["Hkv"], s["D"]);
    c.in_bf16("out", out);
    c.in_f32("lse", lse);
    c.out_bf16("dqkv", qkv_size(s), bf16_rel());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_backward_bf16(ctx, c.bf16("dqkv"), c.bf16("dout"), c.bf16("qkv"), c.bf16("out"), c.f32("lse"), c["B"],
                                c["T"], c["H"], c["Hkv"], c["D"]);
  }
  Cost cost(const Shape& s) const override {
    return {kBf16Bytes * (2 * qkv_size(s) + 2 * out_size(s)) + kF32Bytes * lse_size(s), 2.5 * causal_flops(s)};
  }

  std::vector<GradOf> grads() const override { return {{"dqkv", "qkv", false}}; }
  std::vector<Shape> grad_shapes() const override { return {attn(1, 6, 4, 2, 16), attn(2, 3, 2, 2, 16)}; }
  double loss64(const Case& c, const Inputs64& in) const override { return attention_loss64(c, in); }
  std::map<std::string, std::vector<double>> backward64(const Case& c, const Inputs64& in) const override {
    return {{"dqkv", attention_grad64(c, in)}};
  }
  // bf16 out (in delta) and dqkv: about a bf16 step of the largest gradient.
  Tol grad_tol() const override { return bf16_rel(); }
};

Shape cache(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t pos0, int64_t max_T) {
  return attn(B, T, H, Hkv, D).with("pos0", pos0).with("max_T", max_T);
}

int64_t cache_size(const Shape& s) {
  return s["B"] * s["Hkv"] * s["max_T"] * s["D"];
}

// Positions the op does not write keep what the cache held.
class KvCacheWrite final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    // D 6: no 4-float groups; "off": every buffer off a 16-byte boundary (both the scalar path).
    return {cache(1, 1, 2, 1, 16, 0, 1),
            cache(2, 5, 4, 2, 16, 3, 9),
            cache(2, 37, 4, 2, 24, 0, 46),
            cache(2, 3, 2, 1, 6, 1, 5),
            cache(2, 5, 4, 2, 16, 3, 9).with("off", 1),
            cache(1, 3, 6, 2, 64, 13, 16),
            cache(3, 70, 4, 4, 16, 5, 80)};
  }
  Shape bench_shape() const override { return cache(4, 512, 12, 12, 64, 0, 512); }  // a prompt of 512 tokens
  Case make(const Shape& s, uint64_t seed) const override {
    const int64_t o = offset_of(s);
    Case c(s);
    c.in_f32("qkv", qkv_size(s) + o, seed + 41);
    c.inout_f32("k_cache", cache_size(s) + o, seed + 42, Tol::exact());
    c.inout_f32("v_cache", cache_size(s) + o, seed + 43, Tol::exact());
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    const int64_t o = offset_of(c.shape());
    ops.kv_cache_write(ctx, c.f32("k_cache") + o, c.f32("v_cache") + o, c.f32("qkv") + o, c["B"], c["T"], c["H"],
                       c["Hkv"], c["D"], c["pos0"], c["max_T"]);
  }
  Cost cost(const Shape& s) const override { return {4 * kF32Bytes * s["B"] * s["T"] * s["Hkv"] * s["D"], 0}; }
};

Shape decode(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t max_T) {
  return {{"B", B}, {"Tq", Tq}, {"Tk", Tk}, {"H", H}, {"Hkv", Hkv}, {"D", D}, {"max_T", max_T}};
}

// Tq new queries against Tk cached positions (random caches: every position read is compared).
class AttentionDecode final : public OpCase {
 public:
  std::vector<Shape> test_shapes() const override {
    return {decode(1, 1, 1, 2, 1, 16, 1),     decode(2, 1, 37, 4, 2, 16, 45),  decode(2, 5, 12, 6, 2, 64, 16),
            decode(1, 3, 130, 2, 1, 64, 140), decode(2, 67, 67, 4, 2, 24, 70), decode(1, 1, 200, 4, 4, 128, 256)};
  }
  Shape bench_shape() const override { return decode(4, 1, 512, 12, 12, 64, 512); }  // the 512th token
  Case make(const Shape& s, uint64_t seed) const override {
    Case c(s);
    const int64_t row = (s["H"] + 2 * s["Hkv"]) * s["D"], cache = s["B"] * s["Hkv"] * s["max_T"] * s["D"];
    c.in_f32("qkv", s["B"] * s["Tq"] * row, seed + 51, -1.7f, 1.7f);
    c.in_f32("k_cache", cache, seed + 52, -1.7f, 1.7f);
    c.in_f32("v_cache", cache, seed + 53, -1.7f, 1.7f);
    c.out_f32("out", s["B"] * s["Tq"] * s["H"] * s["D"], Tol::rel_max(1e-5));
    return c;
  }
  void run(const OpTable& ops, const ExecContext& ctx, Case& c) const override {
    ops.attention_decode(ctx, c.f32("out"), c.f32("qkv"), c.f32("k_cache"), c.f32("v_cache"), c["B"], c["Tq"], c["Tk"],
                         c["H"], c["Hkv"], c["D"], c["max_T"]);
  }
  Cost cost(const Shape& s) const override {
    const double B = s["B"], Tq = s["Tq"], Tk = s["Tk"], H = s["H"], Hkv = s["Hkv"], D = s["D"];
    return {kF32Bytes * (2 * B * Hkv * Tk * D + B * Tq * (2 * H + 2 * Hkv) * D), 4 * B * H * Tq * Tk * D};
  }
};

}  // namespace

const OpCase& attention_forward() {
  static const AttentionForward row;
  return row;
}
const OpCase& attention_backward() {
  static const AttentionBackward row;
  return row;
}
const OpCase& attention_forward_bf16() {
  static const AttentionForwardBf16 row;
  return row;
}
const OpCase& attention_backward_bf16() {
  static const AttentionBackwardBf16 row;
  return row;
}
const OpCase& kv_cache_write() {
  static const KvCacheWrite row;
  return row;
}
const OpCase& attention_decode() {
  static const AttentionDecode row;
  return row;
}

}  // namespace ft::test::rows
