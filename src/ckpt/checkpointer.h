// Checkpointer: the trainer's one object for saving and resuming. Saves are asynchronous: at a
// checkpoint step a background thread copies this rank's state (ParamEngine::export_state) into
// host staging buffers while the next step's forward and backward run (they only read the state;
// the next optimizer step waits for the copy through the engine's before-update hook), then
// (encrypts and) writes the rank file (temporary name, fsync, rename). For an object store a second
// thread uploads the file from the local spool, so the staging buffers are free again as soon as the
// file is written: one save can upload while the next is snapshotted and queued behind it (two saves
// in flight at most; a third due while both are pending follows ckpt.when_busy). At later step boundaries the
// ranks agree, over the world communicator, that every rank file is durable; then rank 0 writes the
// manifest — the commit marker — and deletes checkpoints beyond ckpt.keep. A failed save (disk
// full, ...) is logged, counted and discarded on every rank; training goes on and earlier
// checkpoints stay intact.
//
//   Checkpointer ckpt(cfg.ckpt, checkpoint_run(cfg), mesh, engine, loader.tokenizer_hash(), &telemetry);
//   Checkpointer::Resumed r = ckpt.resume();                  // collective; per ckpt.resume
//   if (r.resumed) { step = r.step; tokens = r.tokens; if (r.has_loader) loader.restore(r.loader);
//   } for (...) { step(); ckpt.after_step(step, tokens, loader.state()); } ckpt.finish(); // waits
//   for the last commit
//
// Every call is collective over the world (all ranks call it at the same steps).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt_config.h"
#include "ckpt/ckpt_manifest.h"
#include "ckpt/ckpt_storage.h"
#include "ckpt/crypto.h"
#include "ckpt/pieces.h"
#include "ckpt/state_io.h"  // CheckpointReader::ReadStats
#include "data/loader/loader.h"
#include "model/model_config.h"
#include "parallel/data_parallel/param_engine.h"
#include "parallel/mesh.h"

namespace ft {

namespace obs {
class Telemetry;
}

// What the checkpointer knows of the run beyond its own settings (ckpt.*): the trainer fills it
// from its Config (Trainer: checkpoint_run), so this library reads no aggregate Config.
struct CheckpointRun {
  std::string run_dir;    // train.run_dir: checkpoints.jsonl, and the default checkpoint root
  int64_t steps = 0;      // train.steps: the last step is always saved
  int64_t zero = 0;       // parallel.zero, recorded in the manifest
  bool powersgd = false;  // parallel.grad_compression = "powersgd": its error feedback is state
  // A resume refuses a checkpoint of another model, or (with the loader's position) another
  // train.batch_size or train.seq_len: the data order would not continue.
  ModelConfig model;
  int64_t batch_size = 0, seq_len = 0;
  nlohmann::json config;  // the run's whole configuration (Config::to_json), kept in the manifest
  // data.endpoint: the endpoint of an s3:// or gs:// ckpt.dir ("" = the store's variables).
  std::string store_endpoint;
};

class Checkpointer {
 public:
  Checkpointer(const CkptConfig& ckpt, CheckpointRun run, Mesh& mesh, ParamEngine& engine, uint64_t tokenizer_hash,
               obs::Telemetry* telemetry);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  struct Resumed {
    bool resumed = false;
    std::string dir;
    int64_t step = 0, tokens = 0, restarts = 0;
    bool has_loader = false;
    LoaderState loader;
    double loss_scale = 0;  // fp16: the saved dynamic loss scale (0 = none saved)
    int64_t loss_scale_clean_steps = 0;
    nlohmann::json step_guard;  // the training guards' saved state (null: none saved)
  };
  // Loads the checkpoint ckpt.resume names ("auto": the newest valid one under the root, skipping
  // incomplete or corrupt ones with a warning) into the engine. Refuses another model, batch
  // or tokenizer with an ft::Error. Then clears the root of what a new save could collide with.
  Resumed resume();
  // Called after every optimizer step: completes earlier saves, and starts one when due.
  void after_step(int64_t step, int64_t tokens, const LoaderState& loader);
  // Saves skipped by ckpt.when_busy = "skip" (identical on every rank).
  int64_t skipped() const { return skipped_; }
  // fp16: the loss scaler's state after the latest step, saved with the next checkpoint.
  void set_loss_scale(double scale, int64_t clean_steps) {
    loss_scale_ = scale;
    loss_scale_clean_steps_ = clean_steps;
  }
  // The training guards' state (fault/step_guard.h), asked for when a save starts and kept in its
  // manifest: the same on every rank, so rank 0's is written.
  void set_guard_state(std::function<nlohmann::json()> state) { guard_state_ = std::move(state); }
  // Waits until the last save is committed (or failed); then every rank knows committed().
  void finish();
  // A checkpoint of `step` now, unless one was already started for it (a stop request, the
  // end of a run); followed by finish().
  void save_now(int64_t step, int64_t tokens, const LoaderState& loader);

  // After finish(): the step of the newest checkpoint this run committed or resumed from (-1:
  // none) — whether the run's last state is on disk.
  int64_t committed() const { return committed_; }
  // Whether this run's checkpoints are encrypted (ckpt.encrypt, or resumed from encrypted ones).
  bool encrypting() const { return ckpt_.encrypt; }
  int64_t failures() const { return failures_; }
  const std::string& root() const { return root_; }

