#include "data/prepare/prepare.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "data/prepare/corpus.h"
#include "data/prepare/near_dedup.h"
#include "data/prepare/text_normalize.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/output_path.h"
#include "util/strings.h"

namespace ft {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

const char* kLanguages[] = {"en", "ru", "other"};
int language_index(const std::string& l) {
  return l == "en" ? 0 : l == "ru" ? 1 : 2;
}

// Spill records: u32 text bytes, u8 language index, then the text.
class SpillWriter {
 public:
  explicit SpillWriter(const std::string& path) : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
    if (!out_) throw Error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  }
  void add(const std::string& text, int lang) {
    uint32_t n = static_cast<uint32_t>(text.size());
    uint8_t l = static_cast<uint8_t>(lang);
    out_.write(reinterpret_cast<const char*>(&n), 4);
    out_.write(reinterpret_cast<const char*>(&l), 1);
    out_.write(text.data(), n);
    if (!out_) throw Error(fmt::format("writing {} failed", path_), "is the disk full?");
  }
  void close() { out_.close(); }

 private:
  std::string path_;
  std::ofstream out_;
};

class SpillReader {
 public:
  explicit SpillReader(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) throw Error(fmt::format("cannot open {}", path));
  }
  bool next(std::string* text, int* lang) {
    uint32_t n = 0;
    uint8_t l = 0;
    if (!in_.read(reinterpret_cast<char*>(&n), 4)) return false;
    in_.read(reinterpret_cast<char*>(&l), 1);
    text->resize(n);
    in_.read(text->data(), n);
    *lang = l;
    return static_cast<bool>(in_);
  }

 private:
  std::ifstream in_;
};

// One split: its statistics, and one text spill per language (shards are cut per language, so
// a language's documents are a run of whole shards: data.mixture can select them).
struct SplitAccumulator {
  SplitInfo info;
  std::unique_ptr<SpillWriter> spill[3];
  uint64_t lang_docs[3] = {0, 0, 0}, lang_bytes[3] = {0, 0, 0};
};

std::string spill_path(const std::string& staging, const char* split, int lang, const char* what) {
  return fmt::format("{}/{}.{}.{}", staging, split, kLanguages[lang], what);
}

// Shards per language for a split of `n` shards: at least one for each language with documents,
// the rest by text bytes (largest remainder), never more than a language's documents.
std::vector<int64_t> shards_per_language(int64_t n, const uint64_t docs[3], const uint64_t bytes[3]) {
  std::vector<int64_t> out(3, 0);
  int present = 0;
  uint64_t total = 0;
  for (int l = 0; l < 3; ++l)
    if (docs[l] > 0) ++present, total += bytes[l];
  if (present == 0) return out;
  n = std::max<int64_t>(n, present);
  int64_t given = 0;
  for (int l = 0; l < 3; ++l)
    if (docs[l] > 0) out[static_cast<size_t>(l)] = 1, ++given;
  while (given < n) {  // the next shard goes where a shard would hold the most bytes
    int best = -1;
    double best_load = -1;
    for (int l = 0; l < 3; ++l) {
      auto li = static_cast<size_t>(l);
      if (docs[l] <= static_cast<uint64_t>(out[li])) continue;
      double load = static_cast<double>(bytes[l]) / static_cast<double>(out[li]);
      if (load > best_load) best = l, best_load = load;
    }
    if (best < 0) break;
    ++out[static_cast<size_t>(best)];
    ++given;
  }
  (void)total;
  return out;
}

struct Key128 {
  uint64_t a, b;
  bool operator==(const Key128& o) const { return a == o.a && b == o.b; }
};
struct Key128Hash {
  size_t operator()(const Key128& k) const { return static_cast<size_t>(k.a); }
};

struct ExtractedDoc {
  std::string source, text;
  uint64_t invalid = 0;
  MinHash sig;  // when near-duplicates are removed
};

void remove_stale_staging(const fs::path& out) {
  fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  std::string stem = out.filename().string() + ".tmp-";
  std::error_code ec;
  for (auto& e : fs::directory_iterator(parent, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(stem, 0) != 0) continue;
    long pid = std::atol(name.c_str() + stem.size());
    if (pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;  // still running
    log_info("prepare: removing {} left by an interrupted run", e.path().string());
    fs::remove_all(e.path(), ec);
  }
}

std::string shard_info_json(const ShardInfo& i) {
  return nlohmann::json{
      {"file", i.file},         {"tokens", i.tokens},     {"documents", i.documents},  {"bytes", i.bytes},
      {"checksum", i.checksum}, {"language", i.language}, {"characters", i.characters}}
      .dump();
}

ShardInfo shard_info_from_json(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);
  ShardInfo i;
  i.file = j["file"].get<std::string>();
  i.tokens = j["tokens"].get<uint64_t>();
  i.documents = j["documents"].get<uint64_t>();
  i.bytes = j["bytes"].get<uint64_t>();
  i.checksum = j["checksum"].get<uint64_t>();
  i.language = j["language"].get<std::string>();
  i.characters = j["characters"].get<uint64_t>();
  return i;
}

