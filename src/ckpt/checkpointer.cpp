#include "ckpt/checkpointer.h"

#include <fmt/ranges.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "ckpt/state_io.h"
#include "data/dataset_manifest.h"
#include "data/objstore/object_store.h"
#include "fault/inject.h"
#include "obs/telemetry.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/all_ranks_error.h"
#include "util/clock.h"
#include "util/config_binder.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strings.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

using json = nlohmann::json;

// A checkpoint that must not be skipped for an older one: another model, batch or tokenizer, or
// another key. Resuming stops with its message.
class Refusal : public Error {
 public:
  using Error::Error;
};

// Encrypted runs: the plaintext in staging must not reach swap or a core dump. Best effort: a
// locked-memory limit below the staging size is a warning, not an error.
bool lock_staging(void* p, size_t n) {
  if (::mlock(p, n) != 0) {
    log_warn(
        "checkpoint: cannot lock the {} staging buffers in memory (mlock: {}); with swap on, "
        "plaintext state could be paged out to disk",
        human_bytes(static_cast<double>(n)), std::strerror(errno));
    return false;
  }
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTDUMP);
  return true;
}

void check_compatible(const CheckpointManifest& m, const CheckpointRun& run, uint64_t tokenizer_hash,
                      const std::string& dir) {
  const json& mc = m.config.contains("model") ? m.config["model"] : json::object();
  const ModelConfig& c = run.model;
  const std::vector<std::pair<const char*, json>> mine = {{"dim", c.dim},
                                                          {"n_layers", c.n_layers},
                                                          {"n_heads", c.n_heads},
                                                          {"n_kv_heads", c.n_kv_heads},
                                                          {"vocab_size", c.vocab_size},
                                                          {"ffn_dim", c.ffn_dim},
                                                          {"tie_embeddings", c.tie_embeddings},
                                                          {"norm_eps", c.norm_eps},
                                                          {"rope_theta", c.rope_theta}};
  for (const auto& [k, v] : mine) {
    if (mc.contains(k) && mc[k] != v)
      throw Refusal(fmt::format("{}: the checkpoint's model has model.{} = {}, this run's config says {}", dir, k,
                                mc[k].dump(), v.dump()),
                    "resume with the checkpoint's model settings (fluxtrain ckpt inspect shows them), or "
                    "start a new run");
  }
  if (m.has_loader) {
    const json& tc = m.config.contains("train") ? m.config["train"] : json::object();
    for (const auto& [k, v] :
         std::vector<std::pair<const char*, int64_t>>{{"batch_size", run.batch_size}, {"seq_len", run.seq_len}}) {
      if (tc.contains(k) && tc[k] != json(v))
        throw Refusal(fmt::format("{}: the checkpoint was trained with train.{} = {}, this run's config says {}: the "
                                  "data order would not continue",
                                  dir, k, tc[k].dump(), v),
                      fmt::format("resume with train.{} = {}", k, tc[k].dump()));
    }
    try {
      check_tokenizer_hash(m.tokenizer_hash, tokenizer_hash, dir);
    } catch (const Error& e) {
      throw Refusal(e.what(), e.hint());
    }
  }
}

}  // namespace

struct Checkpointer::SaveJob {
  int64_t step = 0, tokens = 0, optimizer_steps = 0;
  LoaderState loader;
  double loss_scale = 0;
  int64_t loss_scale_clean_steps = 0;
  nlohmann::json step_guard;  // rank 0's: what goes into the manifest
  std::string dir;
  bool final = false;                // the run's last save
  double start = 0;                  // when it was started (now_seconds)
  double stall = 0;                  // the training thread's time on it: starting it, waiting for the copy
  std::atomic<bool> copied{false};   // the state is in the staging buffers
  std::atomic<bool> written{false};  // the rank file is written (or failed): staging is free again
  std::atomic<bool> done{false};     // uploaded and confirmed (or failed)
  // Under mu_: the upload may begin (the save before it is committed everywhere), and has been queued.
  bool upload_allowed = false, upload_queued = false;
  bool ok = false;
  std::string error;
  FileRecord file;
  std::vector<PieceRecord> records;
  PublishReport upload;
  double copy_s = 0, write_s = 0;
};

double process_age_seconds() {
  std::ifstream stat("/proc/self/stat"), up("/proc/uptime");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  double uptime = 0;
  up >> uptime;
  size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) rest >> field;  // field 22: start time in clock ticks after boot
  return uptime - std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::vector<std::string> list_step_dirs(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  for (const auto& e : fs::directory_iterator(root, ec)) {
    int64_t step = parse_step_dir_name(e.path().filename().string());
    if (step >= 0 && e.is_directory()) found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& [s, p] : found) out.push_back(p);
  return out;
}

std::string resolve_checkpoint(const std::string& path) {
  if (fs::exists(path + "/" + kCkptManifestFile)) return path;
  for (const std::string& root : {path, path + "/checkpoints"})
    for (const std::string& d : list_step_dirs(root))
      if (fs::exists(d + "/" + kCkptManifestFile)) return d;
  if (parse_step_dir_name(fs::path(path).filename().string()) >= 0)
    throw Error(fmt::format("{}: no manifest: the checkpoint is incomplete (its save was interrupted)", path),
                "use an older step directory, or --resume auto");
  throw Error(fmt::format("{}: no checkpoint found (neither a step_<N> directory with a "
                          "manifest.json nor a directory "
                          "holding them)",
                          path),
              "give a checkpoint directory such as runs/demo/checkpoints/step_00000300, a "
              "checkpoint root or a run "
              "directory");
}

