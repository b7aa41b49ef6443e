// The checkpoint manifest (step_<N>/manifest.json): the commit marker of a checkpoint, written
// last, after every rank's file is durable. It says what each rank file holds — for every tensor
// its Hugging Face name and global shape, and for each piece of it which file, which part of the
// tensor (tensor-parallel split, local shape, flat range of the local shard), where its bytes are
// and their checksums — plus the run's config, layout, step, tokens, data-loader state and
// tokenizer hash. Documented in docs/formats.md ("Checkpoint").
//
//   CheckpointManifest m = CheckpointManifest::load(dir, &key);   // parse + validate + integrity
//   for (const TensorRecord& t : m.tensors) ...
//   write_file_atomic(dir + "/manifest.json", m.to_json_text(&key));
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/loader/loader.h"
#include "tensor/tensor.h"
#include "util/clock.h"  // utc_timestamp
#include "util/error.h"

namespace ft {

class CkptKey;

constexpr const char* kCkptManifestFile = "manifest.json";
constexpr const char* kCkptManifestFormat = "fluxtrain-checkpoint";
constexpr int kCkptManifestVersion = 1;

// A part of one tensor held by one file: rank r's (tensor-parallel) local shard is the block of
// the global tensor at split_offset along split_dim with shape local_shape; the piece is the
// flat range [begin, end) of that block in row-major order (a ZeRO / data-parallel piece).
struct PieceRecord {
  int file = 0;        // index into CheckpointManifest::files
  int split_dim = -1;  // -1: the local shard is the whole tensor
  int64_t split_offset = 0;
  Shape local_shape;
  int64_t begin = 0, end = 0;    // flat range of the local shard
  uint64_t offset = 0;           // byte offset in the file's payload: weights, then exp_avg, exp_avg_sq
  uint64_t xxh3[3] = {0, 0, 0};  // XXH3-64 of the weights, exp_avg, exp_avg_sq bytes
  int64_t count() const { return end - begin; }
  uint64_t bytes() const { return static_cast<uint64_t>(count()) * 4; }  // of one of the three
};

struct TensorRecord {
  std::string name;  // Hugging Face name
  Shape shape;       // global shape
  std::string dtype = "F32";
  std::vector<PieceRecord> pieces;
};

struct FileRecord {
  std::string name;            // plain file name inside the checkpoint directory
  int rank = 0;                // world rank that wrote it
  uint64_t payload_bytes = 0;  // plaintext bytes
  uint64_t file_bytes = 0;     // on disk (header + payload + tags)
};

struct CheckpointManifest {
  int version = kCkptManifestVersion;
  int64_t step = 0, tokens = 0, optimizer_steps = 0;
  int64_t restarts = 0;                // times the run had been resumed when this was saved
  double loss_scale = 0;               // fp16 dynamic loss scale (0: the run did not use one)
  int64_t loss_scale_clean_steps = 0;  // clean steps in a row towards the next growth
  // The training guards' state after this step (fault/step_guard.h: the loss-spike window); null in
  // checkpoints written before it was saved, and in imported ones.
  nlohmann::json step_guard;
  bool has_loader = true;  // false for imported models (no data position to continue)
  LoaderState loader;
  uint64_t tokenizer_hash = 0;  // 0: none (synthetic data)
  int64_t world = 1, dp = 1, tp = 1, pp = 1, zero = 0;
  int64_t cp = 1;                // context parallelism ("cp" in the layout, absent when 1)
  std::string origin = "train";  // "train", "reshard", "import-hf"
  std::string created;           // UTC, ISO 8601
  nlohmann::json config;         // the run's config (Config::to_json)
  bool encrypted = false;
  std::string key_id;  // CkptKey::id() of the key the files are encrypted with
  uint32_t chunk_bytes = 4u << 20;
  std::vector<FileRecord> files;
  std::vector<TensorRecord> tensors;

  const TensorRecord* find(const std::string& name) const;
  // "world 4 = pp 1 x dp 2 x tp 2, ZeRO 1" ("... x dp 1 x cp 2 x tp 1 ..." when cp > 1).
  std::string layout_text() const;
  // The JSON text with its integrity field: HMAC-SHA256 under a key derived from `key` when
  // encrypted, XXH3-64 otherwise.
  std::string to_json_text(const CkptKey* key) const;
  // Throws ft::Error("<name>: ...") for anything malformed, inconsistent (pieces that do not
  // tile their tensor, ranges outside a file) or failing its integrity check. An encrypted
  // manifest is only authenticated when `key` is given (inspect works without it).
  static CheckpointManifest parse(const std::string& text, const std::string& name, const CkptKey* key);
  static CheckpointManifest load(const std::string& dir, const CkptKey* key);
  // Whether an error of parse() or load() says the manifest is damaged (not JSON, a field
  // missing or wrong, its checksum or HMAC not matching) rather than that the input was wrong
  // (no manifest, a newer format version, another key): `ckpt verify` exits 1 for the first.
  static bool is_damage(const Error& e);
};

// "step_00000100": the directory name of a step (zero-padded to 8 digits), and back (-1: not one).
std::string step_dir_name(int64_t step);
int64_t parse_step_dir_name(const std::string& name);
std::string rank_file_name(int rank);  // "rank-00003.ftckpt"

}  // namespace ft
