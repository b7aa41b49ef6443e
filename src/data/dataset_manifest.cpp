#include "data/dataset_manifest.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "util/error.h"
#include "util/fs.h"
#include "util/json_reader.h"
#include "util/strings.h"

namespace ft {
namespace {

using json = nlohmann::json;
constexpr const char* kHint = "the manifest is damaged or from another tool; re-run `fluxtrain prepare`";

json split_json(const SplitInfo& s) {
  json shards = json::array();
  for (const ShardInfo& sh : s.shards) {
    json j = {{"file", sh.file},
              {"tokens", sh.tokens},
              {"documents", sh.documents},
              {"bytes", sh.bytes},
              {"checksum", hex64(sh.checksum)}};
    if (!sh.language.empty()) j["language"] = sh.language;
    if (sh.characters > 0) j["characters"] = sh.characters;
    shards.push_back(std::move(j));
  }
  return {{"documents", s.documents},
          {"tokens", s.tokens},
          {"characters", s.characters},
          {"text_bytes", s.text_bytes},
          {"chars_per_token", s.chars_per_token()},
          {"bytes_per_token", s.bytes_per_token()},
          {"shards", shards}};
}

using Reader = JsonReader;

bool safe_file_name(const std::string& f) {
  return !f.empty() && f.size() < 256 && f.find('/') == std::string::npos && f != "." && f != ".." &&
         f.find('\0') == std::string::npos;
}

SplitInfo parse_split(const Reader& r, const json& root, const std::string& key) {
  const json& s = r.at(root, key, "splits");
  std::string path = "splits." + key;
  SplitInfo out;
  out.documents = r.u64(s, "documents", path);
  out.tokens = r.u64(s, "tokens", path);
  out.characters = r.u64(s, "characters", path);
  out.text_bytes = r.u64(s, "text_bytes", path);
  const json& shards = r.at(s, "shards", path);
  if (!shards.is_array()) r.fail(path + ".shards", "must be an array");
  uint64_t tokens = 0, docs = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string p = fmt::format("{}.shards[{}]", path, i);
    ShardInfo sh;
    sh.file = r.str(shards[i], "file", p);
    if (!safe_file_name(sh.file)) r.fail(p + ".file", fmt::format("\"{}\" is not a plain file name", sh.file));
    sh.tokens = r.u64(shards[i], "tokens", p);
    sh.documents = r.u64(shards[i], "documents", p);
    sh.bytes = r.u64(shards[i], "bytes", p);
    sh.checksum = parse_hex64(r.str(shards[i], "checksum", p), r.name() + ": " + p + ".checksum");
    if (shards[i].contains("language")) sh.language = r.str(shards[i], "language", p);
    if (shards[i].contains("characters")) sh.characters = r.u64(shards[i], "characters", p);
    if (sh.tokens > (uint64_t{1} << 56) || sh.documents > sh.tokens) r.fail(p, "has impossible token/document counts");
    tokens += sh.tokens;
    docs += sh.documents;
    out.shards.push_back(std::move(sh));
  }
  if (tokens != out.tokens || docs != out.documents) {
    r.fail(path, fmt::format("totals ({} tokens, {} documents) disagree with its shards ({} tokens, {} documents)",
                             out.tokens, out.documents, tokens, docs));
  }
  return out;
}

}  // namespace

std::string DatasetManifest::to_json_text() const {
  json langs = json::object();
  for (auto& [lang, st] : languages) {
    langs[lang] = {
        {"documents", st.documents}, {"bytes", st.bytes}, {"characters", st.characters}, {"tokens", st.tokens}};
  }
  json j = {{"format", kManifestFormat},
            {"version", version},
            {"tokenizer",
             {{"file", tokenizer_file},
              {"xxh3", hex64(tokenizer_hash)},
              {"vocab_size", vocab_size},
              {"eos_id", eos_id},
              {"train_threads", tokenizer_threads}}},
            {"token_bytes", token_bytes},
            {"splits", {{"train", split_json(train)}, {"validation", split_json(validation)}}},
            {"stats",
             {{"languages", langs},
              {"duplicates_dropped", duplicates},
              {"near_duplicates_dropped", near_duplicates},
              {"near_duplicate_threshold", near_dup_threshold},
              {"invalid_utf8_replaced", invalid_utf8},
              {"empty_dropped", empty}}},
            {"sources", sources}};
  return j.dump(2) + "\n";
}

