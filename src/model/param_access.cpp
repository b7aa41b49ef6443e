#include "model/param_access.h"

namespace ft {

FlatParams::FlatParams(ParamLayout layout, Device dev) : layout_(std::move(layout)) {
  w_ = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kParameters, dev);
  g_ = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kGradients, dev);
}

}  // namespace ft
