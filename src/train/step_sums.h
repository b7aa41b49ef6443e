// The host scalars of a training step summed over the ranks (Trainer::step): the loss, the
// gradient norm and the data hash, in the collectives every rank makes after its one read-back.
// A free function so that the step trace (dryrun/step_trace.h) makes the very same calls.
//
//   auto [loss_sum, grad_norm2, data_hash] = sum_step_over_ranks(engine, mesh, loss, norm2, hash);
#pragma once

#include <array>

#include "parallel/data_parallel/param_engine.h"
#include "parallel/mesh.h"

namespace ft {

// {the global loss sum, the global squared gradient norm, the global data hash}.
std::array<double, 3> sum_step_over_ranks(ParamEngine& engine, Mesh& mesh, double loss_sum, double local_norm2,
                                          double data_hash);

}  // namespace ft