Checkpointer::Checkpointer(const CkptConfig& ckpt, CheckpointRun run, Mesh& mesh, ParamEngine& engine,
                           uint64_t tokenizer_hash, obs::Telemetry* telemetry)
    : ckpt_(ckpt),
      run_(std::move(run)),
      mesh_(mesh),
      engine_(engine),
      telemetry_(telemetry),
      tokenizer_hash_(tokenizer_hash),
      root_(ckpt_.root(run_.run_dir)),
      storage_(open_checkpoint_storage(root_, run_.run_dir, mesh.world_rank(), run_.store_endpoint,
                                       static_cast<uint64_t>(ckpt_.part_mb) << 20)),
      chunk_bytes_(static_cast<uint32_t>(ckpt_.chunk_mb << 20)) {
  // The key: needed to encrypt; otherwise loaded when given, to read encrypted checkpoints.
  if (ckpt_.encrypt) {
    key_ = CkptKey::load(ckpt_.key_file);
  } else if (!ckpt_.key_file.empty() || has_key_env()) {
    try {
      key_ = CkptKey::load(ckpt_.key_file);
    } catch (const Error& e) {
      log_warn("checkpoint key not usable ({}); encrypted checkpoints cannot be read", e.what());
    }
  }
  pieces_ = state_pieces(engine_.layout(), engine_.state_ranges());
  state_size_ = ranges_size(engine_.state_ranges());
  // A piece held by several ranks (tensor-parallel replicas) is written once, by the lowest rank.
  std::string keys;
  for (const StatePiece& p : pieces_) keys += p.key() + "\n";
  std::vector<std::string> all = all_gather_strings(keys);
  std::set<std::string> lower;
  for (int r = 0; r < mesh_.world_rank(); ++r) {
    std::istringstream in(all[static_cast<size_t>(r)]);
    for (std::string k; std::getline(in, k);) lower.insert(k);
  }
  for (const StatePiece& p : pieces_)
    if (!lower.count(p.key())) owned_.push_back(p);
  copy_delay_ms_ = FaultInjector::delays().ckpt_copy_ms;
  if (telemetry_) telemetry_->set_checkpoint_interval_steps(ckpt_.interval);
  if (ckpt_.interval > 0) {
    // Staging is allocated (and its pages touched) now, so a save's stall is only the copy.
    side_ = make_side_context(engine_.context());
    staging_ = static_cast<float*>(mem_alloc_host(side_.device, staging_bytes(), MemCategory::kCheckpoint));
    secure_zero(staging_, staging_bytes());
    if (ckpt_.encrypt) staging_locked_ = lock_staging(staging_, staging_bytes());
    std::signal(SIGXFSZ, SIG_IGN);  // a file-size limit is a write error (EFBIG), not death
    writer_.thread = std::thread([this] { run_worker(writer_); });
    uploader_.thread = std::thread([this] { run_worker(uploader_); });
    engine_.set_before_update([this] { wait_for_copy(); });
  }
}

Checkpointer::~Checkpointer() {
  engine_.set_before_update(nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.thread.joinable()) writer_.thread.join();
  if (uploader_.thread.joinable()) uploader_.thread.join();
  if (staging_locked_) ::munlock(staging_, staging_bytes());
  if (staging_) mem_free_host(side_.device, staging_, staging_bytes(), MemCategory::kCheckpoint);
}

void Checkpointer::run_worker(Lane& lane) {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !lane.queue.empty(); });
      if (lane.queue.empty()) return;  // stopping and nothing left
      fn = std::move(lane.queue.front());
      lane.queue.pop_front();
      lane.busy = true;
    }
    fn();
    {
      std::lock_guard<std::mutex> lock(mu_);
      lane.busy = false;
    }
    cv_.notify_all();
  }
}

void Checkpointer::enqueue(Lane& lane, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    lane.queue.push_back(std::move(fn));
  }
  cv_.notify_all();
}

void Checkpointer::wait_idle(Lane& lane) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return lane.queue.empty() && !lane.busy; });
}