// The ranks' collective (PrepareOptions::sync), counted so that a rank that fails joins the next
// one with a failure status instead of leaving the others waiting.
class Sync {
 public:
  explicit Sync(const PrepareOptions& o) : opt_(o) {}
  // Returns rank 0's values; throws when any rank reported a failure.
  std::function<void()> on_run;  // counts completed collectives
  bool failed_remote = false;    // a collective reported another rank's failure
  std::vector<int64_t> run(std::vector<int64_t> v) {
    v.insert(v.begin(), 0);
    exchange(v);
    if (on_run) on_run();
    if (v[0] != 0) {
      failed_remote = true;
      throw Error(fmt::format("prepare: another rank failed (rank {} of {} stops too)", opt_.rank, opt_.world),
                  "the failing rank printed the reason");
    }
    return {v.begin() + 1, v.end()};
  }
  void fail(size_t n) {  // joins the pending collective with a failure (n = its payload size)
    std::vector<int64_t> v(n + 1, 0);
    v[0] = 1;
    exchange(v);
  }

 private:
  void exchange(std::vector<int64_t>& v) {
    if (opt_.world > 1) opt_.sync(v);
  }
  const PrepareOptions& opt_;
};

std::string rank_path(const std::string& staging, const char* split, int lang, const char* what, int rank) {
  return fmt::format("{}/{}.{}.{}.{}", staging, split, kLanguages[lang], what, rank);
}

// Every rank: documents [r·D/N, (r+1)·D/N) of each (split, language) text spill, encoded (EOS
// appended) into "<split>.<lang>.tokens.<r>" (int32) and "<split>.<lang>.lens.<r>" (u64 tokens,
// u64 characters per document).
void encode_part(const std::string& staging, const Tokenizer& tok, int32_t eos, const uint64_t docs[2][3], int rank,
                 int world) {
  const char* split_names[2] = {"train", "validation"};
  for (int s = 0; s < 2; ++s) {
    for (int l = 0; l < 3; ++l) {
      const int64_t D = static_cast<int64_t>(docs[s][l]), first = rank * D / world, last = (rank + 1) * D / world;
      SpillReader reader(spill_path(staging, split_names[s], l, "text"));
      std::ofstream tok_out(rank_path(staging, split_names[s], l, "tokens", rank), std::ios::binary | std::ios::trunc);
      std::ofstream lens_out(rank_path(staging, split_names[s], l, "lens", rank), std::ios::binary | std::ios::trunc);
      std::vector<std::string> texts;
      std::string text;
      int lang = 0;
      int64_t index = 0;
      bool more = true;
      while (more && index < last) {
        texts.clear();
        size_t bytes = 0;
        while (bytes < (size_t{16} << 20) && index < last && (more = reader.next(&text, &lang))) {
          if (index++ < first) continue;
          bytes += text.size();
          texts.push_back(std::move(text));
        }
        if (texts.empty()) continue;
        auto ids = tok.encode_batch(texts);
        for (size_t i = 0; i < ids.size(); ++i) {
          ids[i].push_back(eos);
          tok_out.write(reinterpret_cast<const char*>(ids[i].data()), static_cast<std::streamsize>(ids[i].size() * 4));
          uint64_t rec[2] = {ids[i].size(), count_code_points(texts[i])};
          lens_out.write(reinterpret_cast<const char*>(rec), sizeof rec);
        }
      }
      if (!tok_out || !lens_out)
        throw Error(fmt::format("writing token spill in {} failed", staging), "is the disk full?");
    }
  }
}

