// Size checks shared by the reference and CPU attention ops (a bad model config or a full KV
// cache must be a clear error, not a read past a buffer).
//
//   check_attention_sizes("attention_forward", B, T, H, Hkv, D);
//   check_decode_sizes("attention_decode", B, Tq, Tk, H, Hkv, D, max_T);
#pragma once

#include <cstdint>

#include "util/error.h"

namespace ft {

inline void check_attention_sizes(const char* op, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  if (B < 0 || T < 0 || H <= 0 || Hkv <= 0 || D <= 0 || H % Hkv != 0)
    throw Error(fmt::format("{}: bad sizes B={} T={} H={} Hkv={} D={}", op, B, T, H, Hkv, D),
                "need B, T >= 0; H, Hkv, D > 0; H a multiple of Hkv");
}

// Positions [first, first + n) of a cache of max_T positions.
inline void check_decode_sizes(const char* op, int64_t B, int64_t first, int64_t n, int64_t H, int64_t Hkv, int64_t D,
                               int64_t max_T) {
  check_attention_sizes(op, B, n, H, Hkv, D);
  if (first < 0 || first + n > max_T)
    throw Error(
        fmt::format("{}: positions {}..{} do not fit a KV cache of {} positions", op, first, first + n - 1, max_T),
        "raise the generation length limit (max_T) or shorten the prompt");
}

}  // namespace ft
