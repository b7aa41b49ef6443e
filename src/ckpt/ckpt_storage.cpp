#include "ckpt/ckpt_storage.h"

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "ckpt/bucket_storage.h"
#include "ckpt/checkpointer.h"  // list_step_dirs
#include "ckpt/ckpt_manifest.h"
#include "data/objstore/object_store.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/unused_path.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

// ---- a directory ------------------------------------------------------------------------------

class DirStorage final : public CheckpointStorage {
 public:
  explicit DirStorage(const std::string& root) : CheckpointStorage(root) {}
  std::vector<StoredStep> list_steps() override {
    std::vector<StoredStep> out;
    for (const std::string& d : list_step_dirs(root_))
      out.push_back({parse_step_dir_name(fs::path(d).filename().string()), d, fs::exists(d + "/" + kCkptManifestFile)});
    return out;
  }
  std::string staging_dir(int64_t step) override { return root_ + "/" + step_dir_name(step); }
  PublishReport publish(int64_t, const std::string&) override { return {}; }
  void discard_file(int64_t step, const std::string& name) override {
    std::error_code ec;
    fs::remove(staging_dir(step) + "/" + name, ec);
  }
  void discard_step(int64_t step) override {
    std::error_code ec;
    fs::remove_all(staging_dir(step), ec);
  }
  void write_manifest(int64_t step, const std::string& text) override {
    write_file_atomic(staging_dir(step) + "/" + kCkptManifestFile, text);
  }
  void remove_checkpoint(const StoredStep& s) override {
    std::error_code ec;
    fs::remove_all(s.where, ec);
  }
  std::string set_aside(const StoredStep& s) override {
    std::string aside = unused_path(fmt::format("{}.replaced-{}", s.where, static_cast<int64_t>(std::time(nullptr))));
    std::error_code ec;
    fs::rename(s.where, aside, ec);
    return aside;
  }
  std::string fetch(const StoredStep& s) override { return s.where; }
};

}  // namespace

std::unique_ptr<CheckpointStorage> open_checkpoint_storage(const std::string& root, const std::string& run_dir,
                                                           int rank, const std::string& endpoint, uint64_t part_bytes) {
  if (ObjectUrl::is_object_url(root)) return open_bucket_storage(root, run_dir, rank, endpoint, part_bytes);
  return std::make_unique<DirStorage>(root);
}

}  // namespace ft

namespace ft {

std::string fetch_checkpoint(const std::string& url, const std::string& work_dir, const std::string& endpoint) {
  std::string root = url;
  while (!root.empty() && root.back() == '/') root.pop_back();
  int64_t step = parse_step_dir_name(fs::path(root).filename().string());
  if (step >= 0) root = root.substr(0, root.rfind('/'));
  std::unique_ptr<CheckpointStorage> st = open_checkpoint_storage(root, work_dir, 0, endpoint);
  for (const StoredStep& s : st->list_steps()) {
    if (step >= 0 && s.step != step) continue;
    if (!s.committed) {
      if (step >= 0)
        throw Error(fmt::format("{}: no manifest: the checkpoint is incomplete (its save was interrupted)", s.where),
                    "use an older step, or the root (its newest committed step)");
      continue;
    }
    try {
      return st->fetch(s);
    } catch (const Error& e) {
      throw FetchDamage(e.what(), e.hint());
    }
  }
  throw Error(fmt::format("{}: no committed checkpoint found", url),
              "give a root such as s3://bucket/ckpt or a step such as s3://bucket/ckpt/step_00000100");
}

}  // namespace ft
