// What the supervisor needs to know about checkpoints before a restart: the newest one that is
// committed (has its manifest) and whose every piece verifies (the same check as
// `fluxtrain ckpt verify`), skipping — and saying why — incomplete or corrupt ones.
//
//   CheckpointProbe p = probe_checkpoints(cfg.ckpt, cfg.train.run_dir);
//   if (!p.newest) ...no valid checkpoint; p.skipped says what was wrong with each candidate
//   fluxtrain train --set ckpt.resume="<p.newest->dir>"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/ckpt_config.h"

namespace ft {

struct ProbedCheckpoint {
  std::string dir;
  int64_t step = 0;
};

struct CheckpointProbe {
  std::optional<ProbedCheckpoint> newest;  // the newest valid checkpoint; nullopt: none
  std::vector<std::string> skipped;        // "<dir>: why", newer candidates that are not valid
  int64_t missing_key = 0;                 // how many of them are encrypted and no key could be read
  std::string key_error;                   // why the key could not be read ("" = none was given)
};

// The checkpoints of ckpt.dir (default RUN_DIR/checkpoints), read with ckpt.key_file's key.
// endpoint: data.endpoint, for an s3:// ckpt.dir ("" = the AWS variables).
CheckpointProbe probe_checkpoints(const CkptConfig& ckpt, const std::string& run_dir, const std::string& endpoint = "");
// A user's checkpoint path for a reader (eval, generate): PATH itself when it is a step
// directory with a manifest, else the newest checkpoint that verifies under PATH or
// PATH/checkpoints — a damaged newest one is skipped with a warning naming it (`who` prefixes
// it; key_file: for encrypted ones, "" = FLUXTRAIN_CKPT_KEY). Throws naming PATH when none verifies.
std::string newest_valid_checkpoint(const std::string& path, const std::string& who, const std::string& key_file = "");

}  // namespace ft
