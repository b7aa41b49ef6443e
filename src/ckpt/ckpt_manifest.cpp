#include "ckpt/ckpt_manifest.h"

#include <cstdio>
#include <ctime>

#include "ckpt/crypto.h"
#include "ckpt/pieces.h"
#include "tensor/memory.h"
#include "util/checksum.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/json_reader.h"

namespace ft {
namespace {

using json = nlohmann::json;
constexpr const char* kHint = "the checkpoint is damaged or incomplete; resume from an older one";

// The manifest's field reader, with its two checkpoint-specific field kinds.
class Reader : public JsonReader {
 public:
  explicit Reader(std::string name) : JsonReader(std::move(name), kHint) {}
  uint64_t hex(const json& v, const std::string& path) const {
    if (!v.is_string() || v.get<std::string>().size() != 16) fail(path, "must be 16 hex digits");
    try {
      return parse_hex64(v.get<std::string>(), path);
    } catch (const Error&) {
      fail(path, "must be 16 hex digits");
    }
  }
  Shape shape(const json& obj, const std::string& key, const std::string& path) const {
    const json& v = at(obj, key, path);
    if (!v.is_array() || v.empty() || v.size() > 2) fail(path + "." + key, "must be an array of 1 or 2 sizes");
    Shape s;
    for (const json& d : v) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 31)) fail(path + "." + key, "has a bad size");
      s.push_back(d.get<int64_t>());
    }
    return s;
  }
};

bool plain_file_name(const std::string& f) {
  if (f.empty() || f.size() > 255 || f == "." || f == "..") return false;
  for (char c : f)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

std::string integrity_of(const std::string& body, bool encrypted, const CkptKey* key) {
  if (encrypted) {
    uint8_t k[32];
    key->derive("manifest", k);
    std::string h = hmac_sha256_hex(k, body);
    secure_zero(k, sizeof k);
    return h;
  }
  return hex64(xxh3_64(body.data(), body.size()));
}

}  // namespace

const TensorRecord* CheckpointManifest::find(const std::string& name) const {
  for (const TensorRecord& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string CheckpointManifest::layout_text() const {
  const std::string cp_part = cp > 1 ? fmt::format(" x cp {}", cp) : "";
  return fmt::format("world {} = pp {} x dp {}{} x tp {}, ZeRO {}", world, pp, dp, cp_part, tp, zero);
}

std::string CheckpointManifest::to_json_text(const CkptKey* key) const {
  json j;
  j["format"] = kCkptManifestFormat;
  j["version"] = version;
  j["step"] = step;
  j["tokens"] = tokens;
  j["optimizer_steps"] = optimizer_steps;
  j["restarts"] = restarts;
  if (loss_scale > 0) j["loss_scale"] = {{"scale", loss_scale}, {"clean_steps", loss_scale_clean_steps}};
  if (!step_guard.is_null()) j["step_guard"] = step_guard;
  j["origin"] = origin;
  j["created"] = created;
  j["loader"] = has_loader ? json{{"next_sample", loader.next_sample}, {"epoch", loader.epoch}} : json(nullptr);
  // A data.mixture's weights and the sample each set took effect from (data/loader/mixture.h).
  if (has_loader && !loader.mixture.empty()) j["loader"]["mixture"] = json::parse(loader.mixture);
  j["tokenizer_xxh3"] = hex64(tokenizer_hash);
  j["layout"] = {{"world", world}, {"dp", dp}, {"tp", tp}, {"pp", pp}, {"zero", zero}};
  if (cp > 1) j["layout"]["cp"] = cp;  // absent at cp = 1 (and in checkpoints written before cp)
  j["chunk_bytes"] = chunk_bytes;
  j["encryption"] = encrypted ? json{{"algorithm", "AES-256-GCM"}, {"key_id", key_id}} : json(nullptr);
  json files_j = json::array();
  for (const FileRecord& f : files)
    files_j.push_back(
        {{"name", f.name}, {"rank", f.rank}, {"payload_bytes", f.payload_bytes}, {"file_bytes", f.file_bytes}});
  j["files"] = std::move(files_j);
  json tensors_j = json::array();
  for (const TensorRecord& t : tensors) {
    json pieces = json::array();
    for (const PieceRecord& p : t.pieces)
      pieces.push_back({{"file", p.file},
                        {"split_dim", p.split_dim},
                        {"split_offset", p.split_offset},
                        {"local_shape", p.local_shape},
                        {"begin", p.begin},
                        {"end", p.end},
                        {"offset", p.offset},
                        {"xxh3", {hex64(p.xxh3[0]), hex64(p.xxh3[1]), hex64(p.xxh3[2])}}});
    tensors_j.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}, {"pieces", std::move(pieces)}});
  }
  j["tensors"] = std::move(tensors_j);
  j["config"] = config.is_null() ? json::object() : config;
  FT_CHECK(!encrypted || (key && !key->empty()), "an encrypted manifest needs the key");
  std::string body = j.dump();
  j["integrity"] = encrypted ? json{{"hmac_sha256", integrity_of(body, true, key)}}
                             : json{{"xxh3", integrity_of(body, false, nullptr)}};
  return j.dump(1) + "\n";
}