DatasetManifest DatasetManifest::parse(const std::string& text, const std::string& name) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", name, e.what()), kHint);
  }
  Reader r(name, kHint);
  DatasetManifest m;
  if (!root.is_object() || r.str(root, "format", "") != kManifestFormat) {
    r.fail("format", fmt::format("must be \"{}\"", kManifestFormat));
  }
  uint64_t v = r.u64(root, "version", "");
  if (v != kManifestVersion) {
    throw Error(fmt::format("{}: dataset format version {} is not supported (this build reads version {})", name, v,
                            kManifestVersion),
                "re-run `fluxtrain prepare` with this build");
  }
  const json& tok = r.at(root, "tokenizer", "");
  m.tokenizer_file = r.str(tok, "file", "tokenizer");
  if (!safe_file_name(m.tokenizer_file)) r.fail("tokenizer.file", "is not a plain file name");
  m.tokenizer_hash = parse_hex64(r.str(tok, "xxh3", "tokenizer"), name + ": tokenizer.xxh3");
  uint64_t vocab = r.u64(tok, "vocab_size", "tokenizer");
  if (vocab == 0 || vocab > (uint64_t{1} << 31)) r.fail("tokenizer.vocab_size", "is out of range");
  m.vocab_size = static_cast<int64_t>(vocab);
  const json& eos = r.at(tok, "eos_id", "tokenizer");
  if (!eos.is_number_integer() || eos.get<int64_t>() < 0 || eos.get<int64_t>() >= m.vocab_size) {
    r.fail("tokenizer.eos_id", "must be a token id below vocab_size");
  }
  m.eos_id = eos.get<int32_t>();
  if (tok.contains("train_threads")) {  // absent in datasets prepared before it was recorded
    const uint64_t threads = r.u64(tok, "train_threads", "tokenizer");
    if (threads > 4096) r.fail("tokenizer.train_threads", "is out of range");
    m.tokenizer_threads = static_cast<int>(threads);
  }
  uint64_t tb = r.u64(root, "token_bytes", "");
  if (tb != 2 && tb != 4) r.fail("token_bytes", "must be 2 or 4");
  if (tb == 2 && m.vocab_size > 65536) r.fail("token_bytes", "is 2 but vocab_size does not fit uint16");
  m.token_bytes = static_cast<int>(tb);
  const json& splits = r.at(root, "splits", "");
  m.train = parse_split(r, splits, "train");
  m.validation = parse_split(r, splits, "validation");
  if (root.contains("stats") && root["stats"].is_object()) {
    const json& st = root["stats"];
    if (st.contains("languages") && st["languages"].is_object()) {
      for (auto& [lang, v] : st["languages"].items()) {
        LanguageStats ls;
        ls.documents = r.u64(v, "documents", "stats.languages." + lang);
        ls.bytes = r.u64(v, "bytes", "stats.languages." + lang);
        ls.characters = r.u64(v, "characters", "stats.languages." + lang);
        ls.tokens = r.u64(v, "tokens", "stats.languages." + lang);
        m.languages[lang] = ls;
      }
    }
    if (st.contains("duplicates_dropped")) m.duplicates = r.u64(st, "duplicates_dropped", "stats");
    if (st.contains("near_duplicates_dropped") && st["near_duplicates_dropped"].is_object()) {
      for (auto& [lang, v] : st["near_duplicates_dropped"].items())
        m.near_duplicates[lang] = r.u64(st["near_duplicates_dropped"], lang, "stats.near_duplicates_dropped");
    }
    if (st.contains("near_duplicate_threshold") && st["near_duplicate_threshold"].is_number())
      m.near_dup_threshold = st["near_duplicate_threshold"].get<double>();
    if (st.contains("invalid_utf8_replaced")) m.invalid_utf8 = r.u64(st, "invalid_utf8_replaced", "stats");
    if (st.contains("empty_dropped")) m.empty = r.u64(st, "empty_dropped", "stats");
  }
  if (root.contains("sources") && root["sources"].is_array()) {
    for (const json& s : root["sources"])
      if (s.is_string()) m.sources.push_back(s.get<std::string>());
  }
  return m;
}

