// The dataset manifest (DIR/manifest.json): what a dataset directory holds. Written last by
// `fluxtrain prepare`, so a directory without it is not a dataset. Documented in docs/formats.md.
//
//   DatasetManifest m = DatasetManifest::load(dir);            // parse + validate, names the file
//   for (const ShardInfo& s : m.split(Split::kTrain).shards) ...
//   m.check_tokenizer(dir);                                    // model file hash == manifest
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/loader/loader.h"
#include "data/shard.h"

namespace ft {

constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kManifestFormat = "fluxtrain-dataset";
constexpr int kManifestVersion = 1;

struct SplitInfo {
  std::vector<ShardInfo> shards;
  uint64_t documents = 0, tokens = 0;
  uint64_t characters = 0, text_bytes = 0;  // of the normalised text, EOS separators excluded
  double chars_per_token() const { return tokens ? static_cast<double>(characters) / static_cast<double>(tokens) : 0; }
  double bytes_per_token() const { return tokens ? static_cast<double>(text_bytes) / static_cast<double>(tokens) : 0; }
};

struct LanguageStats {
  uint64_t documents = 0, bytes = 0, characters = 0, tokens = 0;
};

struct DatasetManifest {
  int version = kManifestVersion;
  std::string tokenizer_file = "tokenizer.model";
  uint64_t tokenizer_hash = 0;  // XXH3-64 of the model file
  int tokenizer_threads = 0;    // SentencePiece training threads (kTokenizerTrainThreads); 0 = given
  int64_t vocab_size = 0;
  int32_t eos_id = -1;
  int token_bytes = 2;
  SplitInfo train, validation;
  // Informational: what prepare read and did.
  std::map<std::string, LanguageStats> languages;
  uint64_t duplicates = 0, invalid_utf8 = 0, empty = 0;
  std::map<std::string, uint64_t> near_duplicates;  // per language, dropped by MinHash-LSH
  double near_dup_threshold = 0;                    // 0 = near-duplicates were kept
  std::vector<std::string> sources;

  const SplitInfo& split(Split s) const { return s == Split::kTrain ? train : validation; }

  std::string to_json_text() const;
  // Throws ft::Error("<name>: ...") for anything malformed or inconsistent.
  static DatasetManifest parse(const std::string& text, const std::string& name);
  static DatasetManifest load(const std::string& dir);
  // Throws when DIR/<tokenizer_file> is missing or its hash differs from tokenizer_hash.
  void check_tokenizer(const std::string& dir) const;
};

// A directory holding a dataset this build can read: what --force may replace (prepare --out,
// data pull DIR).
bool is_dataset_dir(const std::string& dir);

// Left by `fluxtrain data pull` in its DIR: the URL pulled (a second pull of it resumes).
constexpr const char* kPullMarkerFile = ".fluxtrain-pull";

// What a dataset directory holds besides the dataset (its manifest, tokenizer, shards and a pull
// marker): a run directory, notes, ... — what replacing the dataset would delete. Names relative to dir.
std::vector<std::string> dataset_foreign_entries(const std::string& dir);

// --force replaces a dataset, not what else lives in its directory (a run a user put there): throws
// naming those entries. `flag` is how the user named dir ("--out", "DIR").
void check_replaceable_dataset(const std::string& dir, const std::string& flag);

// Refuses to go on when a checkpoint's recorded tokenizer differs from the dataset's
// (recorded == 0: the checkpoint predates tokenizers or used synthetic data; accepted).
void check_tokenizer_hash(uint64_t recorded, uint64_t dataset, const std::string& checkpoint);

}  // namespace ft
