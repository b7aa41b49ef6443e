#include "ckpt/offline.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "ckpt/state_io.h"
#include "parallel/data_parallel/shard_plan.h"
#include "parallel/mesh.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "tensor/memory.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace fs = std::filesystem;

namespace ft {

ParamLayout rank_layout(const Config& cfg, int rank) {
  const ParallelConfig& p = cfg.parallel;
  const MeshCoord c = Mesh::coord_of(p, rank);
  std::vector<int> units;
  if (p.pp > 1) {
    const MicroBatching mb = split_batch(cfg.train.batch_size, cfg.train.micro_batch_size, p);
    PipelinePlan plan = PipelinePlan::make(cfg.model, cfg.train.seq_len, p, mb.count);
    units = plan.partition.stage_units(static_cast<int>(c.pp));
  }
  const TpShard shard{.rank = c.tp, .size = p.tp, .sequence_parallel = p.sequence_parallel && p.tp > 1};
  // Each unit padded to a multiple of dp · cp: the cp ranks of a replica hold the same weights and
  // share the optimizer state over the dp × cp group (Trainer::parallelize).
  return ParamLayout::llama(cfg.model, p.dp * p.cp, units, shard);
}

std::vector<std::pair<int64_t, int64_t>> rank_state_ranges(const ParamLayout& layout, const Config& cfg, int rank) {
  // The rank's piece of the dp × cp group (cp inside dp: Mesh::dp_cp()'s order), as the engine's.
  const ParallelConfig& p = cfg.parallel;
  const MeshCoord c = Mesh::coord_of(p, rank);
  return ShardPlan(layout, static_cast<int>(c.dp * p.cp + c.cp), static_cast<int>(p.dp * p.cp)).ranges();
}

void write_offline_checkpoint(const std::string& dir, CheckpointManifest m, const Config& cfg, const StateFiller& fill,
                              const CkptKey* key, uint32_t chunk_bytes) {
  if (fs::exists(dir))
    throw Error(fmt::format("{} already exists", dir), "choose a new output directory, or remove the old one first");
  const std::string tmp = fmt::format("{}.tmp-{}", dir, ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const int world = static_cast<int>(cfg.parallel.world_size());
  m.world = world;
  m.dp = cfg.parallel.dp, m.tp = cfg.parallel.tp, m.pp = cfg.parallel.pp, m.cp = cfg.parallel.cp;
  m.zero = cfg.parallel.zero;
  m.encrypted = key && !key->empty();
  m.key_id = m.encrypted ? key->id() : "";
  m.chunk_bytes = chunk_bytes;
  m.files.clear();
  m.tensors.clear();
  std::set<std::string> written;  // pieces of lower ranks: replicas are written once
  try {
    for (int r = 0; r < world; ++r) {
      ParamLayout layout = rank_layout(cfg, r);
      auto ranges = rank_state_ranges(layout, cfg, r);
      std::vector<StatePiece> pieces = state_pieces(layout, ranges), owned;
      for (const StatePiece& p : pieces)
        if (!written.count(p.key())) owned.push_back(p);
      for (const StatePiece& p : owned) written.insert(p.key());
      const int64_t n = std::max<int64_t>(ranges_size(ranges), 1);
      float* buf =
          static_cast<float*>(mem_alloc(Device::kCPU, static_cast<size_t>(3 * n) * 4, MemCategory::kCheckpoint));
      try {
        fill(r, pieces, buf, buf + n, buf + 2 * n);
        std::vector<PieceRecord> recs;
        FileRecord f = write_rank_file(tmp, m.step, r, owned, buf, buf + n, buf + 2 * n, chunk_bytes, key, &recs);
        add_file_to_manifest(m, f, owned, recs);
      } catch (...) {
        mem_free(Device::kCPU, buf, static_cast<size_t>(3 * n) * 4, MemCategory::kCheckpoint);
        throw;
      }
      mem_free(Device::kCPU, buf, static_cast<size_t>(3 * n) * 4, MemCategory::kCheckpoint);  // wiped
    }
    write_file_atomic(tmp + "/" + kCkptManifestFile, m.to_json_text(key));
    // What we wrote must read back as a valid checkpoint before it takes the final name.
    CheckpointManifest::parse(read_file(tmp + "/" + kCkptManifestFile), tmp, key);
    fs::create_directories(fs::path(dir).parent_path().empty() ? "." : fs::path(dir).parent_path());
    fs::rename(tmp, dir);
    fsync_dir(fs::path(dir).parent_path().empty() ? "." : fs::path(dir).parent_path().string());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

void reshard_checkpoint(const std::string& src, const std::string& dir, const Config& target, const CkptKey* key,
                        bool encrypt_output, const std::string& origin) {
  CheckpointManifest m = CheckpointManifest::load(src, key);
  CheckpointReader reader(src, m, key);
  CheckpointManifest out = m;
  out.origin = origin;
  nlohmann::json parallel = nlohmann::json::object();
  {
    Config t = target;
    parallel = t.to_json()["parallel"];
  }
  out.config["parallel"] = parallel;
  write_offline_checkpoint(
      dir, out, target,
      [&](int, const std::vector<StatePiece>& pieces, float* w, float* mm, float* v) { reader.fill(pieces, w, mm, v); },
      encrypt_output ? key : nullptr, m.chunk_bytes);
}

}  // namespace ft
