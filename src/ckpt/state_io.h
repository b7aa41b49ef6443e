// Moving rank state between memory and checkpoint files.
//
// Writing: a rank's compact state buffers (fp32 weights, AdamW exp_avg, exp_avg_sq over its
// state ranges) go to one rank file as its owned pieces — per piece its weights, then exp_avg,
// then exp_avg_sq — and come back as PieceRecords (offsets, checksums) for the manifest.
//
// Reading: CheckpointReader fills any layout's pieces (another dp/tp/pp split, ZeRO stage, one
// process, a whole tensor for export) from whatever pieces the checkpoint holds, verifying every
// piece it reads (XXH3-64; and the AES-GCM tag of each chunk when encrypted).
//
//   std::vector<PieceRecord> recs;
//   FileRecord f = write_rank_file(dir, step, rank, owned, w, m, v, chunk_bytes, &key, &recs);
//
//   CheckpointReader r(dir, manifest, &key);                   // the rank files in dir
//   CheckpointReader r(dir, manifest, &key, storage->opener(s)); // or where the opener says (a bucket)
//   r.fill(state_pieces(layout, ranges), w, m, v);             // this rank's compact buffers
//   std::vector<float> t = r.tensor("model.norm.weight");       // a whole tensor (weights)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/ckpt_manifest.h"
#include "ckpt/pieces.h"
#include "ckpt/rank_file.h"

namespace ft {

// Writes the `owned` pieces of the compact buffers to dir/rank_file_name(rank); appends one
// PieceRecord per owned piece (file index 0: the caller renumbers) to *records.
FileRecord write_rank_file(const std::string& dir, int64_t step, int rank, const std::vector<StatePiece>& owned,
                           const float* w, const float* m, const float* v, uint32_t chunk_bytes, const CkptKey* key,
                           std::vector<PieceRecord>* records);

// Adds a file's pieces to the manifest's tensors (creating tensor records in first-seen order).
void add_file_to_manifest(CheckpointManifest& m, const FileRecord& f, const std::vector<StatePiece>& owned,
                          const std::vector<PieceRecord>& records);

// Portable form of (piece, record) lists, for gathering every rank's pieces to rank 0.
std::string pieces_to_json(const FileRecord& f, const std::vector<StatePiece>& owned,
                           const std::vector<PieceRecord>& records);
void add_json_file_to_manifest(CheckpointManifest& m, const std::string& json_text);

class CheckpointReader {
 public:
  // open: where each rank file is read from (null: dir/<name>).
  CheckpointReader(std::string dir, const CheckpointManifest& m, const CkptKey* key, RankFileOpener open = nullptr);
  ~CheckpointReader();

  // Fills w, m, v (compact buffers; any may be null) at each piece's compact offset. Throws
  // ft::Error naming the checkpoint when a tensor is missing, has another shape or is not
  // fully covered, and naming the file when a piece fails its checksum or tag.
  void fill(const std::vector<StatePiece>& pieces, float* w, float* m, float* v);
  // A whole tensor: which = 0 weights, 1 exp_avg, 2 exp_avg_sq.
  std::vector<float> tensor(const std::string& name, int which = 0);
  // Reads every chunk and every piece of every file; returns one line per problem (empty: all
  // good).
  std::vector<std::string> verify(bool progress = false);

  const CheckpointManifest& manifest() const { return m_; }
  // What the reads so far cost, over every rank file opened: bytes fetched from where the files
  // live (0 for local files) and the stored bytes of the chunks the reads covered.
  struct ReadStats {
    uint64_t fetched = 0, chunk_bytes_needed = 0;
    int files_opened = 0;
  };
  ReadStats read_stats() const;

 private:
  struct Target {
    Block block;
    int64_t begin, end;
    float* dst[3];  // where element `begin` goes (null: skip)
  };
  void fill_tensor(const TensorRecord& t, const std::vector<Target>& targets);
  const std::vector<float>& piece_data(const TensorRecord& t, size_t k);  // 3 × count, verified
  RankFileReader& reader(int file);
  std::string dir_;
  const CheckpointManifest& m_;
  const CkptKey* key_;
  RankFileOpener open_;
  std::map<int, std::unique_ptr<RankFileReader>> readers_;
  std::map<size_t, std::vector<float>> cache_;  // piece data of the tensor being filled
};

}  // namespace ft