std::vector<std::string> Checkpointer::all_gather_strings(const std::string& s) {
  Communicator& w = mesh_.world();
  const int n = w.size();
  int64_t len = static_cast<int64_t>(s.size());
  std::vector<int64_t> lens(static_cast<size_t>(n));
  w.all_gather(lens.data(), &len, 8);
  int64_t most = *std::max_element(lens.begin(), lens.end());
  std::string mine = s;
  mine.resize(static_cast<size_t>(most));
  std::string all(static_cast<size_t>(most * n), '\0');
  if (most > 0) w.all_gather(all.data(), mine.data(), most);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<size_t>(r * most), static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

void Checkpointer::record(const json& row) {
  if (mesh_.world_rank() != 0) return;
  std::lock_guard<std::mutex> lock(record_mu_);  // the training thread and the worker both record
  std::error_code ec;
  fs::create_directories(run_.run_dir, ec);
  std::ofstream out(run_.run_dir + "/checkpoints.jsonl", std::ios::app);
  out << row.dump() << "\n";
}

// ---- resume ----------------------------------------------------------------------------------

Checkpointer::Resumed Checkpointer::resume() {
  Resumed out;
  const std::string& spec = ckpt_.resume;
  const bool rank0 = mesh_.world_rank() == 0;
  // Where checkpoints go must be writable before step 1, not at the first save.
  if (ckpt_.interval > 0 || spec == "auto") storage_->check_writable();
  if (!spec.empty()) {
    const double t0 = now_seconds();
    // Rank 0 lists the candidates, newest first; every rank tries each in turn.
    std::string list;
    bool exact = false;
    // Read through a CheckpointStorage: "auto" (storage_), or an s3:// root or step (the
    // supervisor's restarts name one), through storage_ when it is this run's root.
    const bool url = ObjectUrl::is_object_url(spec);
    const bool stored = spec == "auto" || url;
    CheckpointStorage* source = storage_.get();
    std::unique_ptr<CheckpointStorage> other;
    int64_t only_step = -1;
    if (url) {
      std::string r = spec;
      while (!r.empty() && r.back() == '/') r.pop_back();
      only_step = parse_step_dir_name(fs::path(r).filename().string());
      if (only_step >= 0) r = r.substr(0, r.rfind('/'));
      exact = only_step >= 0;
      std::string mine = root_;
      while (!mine.empty() && mine.back() == '/') mine.pop_back();
      if (r != mine) {
        other = open_checkpoint_storage(r, run_.run_dir, mesh_.world_rank(), run_.store_endpoint);
        source = other.get();
      }
    }
    if (rank0) {
      std::vector<std::string> cands;
      if (stored) {
        for (const StoredStep& st : source->list_steps())
          if (only_step < 0 || st.step == only_step)
            list += fmt::format("{}\t{}\t{}\n", st.step, st.committed ? 1 : 0, st.where);
        if (exact && list.empty()) throw Error(fmt::format("{}: no such checkpoint", spec));
      } else if (fs::exists(spec + "/" + kCkptManifestFile) ||
                 parse_step_dir_name(fs::path(spec).filename().string()) >= 0) {
        cands = {spec};
        exact = true;
      } else {
        cands = list_step_dirs(spec);
        if (cands.empty()) cands = list_step_dirs(spec + "/checkpoints");
        if (cands.empty()) resolve_checkpoint(spec);  // throws naming the path
      }
      for (const std::string& c : cands)
        list += fmt::format("0\t{}\t{}\n", fs::exists(c + "/" + kCkptManifestFile) ? 1 : 0, c);
    }
    std::vector<std::string> lists = all_gather_strings(list);
    std::vector<StoredStep> cands;
    {
      std::istringstream in(lists[0]);
      for (std::string c; std::getline(in, c);) {
        const size_t a = c.find('\t'), b = c.find('\t', a + 1);
        cands.push_back({std::stoll(c.substr(0, a)), c.substr(b + 1), c.substr(a + 1, b - a - 1) == "1"});
      }
    }
    if (cands.empty()) log_info("resume: no checkpoint under {}; starting from step 0", root_);
    float* buf = static_cast<float*>(mem_alloc(Device::kCPU, staging_bytes(), MemCategory::kCheckpoint));
    float *w = buf, *m1 = buf + state_size_, *m2 = buf + 2 * state_size_;
    std::vector<std::string> failed;  // why each checkpoint (with a manifest) was skipped
    bool read_encrypted = false;
    for (const StoredStep& stored_step : cands) {
      const std::string& cand = stored_step.where;
      int status = 0;  // 0 ok, 1 skip (incomplete, corrupt), 2 refused
      std::string err, hint;
      CheckpointManifest m;
      std::string local;
      CheckpointReader::ReadStats read_stats{};
      try {
        // A bucket: the manifest is downloaded, the rank files are read in place (the chunks this
        // rank's layout needs, by ranged GETs).
        local = stored ? source->fetch_manifest(stored_step) : cand;
        m = CheckpointManifest::load(local,
                                     nullptr);  // unauthenticated first: is it ours, which key?
        if (m.encrypted && key_.empty())
          throw Refusal(fmt::format("{}: the checkpoint is encrypted and no key was given", cand),
                        "set FLUXTRAIN_CKPT_KEY or ckpt.key_file to the key it was written with");
        if (m.encrypted && key_.id() != m.key_id)
          throw Refusal(fmt::format("{}: the checkpoint was encrypted with key id {}, the given key has id {}", cand,
                                    m.key_id, key_.id()),
                        "set FLUXTRAIN_CKPT_KEY or ckpt.key_file to the key it was written with");
        if (m.encrypted) m = CheckpointManifest::load(local, &key_);
        check_compatible(m, run_, tokenizer_hash_, cand);
        CheckpointReader reader(local, m, key_.empty() ? nullptr : &key_,
                                stored ? source->opener(stored_step) : nullptr);
        std::fill_n(buf, 3 * state_size_, 0.0f);
        reader.fill(pieces_, w, m1, m2);
        read_stats = reader.read_stats();
      } catch (const Refusal& e) {
        status = 2, err = e.what(), hint = e.hint();
      } catch (const Error& e) {
        status = 1, err = e.what(), hint = e.hint();
      }
      // A damaged object is named by its URL, not by the local copy the reader found it in.
      if (stored && !local.empty() && local != cand && !cand.empty() && cand.back() == '/')
        for (size_t at = err.find(local + "/"); at != std::string::npos; at = err.find(local + "/", at + cand.size()))
          err.replace(at, local.size() + 1, cand);
      // [2]: a manifest is there, so this is a checkpoint that failed, not an interrupted save.
      double flags[3] = {status == 1 ? 1.0 : 0.0, status == 2 ? 1.0 : 0.0, stored_step.committed ? 1.0 : 0.0};
      mesh_.world().all_reduce(flags, 3);
      if (flags[1] > 0) {
        mem_free(Device::kCPU, buf, staging_bytes(), MemCategory::kCheckpoint);
        if (status == 2) throw Error(err, hint);
        throw Error(fmt::format("{}: another rank refused to resume from this checkpoint (see its error)", cand));
      }
      if (flags[0] > 0) {
        if (exact) {
          mem_free(Device::kCPU, buf, staging_bytes(), MemCategory::kCheckpoint);
          throw Error(
              status ? err : fmt::format("{}: another rank could not read this checkpoint (see its error)", cand),
              hint.empty() ? "resume from another checkpoint (--resume auto picks the newest valid one)" : hint);
        }
        const std::string why = status ? err : std::string("another rank could not read it (see its warning)");
        log_warn("resume: skipping checkpoint {}: {}", cand, why);
        if (flags[2] > 0) failed.push_back(why);
        continue;
      }
      engine_.import_state(w, m1, m2, m.optimizer_steps);
      if (stored) report_ranged_read(cand, m, read_stats);
      keep_encryption(m, cand);
      read_encrypted = m.encrypted;
      out.resumed = true;
      out.dir = cand;
      out.step = m.step;
      out.tokens = m.tokens;
      out.restarts = m.restarts + 1;
      out.has_loader = m.has_loader;
      out.loader = m.loader;
      out.loss_scale = m.loss_scale;
      out.loss_scale_clean_steps = m.loss_scale_clean_steps;
      out.step_guard = m.step_guard;
      restarts_ = out.restarts;
      log_info("resume: loaded {} (step {}, saved under {}; now {}) in {:.2f} s", cand, m.step, m.layout_text(),
               mesh_.describe(), now_seconds() - t0);
      if (run_.powersgd)
        log_warn(
            "resume: PowerSGD's error feedback and factors are not in checkpoints; losses after "
            "resuming are not "
            "bit-identical to an uninterrupted run");
      break;
    }
    mem_free(Device::kCPU, buf, staging_bytes(), MemCategory::kCheckpoint);
    source->clear_fetched();
    if (exact && !out.resumed) throw Error(fmt::format("{}: could not resume from it", spec));
    // Checkpoints were there and none could be read: training from step 0 would silently discard
    // them (and, at the first save, write over their steps). Starting over is the user's choice.
    if (!out.resumed && !failed.empty()) {
      throw Error(
          fmt::format("--resume {}: every checkpoint under {} failed verification ({})", spec,
                      stored || cands.empty() ? root_ : fs::path(cands.front().where).parent_path().string(),
                      fmt::join(failed, "; ")),
          fmt::format("`fluxtrain ckpt verify` names the damage; restore a checkpoint, or start over with --force "
                      "instead of --resume (the run's files are moved to {}/replaced-<time>/)",
                      run_.run_dir));
    }
    report_resume_ = out.resumed;
    // The key was given for a resume, but nothing it would read or write is encrypted.
    if (rank0 && !ckpt_.key_file.empty() && !ckpt_.encrypt && !read_encrypted)
      log_warn("config: ckpt.key_file has no effect: ckpt.encrypt = false and {}",
               out.resumed ? fmt::format("the checkpoint resumed from, {}, is not encrypted", out.dir)
                           : std::string("there was no checkpoint to resume from"));
  }
  if (ckpt_.interval > 0) {
    if (rank0) prepare_root(out.step);
    mesh_.world().barrier();
  }
  last_saved_ = out.step;
  committed_ = committed_local_ = out.resumed ? out.step : -1;
  return out;
}

void Checkpointer::report_ranged_read(const std::string& where, const CheckpointManifest& m,
                                      const CheckpointReader::ReadStats& stats) {
  const json mine = {{"fetched", stats.fetched}, {"needed", stats.chunk_bytes_needed}, {"files", stats.files_opened}};
  std::vector<std::string> all = all_gather_strings(mine.dump());
  if (mesh_.world_rank() != 0) return;
  json fetched = json::array(), needed = json::array(), files = json::array();
  uint64_t total = 0, objects = 0;
  for (const std::string& a : all) {
    const json r = json::parse(a);
    fetched.push_back(r["fetched"]);
    needed.push_back(r["needed"]);
    files.push_back(r["files"]);
    total += r["fetched"].get<uint64_t>();
  }
  if (total == 0) return;  // local files: nothing fetched
  for (const FileRecord& f : m.files) objects += f.file_bytes;
  std::vector<std::string> per_rank;
  for (const json& f : fetched)
    per_rank.push_back(fmt::format(
        "{} ({:.0f}%)", human_bytes(static_cast<double>(f.get<uint64_t>())),
        100.0 * static_cast<double>(f.get<uint64_t>()) / static_cast<double>(std::max<uint64_t>(objects, 1))));
  log_info("resume: read {} by ranged GETs: per rank {} of the checkpoint's {} (the chunks each rank's layout needs)",
           where, fmt::join(per_rank, ", "), human_bytes(static_cast<double>(objects)));
  record({{"event", "resume_read"},
          {"step", m.step},
          {"object_bytes", objects},
          {"fetched_bytes", fetched},
          {"chunk_bytes_needed", needed},
          {"files_opened", files},
          {"chunk_bytes", m.chunk_bytes}});
}

void Checkpointer::keep_encryption(const CheckpointManifest& m, const std::string& dir) {
  if (!m.encrypted || ckpt_.encrypt) return;
  const bool rank0 = mesh_.world_rank() == 0;
  if (ckpt_.allow_plaintext) {  // the explicit choice, said loudly
    if (rank0)
      log_warn(
          "checkpoint: {} is encrypted; ckpt.allow_plaintext = true: the checkpoints this run writes are NOT "
          "encrypted",
          dir);
    return;
  }
  ckpt_.encrypt = true;
  run_.config["ckpt"]["encrypt"] = true;
  if (staging_ && !staging_locked_) staging_locked_ = lock_staging(staging_, staging_bytes());
  if (rank0 && ckpt_.interval > 0)
    log_info(
        "checkpoint: {} is encrypted, so this run's checkpoints stay encrypted (key id {}); to write plaintext "
        "ones, set ckpt.allow_plaintext = true",
        dir, key_.id());
}

void Checkpointer::prepare_root(int64_t resumed_step) {
  // Uploads a killed run left unfinished (no process of this run has begun one yet).
  try {
    storage_->clean_orphans(std::numeric_limits<int64_t>::max());
  } catch (const Error& e) {
    log_warn("checkpoint: unfinished uploads under {} could not be cleaned: {}", root_, e.what());
  }
  for (const StoredStep& st : storage_->list_steps()) {
    if (!st.committed) {
      log_warn("checkpoint: removing {}: incomplete (no manifest; a save was interrupted)", st.where);
      storage_->discard_step(st.step);
    } else if (st.step > resumed_step) {
      std::string aside = storage_->set_aside(st);
      log_warn("checkpoint: {} is newer than the step this run starts from ({}); moved to {}", st.where, resumed_step,
               aside);
    }
  }
}

// ---- saving ----------------------------------------------------------------------------------

void Checkpointer::after_step(int64_t step, int64_t tokens, const LoaderState& loader) {
  if (report_resume_) {
    report_resume_ = false;
    double age = process_age_seconds();
    log_info("resume: {:.2f} s from process start to the end of the first resumed step (step {})", age, step);
    record({{"event", "resume"}, {"step", step}, {"seconds_from_start", age}});
  }
  if (ckpt_.interval <= 0) return;
  drain_events();
  if (!jobs_.empty()) poll(false);
  const bool due = step % ckpt_.interval == 0 || step == run_.steps;
  if (due && step != last_saved_) start_save(step, tokens, loader, step == run_.steps);
}

void Checkpointer::finish() {
  if (ckpt_.interval <= 0) return;
  poll(true);
  wait_idle(uploader_);  // rank 0: the manifest
  drain_events();
  // Rank 0 wrote (or failed to write) the manifest: every rank learns which step is on disk.
  double c = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = static_cast<double>(committed_local_);
  }
  mesh_.world().broadcast(&c, sizeof c, 0);
  committed_ = static_cast<int64_t>(c);
}

