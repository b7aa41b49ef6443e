#include "parallel/data_parallel/powersgd.h"

#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "util/hash.h"

namespace ft {
namespace {

// Gram–Schmidt on the r columns of P (n × r, row-major).
void orthonormalise(float* P, int64_t n, int64_t r) {
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t k = 0; k < j; ++k) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(P[i * r + j]) * P[i * r + k];
      for (int64_t i = 0; i < n; ++i) P[i * r + j] -= static_cast<float>(dot) * P[i * r + k];
    }
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) norm += static_cast<double>(P[i * r + j]) * P[i * r + j];
    float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
    for (int64_t i = 0; i < n; ++i) P[i * r + j] *= inv;
  }
}

}  // namespace

PowerSGD::PowerSGD(const ExecContext& ctx, Communicator& dp, const ParamLayout& layout, int rank)
    : ctx_(ctx), dp_(dp), layout_(layout), r_(rank) {
  compressed_.resize(static_cast<size_t>(layout.num_units()));
  uncompressed_.resize(static_cast<size_t>(layout.num_units()));
  for (const ParamSpec& p : layout.specs()) {
    bool matrix = p.shape.size() == 2;
    int64_t n = matrix ? p.shape[0] : 0, m = matrix ? p.shape[1] : 0;
    // Worth compressing when the factors are much smaller than the matrix.
    if (matrix && (n + m) * r_ * 2 < n * m) {
      Matrix mat{&p, n, m, Tensor::empty({m, r_}, DType::kF32, MemCategory::kCommunication),
                 Tensor::zeros({n, m}, DType::kF32, MemCategory::kCommunication)};
      uint64_t stream = hash_string("powersgd:" + p.name);  // same Q on every rank
      float* q = mat.q.data<float>();
      for (int64_t i = 0; i < m * r_; ++i) q[i] = static_cast<float>(normal_at(stream, static_cast<uint64_t>(i)));
      compressed_[static_cast<size_t>(p.unit)].push_back(std::move(mat));
    } else {
      uncompressed_[static_cast<size_t>(p.unit)].push_back(&p);
    }
  }
}

void PowerSGD::reduce_unit(float* unit_grads, int u) {
  const int64_t base = layout_.unit_begin(u);
  auto& mats = compressed_[static_cast<size_t>(u)];
  const float R = static_cast<float>(dp_.size());

  // Vectors and small matrices: one packed, uncompressed sum.
  int64_t total = 0;
  for (const ParamSpec* p : uncompressed_[static_cast<size_t>(u)]) total += p->numel();
  packed_.resize(static_cast<size_t>(total));
  int64_t off = 0;
  for (const ParamSpec* p : uncompressed_[static_cast<size_t>(u)]) {
    std::memcpy(packed_.data() + off, unit_grads + (p->offset - base), static_cast<size_t>(p->numel()) * 4);
    off += p->numel();
  }
  WorkPtr plain = dp_.all_reduce_async(packed_.data(), total);

  if (!mats.empty()) {
    int64_t np = 0, nq = 0;
    for (auto& mat : mats) {
      np += mat.n * r_;
      nq += mat.m * r_;
    }
    p_.resize(static_cast<size_t>(np));
    q_.resize(static_cast<size_t>(nq));
    // M ← grad + error;  P = M Q
    int64_t po = 0;
    for (auto& mat : mats) {
      float* M = unit_grads + (mat.spec->offset - base);
      ops::add_inplace(ctx_, M, mat.error.data<float>(), mat.n * mat.m);
      ops::matmul(ctx_, p_.data() + po, M, mat.q.data<float>(), mat.n, r_, mat.m, false, false, 0, Precision::kF32);
      po += mat.n * r_;
    }
    dp_.all_reduce(p_.data(), np);
    // Q = Mᵀ P̂
    po = 0;
    int64_t qo = 0;
    for (auto& mat : mats) {
      orthonormalise(p_.data() + po, mat.n, r_);
      float* M = unit_grads + (mat.spec->offset - base);
      ops::matmul(ctx_, q_.data() + qo, M, p_.data() + po, mat.m, r_, mat.n, true, false, 0, Precision::kF32);
      po += mat.n * r_;
      qo += mat.m * r_;
    }
    dp_.all_reduce(q_.data(), nq);
    // M̂ = P̂ Qᵀ;  error = M − M̂ / R;  gradient ← M̂
    po = qo = 0;
    for (auto& mat : mats) {
      float* M = unit_grads + (mat.spec->offset - base);
      approx_.resize(static_cast<size_t>(mat.n * mat.m));
      ops::matmul(ctx_, approx_.data(), p_.data() + po, q_.data() + qo, mat.n, mat.m, r_, false, true, 0,
                  Precision::kF32);
      std::memcpy(mat.q.data<float>(), q_.data() + qo, static_cast<size_t>(mat.m * r_) * 4);
      float* e = mat.error.data<float>();
      for (int64_t i = 0; i < mat.n * mat.m; ++i) {
        e[i] = M[i] - approx_[static_cast<size_t>(i)] / R;
        M[i] = approx_[static_cast<size_t>(i)];
      }
      po += mat.n * r_;
      qo += mat.m * r_;
    }
  }

  plain->wait();
  off = 0;
  for (const ParamSpec* p : uncompressed_[static_cast<size_t>(u)]) {
    std::memcpy(unit_grads + (p->offset - base), packed_.data() + off, static_cast<size_t>(p->numel()) * 4);
    off += p->numel();
  }
}

}  // namespace ft
