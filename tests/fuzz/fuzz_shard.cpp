// libFuzzer target: arbitrary bytes as a shard file. The reader must either accept them (and
// then every document offset and token read stays in bounds) or throw ft::Error — never crash,
// never read out of bounds (built with ASan + UBSan).
#include <cstdint>
#include <cstring>
#include <vector>

#include "data/shard.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Shards are mmap'd (page-aligned); give the reader the same alignment.
  std::vector<uint64_t> aligned((size + 7) / 8 + 1);
  std::memcpy(aligned.data(), data, size);
  try {
    ft::ShardView v(reinterpret_cast<const uint8_t*>(aligned.data()), size, "fuzz.ftshard");
    volatile uint64_t sink = 0;
    for (uint64_t d = 0; d < v.num_docs(); ++d) {
      uint64_t a = v.doc_offset(d), b = v.doc_offset(d + 1);
      if (b > v.num_tokens() || a >= b) __builtin_trap();  // parse promised ordered, in-range offsets
      sink = sink + v.token(a) + v.token(b - 1);
    }
    (void)v.compute_checksum();
    try {
      v.verify();
    } catch (const ft::Error&) {
    }
  } catch (const ft::Error&) {
  }
  return 0;
}