// The documents [first, last) of each shard: the greedy cut of write_shards, on lengths only.
std::vector<std::pair<size_t, size_t>> cut_shards(const std::vector<uint64_t>& doc_lens, int64_t n) {
  uint64_t total = 0;
  for (uint64_t l : doc_lens) total += l;
  std::vector<std::pair<size_t, size_t>> out;
  size_t d = 0;
  uint64_t done = 0;
  for (int64_t s = 0; s < n; ++s) {
    size_t begin = d;
    uint64_t in_shard = 0;
    uint64_t target = total * static_cast<uint64_t>(s + 1) / static_cast<uint64_t>(n);
    size_t docs_left = doc_lens.size() - d;
    size_t shards_after = static_cast<size_t>(n - s - 1);
    while (d < doc_lens.size()) {
      if (docs_left <= shards_after) break;  // every later shard needs a document
      // Stop when adding this document overshoots the target by more than stopping undershoots it.
      if (s != n - 1 && in_shard > 0 && done + doc_lens[d] / 2 >= target) break;
      in_shard += doc_lens[d];
      done += doc_lens[d];
      ++d;
      --docs_left;
    }
    out.emplace_back(begin, d);
  }
  FT_CHECK(d == doc_lens.size(), "{} documents left after cutting shards", doc_lens.size() - d);
  return out;
}

// One (split, language)'s documents over the ranks' token files, in rank order.
struct RankedTokens {
  std::vector<uint64_t> lens, chars;
  std::vector<int> rank_of;        // per document
  std::vector<uint64_t> offset;    // per document: first token inside its rank's file
  std::vector<std::string> files;  // per rank
};

RankedTokens read_lens(const std::string& staging, const char* split, int lang, int world) {
  RankedTokens t;
  for (int r = 0; r < world; ++r) {
    t.files.push_back(rank_path(staging, split, lang, "tokens", r));
    std::string raw = read_file(rank_path(staging, split, lang, "lens", r));
    uint64_t off = 0;
    for (size_t i = 0; i + 16 <= raw.size(); i += 16) {
      uint64_t rec[2];
      std::memcpy(rec, raw.data() + i, 16);
      t.lens.push_back(rec[0]);
      t.chars.push_back(rec[1]);
      t.rank_of.push_back(r);
      t.offset.push_back(off);
      off += rec[0];
    }
  }
  return t;
}

ShardInfo write_shard(const std::string& path, int token_bytes, const RankedTokens& t, size_t first, size_t last,
                      const std::string& language) {
  ShardWriter w(path, token_bytes);
  uint64_t chars = 0;
  std::vector<int32_t> buf;
  std::ifstream in;
  int open_rank = -1;
  for (size_t d = first; d < last; ++d) {
    if (t.rank_of[d] != open_rank) {
      in.close();
      in.open(t.files[static_cast<size_t>(t.rank_of[d])], std::ios::binary);
      if (!in) throw Error(fmt::format("cannot open {}", t.files[static_cast<size_t>(t.rank_of[d])]));
      open_rank = t.rank_of[d];
    }
    buf.resize(t.lens[d]);
    in.seekg(static_cast<std::streamoff>(t.offset[d] * 4));
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 4));
    if (!in) throw Error(fmt::format("{}: short read", t.files[static_cast<size_t>(open_rank)]));
    w.add_document(buf.data(), buf.size());
    chars += t.chars[d];
  }
  ShardInfo info = w.commit();
  info.language = language;
  info.characters = chars;
  return info;
}

// Every rank: the shards of both splits (cut per language), writing those with k % world == rank
// and their ShardInfo as "<name>.info" (one JSON object) beside them.
void write_rank_shards(const std::string& staging, int token_bytes, const uint64_t docs[2][3],
                       const uint64_t bytes[2][3], int64_t shards, int64_t val_shards, int rank, int world) {
  const char* split_names[2] = {"train", "validation"};
  for (int s = 0; s < 2; ++s) {
    std::vector<int64_t> per_lang = shards_per_language(s == 0 ? shards : val_shards, docs[s], bytes[s]);
    int64_t k = 0;
    for (int l = 0; l < 3; ++l) {
      if (per_lang[static_cast<size_t>(l)] == 0) continue;
      RankedTokens t = read_lens(staging, split_names[s], l, world);
      for (auto [first, last] : cut_shards(t.lens, per_lang[static_cast<size_t>(l)])) {
        if (k % world == rank) {
          std::string name = fmt::format("{}-{:05d}.ftshard", split_names[s], k);
          ShardInfo info = write_shard(staging + "/" + name, token_bytes, t, first, last, kLanguages[l]);
          write_file_atomic(staging + "/" + name + ".info", shard_info_json(info));
        }
        ++k;
      }
    }
    if (k == 0 && rank == 0) {  // an empty split (no validation documents): one empty shard, as readers expect
      std::string name = fmt::format("{}-00000.ftshard", split_names[s]);
      ShardInfo info = write_shard(staging + "/" + name, token_bytes, RankedTokens{}, 0, 0, "");
      write_file_atomic(staging + "/" + name + ".info", shard_info_json(info));
    }
  }
}

