// libFuzzer target: arbitrary bytes as a safetensors file (Hugging Face import reads these).
// Parsing either succeeds with every tensor's bytes inside the file and matching its shape, or
// throws ft::Error — never crashes.
#include <cstdint>
#include <string>

#include "util/error.h"
#include "util/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    ft::SafetensorsFile f = ft::SafetensorsFile::from_bytes(bytes, "fuzz.safetensors");
    for (const std::string& n : f.names()) {
      ft::SafetensorsFile::View v = f.get(n);
      uint64_t count = 1;
      for (int64_t d : v.shape) count *= static_cast<uint64_t>(d);
      if (count * ft::safetensors_dtype_size(v.dtype) != v.bytes) __builtin_trap();
      // Touch every byte: ASan reports a view outside the buffer.
      uint8_t x = 0;
      for (size_t i = 0; i < v.bytes; ++i) x = static_cast<uint8_t>(x ^ static_cast<uint8_t>(v.data[i]));
      volatile uint8_t sink = x;
      (void)sink;
    }
  } catch (const ft::Error&) {
  }
  return 0;
}