void Checkpointer::save_now(int64_t step, int64_t tokens, const LoaderState& loader) {
  if (ckpt_.interval <= 0) return;
  drain_events();
  if (step != last_saved_) start_save(step, tokens, loader, true);
  finish();
}

bool Checkpointer::make_room(int64_t step, bool final) {
  poll(false);  // retire the saves every rank has finished
  if (jobs_.empty()) return true;
  const bool rank0 = mesh_.world_rank() == 0;
  const char* doing = storage_->failure_stops_training() ? "uploaded" : "written";
  if (jobs_.size() == 1) {  // the previous save is still uploading: this one queues behind it
    if (rank0 && jobs_.front()->written.load())
      log_info(
          "checkpoint step {} is due while step {} is still being {}; it is queued behind it (ckpt.when_busy = "
          "\"{}\" applies when a third save is due before step {} is done)",
          step, jobs_.front()->step, doing, ckpt_.when_busy, jobs_.front()->step);
    return true;
  }
  // Both pending: one uploading, one queued (its file in the spool).
  const int64_t older = jobs_.front()->step, queued = jobs_.back()->step;
  if (ckpt_.when_busy == "skip" && !final) {
    ++skipped_;
    if (telemetry_) telemetry_->on_checkpoint_skipped();
    if (rank0) {
      log_warn(
          "checkpoint step {} skipped: step {} is still being {} and step {} is queued behind it "
          "(ckpt.when_busy = \"skip\"; {} skipped so far; raise ckpt.interval if this repeats)",
          step, older, doing, queued, skipped_);
      record({{"event", "skipped"}, {"step", step}, {"uploading", older}, {"queued", queued}});
    }
    return false;
  }
  if (rank0)
    log_warn(
        "checkpoint step {} is due while step {} is still being {} and step {} is queued behind it; training "
        "waits for step {} ({}; raise ckpt.interval if this repeats)",
        step, older, doing, queued, older,
        final ? "the final save is never skipped" : "ckpt.when_busy = \"wait\"; \"skip\" skips such saves");
  while (jobs_.size() >= 2) retire_oldest(true);
  return true;
}

