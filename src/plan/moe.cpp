#include "plan/moe.h"

namespace ft::plan {

double moe_load_factor(const MoeSpec& moe) {
  if (!moe.enabled()) return 1.0;
  return moe.capacity_factor > 0 ? moe.capacity_factor : moe.imbalance;
}

double moe_active_routed_params_per_layer(const MoeSpec& moe, int64_t hidden, int64_t tp) {
  if (!moe.enabled()) return 0;
  return 3.0 * static_cast<double>(hidden) * static_cast<double>(moe.expert_ffn) * static_cast<double>(moe.top_k) /
         static_cast<double>(tp);  // gate, up, down of each
}

double moe_held_params_per_layer(const MoeSpec& moe, int64_t hidden, int64_t ep, int64_t tp) {
  if (!moe.enabled()) return 0;
  return 3.0 * static_cast<double>(hidden) * static_cast<double>(moe.expert_ffn) *
         (static_cast<double>(moe.experts) / static_cast<double>(ep)) / static_cast<double>(tp);
}

double moe_extra_params_per_layer(const MoeSpec& moe, int64_t hidden, int64_t ep, int64_t tp) {
  return moe_held_params_per_layer(moe, hidden, ep, tp) - moe_active_routed_params_per_layer(moe, hidden, tp);
}

double moe_all_to_all_bytes(const MoeSpec& moe, int64_t hidden, double tokens, int64_t ep, double elem_bytes,
                            bool full_recompute) {
  if (!moe.enabled() || ep <= 1) return 0;
  const double passes = full_recompute ? 6.0 : 4.0;  // dispatch + combine, forward and backward
  const double leaving = static_cast<double>(ep - 1) / static_cast<double>(ep);
  return passes * tokens * static_cast<double>(moe.top_k) * static_cast<double>(hidden) * elem_bytes * leaving;
}

}  // namespace ft::plan
