#include "parallel/data_parallel/zero_engines.h"

namespace ft {

std::unique_ptr<ParamEngine> make_param_engine(const ExecContext& ctx, const ParallelConfig& p, const OptimConfig& o,
                                               ParamLayout layout, Communicator& dp, Communicator& tp, Communicator& pp,
                                               uint64_t seed) {
  switch (p.zero) {
    case 0:
      return std::make_unique<Zero0Engine>(ctx, p, o, std::move(layout), dp, tp, pp, seed);
    case 1:
    case 2:
      return std::make_unique<Zero12Engine>(ctx, p, o, std::move(layout), dp, tp, pp, seed);
    case 3:
      return std::make_unique<Zero3Engine>(ctx, p, o, std::move(layout), dp, tp, pp, seed);
    default:
      throw Error(fmt::format("parallel.zero = {} is not a ZeRO stage", p.zero), "use 0, 1, 2 or 3");
  }
}

}  // namespace ft
