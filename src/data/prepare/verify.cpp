#include "data/prepare/verify.h"

#include <chrono>
#include <filesystem>

#include "data/dataset_manifest.h"
#include "data/shard.h"
#include "util/error.h"

namespace ft {

VerifyReport verify_dataset(const std::string& dir) {
  auto t0 = std::chrono::steady_clock::now();
  VerifyReport r;
  DatasetManifest m = DatasetManifest::load(dir);
  try {
    m.check_tokenizer(dir);
  } catch (const Error& e) {
    r.problems.push_back(e.what());
  }
  for (const SplitInfo* split : {&m.train, &m.validation}) {
    for (const ShardInfo& info : split->shards) {
      std::string path = (std::filesystem::path(dir) / info.file).string();
      try {
        Shard s(path);
        const ShardView& v = s.view();
        if (v.num_tokens() != info.tokens || v.num_docs() != info.documents || v.header().checksum != info.checksum ||
            v.header().file_bytes != info.bytes || v.token_bytes() != m.token_bytes) {
          throw Error(
              fmt::format("{}: header ({} tokens, {} documents, {} bytes, checksum {}) does not match the "
                          "manifest ({}, {}, {}, {})",
                          path, v.num_tokens(), v.num_docs(), v.header().file_bytes, hex64(v.header().checksum),
                          info.tokens, info.documents, info.bytes, hex64(info.checksum)));
        }
        v.verify();
        r.bytes += v.header().file_bytes;
        r.tokens += v.num_tokens();
      } catch (const Error& e) {
        r.problems.push_back(e.what());
      }
      ++r.shards;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ft
