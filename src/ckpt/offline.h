// Checkpoints written by one process for a whole layout: resharding (`fluxtrain ckpt reshard`)
// and Hugging Face import. Each world rank of the target config gets the rank file the trainer
// would have written under that layout, so the result resumes like any saved checkpoint.
//
//   Config target = config_from_json(src_manifest.config);  target.parallel.dp = 4; ...
//   reshard_checkpoint("runs/a/checkpoints/step_00000100", "resharded/step_00000100", target, &key,
//   false);
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/ckpt_manifest.h"
#include "ckpt/crypto.h"
#include "ckpt/pieces.h"
#include "config/config.h"

namespace ft {

// The parameter layout world rank `rank` holds under cfg — what the Trainer builds: its pipeline
// stage's units, its tensor-parallel shard of them, padded to the dp · cp size — and its state
// ranges (its ShardPlan piece of every unit over the dp × cp group: the cp ranks of a replica
// hold the same weights and split the state, cp inside dp).
ParamLayout rank_layout(const Config& cfg, int rank);
std::vector<std::pair<int64_t, int64_t>> rank_state_ranges(const ParamLayout& layout, const Config& cfg, int rank);

// Fills a rank's compact state buffers (weights, exp_avg, exp_avg_sq; state_size floats each).
using StateFiller = std::function<void(int rank, const std::vector<StatePiece>& pieces, float* w, float* m, float* v)>;

// Writes a complete checkpoint at `dir` (built in dir + ".tmp-<pid>", renamed when complete): one
// rank file per world rank of cfg (replicated pieces once), then the manifest. `m` carries the
// step, tokens, loader state, config, ...; its layout fields, files and tensors are filled here.
// key: encrypt with it (null: plaintext). Throws when dir exists.
void write_offline_checkpoint(const std::string& dir, CheckpointManifest m, const Config& cfg, const StateFiller& fill,
                              const CkptKey* key, uint32_t chunk_bytes);

// Rewrites the checkpoint at src under target's layout (parallel.*) into dir; the manifest's
// origin becomes `origin`.
void reshard_checkpoint(const std::string& src, const std::string& dir, const Config& target, const CkptKey* key,
                        bool encrypt_output, const std::string& origin = "reshard");

}  // namespace ft