// The output directory as given (a trailing slash dropped).
fs::path output_dir(const PrepareOptions& opt) {
  fs::path out = fs::path(opt.out_dir).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();
  return out;
}

void check_options(const PrepareOptions& opt) {
  if (opt.out_dir.empty()) throw Error("prepare needs --out DIR");
  if (opt.shards < 1 || opt.shards > 1000000)
    throw Error(fmt::format("--shards {} must be in 1 .. 1000000", opt.shards));
  if (opt.val_shards < 1 || opt.val_shards > 1000000) {
    throw Error(fmt::format("--val-shards {} must be in 1 .. 1000000", opt.val_shards));
  }
  if (!(opt.val_fraction >= 0 && opt.val_fraction < 1)) {
    throw Error(fmt::format("--val-fraction {} must be in [0, 1)", opt.val_fraction));
  }
}

// The staging directory "<out>.tmp-<pid>", created after checking that --out may be written
// (it is no input and holds no input; --force replaces a dataset, nothing else; a mount point
// cannot be renamed over) and removing what interrupted runs left.
std::string create_staging(const fs::path& out, const std::vector<std::string>& inputs, bool force) {
  std::error_code ec;
  const bool replacing = check_output_path(out.string(), OutputRule{.flag = "--out",
                                                                    .kind = "dataset",
                                                                    .inputs = inputs,
                                                                    .force = force,
                                                                    .is_ours = is_dataset_dir,
                                                                    .renamed_into_place = true});
  if (replacing) check_replaceable_dataset(out.string(), "--out");
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  remove_stale_staging(out);
  std::string staging = fmt::format("{}.tmp-{}", out.string(), ::getpid());
  fs::remove_all(staging, ec);
  if (!fs::create_directories(staging, ec) || ec) {
    throw Error(fmt::format("cannot create {}: {}", staging, ec.message()), "check that the parent is writable");
  }
  return staging;
}

// Removes the staging directory on the way out unless the dataset was published.
struct StagingCleanup {
  std::string dir;
  bool keep = false;
  ~StagingCleanup() {
    std::error_code e;
    if (!keep) fs::remove_all(dir, e);
  }
};

// Step 1a: s3:// and gs:// prefixes downloaded into the staging directory, then every input
// expanded into the files to read. Records the sources in the manifest.
ExpandResult gather_input_files(const std::vector<std::string>& inputs, const PrepareOptions& opt,
                                const std::string& staging, DatasetManifest& m, PrepareReport& rep) {
  std::vector<std::string> local;
  for (const std::string& in : inputs) {
    if (ObjectUrl::is_object_url(in)) {
      std::string dir = fmt::format("{}/remote-input/{}", staging, local.size());
      PullReport pr = object_pull(in, dir, opt.store);
      if (pr.objects == 0) throw Error(fmt::format("input {}: no objects under this prefix", in));
      log_info("prepare: fetched {} objects ({}) from {}", pr.objects, human_bytes(static_cast<double>(pr.bytes)), in);
      local.push_back(dir);
    } else {
      local.push_back(in);
    }
    m.sources.push_back(in);
  }
  if (opt.inputs.empty()) m.sources = {"built-in corpus: Debian manpages, manpages-dev, manpages-ru"};
  ExpandResult files = expand_inputs(local);
  rep.input_files = files.files.size();
  rep.skipped_files = files.skipped;
  rep.skipped_summary = files.skipped_summary();
  for (auto& f : files.files) rep.input_bytes += f.bytes;
  if (files.files.empty()) {
    throw Error("no input files with text to read (.txt, .md, .jsonl or manual pages)", "check the --input paths");
  }
  return files;
}

// The documents of a batch of input files, read in parallel.
struct FileBatch {
  std::vector<std::vector<ExtractedDoc>> docs;  // per file
  std::vector<std::string> failures;            // per file: "" or the error ("!..." for a skipped man page)
  std::vector<uint64_t> not_text;               // per file: bytes that are invalid UTF-8 or NUL
};

FileBatch read_file_batch(const std::vector<InputFile>& files, size_t first, size_t n, const NearDuplicates* near) {
  FileBatch out{std::vector<std::vector<ExtractedDoc>>(n), std::vector<std::string>(n), std::vector<uint64_t>(n, 0)};
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
    const InputFile& f = files[first + static_cast<size_t>(i)];
    const size_t k = static_cast<size_t>(i);
    try {
      for_each_document(f, [&](const std::string& src, std::string&& raw, uint64_t bad) {
        out.not_text[k] += bad + count_nul_bytes(raw);
        NormalizeResult r = normalize_document(raw);
        out.not_text[k] += r.invalid_utf8;
        MinHash sig = near && !r.text.empty() ? near->signature(r.text) : MinHash{};
        out.docs[k].push_back({src, std::move(r.text), r.invalid_utf8 + bad, std::move(sig)});
      });
    } catch (const Error& e) {
      if (f.kind != InputKind::kManPage)
        out.failures[k] = std::string(e.what()) + "\n" + e.hint();
      else
        out.failures[k] = "!" + std::string(e.what());  // a page groff cannot render: skip
    }
  }
  return out;
}

