#include "ckpt/probe.h"

#include <filesystem>

#include "ckpt/checkpointer.h"
#include "ckpt/ckpt_manifest.h"
#include "ckpt/ckpt_storage.h"
#include "ckpt/crypto.h"
#include "ckpt/state_io.h"
#include "util/error.h"
#include "util/log.h"

namespace ft {

CheckpointProbe probe_checkpoints(const CkptConfig& ckpt, const std::string& run_dir, const std::string& endpoint) {
  CheckpointProbe out;
  CkptKey key;
  std::string key_error;
  if (ckpt.encrypt || !ckpt.key_file.empty() || has_key_env()) {
    try {
      key = CkptKey::load(ckpt.key_file);
    } catch (const Error& e) {
      key_error = e.what();
    }
  }
  out.key_error = key_error;
  // Through the storage of ckpt.dir: an object store's steps are fetched to a cache under
  // run_dir to be verified; the result names the step's URL.
  std::unique_ptr<CheckpointStorage> storage = open_checkpoint_storage(ckpt.root(run_dir), run_dir, 0, endpoint);
  struct Cleanup {
    CheckpointStorage* s;
    ~Cleanup() { s->clear_fetched(); }
  } cleanup{storage.get()};
  std::vector<StoredStep> steps;
  try {
    steps = storage->list_steps();  // newest first
  } catch (const Error& e) {
    out.skipped.push_back(e.what());
  }
  for (const StoredStep& st : steps) {
    if (!st.committed) {
      out.skipped.push_back(st.where + ": no manifest (the save was interrupted)");
      continue;
    }
    try {
      const std::string dir = storage->fetch(st);
      CheckpointManifest m = CheckpointManifest::load(dir, nullptr);
      if (m.encrypted && key.empty()) {
        ++out.missing_key;
        throw Error(
            fmt::format("{}: encrypted, and no key{}", st.where, key_error.empty() ? "" : " (" + key_error + ")"));
      }
      if (m.encrypted) m = CheckpointManifest::load(dir, &key);  // authenticated
      CheckpointReader reader(dir, m, key.empty() ? nullptr : &key);
      std::vector<std::string> problems = reader.verify();
      if (!problems.empty()) throw Error(problems.front());
      out.newest = ProbedCheckpoint{st.where, m.step};
      return out;
    } catch (const Error& e) {
      out.skipped.push_back(e.what());
    }
  }
  return out;
}

std::string newest_valid_checkpoint(const std::string& path, const std::string& who, const std::string& key_file) {
  if (std::filesystem::exists(path + "/" + kCkptManifestFile)) return path;
  CkptConfig probe;
  probe.key_file = key_file;
  probe.dir = std::filesystem::is_directory(path + "/checkpoints") ? path + "/checkpoints" : path;
  CheckpointProbe p = probe_checkpoints(probe, "");
  for (const std::string& why : p.skipped) log_warn("{}: skipping {}", who, why);
  if (!p.newest && p.missing_key > 0 && p.missing_key == static_cast<int64_t>(p.skipped.size())) {
    // Every candidate is whole but encrypted: the cause is the missing key, not the checkpoints.
    throw Error(fmt::format("{}: its {} checkpoint(s) are encrypted and no key was given{}", path, p.missing_key,
                            p.key_error.empty() ? " (neither FLUXTRAIN_CKPT_KEY nor a key file is set)"
                                                : " (" + p.key_error + ")"),
                who == "generate" ? "pass --key-file FILE or set FLUXTRAIN_CKPT_KEY to the key the run was trained with"
                                  : "set FLUXTRAIN_CKPT_KEY to the 64 hex digits of the key the run was trained with");
  }
  if (!p.newest) {
    throw Error(fmt::format("{}: no valid checkpoint{}", path,
                            p.skipped.empty() ? "" : fmt::format(" ({} invalid one(s) skipped)", p.skipped.size())),
                "give a run directory, a checkpoint root or a step_<N> directory with a manifest.json");
  }
  return p.newest->dir;
}

}  // namespace ft