void Checkpointer::start_save(int64_t step, int64_t tokens, const LoaderState& loader, bool final) {
  const double t0 = now_seconds();
  if (!make_room(step, final)) return;
  // The staging buffers are reused: the newest save's file must be written first (a local write).
  if (!jobs_.empty() && !jobs_.back()->written.load()) {
    if (mesh_.world_rank() == 0)
      log_warn(
          "checkpoint step {} is due while step {}'s file is still being written; training waits for it (its "
          "staging buffers are reused; raise ckpt.interval if this repeats)",
          step, jobs_.back()->step);
    wait_written(*jobs_.back());
  }
  auto job = std::make_unique<SaveJob>();
  job->step = step;
  job->tokens = tokens;
  job->loader = loader;
  job->loss_scale = loss_scale_;
  job->loss_scale_clean_steps = loss_scale_clean_steps_;
  if (guard_state_ && mesh_.world_rank() == 0) job->step_guard = guard_state_();
  job->optimizer_steps = engine_.optimizer_steps();
  job->dir = storage_->staging_dir(step);
  job->final = final;
  job->start = t0;
  stream_wait(side_, engine_.context());  // the copies follow the update that produced the state
  last_saved_ = step;
  SaveJob* j = job.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    j->upload_allowed = jobs_.empty();  // else once the save before it is committed (retire_oldest)
  }
  jobs_.push_back(std::move(job));
  if (ckpt_.async) {
    // The background thread copies the state into staging while the next step's forward and
    // backward run (they only read it); the next optimizer step waits for the copy
    // (wait_for_copy, the engine's before-update hook), then it writes.
    enqueue(writer_, [this, j] {
      copy_job(*j);
      write_job(*j);
    });
    j->stall = now_seconds() - t0;
  } else {  // synchronous: the training thread copies and writes; the stall is the whole save
    copy_job(*j);
    write_job(*j);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return j->done.load(); });  // uploaded too
    }
    j->stall = now_seconds() - t0;
    poll(true);
    wait_idle(uploader_);  // rank 0: the manifest too
  }
}