// Step 1b: the documents, normalised, with exact and near duplicates dropped, sorted into the
// train and validation splits and spilled per language.
class DocumentSorter {
 public:
  DocumentSorter(const PrepareOptions& opt, const std::string& staging, DatasetManifest& m, PrepareReport& rep)
      : opt_(opt), m_(m), rep_(rep), val_cut_(static_cast<uint64_t>(opt.val_fraction * 1e6)) {
    const char* split_names[2] = {"train", "validation"};
    for (int sp = 0; sp < 2; ++sp)
      for (int l = 0; l < 3; ++l)
        acc[sp].spill[l] = std::make_unique<SpillWriter>(spill_path(staging, split_names[sp], l, "text"));
    if (!(opt.near_dup_threshold >= 0 && opt.near_dup_threshold <= 1)) {  // nan too: not "dedup off"
      throw Error(fmt::format("--near-dup-threshold {} must be in [0, 1]", opt.near_dup_threshold),
                  "0 keeps near-duplicates; 0.8 drops documents whose 5-word shingles overlap an earlier one's by 80%");
    }
    if (opt.near_dup_threshold > 0)
      near_ = std::make_unique<NearDuplicates>(NearDupOptions{.threshold = opt.near_dup_threshold});
    m.near_dup_threshold = opt.near_dup_threshold;
  }

  void add_files(const std::vector<InputFile>& files) {
    const size_t kBatch = 64;
    for (size_t b0 = 0; b0 < files.size(); b0 += kBatch) {
      size_t nb = std::min(kBatch, files.size() - b0);
      FileBatch batch = read_file_batch(files, b0, nb, near_.get());
      for (size_t i = 0; i < nb; ++i) add_file(files[b0 + i], batch.failures[i], batch.not_text[i], batch.docs[i]);
    }
  }

  // Closes the spills and checks that there is something to train on.
  void finish() {
    for (auto& a : acc)
      for (auto& sp : a.spill) sp->close();
    if (rep_.failed_files > 0) {
      log_warn("prepare: skipped {} manual pages that groff could not render (first: {})", rep_.failed_files,
               first_failure_);
    }
    if (acc[0].info.documents == 0) {
      throw Error(fmt::format("the inputs hold no non-empty training documents ({} files read, {} documents, {} empty, "
                              "{} duplicates)",
                              rep_.input_files, rep_.raw_documents, m_.empty, m_.duplicates),
                  "check the --input paths and file types");
    }
    if (acc[0].info.documents < static_cast<uint64_t>(opt_.shards)) {
      throw Error(fmt::format("--shards {} is more than the {} training documents", opt_.shards, acc[0].info.documents),
                  "use fewer shards or more text");
    }
    if (acc[1].info.documents == 0 && opt_.val_fraction > 0) {
      log_warn("prepare: no document fell into the validation split ({} documents, --val-fraction {})",
               acc[0].info.documents, opt_.val_fraction);
    }
  }

  SplitAccumulator acc[2];
  LanguageStats lang_stats[3];

 private:
  void add_file(const InputFile& f, const std::string& failure, uint64_t not_text, std::vector<ExtractedDoc>& docs) {
    if (!failure.empty()) {
      if (failure[0] != '!') {
        size_t nl = failure.find('\n');
        throw Error(failure.substr(0, nl), failure.substr(nl + 1));
      }
      ++rep_.failed_files;
      if (first_failure_.empty()) first_failure_ = failure.substr(1);
      return;
    }
    if (f.kind != InputKind::kManPage && mostly_binary(not_text, f.bytes)) {
      ++rep_.binary_files;  // named, one warning each: the user may have meant something else
      log_warn("prepare: skipping {}: {} of its {} bytes are invalid UTF-8 or NUL: not text", f.path, not_text,
               f.bytes);
      return;
    }
    for (ExtractedDoc& d : docs) add_document(d);
  }

