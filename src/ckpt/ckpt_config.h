// CkptConfig (ckpt.*): when and where checkpoints are written, how many are kept, encryption,
// and what to resume from.
//
//   [ckpt]
//   interval = 2000        # every N optimizer steps (and after the last step); 0 = never
//   keep = 3               # newest committed checkpoints kept; older ones deleted after a commit
//   encrypt = true         # AES-256-GCM; key from key_file or FLUXTRAIN_CKPT_KEY (64 hex digits)
//   resume = "auto"        # newest valid checkpoint under dir ("" = start fresh; or a path)
//   when_busy = "wait"     # a save due while one uploads and one is queued: "wait" or "skip"
//
// Layout on disk and the manifest: docs/formats.md, "Checkpoint".
#pragma once

#include <cstdint>
#include <string>

namespace ft {

class ConfigBinder;

struct CkptConfig {
  int64_t interval = 0;  // save every N steps (and after the last step); 0 = never
  int64_t keep = 3;      // committed checkpoints to keep (>= 1)
  std::string dir;       // where step_<N>/ go: a directory or s3://bucket/prefix; "" = <train.run_dir>/checkpoints
  bool async = true;     // background writes (false: the training thread writes; benchmarks)
  bool encrypt = false;  // AES-256-GCM over chunks
  std::string key_file;  // file with the 256-bit key in hex; "" = FLUXTRAIN_CKPT_KEY
  int64_t chunk_mb = 4;  // plaintext bytes per encrypted (and checksummed) chunk, in MiB
  int64_t part_mb = 8;   // object store: multipart part size in MiB (S3 requires >= 5 but for the last)
  // A save due while one upload runs and another save waits behind it (the one queued upload, its
  // rank file in the local spool): "wait" (training waits for the older upload) or "skip" (this
  // save is skipped, logged and counted; the final save is never skipped).
  std::string when_busy = "wait";
  std::string resume;  // "" = fresh start, "auto" = newest valid checkpoint, or a path
  // Resuming from encrypted checkpoints keeps encrypting (whatever ckpt.encrypt says) unless
  // this is true: writing plaintext after encrypted checkpoints is an explicit choice.
  bool allow_plaintext = false;

  void bind(ConfigBinder& b);
  void validate() const;
  // The checkpoint root for a run directory.
  std::string root(const std::string& run_dir) const { return dir.empty() ? run_dir + "/checkpoints" : dir; }
};

}  // namespace ft