void Checkpointer::copy_job(SaveJob& j) {
  const double t0 = now_seconds();
  if (ckpt_.async && copy_delay_ms_ > 0)  // tests: the next update must wait for the copy
    std::this_thread::sleep_for(std::chrono::milliseconds(copy_delay_ms_));
  engine_.export_state(side_, staging_, staging_ + state_size_, staging_ + 2 * state_size_);
  synchronize(side_);  // the state is in staging: the writer reads it next
  j.copy_s = now_seconds() - t0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    j.copied = true;
  }
  cv_.notify_all();
}

void Checkpointer::wait_for_copy() {
  if (jobs_.empty() || jobs_.back()->copied.load()) return;
  SaveJob& j = *jobs_.back();
  const double t0 = now_seconds();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return j.copied.load(); });
  }
  stream_wait(engine_.context(), side_);  // the update is queued after the copies (done on the host already)
  j.stall += now_seconds() - t0;
}

void Checkpointer::wait_written(SaveJob& j) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return j.written.load(); });
}

void Checkpointer::write_job(SaveJob& j) {
  const double t0 = now_seconds();
  try {
    fs::create_directories(j.dir);
    j.file = write_rank_file(j.dir, j.step, mesh_.world_rank(), owned_, staging_, staging_ + state_size_,
                             staging_ + 2 * state_size_, chunk_bytes_, ckpt_.encrypt ? &key_ : nullptr, &j.records);
    j.ok = true;
  } catch (const std::exception& e) {
    j.ok = false;
    j.error = e.what();
  }
  secure_zero(staging_, staging_bytes());  // no plaintext copy left behind; free for the next save
  j.write_s = now_seconds() - t0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    j.written = true;
  }
  cv_.notify_all();
  if (!j.ok) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      j.done = true;
    }
    cv_.notify_all();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  queue_upload_locked(j);
}

void Checkpointer::queue_upload_locked(SaveJob& j) {
  // A save's upload begins once its file is written and the save before it is committed on every
  // rank: uploads and rank 0's commits reach the store in step order (commit N, then N + 1's files).
  if (!j.written.load() || !j.upload_allowed || j.upload_queued) return;
  j.upload_queued = true;
  SaveJob* p = &j;
  uploader_.queue.push_back([this, p] { upload_job(*p); });
  cv_.notify_all();
}

