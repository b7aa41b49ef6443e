// ParamAccess: where each unit's weights and gradients are right now, and the hooks that run
// around each unit's forward and backward. The model reads weights and accumulates gradients
// only through this interface; parallelism plugs in here from outside the model:
//   - FlatParams (below): one process holds every unit in two flat arenas;
//   - data parallelism wraps it and starts a bucket's all-reduce in after_backward;
//   - ZeRO-3 serves gathered copies in before_forward/before_backward and frees them after.
//
//   FlatParams store(layout);            // weights and gradients, fp32, zeroed
//   layout.init(store.weight_arena(), seed);
//   Llama model(ctx, cfg, layout, precision);  model.forward_backward(store, acts, batch, scale);
#pragma once

#include <cstdint>

#include "model/param_layout.h"
#include "tensor/tensor.h"

namespace ft {

class ParamAccess {
 public:
  virtual ~ParamAccess() = default;
  virtual const ParamLayout& layout() const = 0;
  // Base of unit u's weights / gradients; parameter p is at base + (p.offset - unit_begin(u)).
  virtual const float* weights(int unit) = 0;
  virtual float* grads(int unit) = 0;
  // bf16 compute: unit u's weights rounded to bf16, laid out like weights(u), current with the
  // fp32 weights — or null when this access keeps no such copy (the model rounds them itself).
  virtual const uint16_t* weights_bf16(int unit) { return nullptr; }

  virtual void before_forward(int unit) {}
  virtual void after_forward(int unit) {}
  virtual void before_backward(int unit) {}
  // Unit u's gradients for the current micro-batch are complete.
  virtual void after_backward(int unit) {}

  const float* weight(const ParamSpec& p) { return weights(p.unit) + (p.offset - layout().unit_begin(p.unit)); }
  float* grad(const ParamSpec& p) { return grads(p.unit) + (p.offset - layout().unit_begin(p.unit)); }
  const uint16_t* weight_bf16(const ParamSpec& p) {
    const uint16_t* base = weights_bf16(p.unit);
    return base ? base + (p.offset - layout().unit_begin(p.unit)) : nullptr;
  }
};

// Every parameter and gradient of the layout in two fp32 arenas on this process.
class FlatParams : public ParamAccess {
 public:
  // On dev (weight_arena() is then that device's memory).
  explicit FlatParams(ParamLayout layout, Device dev = Device::kCPU);
  const ParamLayout& layout() const override { return layout_; }
  const float* weights(int unit) override { return w_.data<float>() + layout_.unit_begin(unit); }
  float* grads(int unit) override { return g_.data<float>() + layout_.unit_begin(unit); }

  float* weight_arena() { return w_.data<float>(); }
  float* grad_arena() { return g_.data<float>(); }
  int64_t size() const { return layout_.total(); }
  void zero_grads() { g_.zero_(); }

 private:
  ParamLayout layout_;
  Tensor w_, g_;  // (total,) fp32 each
};

}  // namespace ft