  void add_document(const ExtractedDoc& d) {
    ++rep_.raw_documents;
    m_.invalid_utf8 += d.invalid;
    if (d.text.empty()) {
      ++m_.empty;
      return;
    }
    Key128 key{xxh3_64(d.text.data(), d.text.size(), 0), xxh3_64(d.text.data(), d.text.size(), 0x5eed)};
    if (!seen_.insert(key).second) {
      ++m_.duplicates;
      return;
    }
    int lang = language_index(detect_language(d.text));
    if (near_ && near_->is_duplicate_or_add(d.sig)) {  // input order decides which copy stays
      ++m_.near_duplicates[kLanguages[lang]];
      return;
    }
    int split = (mix64(key.a ^ opt_.seed) % 1000000) < val_cut_ ? 1 : 0;
    uint64_t chars = count_code_points(d.text);
    SplitInfo& si = acc[split].info;
    si.documents += 1;
    si.characters += chars;
    si.text_bytes += d.text.size();
    lang_stats[lang].documents += 1;
    lang_stats[lang].characters += chars;
    lang_stats[lang].bytes += d.text.size();
    acc[split].lang_docs[lang] += 1;
    acc[split].lang_bytes[lang] += d.text.size();
    acc[split].spill[lang]->add(d.text, lang);
  }

  const PrepareOptions& opt_;
  DatasetManifest& m_;
  PrepareReport& rep_;
  const uint64_t val_cut_;
  std::unordered_set<Key128, Key128Hash> seen_;
  std::unique_ptr<NearDuplicates> near_;
  std::string first_failure_;
};

// Step 2: the tokenizer model's bytes: --tokenizer's file, or trained on the train split's text
// spills (each document's non-empty lines, languages in order).
std::string tokenizer_model(const PrepareOptions& opt, const std::string& staging, PrepareReport& rep) {
  if (!opt.tokenizer.empty()) return read_file(opt.tokenizer);
  TokenizerTrainOptions to;
  to.vocab_size = opt.vocab_size;
  to.seed = opt.seed;
  int reading = 0;
  auto reader = std::make_unique<SpillReader>(spill_path(staging, "train", 0, "text"));
  std::string doc;
  int lang = 0;
  size_t pos = std::string::npos;
  std::string model = train_tokenizer(to, [&](std::string* line) {
    while (true) {
      if (pos == std::string::npos || pos >= doc.size()) {
        while (!reader->next(&doc, &lang)) {
          if (++reading == 3) return false;
          reader = std::make_unique<SpillReader>(spill_path(staging, "train", reading, "text"));
        }
        pos = 0;
      }
      size_t eol = doc.find('\n', pos);
      if (eol == std::string::npos) eol = doc.size();
      line->assign(doc, pos, eol - pos);
      pos = eol + 1;
      if (!line->empty()) return true;
    }
  });
  rep.trained_tokenizer = true;
  return model;
}

// Step 4, after every rank wrote its shards: token counts from the ranks' length files and the
// shards' ShardInfo into the splits and languages; the spills are removed.
void collect_shards(const std::string& staging, int world, DocumentSorter& docs) {
  const char* split_names[2] = {"train", "validation"};
  std::error_code ec;
  for (int sp = 0; sp < 2; ++sp) {
    for (int l = 0; l < 3; ++l) {
      for (int r = 0; r < world; ++r) {
        std::string raw = read_file(rank_path(staging, split_names[sp], l, "lens", r));
        for (size_t i = 0; i + 16 <= raw.size(); i += 16) {
          uint64_t n;
          std::memcpy(&n, raw.data() + i, 8);
          docs.acc[sp].info.tokens += n;
          docs.lang_stats[l].tokens += n;
        }
        fs::remove(rank_path(staging, split_names[sp], l, "lens", r), ec);
        fs::remove(rank_path(staging, split_names[sp], l, "tokens", r), ec);
      }
      fs::remove(spill_path(staging, split_names[sp], l, "text"), ec);
    }
    for (int64_t k = 0;; ++k) {
      std::string info = fmt::format("{}/{}-{:05d}.ftshard.info", staging, split_names[sp], k);
      if (!fs::exists(info)) break;
      docs.acc[sp].info.shards.push_back(shard_info_from_json(read_file(info)));
      fs::remove(info, ec);
    }
  }
}

// Step 5: the manifest written last, then the staging directory renamed to <out> (replacing the
// dataset there, for --force).
void publish(const std::string& staging, const fs::path& out, const DatasetManifest& m, StagingCleanup& cleanup) {
  std::error_code ec;
  write_file_atomic(staging + "/" + kManifestFile, m.to_json_text());
  fs::remove_all(staging + "/remote-input", ec);
  fsync_dir(staging);
  if (fs::exists(out)) {
    std::string old = fmt::format("{}.old-{}", out.string(), ::getpid());
    fs::rename(out, old);
    fs::rename(staging, out);
    fs::remove_all(old, ec);
  } else {
    fs::rename(staging, out);
  }
  cleanup.keep = true;
  fsync_dir(out.has_parent_path() ? out.parent_path().string() : ".");
}