void Checkpointer::upload_job(SaveJob& j) {
  const double t0 = now_seconds();
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping = stop_;
  }
  // Not begun: behind an upload that failed where a failure stops training (the store refused it;
  // this one would only retry into the same refusal), or the checkpointer is going away.
  if (stopping || upload_failed_) {
    j.ok = false;
    j.error = stopping ? "not uploaded: training stopped first"
                       : fmt::format("not uploaded: the upload of an earlier checkpoint failed");
  } else {
    try {
      j.upload = storage_->publish(j.step, j.file.name);  // an object store: uploaded and confirmed
    } catch (const std::exception& e) {
      j.ok = false;
      j.error = e.what();
      if (storage_->failure_stops_training()) upload_failed_ = true;
    }
  }
  j.write_s += now_seconds() - t0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    j.done = true;
  }
  cv_.notify_all();
}

void Checkpointer::allow_next_upload() {
  if (jobs_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.front()->upload_allowed = true;
  queue_upload_locked(*jobs_.front());
}

bool Checkpointer::poll(bool block) {
  // Oldest first: a save commits only after the one before it (rank 0's manifests stay in order).
  while (!jobs_.empty())
    if (!retire_oldest(block)) return false;
  return true;
}

bool Checkpointer::retire_oldest(bool block) {
  if (jobs_.empty()) return true;
  SaveJob& j = *jobs_.front();
  if (block) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return j.done.load(); });
  }
  const bool done = j.done.load();
  double flags[2] = {done ? 0.0 : 1.0, done && !j.ok ? 1.0 : 0.0};
  mesh_.world().all_reduce(flags, 2);
  if (flags[0] > 0) return false;
  const bool rank0 = mesh_.world_rank() == 0;
  if (flags[1] > 0) {  // some rank failed: the checkpoint is discarded everywhere
    ++failures_;
    const bool stop = storage_->failure_stops_training();
    // Stopping: every rank names the first rank's error (the CLI prints what is thrown).
    std::string first;
    if (stop)
      for (const std::string& e : all_gather_strings(j.ok ? std::string() : j.error))
        if (first.empty()) first = e;
    if (!j.ok && !stop)
      log_error("checkpoint step {} failed: {}; training continues, the partial checkpoint is discarded", j.step,
                j.error);
    try {
      storage_->discard_file(j.step, rank_file_name(mesh_.world_rank()));
    } catch (const Error& e) {
      log_warn("checkpoint step {}: {}", j.step, e.what());
    }
    mesh_.world().barrier();
    if (rank0) {
      try {
        storage_->discard_step(j.step);
      } catch (const Error& e) {
        log_warn("checkpoint step {}: {}", j.step, e.what());
      }
      log_error("checkpoint step {} discarded ({} failure(s) so far); earlier checkpoints are intact", j.step,
                failures_);
      record({{"event", "save"}, {"step", j.step}, {"ok", false}, {"error", j.ok ? "another rank failed" : j.error}});
    }
    if (telemetry_) telemetry_->on_checkpoint(j.step, now_seconds() - j.start, false);
    const int64_t step = j.step;
    jobs_.pop_front();
    if (!stop) allow_next_upload();  // stopping: the queued save is abandoned, never uploaded
    if (stop) {
      // Rank 0's committed_local_ is current once the commits queued on the upload thread ran (the
      // previous save's may still be queued: it retired while this one uploaded).
      wait_idle(uploader_);
      double c = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        c = static_cast<double>(committed_local_);
      }
      mesh_.world().broadcast(&c, sizeof c, 0);
      const int64_t last = static_cast<int64_t>(c);
      throw AllRanksError(
          fmt::format("checkpoint step {} failed: {}; training stops: {}", step, first,
                      last >= 0 ? fmt::format("the last committed checkpoint is {}/{}", root_, step_dir_name(last))
                                : std::string("no checkpoint was committed")),
          last >= 0 ? "fix the store (credentials, availability), then `--resume auto` continues from it"
                    : "fix the store (credentials, availability), then start again");
    }
    return true;
  }
  if (telemetry_ && j.upload.bytes > 0) telemetry_->on_checkpoint_upload(j.upload.bytes, j.upload.seconds);
  json mine = json::parse(pieces_to_json(j.file, owned_, j.records));
  mine["stall_s"] = j.stall;
  mine["copy_s"] = j.copy_s;
  mine["write_s"] = j.write_s;
  mine["upload_bytes"] = j.upload.bytes;
  mine["upload_s"] = j.upload.seconds;
  std::vector<std::string> files = all_gather_strings(mine.dump());
  if (rank0) {
    auto m = std::make_shared<CheckpointManifest>();
    m->step = j.step;
    m->tokens = j.tokens;
    m->optimizer_steps = j.optimizer_steps;
    m->restarts = restarts_;
    m->loader = j.loader;
    m->loss_scale = j.loss_scale;
    m->loss_scale_clean_steps = j.loss_scale_clean_steps;
    m->step_guard = j.step_guard;
    m->tokenizer_hash = tokenizer_hash_;
    m->world = mesh_.world_size();
    m->dp = mesh_.degrees().dp, m->tp = mesh_.degrees().tp, m->pp = mesh_.degrees().pp, m->zero = run_.zero;
    m->cp = mesh_.degrees().cp;
    m->created = utc_timestamp();
    m->config = run_.config;
    m->encrypted = ckpt_.encrypt;
    if (m->encrypted) m->key_id = key_.id();
    m->chunk_bytes = chunk_bytes_;
    SaveTimes t;  // the slowest rank's
    for (const std::string& f : files) {
      add_json_file_to_manifest(*m, f);
      const json r = json::parse(f);
      t.stall_s = std::max(t.stall_s, r["stall_s"].get<double>());
      t.copy_s = std::max(t.copy_s, r["copy_s"].get<double>());
      t.write_s = std::max(t.write_s, r["write_s"].get<double>());
      t.upload_s = std::max(t.upload_s, r["upload_s"].get<double>());
      t.upload_bytes += r["upload_bytes"].get<uint64_t>();
    }
    const int64_t step = j.step;
    const double start = j.start;
    // On the upload thread, after the uploads before it: one thread speaks to the store (a commit
    // never races an upload of this process; a listing that computes ETags while a PUT stores an
    // object made moto report a wrong ETag). A commit queued behind the next save's upload waits for it.
    enqueue(uploader_, [this, m, step, start, t] { commit_job(m, step, start, t); });
  }
  jobs_.pop_front();
  allow_next_upload();
  drain_events();
  return true;
}

