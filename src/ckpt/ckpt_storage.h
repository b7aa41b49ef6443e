// Where checkpoints live: a local (or shared) directory, or a bucket (s3://bucket/prefix or
// gs://bucket/prefix: bucket_storage.h).
// The checkpointer speaks only this small interface, so each place is one implementation and
// no `if (s3)` is scattered through saving, resuming and retention.
//
// A rank writes its file into staging_dir(step) (a local directory: the checkpoint's own for a
// directory root, a spool under the run directory for an object store), then publish() makes it
// durable where checkpoints live (nothing to do locally; uploaded, confirmed by size and checksum,
// and the spool copy removed for a store). Rank 0 writes the manifest last, after every rank
// published: a checkpoint exists only when its manifest does.
//
//   std::unique_ptr<CheckpointStorage> st = open_checkpoint_storage(root, run_dir, rank, endpoint);
//   st->check_writable();                               // one clear error before step 1
//   write_rank_file(st->staging_dir(100), ...);  PublishReport p = st->publish(100, "rank-00000.ftckpt");
//   st->write_manifest(100, text);                      // rank 0, after every rank's publish
//   for (const StoredStep& s : st->list_steps()) ...   // newest first
//   std::string dir = st->fetch(s);                     // a local directory CheckpointReader reads
//   std::string d = st->fetch_manifest(s);              // or only the manifest, and the rank files
//   CheckpointReader r(d, m, &key, st->opener(s));      //   read in place (a bucket: ranged GETs)
//   std::string d = fetch_checkpoint("s3://b/ckpt", "/tmp/work", "");   // `fluxtrain ckpt verify s3://...`
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/rank_file.h"  // RankFileOpener
#include "util/error.h"

namespace ft {

struct StoredStep {
  int64_t step = 0;
  std::string where;       // the step's directory, or its URL (s3:// or gs://bucket/prefix/step_N/)
  bool committed = false;  // its manifest exists
};

struct PublishReport {
  uint64_t bytes = 0;  // uploaded (0: nothing to upload, a local directory)
  double seconds = 0;
};

class CheckpointStorage {
 public:
  virtual ~CheckpointStorage() = default;
  const std::string& root() const { return root_; }
  // Throws one clear ft::Error when checkpoints cannot be written there (a bucket that does not
  // exist, credentials refused).
  virtual void check_writable() {}
  // Steps under the root (committed or not), newest first.
  virtual std::vector<StoredStep> list_steps() = 0;
  // The local directory a rank writes its file of `step` into.
  virtual std::string staging_dir(int64_t step) = 0;
  // This rank's file in staging_dir(step), made durable where checkpoints live.
  virtual PublishReport publish(int64_t step, const std::string& file_name) = 0;
  // A failed save: this rank's file of it; rank 0, after every rank: what is left of the step.
  virtual void discard_file(int64_t step, const std::string& file_name) = 0;
  virtual void discard_step(int64_t step) = 0;
  // The commit marker, written last.
  virtual void write_manifest(int64_t step, const std::string& text) = 0;
  // Retention: a committed checkpoint goes, its manifest first, then the files it names.
  virtual void remove_checkpoint(const StoredStep& s) = 0;
  // A committed checkpoint newer than the step a run resumes from: kept under another name.
  virtual std::string set_aside(const StoredStep& s) = 0;
  // A local directory holding s's manifest and every file it names (each object's size checked
  // against the manifest on the way); throws naming the missing or damaged object.
  virtual std::string fetch(const StoredStep& s) = 0;
  // A local directory holding s's manifest only (each object it names checked to exist with its
  // size, as fetch() does); the rank files are read in place through opener(s). A directory: s.where.
  virtual std::string fetch_manifest(const StoredStep& s) { return fetch(s); }
  // Where a reader of s (after fetch_manifest) takes each rank file from: null = the files in the
  // fetched directory; a bucket: the objects, by ranged GETs of the chunks a read needs.
  virtual RankFileOpener opener(const StoredStep& /*s*/) { return nullptr; }
  // Removes what fetch() brought here.
  virtual void clear_fetched() {}
  // Unfinished uploads of rank files of steps below `below_step` (S3 multipart uploads a killed
  // save left behind; their parts are stored and billed until aborted): aborted; returns how many.
  virtual int clean_orphans(int64_t /*below_step*/) { return 0; }
  // Whether a failed save stops training. A directory: no (a full disk may clear, training goes
  // on and the next save retries). An object store: yes — the save already retried with backoff,
  // and what is left (refused credentials, a storm of 5xx) would fail every later save too, so
  // training on would spend compute that can never be resumed from.
  virtual bool failure_stops_training() const { return false; }

 protected:
  explicit CheckpointStorage(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

// A committed checkpoint that could not be fetched (an object missing or of the wrong size).
class FetchDamage : public Error {
 public:
  using Error::Error;
};

// The checkpoint a URL names — s3:// or gs://bucket/prefix/step_<N>, or a root such as
// gs://bucket/prefix (its newest committed step) — downloaded under work_dir; returns the local
// step directory. Throws
// FetchDamage naming the object when one is missing or damaged, ft::Error when there is none.
std::string fetch_checkpoint(const std::string& url, const std::string& work_dir, const std::string& endpoint);

// A directory for a path, a bucket for s3:// or gs:// (endpoint: data.endpoint, "" = the store's
// variables; part_bytes: ckpt.part_mb, S3's multipart part or GCS's resumable chunk; 0 = the
// client's default).
std::unique_ptr<CheckpointStorage> open_checkpoint_storage(const std::string& root, const std::string& run_dir,
                                                           int rank, const std::string& endpoint,
                                                           uint64_t part_bytes = 0);

}  // namespace ft
