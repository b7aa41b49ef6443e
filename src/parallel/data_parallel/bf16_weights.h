// Bf16Weights: the bf16 copy of a full fp32 weight arena that bf16 GEMMs read
// (ParamAccess::weights_bf16), kept by the engines that hold full weights (ZeRO 0-2) when training
// in bf16 — so the weights are rounded once per update, not once per GEMM and micro-batch.
// Each unit's copy is stamped with the version of the weights it was rounded from; a unit asked
// for after the weights changed is rounded again (ZeRO 1-2: after the all-gather of the updated
// weights), unless the update wrote it already (ZeRO 0: AdamW rounds each weight as it writes it).
//
//   Bf16Weights w16;  w16.enable(ctx, layout);
//   const uint16_t* p = w16.unit(u, fp32_weights_of_unit, version);   // rounded if stale
//   opt.step(w, ..., w16.arena());  w16.mark_current(new_version);     // fused into the update
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_layout.h"
#include "tensor/exec_context.h"
#include "tensor/tensor.h"

namespace ft {

class Bf16Weights {
 public:
  // Allocates the copy (MemCategory::kParameters, 2 bytes per arena element); every unit stale.
  void enable(const ExecContext& ctx, const ParamLayout& layout);
  bool enabled() const { return arena_.defined(); }
  // Unit u's bf16 weights, rounded from `weights` (the unit's fp32 weights) unless current at
  // `version`.
  const uint16_t* unit(int u, const float* weights, int64_t version);
  // The whole copy, for an update that writes it (then mark_current).
  uint16_t* arena() { return arena_.data<uint16_t>(); }
  void mark_current(int64_t version);

 private:
  ExecContext ctx_;  // where the rounding runs
  const ParamLayout* layout_ = nullptr;
  Tensor arena_;
  std::vector<int64_t> version_;  // per unit; -1: never rounded
};

}  // namespace ft
