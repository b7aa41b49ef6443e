// PowerSGD gradient compression (Vogels et al., 2019) with error feedback.
//
// For each gradient matrix M (n × m) of a unit, with the rank's error e added (M ← M + e):
//   P = M Q           all-reduce P (n × r), orthonormalise its columns
//   Q = Mᵀ P          all-reduce Q (m × r)
//   M̂ = P Qᵀ          the approximate sum over ranks, identical on every rank
//   e ← M − M̂ / R     what this rank's share lost, carried into the next step
// Q is kept between steps (warm start). Vectors and matrices too small to gain are summed
// uncompressed in one packed all-reduce. Instead of n·m floats a matrix sends (n + m)·r.
// Reduction is synchronous: the factor matmuls run on the compute threads.
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_layout.h"
#include "parallel/comm/comm.h"
#include "tensor/exec_context.h"
#include "tensor/tensor.h"

namespace ft {

class PowerSGD {
 public:
  PowerSGD(const ExecContext& ctx, Communicator& dp, const ParamLayout& layout, int rank);
  // unit_grads points at unit u's first element; on return it holds the (approximate) sum.
  void reduce_unit(float* unit_grads, int u);

 private:
  struct Matrix {
    const ParamSpec* spec;
    int64_t n, m;
    Tensor q, error;  // (m, r), (n, m)
  };
  ExecContext ctx_;
  Communicator& dp_;
  const ParamLayout& layout_;
  int r_;
  std::vector<std::vector<Matrix>> compressed_;              // per unit
  std::vector<std::vector<const ParamSpec*>> uncompressed_;  // per unit
  // Exchange buffers, grown to the largest unit: all P, all Q, the packed small tensors, one M̂.
  Tensor p_, q_, packed_, approx_;
  float* room(Tensor& t, int64_t n);
};

}  // namespace ft
