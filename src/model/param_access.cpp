#include "model/param_access.h"

namespace ft {

FlatParams::FlatParams(ParamLayout layout) : layout_(std::move(layout)) {
  w_ = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kParameters);
  g_ = Tensor::zeros({layout_.total()}, DType::kF32, MemCategory::kGradients);
}

}  // namespace ft
