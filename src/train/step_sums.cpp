#include "train/step_sums.h"

namespace ft {

std::array<double, 3> sum_step_over_ranks(ParamEngine& engine, Mesh& mesh, double loss_sum, double local_norm2,
                                          double data_hash) {
  // Only the last stage has a loss; every stage read the same batch: both are summed over the
  // stages in the engine's all-reduce of the gradient norm over them, then over dp.
  double sums[2] = {loss_sum, mesh.coord().pp == 0 ? data_hash : 0.0};
  const double grad_norm2 = engine.reduce_gradient_norm(local_norm2, sums);
  // Context parallelism: each cp rank has the losses and the data hash of its chunks of the same
  // samples.
  if (mesh.degrees().cp > 1) mesh.cp().all_reduce(sums, 2);
  mesh.dp().all_reduce(sums, 2);
  return {sums[0], grad_norm2, sums[1]};
}

}  // namespace ft
