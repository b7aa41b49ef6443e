#include "ckpt/state_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tensor/memory.h"
#include "util/checksum.h"
#include "util/error.h"
#include "util/log.h"

namespace ft {
namespace {

using json = nlohmann::json;

void wipe(std::vector<float>& v) {
  secure_zero(v.data(), v.size() * sizeof(float));
  v.clear();
}

const char* kWhich[3] = {"weights", "exp_avg", "exp_avg_sq"};

// The first element that is NaN or infinite, or -1 (a pass at memory speed, like the checksum).
int64_t first_non_finite(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return i;
  return -1;
}

std::string non_finite_message(const std::string& tensor, int which, const float* p, int64_t at, int64_t begin) {
  return fmt::format("the {} of {} hold a non-finite value ({} at element {} of its shard)", kWhich[which], tensor,
                     p[at], begin + at);
}

}  // namespace

FileRecord write_rank_file(const std::string& dir, int64_t step, int rank, const std::vector<StatePiece>& owned,
                           const float* w, const float* m, const float* v, uint32_t chunk_bytes, const CkptKey* key,
                           std::vector<PieceRecord>* records) {
  FileRecord f;
  f.name = rank_file_name(rank);
  f.rank = rank;
  for (const StatePiece& p : owned) f.payload_bytes += 3 * static_cast<uint64_t>(p.count()) * 4;
  RankFileWriter out(dir + "/" + f.name, step, rank, f.payload_bytes, chunk_bytes, key);
  uint64_t offset = 0;
  for (const StatePiece& p : owned) {
    PieceRecord r;
    r.split_dim = p.spec->split_dim;
    r.split_offset = p.spec->split_offset;
    r.local_shape = p.spec->shape;
    r.begin = p.begin;
    r.end = p.end;
    r.offset = offset;
    const float* src[3] = {w, m, v};
    for (int c = 0; c < 3; ++c) {
      const float* data = src[c] + p.compact;
      // A checkpoint never stores non-finite state: resuming from it could only produce NaNs.
      if (const int64_t at = first_non_finite(data, p.count()); at >= 0)
        throw Error(fmt::format("step {}: {}: not saved", step, non_finite_message(p.spec->name, c, data, at, p.begin)),
                    "the training diverged (lower optim.lr, keep optim.grad_clip on); earlier checkpoints are kept");
      r.xxh3[c] = xxh3_64(data, r.bytes());
      out.write(data, r.bytes());
    }
    offset += 3 * r.bytes();
    records->push_back(std::move(r));
  }
  f.file_bytes = out.commit();
  return f;
}

void add_file_to_manifest(CheckpointManifest& m, const FileRecord& f, const std::vector<StatePiece>& owned,
                          const std::vector<PieceRecord>& records) {
  FT_CHECK(owned.size() == records.size(), "pieces and records differ");
  const int index = static_cast<int>(m.files.size());
  m.files.push_back(f);
  for (size_t i = 0; i < owned.size(); ++i) {
    TensorRecord* t = nullptr;
    for (TensorRecord& x : m.tensors)
      if (x.name == owned[i].spec->name) t = &x;
    if (!t) {
      m.tensors.push_back({owned[i].spec->name, owned[i].spec->global_shape, "F32", {}});
      t = &m.tensors.back();
    }
    PieceRecord r = records[i];
    r.file = index;
    t->pieces.push_back(std::move(r));
  }
}

std::string pieces_to_json(const FileRecord& f, const std::vector<StatePiece>& owned,
                           const std::vector<PieceRecord>& records) {
  json pieces = json::array();
  for (size_t i = 0; i < owned.size(); ++i) {
    const PieceRecord& r = records[i];
    pieces.push_back({{"name", owned[i].spec->name},
                      {"shape", owned[i].spec->global_shape},
                      {"split_dim", r.split_dim},
                      {"split_offset", r.split_offset},
                      {"local_shape", r.local_shape},
                      {"begin", r.begin},
                      {"end", r.end},
                      {"offset", r.offset},
                      {"xxh3", {r.xxh3[0], r.xxh3[1], r.xxh3[2]}}});
  }
  json j = {{"name", f.name},
            {"rank", f.rank},
            {"payload_bytes", f.payload_bytes},
            {"file_bytes", f.file_bytes},
            {"pieces", std::move(pieces)}};
  return j.dump();
}

void add_json_file_to_manifest(CheckpointManifest& m, const std::string& text) {
  json j = json::parse(text);
  FileRecord f{j["name"].get<std::string>(), j["rank"].get<int>(), j["payload_bytes"].get<uint64_t>(),
               j["file_bytes"].get<uint64_t>()};
  const int index = static_cast<int>(m.files.size());
  m.files.push_back(f);
  for (const json& p : j["pieces"]) {
    std::string name = p["name"].get<std::string>();
    TensorRecord* t = nullptr;
    for (TensorRecord& x : m.tensors)
      if (x.name == name) t = &x;
    if (!t) {
      m.tensors.push_back({name, p["shape"].get<Shape>(), "F32", {}});
      t = &m.tensors.back();
    }
    PieceRecord r;
    r.file = index;
    r.split_dim = p["split_dim"].get<int>();
    r.split_offset = p["split_offset"].get<int64_t>();
    r.local_shape = p["local_shape"].get<Shape>();
    r.begin = p["begin"].get<int64_t>();
    r.end = p["end"].get<int64_t>();
    r.offset = p["offset"].get<uint64_t>();
    for (int c = 0; c < 3; ++c) r.xxh3[c] = p["xxh3"][static_cast<size_t>(c)].get<uint64_t>();
    t->pieces.push_back(std::move(r));
  }
}

CheckpointReader::CheckpointReader(std::string dir, const CheckpointManifest& m, const CkptKey* key,
                                   RankFileOpener open)
    : dir_(std::move(dir)), m_(m), key_(key), open_(std::move(open)) {}

CheckpointReader::ReadStats CheckpointReader::read_stats() const {
  ReadStats s;
  for (const auto& [f, r] : readers_) {
    s.fetched += r->bytes_fetched();
    s.chunk_bytes_needed += r->chunk_bytes_needed();
    ++s.files_opened;
  }
  return s;
}

CheckpointReader::~CheckpointReader() {
  for (auto& [k, v] : cache_) wipe(v);
}

RankFileReader& CheckpointReader::reader(int file) {
  auto it = readers_.find(file);
  if (it != readers_.end()) return *it->second;
  auto r = open_ ? std::make_unique<RankFileReader>(open_(m_.files.at(static_cast<size_t>(file))), m_, file, key_)
                 : std::make_unique<RankFileReader>(dir_, m_, file, key_);
  return *readers_.emplace(file, std::move(r)).first->second;
}

const std::vector<float>& CheckpointReader::piece_data(const TensorRecord& t, size_t k) {
  auto it = cache_.find(k);
  if (it != cache_.end()) return it->second;
  const PieceRecord& p = t.pieces[k];
  std::vector<float> data(static_cast<size_t>(3 * p.count()));
  RankFileReader& r = reader(p.file);
  r.read(p.offset, 3 * p.bytes(), data.data());
  for (int c = 0; c < 3; ++c) {
    if (xxh3_64(data.data() + c * p.count(), p.bytes()) != p.xxh3[c]) {
      wipe(data);
      throw Error(fmt::format("{}: the {} of {} (elements [{}, {}) of its shard) fail their checksum", r.path(),
                              kWhich[c], t.name, p.begin, p.end),
                  "the checkpoint is damaged; resume from an older one (--resume auto skips it)");
    }
    // Written before saves checked finiteness (or by another tool): unusable all the same.
    if (const int64_t at = first_non_finite(data.data() + c * p.count(), p.count()); at >= 0) {
      const std::string what = non_finite_message(t.name, c, data.data() + c * p.count(), at, p.begin);
      wipe(data);
      throw Error(fmt::format("{}: {}", r.path(), what),
                  "the state had diverged when it was saved; resume from an older checkpoint (--resume auto "
                  "skips it)");
    }
  }
  return cache_.emplace(k, std::move(data)).first->second;
}

void CheckpointReader::fill_tensor(const TensorRecord& t, const std::vector<Target>& targets) {
  for (auto& [k, v] : cache_) wipe(v);
  cache_.clear();
  for (const Target& d : targets) {
    int64_t filled = 0;
    for (size_t k = 0; k < t.pieces.size(); ++k) {
      const PieceRecord& p = t.pieces[k];
      Block s = Block::of(t.shape, p.split_dim, p.split_offset, p.local_shape);
      // Count first (no read) so only the pieces that overlap are read.
      int64_t n = for_each_overlap(d.block, d.begin, d.end, s, p.begin, p.end, [](int64_t, int64_t, int64_t) {});
      if (n == 0) continue;
      const std::vector<float>& src = piece_data(t, k);
      for_each_overlap(d.block, d.begin, d.end, s, p.begin, p.end, [&](int64_t di, int64_t si, int64_t count) {
        for (int c = 0; c < 3; ++c)
          if (d.dst[c]) std::memcpy(d.dst[c] + di, src.data() + c * p.count() + si, static_cast<size_t>(count) * 4);
      });
      filled += n;
    }
    if (filled != d.end - d.begin)
      throw Error(fmt::format("{}: the checkpoint's pieces of {} cover {} of the {} elements needed", dir_, t.name,
                              filled, d.end - d.begin),
                  "the checkpoint is damaged or incomplete");
  }
  for (auto& [k, v] : cache_) wipe(v);
  cache_.clear();
}

void CheckpointReader::fill(const std::vector<StatePiece>& pieces, float* w, float* m, float* v) {
  std::map<std::string, std::vector<Target>> by_name;
  std::vector<std::string> order;
  for (const StatePiece& p : pieces) {
    const ParamSpec& s = *p.spec;
    const TensorRecord* t = m_.find(s.name);
    if (!t)
      throw Error(fmt::format("{}: the checkpoint has no tensor {}: it was saved from another model", dir_, s.name),
                  "resume with the model.* settings of the checkpoint's config (fluxtrain ckpt inspect "
                  "shows them)");
    if (t->shape != s.global_shape)
      throw Error(fmt::format("{}: {} has shape {} in the checkpoint, the model needs {}", dir_, s.name,
                              shape_str(t->shape), shape_str(s.global_shape)),
                  "resume with the model.* settings of the checkpoint's config (fluxtrain ckpt "
                  "inspect shows them)");
    if (!by_name.count(s.name)) order.push_back(s.name);
    by_name[s.name].push_back(
        {p.block(),
         p.begin,
         p.end,
         {w ? w + p.compact : nullptr, m ? m + p.compact : nullptr, v ? v + p.compact : nullptr}});
  }
  for (const std::string& name : order) fill_tensor(*m_.find(name), by_name[name]);
}

std::vector<float> CheckpointReader::tensor(const std::string& name, int which) {
  const TensorRecord* t = m_.find(name);
  if (!t) throw Error(fmt::format("{}: the checkpoint has no tensor {}", dir_, name));
  std::vector<float> out(static_cast<size_t>(shape_numel(t->shape)));
  Target d{Block::of(t->shape, -1, 0, t->shape), 0, shape_numel(t->shape), {nullptr, nullptr, nullptr}};
  d.dst[which] = out.data();
  fill_tensor(*t, {d});
  return out;
}

std::vector<std::string> CheckpointReader::verify(bool progress) {
  std::vector<std::string> problems;
  std::vector<bool> bad_file(m_.files.size(), false);  // said once, not again for each of its pieces
  for (size_t f = 0; f < m_.files.size(); ++f) {
    try {
      reader(static_cast<int>(f)).verify_chunks();
      if (progress) log_info("verify: {} chunks ok", m_.files[f].name);
    } catch (const Error& e) {
      problems.push_back(e.what());
      bad_file[f] = true;
    }
  }
  for (const TensorRecord& t : m_.tensors) {
    for (size_t k = 0; k < t.pieces.size(); ++k) {
      const int file = t.pieces[k].file;
      if (file >= 0 && static_cast<size_t>(file) < bad_file.size() && bad_file[static_cast<size_t>(file)]) continue;
      try {
        piece_data(t, k);
      } catch (const Error& e) {
        problems.push_back(e.what());
      }
      for (auto& [i, v] : cache_) wipe(v);
      cache_.clear();
    }
  }
  return problems;
}

}  // namespace ft