DatasetManifest DatasetManifest::load(const std::string& dir) {
  if (dir.empty())  // "" would read as the current directory's manifest, and say ": no manifest.json"
    throw Error("the dataset path is empty", "name a directory made by `fluxtrain prepare --out DIR`");
  std::string path = (std::filesystem::path(dir) / kManifestFile).string();
  std::error_code ec;
  const bool found = std::filesystem::exists(path, ec);
  if (ec) {  // a symbolic-link loop, no permission on a parent, ...: not "no manifest"
    throw Error(fmt::format("{}: cannot read the dataset: {}: {}", dir, path, ec.message()),
                "fix the path (a symbolic link pointing to itself?) or point data.path at a prepared dataset");
  }
  if (!found) {
    throw Error(
        fmt::format("{}: no {} — not a fluxtrain dataset (or its preparation did not finish)", dir, kManifestFile),
        fmt::format("prepare one with `fluxtrain prepare --out {}`", dir));
  }
  return parse(read_file(path), path);
}

void DatasetManifest::check_tokenizer(const std::string& dir) const {
  std::string path = (std::filesystem::path(dir) / tokenizer_file).string();
  std::string bytes = read_file(path);
  uint64_t h = xxh3_64(bytes.data(), bytes.size());
  if (h != tokenizer_hash) {
    throw Error(fmt::format("{}: tokenizer mismatch: the model file hashes to {}, the manifest records {}", path,
                            hex64(h), hex64(tokenizer_hash)),
                "the tokenizer was replaced after preparation; re-run `fluxtrain prepare` with this tokenizer");
  }
}

bool is_dataset_dir(const std::string& dir) {
  try {
    DatasetManifest::parse(read_file(dir + "/" + kManifestFile), dir);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::vector<std::string> dataset_foreign_entries(const std::string& dir) {
  const DatasetManifest m = DatasetManifest::parse(read_file(dir + "/" + kManifestFile), dir);
  std::set<std::string> own = {kManifestFile, kPullMarkerFile, m.tokenizer_file};
  for (const SplitInfo* s : {&m.train, &m.validation})
    for (const ShardInfo& sh : s->shards) own.insert(sh.file);
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!own.count(name)) out.push_back(e.is_directory(ec) ? name + "/" : name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void check_replaceable_dataset(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return;
  const std::vector<std::string> other = dataset_foreign_entries(dir);
  if (other.empty()) return;
  throw Error(fmt::format("{} {} holds {} not the dataset's ({}): --force only replaces a dataset", flag, dir,
                          other.size() == 1 ? "an entry that is" : fmt::format("{} entries that are", other.size()),
                          name_some(other, 3)),
              fmt::format("move them out of {} first, or choose another {}", dir, flag));
}

void check_tokenizer_hash(uint64_t recorded, uint64_t dataset, const std::string& checkpoint) {
  if (recorded == 0 || recorded == dataset) return;
  throw Error(fmt::format("{}: tokenizer mismatch: the checkpoint was trained with tokenizer {}, the dataset uses {}",
                          checkpoint, hex64(recorded), hex64(dataset)),
              "token ids would mean different text; train from scratch or prepare the data with the checkpoint's "
              "tokenizer (fluxtrain prepare --tokenizer MODEL)");
}

}  // namespace ft
