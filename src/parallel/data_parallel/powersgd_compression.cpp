#include "parallel/data_parallel/powersgd_compression.h"

#include <algorithm>
#include <vector>

#include "kernels/ops.h"
#include "util/hash.h"

namespace ft {

PowerSGD::PowerSGD(const ExecContext& ctx, Communicator& dp, const ParamLayout& layout, int rank)
    : ctx_(ctx), dp_(dp), layout_(layout), r_(rank) {
  compressed_.resize(static_cast<size_t>(layout.num_units()));
  uncompressed_.resize(static_cast<size_t>(layout.num_units()));
  for (const ParamSpec& p : layout.specs()) {
    bool matrix = p.shape.size() == 2;
    int64_t n = matrix ? p.shape[0] : 0, m = matrix ? p.shape[1] : 0;
    // Worth compressing when the factors are much smaller than the matrix.
    if (matrix && (n + m) * r_ * 2 < n * m) {
      Matrix mat{&p, n, m, Tensor::empty({m, r_}, DType::kF32, MemCategory::kCommunication, ctx.device),
                 Tensor::zeros({n, m}, DType::kF32, MemCategory::kCommunication, ctx.device)};
      uint64_t stream = hash_string("powersgd:" + p.name);  // same Q on every rank, drawn on the host
      std::vector<float> q(static_cast<size_t>(m * r_));
      for (int64_t i = 0; i < m * r_; ++i)
        q[static_cast<size_t>(i)] = static_cast<float>(normal_at(stream, static_cast<uint64_t>(i)));
      mem_copy(ctx_, mat.q.raw(), mat.q.device(), q.data(), Device::kCPU, q.size() * sizeof(float));
      compressed_[static_cast<size_t>(p.unit)].push_back(std::move(mat));
    } else {
      uncompressed_[static_cast<size_t>(p.unit)].push_back(&p);
    }
  }
}

float* PowerSGD::room(Tensor& t, int64_t n) {
  if (!t.defined() || t.numel() < n) t = Tensor::empty({n}, DType::kF32, MemCategory::kCommunication, ctx_.device);
  return t.data<float>();
}

void PowerSGD::reduce_unit(float* unit_grads, int u) {
  const ExecContext& ctx = ctx_;
  const Device dev = ctx.device;
  const int64_t base = layout_.unit_begin(u);
  auto& mats = compressed_[static_cast<size_t>(u)];
  const float R = static_cast<float>(dp_.size());

  // Vectors and small matrices: one packed, uncompressed sum.
  int64_t total = 0;
  for (const ParamSpec* p : uncompressed_[static_cast<size_t>(u)]) total += p->numel();
  float* packed = room(packed_, total);
  int64_t off = 0;
  for (const ParamSpec* p : uncompressed_[static_cast<size_t>(u)]) {
    mem_copy(ctx, packed + off, dev, unit_grads + (p->offset - base), dev, static_cast<size_t>(p->numel()) * 4);
    off += p->numel();
  }
  WorkPtr plain = dp_.all_reduce_async(packed, total);

  if (!mats.empty()) {
    int64_t np = 0, nq = 0, nm = 0;
    for (auto& mat : mats) {
      np += mat.n * r_;
      nq += mat.m * r_;
      nm = std::max(nm, mat.n * mat.m);
    }
    float* P = room(p_, np);
    float* Q = room(q_, nq);
    float* approx = room(approx_, nm);
    // M ← grad + error;  P = M Q
    int64_t po = 0;
    for (auto& mat : mats) {
      float* M = unit_grads + (mat.spec->offset - base);
      ops::add_inplace(ctx_, M, mat.error.data<float>(), mat.n * mat.m);
      ops::matmul(ctx_, P + po, M, mat.q.data<float>(), mat.n, r_, mat.m, false, false, 0, Precision::kF32);
      po += mat.n * r_;
    }
    dp_.all_reduce_async(P, np)->stream_wait(ctx_);
    // Q = Mᵀ P̂
    po = 0;
    int64_t qo = 0;
    for (auto& mat : mats) {
      ops::gram_schmidt(ctx_, P + po, mat.n, r_);
      float* M = unit_grads + (mat.spec->offset - base);
      ops::matmul(ctx_, Q + qo, M, P + po, mat.m, r_, mat.n, true, false, 0, Precision::kF32);
      po += mat.n * r_;
      qo += mat.m * r_;
    }
    dp_.all_reduce_async(Q, nq)->stream_wait(ctx_);
    // M̂ = P̂ Qᵀ;  error = M − M̂ / R;  gradient ← M̂
    po = qo = 0;
    for (auto& mat : mats) {
      float* M = unit_grads + (mat.spec->offset - base);
      ops::matmul(ctx_, approx, P + po, Q + qo, mat.n, mat.m, r_, false, true, 0, Precision::kF32);
      mem_copy(ctx, mat.q.raw(), dev, Q + qo, dev, static_cast<size_t>(mat.m * r_) * 4);
      ops::powersgd_error_feedback(ctx_, mat.error.data<float>(), M, approx, R, mat.n * mat.m);
      po += mat.n * r_;
      qo += mat.m * r_;
    }
  }

  plain->stream_wait(ctx_);
  off = 0;
  for (const ParamSpec* p : uncompressed_[static_cast<size_t>(u)]) {
    mem_copy(ctx, unit_grads + (p->offset - base), dev, packed + off, dev, static_cast<size_t>(p->numel()) * 4);
    off += p->numel();
  }
}

}  // namespace ft
