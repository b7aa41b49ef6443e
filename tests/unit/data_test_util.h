// Helpers for the data tests: scratch directories and small datasets written straight through
// ShardWriter (no tokenizer training), with known token content.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset_manifest.h"
#include "data/shard.h"
#include "util/checksum.h"
#include "util/fs.h"

namespace ft::testing {

inline std::string scratch_dir(const std::string& name) {
  static std::atomic<int> counter{0};
  auto p = std::filesystem::temp_directory_path() /
           ("ft_data_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

// A dataset whose token at (split, shard s, position i) is a known function, so tests can check
// what the loader returns. Documents have `doc_len` tokens, the last being EOS = 2.
struct FakeDataset {
  std::string dir;
  std::vector<std::vector<int32_t>> train_tokens, val_tokens;  // per shard
};

inline int32_t fake_token(int split, int64_t shard, int64_t i) {
  return static_cast<int32_t>(3 + ((split * 7919 + shard * 104729 + i * 31) % 60000));
}

inline FakeDataset make_fake_dataset(const std::string& dir, const std::vector<int64_t>& train_shard_tokens,
                                     const std::vector<int64_t>& val_shard_tokens, int64_t doc_len = 37) {
  FakeDataset ds;
  ds.dir = dir;
  DatasetManifest m;
  std::string tok = "not a real tokenizer, only hashed";
  write_file_atomic(dir + "/tokenizer.model", tok);
  m.tokenizer_hash = xxh3_64(tok.data(), tok.size());
  m.vocab_size = 65536;
  m.eos_id = 2;
  m.token_bytes = 2;
  for (int split = 0; split < 2; ++split) {
    const auto& sizes = split == 0 ? train_shard_tokens : val_shard_tokens;
    SplitInfo& si = split == 0 ? m.train : m.validation;
    auto& store = split == 0 ? ds.train_tokens : ds.val_tokens;
    for (size_t s = 0; s < sizes.size(); ++s) {
      std::vector<int32_t> all(static_cast<size_t>(sizes[s]));
      for (int64_t i = 0; i < sizes[s]; ++i)
        all[static_cast<size_t>(i)] = fake_token(split, static_cast<int64_t>(s), i);
      ShardWriter w(fmt::format("{}/{}-{:05d}.ftshard", dir, split == 0 ? "train" : "validation", s), 2);
      for (int64_t i = 0; i < sizes[s]; i += doc_len) {
        int64_t n = std::min(doc_len, sizes[s] - i);
        all[static_cast<size_t>(i + n - 1)] = 2;
        w.add_document(all.data() + i, static_cast<size_t>(n));
      }
      ShardInfo info = w.commit();
      si.shards.push_back(info);
      si.tokens += info.tokens;
      si.documents += info.documents;
      store.push_back(std::move(all));
    }
    si.characters = si.tokens * 4;
    si.text_bytes = si.tokens * 5;
  }
  write_file_atomic(dir + "/" + kManifestFile, m.to_json_text());
  return ds;
}

}  // namespace ft::testing