 private:
  struct SaveJob;
  // final: the run's last save (never skipped).
  void start_save(int64_t step, int64_t tokens, const LoaderState& loader, bool final);
  // Whether ckpt.when_busy lets this save go ahead; waits (or skips) when two saves are pending.
  bool make_room(int64_t step, bool final);
  bool poll(bool block);                   // collective; true when no save is in flight any more
  bool retire_oldest(bool block);          // collective; the oldest save committed or discarded: true
  void copy_job(SaveJob& job);             // background (async) : the state into staging
  void wait_for_copy();                    // training thread, before an update: until copy_job is done
  void wait_written(SaveJob& job);         // training thread: until the job's file is written (staging free)
  void write_job(SaveJob& job);            // background: this rank's file, then queued for upload
  void upload_job(SaveJob& job);           // the upload thread: publish() (an object store: upload, confirm)
  void queue_upload_locked(SaveJob& job);  // under mu_: queues its upload when written and allowed
  void allow_next_upload();                // training thread: the oldest save's upload may begin
  struct SaveTimes {
    double stall_s = 0;         // the training thread's: starting the save, waiting for the copy
    double copy_s = 0;          // export_state into staging
    double write_s = 0;         // the rank file: checksums, encryption, write, fsync, rename (and upload)
    double upload_s = 0;        // object store: the slowest rank's upload
    uint64_t upload_bytes = 0;  // object store: every rank's uploaded bytes
  };
  // Rank 0, background: the manifest, retention, the log line.
  void commit_job(std::shared_ptr<CheckpointManifest> m, int64_t step, double t_start, SaveTimes t);
  void drain_events();  // training thread: commit results to telemetry
  struct Lane {
    std::deque<std::function<void()>> queue;
    bool busy = false;
    std::thread thread;
  };
  void run_worker(Lane& lane);
  void enqueue(Lane& lane, std::function<void()> fn);
  void wait_idle(Lane& lane);
  void prepare_root(int64_t resumed_step);
  // After a resume from a bucket: the bytes each rank fetched by ranged GETs against the objects'
  // sizes (rank 0 logs them and records a "resume_read" row). Collective.
  void report_ranged_read(const std::string& where, const CheckpointManifest& m,
                          const CheckpointReader::ReadStats& stats);
  // Resumed from an encrypted checkpoint with ckpt.encrypt off: go on encrypting, unless
  // ckpt.allow_plaintext says otherwise (logged either way).
  void keep_encryption(const CheckpointManifest& m,
                       const std::string& dir);  // rank 0: partial dirs removed, newer ones set aside
  void record(const nlohmann::json& row);        // rank 0: <run_dir>/checkpoints.jsonl
  std::vector<std::string> all_gather_strings(const std::string& s);
  // Bytes of a staging (or resume) buffer: weights, first and second moments.
  size_t staging_bytes() const { return static_cast<size_t>(3 * std::max<int64_t>(state_size_, 1)) * 4; }

  struct Event {
    int64_t step;
    double seconds;
    bool ok;
  };
  CkptConfig ckpt_;
  CheckpointRun run_;
  Mesh& mesh_;
  ParamEngine& engine_;
  obs::Telemetry* telemetry_;
  uint64_t tokenizer_hash_;
  std::string root_;
  std::unique_ptr<CheckpointStorage> storage_;  // root_: a directory or an object store
  CkptKey key_;
  uint32_t chunk_bytes_;
  std::vector<StatePiece> pieces_, owned_;  // this rank's state pieces; the ones it writes
  int64_t state_size_ = 0;
  // 3 × state_size_ floats of host memory (kCheckpoint; pinned for a GPU: mem_alloc_host), wiped
  // after each write.
  float* staging_ = nullptr;
  // Where the device-to-staging copies are queued: a side context of the engine's (its own
  // stream on a GPU), ordered after the step that produced the state (stream_wait); the next
  // optimizer update waits for it (wait_for_copy).
  ExecContext side_;
  bool staging_locked_ = false;  // encrypted runs: mlock'ed, out of core dumps
  int64_t restarts_ = 0;
  double loss_scale_ = 0;
  int64_t loss_scale_clean_steps_ = 0;
  std::function<nlohmann::json()> guard_state_;  // set_guard_state (empty: nothing saved)
  int copy_delay_ms_ = 0;                        // FaultInjector::delays(): slow the background copy down (tests)

  // The saves in flight, oldest first (two at most; identical on every rank): the older one
  // uploading, the newer one being written or queued behind it.
  std::deque<std::unique_ptr<SaveJob>> jobs_;
  int64_t failures_ = 0;
  int64_t skipped_ = 0;
  int64_t last_saved_ = -1;
  int64_t committed_ = -1;        // every rank, after finish(): rank 0's committed_local_
  int64_t committed_local_ = -1;  // rank 0: the newest manifest written (or resumed from)
  bool report_resume_ = false;
  double resume_started_ = 0;

  Lane writer_;    // copies into staging, rank files
  Lane uploader_;  // publish() (uploads to an object store; nothing for a directory), rank 0's commits
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> upload_failed_{false};  // the upload thread: a failure that stops training happened
  std::vector<Event> events_;               // from the worker, reported by the training thread
  std::mutex record_mu_;                    // checkpoints.jsonl
};

// Seconds since this process started (from /proc/self/stat).
double process_age_seconds();

// Resolves a user's checkpoint path: a step_<N> directory, a checkpoint root holding them, or a
// run directory holding checkpoints/ — the newest committed step in the latter two. Throws naming
// the path when nothing is found.
std::string resolve_checkpoint(const std::string& path);
// The step directories under a root, newest first (with or without a manifest).
std::vector<std::string> list_step_dirs(const std::string& root);

}  // namespace ft