// Rank 0's part (all of it with one rank); `sync` joins the other ranks at each step.
PrepareReport prepare_rank0(const PrepareOptions& opt, Sync& sync) {
  auto t0 = Clock::now();
  PrepareReport rep;
  check_options(opt);
  const fs::path out = output_dir(opt);
  rep.out_dir = out.string();
  std::vector<std::string> inputs = opt.inputs;
  if (inputs.empty()) inputs = default_corpus_inputs();
  StagingCleanup cleanup{create_staging(out, inputs, opt.force)};  // from here on, any exception removes it
  const std::string& staging = cleanup.dir;
  DatasetManifest m;

  // 1. Extract.
  ExpandResult files = gather_input_files(inputs, opt, staging, m, rep);
  auto t_extract = Clock::now();
  DocumentSorter docs(opt, staging, m, rep);
  docs.add_files(files.files);
  docs.finish();
  rep.seconds_extract = since(t_extract);

  // 2. Tokenizer.
  auto t_tok = Clock::now();
  std::string model = tokenizer_model(opt, staging, rep);
  Tokenizer tok = Tokenizer::from_bytes(model, opt.tokenizer.empty() ? "trained tokenizer" : opt.tokenizer);
  write_file_atomic(staging + "/" + m.tokenizer_file, model);
  m.tokenizer_hash = tok.hash();
  if (rep.trained_tokenizer) m.tokenizer_threads = TokenizerTrainOptions{}.threads;
  m.vocab_size = tok.vocab_size();
  m.eos_id = tok.eos_id();
  m.token_bytes = m.vocab_size <= 65536 ? 2 : 4;
  rep.seconds_tokenizer = since(t_tok);

  // Every rank learns the staging directory and the (split, language) document counts.
  uint64_t doc_counts[2][3], bytes[2][3];
  std::vector<int64_t> shared = {static_cast<int64_t>(::getpid())};
  for (int sp = 0; sp < 2; ++sp)
    for (int l = 0; l < 3; ++l) {
      doc_counts[sp][l] = docs.acc[sp].lang_docs[l], bytes[sp][l] = docs.acc[sp].lang_bytes[l];
      shared.push_back(static_cast<int64_t>(doc_counts[sp][l]));
      shared.push_back(static_cast<int64_t>(bytes[sp][l]));
    }
  sync.run(shared);

  // 3. Encode: this rank's part of each (split, language).
  auto t_enc = Clock::now();
  encode_part(staging, tok, m.eos_id, doc_counts, opt.rank, opt.world);
  sync.run({});
  rep.seconds_encode = since(t_enc);

  // 4. Shards: cut per language over every rank's documents; this rank writes its share.
  auto t_shard = Clock::now();
  write_rank_shards(staging, m.token_bytes, doc_counts, bytes, opt.shards, opt.val_shards, opt.rank, opt.world);
  sync.run({});
  collect_shards(staging, opt.world, docs);
  m.train = docs.acc[0].info;
  m.validation = docs.acc[1].info;
  for (int l = 0; l < 3; ++l) {
    if (docs.lang_stats[l].documents > 0) m.languages[kLanguages[l]] = docs.lang_stats[l];
  }
  rep.seconds_shard = since(t_shard);
  rep.world = opt.world;

  // 5. Manifest last, then publish the directory.
  publish(staging, out, m, cleanup);
  rep.manifest = std::move(m);
  rep.seconds_total = since(t0);
  sync.run({});  // the other ranks finish once the dataset is published
  return rep;
}

// The other ranks: wait for rank 0's extraction and tokenizer, encode their part, write their shards.
void prepare_other_rank(const PrepareOptions& opt, Sync& sync) {
  std::vector<int64_t> shared = sync.run(std::vector<int64_t>(13, 0));
  const std::string staging = fmt::format("{}.tmp-{}", output_dir(opt).string(), shared[0]);
  uint64_t docs[2][3], bytes[2][3];
  for (int sp = 0, i = 1; sp < 2; ++sp)
    for (int l = 0; l < 3; ++l, i += 2)
      docs[sp][l] = static_cast<uint64_t>(shared[static_cast<size_t>(i)]),
      bytes[sp][l] = static_cast<uint64_t>(shared[static_cast<size_t>(i + 1)]);
  Tokenizer tok = Tokenizer::load(staging + "/tokenizer.model");
  encode_part(staging, tok, tok.eos_id(), docs, opt.rank, opt.world);
  sync.run({});
  write_rank_shards(staging, tok.vocab_size() <= 65536 ? 2 : 4, docs, bytes, opt.shards, opt.val_shards, opt.rank,
                    opt.world);
  sync.run({});
  sync.run({});
}

}  // namespace