void Checkpointer::commit_job(std::shared_ptr<CheckpointManifest> m, int64_t step, double t_start, SaveTimes t) {
  try {
    storage_->write_manifest(step, m->to_json_text(m->encrypted ? &key_ : nullptr));
  } catch (const std::exception& e) {
    try {
      storage_->discard_step(step);
    } catch (const Error& e2) {
      log_warn("checkpoint step {}: {}", step, e2.what());
    }
    log_error(
        "checkpoint step {} failed writing its manifest: {}; the checkpoint is discarded, training "
        "continues",
        step, e.what());
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back({step, now_seconds() - t_start, false});
    record({{"event", "save"}, {"step", step}, {"ok", false}, {"error", e.what()}});
    return;
  }
  // Retention: the newest ckpt.keep committed checkpoints stay; older ones (and stale partial
  // directories older than this commit) go — only now that a newer one is durable.
  int64_t kept = 0;
  try {
    for (const StoredStep& st : storage_->list_steps()) {
      if (st.committed && ++kept <= ckpt_.keep) continue;
      if (!st.committed && st.step >= step) continue;
      if (st.committed)
        storage_->remove_checkpoint(st);
      else
        storage_->discard_step(st.step);
    }
    storage_->clean_orphans(step);  // unfinished uploads of older steps (a save that was killed)
  } catch (const Error& e) {        // the new checkpoint is committed; old ones stay for the next commit
    log_warn("checkpoint: retention after step {}: {}", step, e.what());
  }
  const double total = now_seconds() - t_start;
  uint64_t bytes = 0;
  for (const FileRecord& f : m->files) bytes += f.file_bytes;
  // What a synchronous save costs the training thread: copying and writing (async: measured by
  // the background thread; sync: the stall itself, which includes the manifest).
  const double sync_s = ckpt_.async ? t.copy_s + t.write_s : t.stall_s;
  const double ratio = t.stall_s / std::max(sync_s, 1e-9);
  const std::string upload =
      t.upload_bytes == 0
          ? std::string()
          : fmt::format(" (uploaded to {}: {:.1f} MB in {:.3f} s, {:.0f} MB/s per rank)", root_,
                        static_cast<double>(t.upload_bytes) / 1e6, t.upload_s,
                        static_cast<double>(t.upload_bytes) / 1e6 /
                            std::max<double>(static_cast<double>(m->files.size()), 1) / std::max(t.upload_s, 1e-9));
  log_info(
      "checkpoint step {} committed: {:.1f} MB in {} file(s){}, written in {:.3f} s ({:.0f} MB/s){}; "
      "training "
      "stalled {:.1f} ms{}",
      step, static_cast<double>(bytes) / 1e6, m->files.size(), m->encrypted ? " (encrypted)" : "", t.write_s,
      static_cast<double>(bytes) / 1e6 / std::max(t.write_s, 1e-9), upload, t.stall_s * 1e3,
      ckpt_.async ? fmt::format(" against {:.1f} ms for a synchronous save (copy {:.1f} ms + write): {:.1f}%",
                                sync_s * 1e3, t.copy_s * 1e3, 100.0 * ratio)
                  : std::string(" (synchronous save: ckpt.async = false)"));
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({step, total, true});
  committed_local_ = std::max(committed_local_, step);
  record({{"event", "save"},
          {"step", step},
          {"ok", true},
          {"bytes", bytes},
          {"files", m->files.size()},
          {"encrypted", m->encrypted},
          {"async", ckpt_.async},
          {"stall_s", t.stall_s},
          {"copy_s", t.copy_s},
          {"write_s", t.write_s},
          {"upload_bytes", t.upload_bytes},
          {"upload_s", t.upload_s},
          {"sync_s", sync_s},
          {"commit_s", total},
          {"stall_ratio", ratio}});
}

void Checkpointer::drain_events() {
  std::vector<Event> ev;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ev.swap(events_);
  }
  for (const Event& e : ev) {
    if (!e.ok) ++failures_;
    if (telemetry_) telemetry_->on_checkpoint(e.step, e.seconds, e.ok);
  }
}

}  // namespace ft
