// libFuzzer target: arbitrary bytes as a checkpoint manifest.json. Parsing either succeeds with a
// manifest whose pieces tile every tensor inside its files' payloads, or throws ft::Error — never
// crashes. Inputs that are JSON get a correct integrity checksum first, so the fuzzer reaches the
// structural checks behind it.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/ckpt_manifest.h"
#include "ckpt/pieces.h"
#include "util/checksum.h"
#include "util/error.h"

static void check(const std::string& text) {
  try {
    ft::CheckpointManifest m = ft::CheckpointManifest::parse(text, "fuzz/manifest.json", nullptr);
    for (const auto& t : m.tensors) {
      int64_t n = 0;
      auto [rows, cols] = ft::matrix_shape(t.shape);
      for (const auto& p : t.pieces) {
        n += p.count();
        if (p.file < 0 || p.file >= static_cast<int>(m.files.size())) __builtin_trap();
        if (p.offset + 3 * p.bytes() > m.files[static_cast<size_t>(p.file)].payload_bytes) __builtin_trap();
        for (const ft::Rect& r :
             ft::piece_rects(ft::Block::of(t.shape, p.split_dim, p.split_offset, p.local_shape), p.begin, p.end))
          if (r.r0 < 0 || r.c0 < 0 || r.r1 > rows || r.c1 > cols) __builtin_trap();
      }
      if (n != ft::shape_numel(t.shape)) __builtin_trap();
    }
    if (!m.encrypted) {  // what we parse, we write and parse again identically
      std::string again = m.to_json_text(nullptr);
      if (ft::CheckpointManifest::parse(again, "again", nullptr).to_json_text(nullptr) != again) __builtin_trap();
    }
  } catch (const ft::Error&) {
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  check(text);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    j.erase("integrity");
    j["integrity"] = {{"xxh3", ft::hex64(ft::xxh3_64(j.dump().data(), j.dump().size()))}};
    check(j.dump());
  }
  return 0;
}