PrepareReport prepare_dataset(const PrepareOptions& opt) {
  if (opt.world < 1 || opt.rank < 0 || opt.rank >= opt.world || (opt.world > 1 && !opt.sync)) {
    throw Error(fmt::format("prepare: rank {} of {} ranks", opt.rank, opt.world));
  }
  Sync sync(opt);
  // The payload sizes of the collectives in order, so that a failing rank joins the pending one.
  const size_t payloads[] = {13, 0, 0, 0};
  size_t done = 0;
  sync.on_run = [&] { ++done; };
  try {
    if (opt.rank == 0) return prepare_rank0(opt, sync);
    prepare_other_rank(opt, sync);
    return {};
  } catch (...) {
    if (opt.world > 1 && done < 4 && !sync.failed_remote) sync.fail(payloads[done]);
    throw;
  }
}

std::string format_report(const PrepareReport& r) {
  const DatasetManifest& m = r.manifest;
  std::string s;
  s += fmt::format(
      "prepare: read {} files ({} on disk; {}{}{})\n", r.input_files, human_bytes(static_cast<double>(r.input_bytes)),
      r.skipped_summary.empty() ? fmt::format("{} other files skipped", r.skipped_files) : r.skipped_summary,
      r.failed_files ? fmt::format(", {} unrenderable pages skipped", r.failed_files) : "",
      r.binary_files ? fmt::format(", {} binary files skipped (named above)", r.binary_files) : "");
  s += fmt::format(
      "prepare: {} documents: {} kept, {} exact duplicates dropped, {} empty dropped, {} invalid UTF-8 "
      "sequences replaced\n",
      r.raw_documents, m.train.documents + m.validation.documents, m.duplicates, m.empty, m.invalid_utf8);
  if (m.near_dup_threshold > 0) {
    uint64_t total = 0;
    std::string per;
    for (auto& [lang, n] : m.near_duplicates) total += n, per += fmt::format(", {} {}", lang, n);
    s += fmt::format("prepare: {} near-duplicates dropped (MinHash-LSH, Jaccard >= {} over 5-word shingles){}\n", total,
                     m.near_dup_threshold, total ? ":" + per.substr(1) : "");
  }
  s += fmt::format("  {:<9} {:>9} {:>12} {:>12} {:>11} {:>11}\n", "language", "documents", "bytes", "characters",
                   "tokens", "chars/token");
  for (auto& [lang, st] : m.languages) {
    s += fmt::format("  {:<9} {:>9} {:>12} {:>12} {:>11} {:>11.3f}\n", lang, st.documents, st.bytes, st.characters,
                     st.tokens, st.tokens ? static_cast<double>(st.characters) / static_cast<double>(st.tokens) : 0.0);
  }
  for (int i = 0; i < 2; ++i) {
    const SplitInfo& sp = i == 0 ? m.train : m.validation;
    s += fmt::format(
        "  {:<10} {:>8} docs {:>12} bytes {:>12} chars {:>11} tokens  {:.3f} chars/token  {:.3f} "
        "bytes/token  {} shards\n",
        i == 0 ? "train" : "validation", sp.documents, sp.text_bytes, sp.characters, sp.tokens, sp.chars_per_token(),
        sp.bytes_per_token(), sp.shards.size());
  }
  double mb = static_cast<double>(m.train.text_bytes + m.validation.text_bytes) / 1e6;
  s += fmt::format(
      "prepare: tokenizer {} ({} pieces, xxh3 {}) in {:.1f}s; extract {:.1f}s, encode {:.1f}s ({:.2f} "
      "MB/s, {} rank(s)), shards {:.1f}s\n",
      r.trained_tokenizer ? fmt::format("trained (SentencePiece BPE, byte fallback, {} threads)", m.tokenizer_threads)
                          : std::string("given"),
      m.vocab_size, hex64(m.tokenizer_hash), r.seconds_tokenizer, r.seconds_extract, r.seconds_encode,
      r.seconds_encode > 0 ? mb / r.seconds_encode : 0.0, r.world, r.seconds_shard);
  s += fmt::format("prepare: wrote {} ({} + {} shards, {}-bit tokens) in {:.1f}s\n", r.out_dir, m.train.shards.size(),
                   m.validation.shards.size(), m.token_bytes * 8, r.seconds_total);
  return s;
}

}  // namespace ft