CheckpointManifest CheckpointManifest::parse(const std::string& text, const std::string& name, const CkptKey* key) {
  Reader r(name);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not JSON: {}", name, e.what()), kHint);
  }
  if (!j.is_object()) r.fail("(top level)", "is not a JSON object");
  if (r.str(j, "format", "") != kCkptManifestFormat)
    r.fail(".format", fmt::format("is not \"{}\"", kCkptManifestFormat));
  CheckpointManifest m;
  m.version = static_cast<int>(r.i64(j, "version", "", 0, 1000));
  if (m.version != kCkptManifestVersion)
    throw Error(fmt::format("{}: checkpoint format version {} is not supported (this build reads version {})", name,
                            m.version, kCkptManifestVersion),
                "use the fluxtrain version that wrote it");
  // Integrity first: everything but the "integrity" field, as written.
  const json& integ = r.at(j, "integrity", "");
  json body = j;
  body.erase("integrity");
  const std::string body_text = body.dump();
  const json& enc = r.at(j, "encryption", "");
  m.encrypted = !enc.is_null();
  if (m.encrypted) {
    m.key_id = r.str(enc, "key_id", ".encryption");
    if (r.str(enc, "algorithm", ".encryption") != "AES-256-GCM") r.fail(".encryption.algorithm", "is not AES-256-GCM");
    if (key && !key->empty()) {
      if (!equal_constant_time(key->id(), m.key_id))
        throw Error(fmt::format("{}: the checkpoint was encrypted with key id {}, the given key has id {}", name,
                                m.key_id, key->id()),
                    "set ckpt.key_file or FLUXTRAIN_CKPT_KEY to the key the checkpoint was written with");
      if (!equal_constant_time(r.str(integ, "hmac_sha256", ".integrity"), integrity_of(body_text, true, key)))
        throw Error(fmt::format("{}: the manifest's HMAC does not verify: it was modified", name), kHint);
    }
  } else if (r.hex(r.at(integ, "xxh3", ".integrity"), ".integrity.xxh3") !=
             parse_hex64(integrity_of(body_text, false, nullptr), "xxh3")) {
    throw Error(fmt::format("{}: the manifest's checksum does not match its contents", name), kHint);
  }

  m.step = r.i64(j, "step", "");
  m.tokens = r.i64(j, "tokens", "");
  m.optimizer_steps = r.i64(j, "optimizer_steps", "");
  m.restarts = r.i64(j, "restarts", "");
  if (auto ls = j.find("loss_scale"); ls != j.end() && !ls->is_null()) {  // optional: fp16 runs only
    const json& v = r.at(*ls, "scale", ".loss_scale");
    if (!v.is_number() || !(v.get<double>() >= 1) || !(v.get<double>() <= 16777216))
      r.fail(".loss_scale.scale", "must be a number in [1, 2^24]");
    m.loss_scale = v.get<double>();
    m.loss_scale_clean_steps = r.i64(*ls, "clean_steps", ".loss_scale");
  }
  if (auto g = j.find("step_guard"); g != j.end() && !g->is_null()) {  // optional: older checkpoints lack it
    if (!g->is_object()) r.fail(".step_guard", "is not a JSON object");
    m.step_guard = *g;  // its fields are checked where it is restored (fault/step_guard.h)
  }
  m.origin = r.str(j, "origin", "");
  m.created = r.str(j, "created", "");
  const json& ld = r.at(j, "loader", "");
  m.has_loader = !ld.is_null();
  if (m.has_loader) {
    m.loader.next_sample = r.i64(ld, "next_sample", ".loader");
    m.loader.epoch = r.i64(ld, "epoch", ".loader");
    if (ld.contains("mixture")) m.loader.mixture = ld["mixture"].dump();
  }
  m.tokenizer_hash = r.hex(r.at(j, "tokenizer_xxh3", ""), ".tokenizer_xxh3");
  const json& lay = r.at(j, "layout", "");
  m.world = r.i64(lay, "world", ".layout", 1, 1 << 24);
  m.dp = r.i64(lay, "dp", ".layout", 1, 1 << 24);
  m.tp = r.i64(lay, "tp", ".layout", 1, 1 << 24);
  m.pp = r.i64(lay, "pp", ".layout", 1, 1 << 24);
  m.zero = r.i64(lay, "zero", ".layout", 0, 3);
  if (lay.is_object() && lay.contains("cp")) m.cp = r.i64(lay, "cp", ".layout", 1, 1 << 24);
  m.chunk_bytes = static_cast<uint32_t>(r.i64(j, "chunk_bytes", "", 4096, int64_t{1} << 30));
  m.config = r.at(j, "config", "");
  if (!m.config.is_object()) r.fail(".config", "is not a JSON object");

  const json& files = r.at(j, "files", "");
  if (!files.is_array() || files.empty()) r.fail(".files", "must be a non-empty array");
  for (size_t i = 0; i < files.size(); ++i) {
    std::string p = fmt::format(".files[{}]", i);
    FileRecord f;
    f.name = r.str(files[i], "name", p);
    if (!plain_file_name(f.name)) r.fail(p + ".name", "is not a plain file name");
    f.rank = static_cast<int>(r.i64(files[i], "rank", p, 0, 1 << 24));
    f.payload_bytes = static_cast<uint64_t>(r.i64(files[i], "payload_bytes", p));
    f.file_bytes = static_cast<uint64_t>(r.i64(files[i], "file_bytes", p));
    for (const FileRecord& o : m.files)
      if (o.name == f.name) r.fail(p + ".name", "repeats another file");
    m.files.push_back(std::move(f));
  }

  const json& tensors = r.at(j, "tensors", "");
  if (!tensors.is_array()) r.fail(".tensors", "must be an array");
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string p = fmt::format(".tensors[{}]", i);
    TensorRecord t;
    t.name = r.str(tensors[i], "name", p);
    if (m.find(t.name)) r.fail(p + ".name", "repeats another tensor");
    t.shape = r.shape(tensors[i], "shape", p);
    t.dtype = r.str(tensors[i], "dtype", p);
    if (t.dtype != "F32") r.fail(p + ".dtype", "is not F32");
    const json& pieces = r.at(tensors[i], "pieces", p);
    if (!pieces.is_array()) r.fail(p + ".pieces", "must be an array");
    const int64_t numel = shape_numel(t.shape);
    int64_t covered = 0;
    std::vector<Rect> rects;
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::string q = fmt::format("{}.pieces[{}]", p, k);
      const json& pj = pieces[k];
      PieceRecord pr;
      pr.file = static_cast<int>(r.i64(pj, "file", q, 0, static_cast<int64_t>(m.files.size()) - 1));
      pr.split_dim = static_cast<int>(r.i64(pj, "split_dim", q, -1, static_cast<int64_t>(t.shape.size()) - 1));
      pr.split_offset = r.i64(pj, "split_offset", q);
      pr.local_shape = r.shape(pj, "local_shape", q);
      if (pr.local_shape.size() != t.shape.size()) r.fail(q + ".local_shape", "has another rank than the tensor");
      for (size_t d = 0; d < t.shape.size(); ++d) {
        bool split = static_cast<int>(d) == pr.split_dim;
        int64_t end = (split ? pr.split_offset : 0) + pr.local_shape[d];
        if (split ? end > t.shape[d] : pr.local_shape[d] != t.shape[d])
          r.fail(q + ".local_shape", "does not fit the tensor's shape at its split offset");
      }
      if (pr.split_dim < 0 && pr.split_offset != 0) r.fail(q + ".split_offset", "must be 0 without a split");
      const int64_t lnumel = shape_numel(pr.local_shape);
      pr.begin = r.i64(pj, "begin", q, 0, lnumel);
      pr.end = r.i64(pj, "end", q, pr.begin, lnumel);
      pr.offset = static_cast<uint64_t>(r.i64(pj, "offset", q));
      const json& xs = r.at(pj, "xxh3", q);
      if (!xs.is_array() || xs.size() != 3) r.fail(q + ".xxh3", "must be 3 checksums");
      for (int c = 0; c < 3; ++c) pr.xxh3[c] = r.hex(xs[static_cast<size_t>(c)], fmt::format("{}.xxh3[{}]", q, c));
      const uint64_t payload = m.files[static_cast<size_t>(pr.file)].payload_bytes;
      if (pr.offset > payload || 3 * pr.bytes() > payload - pr.offset)
        r.fail(q, fmt::format("bytes [{}, {}) lie outside the file's {} payload bytes", pr.offset,
                              pr.offset + 3 * pr.bytes(), payload));
      // The pieces must tile the tensor: no two overlap, and together they have its size.
      for (const Rect& a :
           piece_rects(Block::of(t.shape, pr.split_dim, pr.split_offset, pr.local_shape), pr.begin, pr.end)) {
        for (const Rect& b : rects)
          if (rects_overlap(a, b)) r.fail(q, "overlaps another piece of the tensor");
        rects.push_back(a);
      }
      covered += pr.count();
      t.pieces.push_back(std::move(pr));
    }
    if (covered != numel) r.fail(p + ".pieces", fmt::format("cover {} of the tensor's {} elements", covered, numel));
    m.tensors.push_back(std::move(t));
  }
  return m;
}

bool CheckpointManifest::is_damage(const Error& e) {
  return e.hint() == kHint;
}

CheckpointManifest CheckpointManifest::load(const std::string& dir, const CkptKey* key) {
  std::string path = dir + "/" + kCkptManifestFile;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    throw Error(fmt::format("{}: no manifest: the checkpoint is incomplete (a save was "
                            "interrupted) or the path is not a "
                            "checkpoint",
                            path),
                "give a step_<N> directory with a manifest.json, or --resume auto");
  std::fclose(f);
  return parse(read_file(path), path, key);
}

std::string step_dir_name(int64_t step) {
  return fmt::format("step_{:08d}", step);
}

int64_t parse_step_dir_name(const std::string& name) {
  if (name.size() < 6 || name.compare(0, 5, "step_") != 0) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > INT64_MAX / 20) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::string rank_file_name(int rank) {
  return fmt::format("rank-{:05d}.ftckpt", rank);
}

}  // namespace ft
