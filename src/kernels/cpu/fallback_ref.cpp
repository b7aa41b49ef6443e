// TEMPORARY (development only): CPU ops not yet written forward to the reference.
// Each fast kernel that lands deletes its forwarder here; this file goes when it is empty.
#include "kernels/ops.h"

namespace ft::cpu {

void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D) {
  ref::attention_forward(out, lse, qkv, B, T, H, Hkv, D);
}
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  ref::attention_backward(dqkv, dout, qkv, out, lse, B, T, H, Hkv, D);
}

}  // namespace ft::cpu
