#include "train/run_dir.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/loader/mixture.h"
#include "data/objstore/object_store.h"
#include "train/run_lock.h"
#include "util/dir_check.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/output_path.h"
#include "util/unused_path.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

// What a run writes into its directory (docs/operations.md): the trainer's, then the supervisor's.
const std::vector<std::string> kTrainerFiles = {
    "config.json", "metrics.jsonl", "checkpoints.jsonl", "checkpoints", "samples", "tb", "validation", "report.html"};
const std::vector<std::string> kSupervisorFiles = {"supervisor.jsonl", "logs", "heartbeat", "ranks.json"};

std::string stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

bool has_checkpoints(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return false;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.path().filename().string().rfind("step_", 0) == 0) return true;
  return false;
}

// A run directory or ckpt.dir inside a dataset the run reads would be deleted by the next
// `prepare --force` of that dataset (and mixes a run into the data): refused before anything is written.
void check_not_in_dataset(const Config& cfg) {
  const DataConfig& d = cfg.data;
  if (d.source != DataSource::kDataset) return;
  std::vector<std::string> datasets;
  if (!d.path.empty()) datasets.push_back(d.path);
  if (!d.mixture.empty())
    for (const MixtureSource& s : parse_mixture(d.mixture, d.path)) datasets.push_back(s.path);
  std::error_code ec;
  for (const std::string& ds : datasets) {
    if (ObjectUrl::is_object_url(ds) || !fs::is_directory(ds, ec)) continue;
    auto refuse = [&](const std::string& what, const std::string& inner, const std::string& flag) {
      throw Error(fmt::format("{} {} is inside the dataset {} the run reads: a `prepare --force` of the dataset "
                              "would delete it",
                              what, inner, ds),
                  fmt::format("choose a {} outside {}", flag, ds));
    };
    if (path_within(cfg.train.run_dir, ds)) refuse("run directory", cfg.train.run_dir, "--run-dir");
    if (!cfg.ckpt.dir.empty() && path_within(cfg.ckpt.dir, ds)) refuse("ckpt.dir", cfg.ckpt.dir, "ckpt.dir");
  }
}

}  // namespace

bool is_run_config(const std::string& path) {
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(path));
    return j.is_object() && j.contains("model") && j["model"].is_object() && j.contains("train") &&
           j["train"].is_object();
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::string> claim_run_dir(const Config& cfg, bool force, RunDirUser user) {
  const std::string dir = cfg.train.run_dir;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(fmt::format("run directory {} is a file", dir), "choose another --run-dir");
  const std::string config = dir + "/config.json";
  if (fs::exists(config, ec) && !is_run_config(config)) {
    throw Error(fmt::format("run directory {} holds a config.json that is not a fluxtrain run's (a Hugging Face "
                            "export?): training there would replace it",
                            dir),
                "choose another --run-dir");
  }
  check_not_in_dataset(cfg);
  check_dir_writable(dir, "run directory", "choose another --run-dir");
  // Checkpoints are written from the first save on: a root that cannot hold them is said now, not
  // at every save after the training.
  if (cfg.ckpt.interval > 0)
    check_dir_writable(cfg.ckpt.root(dir), cfg.ckpt.dir.empty() ? "checkpoint directory" : "ckpt.dir",
                       cfg.ckpt.dir.empty() ? "choose another --run-dir" : "choose another ckpt.dir");
  const bool resume = !cfg.ckpt.resume.empty();
  if (resume && force) {
    throw Error("--force starts the run over, --resume continues it: give one of them",
                "--resume auto continues from the newest checkpoint; --force moves the old run aside");
  }
  // One run at a time: taken before anything is moved aside (--force must not move a running run's files).
  const std::string holder = lock_run_dir(dir);
  if (user == RunDirUser::kSupervisor) ::setenv(kRunLockHolderEnv, holder.c_str(), 1);  // its ranks share it
  if (resume) return {};
  std::vector<std::string> found;
  std::vector<std::string> names = kTrainerFiles;
  if (user == RunDirUser::kSupervisor) names.insert(names.end(), kSupervisorFiles.begin(), kSupervisorFiles.end());
  for (const std::string& n : names) {
    if (n == "checkpoints" ? has_checkpoints(dir + "/" + n) : fs::exists(dir + "/" + n, ec)) found.push_back(n);
  }
  const std::string root = cfg.ckpt.root(dir);
  const bool outside = !cfg.ckpt.dir.empty() && has_checkpoints(root);
  // A start that was refused (a resume it could not do, a bad cache file) may have opened its
  // TensorBoard events or sample log before the refusal; without the config.json an accepted run
  // writes first, they hold no run and do not stop the next start (which adds its own events file).
  const std::vector<std::string> before_acceptance = {"tb", "samples"};
  if (std::all_of(found.begin(), found.end(), [&](const std::string& n) {
        return std::find(before_acceptance.begin(), before_acceptance.end(), n) != before_acceptance.end();
      }))
    found.clear();
  if (found.empty() && !outside) return {};
  std::vector<std::string> shown = found;
  if (outside) shown.push_back(root);
  if (!force) {
    throw Error(fmt::format("run directory {} already holds a run ({}): a fresh start would overwrite it", dir,
                            fmt::join(shown, ", ")),
                fmt::format("continue it with --resume auto, start over with --force (its files are moved to "
                            "{}/replaced-<time>/), or choose another --run-dir",
                            dir));
  }
  // The aside's name is claimed by creating it: a second --force in the same second gets
  // replaced-<time>-2/, never the first one's directory.
  const std::string aside = found.empty() ? "" : create_unused_dir(fmt::format("{}/replaced-{}", dir, stamp()));
  std::vector<std::string> moved;
  for (const std::string& n : found) {
    fs::rename(dir + "/" + n, aside + "/" + n);
    moved.push_back(dir + "/" + n);
  }
  if (outside) {
    const std::string to = unused_path(fmt::format("{}.replaced-{}", root, stamp()));
    fs::rename(root, to);
    moved.push_back(root);
    log_warn("--force: the earlier run's checkpoints {} are now {}", root, to);
  }
  if (!found.empty())
    log_warn("--force: the earlier run's files in {} ({}) are now in {}", dir, fmt::join(found, ", "), aside);
  return moved;
}

}  // namespace ft
