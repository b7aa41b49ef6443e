// Checkpoint files and manifests: round trips (plain and AES-256-GCM), resharding between
// layouts in one process, and every kind of damage reported with the file's name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>

#include "ckpt/ckpt_manifest.h"
#include "ckpt/crypto.h"
#include "ckpt/offline.h"
#include "ckpt/state_io.h"
#include "config/config.h"
#include "util/checksum.h"
#include "util/error.h"
#include "util/fs.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

std::string scratch(const std::string& name) {
  static int counter = 0;
  auto p = fs::temp_directory_path() / fmt::format("ft_ckpt_{}_{}_{}", name, ::getpid(), counter++);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

const char* kKeyHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

// Reference values of every tensor (weights, exp_avg, exp_avg_sq), indexed by global flat index.
struct Reference {
  std::map<std::string, std::vector<float>> t[3];
  explicit Reference(const ModelConfig& m) {
    std::mt19937 g(7);
    std::normal_distribution<float> n(0, 1);
    ParamLayout layout = ParamLayout::llama(m);
    for (const ParamSpec& p : layout.specs())
      for (int c = 0; c < 3; ++c) {
        auto& v = t[c][p.name];
        v.resize(static_cast<size_t>(p.numel()));
        for (float& x : v) x = c == 2 ? std::abs(n(g)) : n(g);
      }
  }
  // A filler for any layout without tensor parallelism (local shard == global tensor).
  StateFiller filler() const {
    return [this](int, const std::vector<StatePiece>& pieces, float* w, float* m, float* v) {
      float* dst[3] = {w, m, v};
      for (const StatePiece& p : pieces)
        for (int c = 0; c < 3; ++c) std::copy_n(t[c].at(p.spec->name).data() + p.begin, p.count(), dst[c] + p.compact);
    };
  }
};

Config config(int dp, int pp, int zero) {
  return load_config("", {"train.batch_size=8", fmt::format("parallel.dp={}", dp), fmt::format("parallel.pp={}", pp),
                          fmt::format("parallel.zero={}", zero)});
}

CheckpointManifest base_manifest(int64_t step) {
  CheckpointManifest m;
  m.step = step;
  m.tokens = step * 100;
  m.optimizer_steps = step;
  m.loader = {step * 8, 0};
  Config c = config(1, 1, 0);
  m.config = c.to_json();
  return m;
}

void expect_equal_to_reference(const std::string& dir, const Reference& ref, const CkptKey* key) {
  CheckpointManifest m = CheckpointManifest::load(dir, key);
  CheckpointReader r(dir, m, key);
  for (auto& [name, want] : ref.t[0])
    for (int c = 0; c < 3; ++c) ASSERT_EQ(r.tensor(name, c), ref.t[c].at(name)) << name << " " << c;
  EXPECT_TRUE(r.verify().empty());
}

void flip_byte(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

std::string first_problem(const std::string& dir, const CkptKey* key) {
  try {
    CheckpointManifest m = CheckpointManifest::load(dir, key);
    CheckpointReader r(dir, m, key);
    auto p = r.verify();
    return p.empty() ? "" : p[0];
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(CkptFormat, RoundTripPlainAndEncrypted) {
  ModelConfig mc;
  Reference ref(mc);
  std::string root = scratch("roundtrip");
  write_offline_checkpoint(root + "/plain", base_manifest(3), config(1, 1, 0), ref.filler(), nullptr, 4096);
  expect_equal_to_reference(root + "/plain", ref, nullptr);
  CkptKey key = CkptKey::from_hex(kKeyHex, "test");
  write_offline_checkpoint(root + "/enc", base_manifest(3), config(1, 1, 0), ref.filler(), &key, 4096);
  expect_equal_to_reference(root + "/enc", ref, &key);
  CheckpointManifest m = CheckpointManifest::load(root + "/enc", &key);
  EXPECT_TRUE(m.encrypted);
  EXPECT_EQ(m.loader.next_sample, 24);
  // Plaintext never reaches the disk: 64 bytes of the embedding are in the plain file only.
  const auto& emb = ref.t[0].at("model.embed_tokens.weight");
  std::string needle(reinterpret_cast<const char*>(emb.data() + 100), 64);
  EXPECT_NE(read_file(root + "/plain/rank-00000.ftckpt").find(needle), std::string::npos);
  EXPECT_EQ(read_file(root + "/enc/rank-00000.ftckpt").find(needle), std::string::npos);
}

TEST(CkptFormat, ReshardBetweenLayoutsKeepsEveryValue) {
  ModelConfig mc;
  Reference ref(mc);
  std::string root = scratch("reshard");
  const Config a = config(2, 2, 1);  // 4 ranks, two stages
  write_offline_checkpoint(root + "/a", base_manifest(5), a, ref.filler(), nullptr, 4096);
  CheckpointManifest ma = CheckpointManifest::load(root + "/a", nullptr);
  EXPECT_EQ(ma.files.size(), 4u);
  expect_equal_to_reference(root + "/a", ref, nullptr);
  for (Config target : {config(4, 1, 3), config(1, 1, 0), config(2, 1, 2), config(1, 2, 0)}) {
    std::string out = fmt::format("{}/dp{}pp{}z{}", root, target.parallel.dp, target.parallel.pp, target.parallel.zero);
    reshard_checkpoint(root + "/a", out, target, nullptr, false);
    expect_equal_to_reference(out, ref, nullptr);
    // Each target rank's own pieces, filled from the source layout, are the reference values.
    CheckpointReader r(root + "/a", ma, nullptr);
    for (int rank = 0; rank < target.parallel.world_size(); ++rank) {
      ParamLayout l = rank_layout(target, rank);
      auto ranges = rank_state_ranges(l, target, rank);
      auto pieces = state_pieces(l, ranges);
      std::vector<float> w(static_cast<size_t>(ranges_size(ranges))), m(w.size()), v(w.size());
      r.fill(pieces, w.data(), m.data(), v.data());
      for (const StatePiece& p : pieces)
        for (int64_t i = 0; i < p.count(); ++i) {
          ASSERT_EQ(w[static_cast<size_t>(p.compact + i)], ref.t[0].at(p.spec->name)[static_cast<size_t>(p.begin + i)]);
          ASSERT_EQ(v[static_cast<size_t>(p.compact + i)], ref.t[2].at(p.spec->name)[static_cast<size_t>(p.begin + i)]);
        }
    }
  }
}

TEST(CkptFormat, DamageIsReportedNamingTheFile) {
  ModelConfig mc;
  Reference ref(mc);
  CkptKey key = CkptKey::from_hex(kKeyHex, "test");
  std::string root = scratch("damage");
  auto fresh = [&](const std::string& name, bool enc) {
    std::string d = root + "/" + name;
    write_offline_checkpoint(d, base_manifest(7), config(2, 1, 1), ref.filler(), enc ? &key : nullptr, 4096);
    return d;
  };
  // A flipped bit in an encrypted chunk: the tag fails.
  std::string d = fresh("bit", true);
  flip_byte(d + "/rank-00001.ftckpt", 64 + 5000);
  std::string p = first_problem(d, &key);
  EXPECT_NE(p.find("rank-00001.ftckpt"), std::string::npos) << p;
  EXPECT_NE(p.find("does not authenticate"), std::string::npos) << p;
  // A flipped bit in a plaintext file: the piece checksum fails.
  d = fresh("bitplain", false);
  flip_byte(d + "/rank-00000.ftckpt", 64 + 5000);
  p = first_problem(d, nullptr);
  EXPECT_NE(p.find("rank-00000.ftckpt"), std::string::npos) << p;
  EXPECT_NE(p.find("checksum"), std::string::npos) << p;
  // Truncated.
  d = fresh("trunc", true);
  fs::resize_file(d + "/rank-00000.ftckpt", fs::file_size(d + "/rank-00000.ftckpt") - 100);
  p = first_problem(d, &key);
  EXPECT_NE(p.find("rank-00000.ftckpt: truncated"), std::string::npos) << p;
  // Swapped files.
  d = fresh("swap", true);
  fs::rename(d + "/rank-00000.ftckpt", d + "/x");
  fs::rename(d + "/rank-00001.ftckpt", d + "/rank-00000.ftckpt");
  fs::rename(d + "/x", d + "/rank-00001.ftckpt");
  p = first_problem(d, &key);
  EXPECT_NE(p.find("rank-00000.ftckpt: holds rank 1's state"), std::string::npos) << p;
  // A file of another step.
  std::string other = root + "/other";
  write_offline_checkpoint(other, base_manifest(8), config(2, 1, 1), ref.filler(), &key, 4096);
  d = fresh("step", true);
  fs::copy_file(other + "/rank-00001.ftckpt", d + "/rank-00001.ftckpt", fs::copy_options::overwrite_existing);
  p = first_problem(d, &key);
  EXPECT_NE(p.find("rank-00001.ftckpt: holds step 8"), std::string::npos) << p;
  // The wrong key.
  CkptKey wrong = CkptKey::from_hex(std::string(64, 'a'), "test");
  d = fresh("key", true);
  p = first_problem(d, &wrong);
  EXPECT_NE(p.find("encrypted with key id"), std::string::npos) << p;
  // An edited manifest: HMAC (encrypted) or checksum (plain).
  std::string text = read_file(d + "/manifest.json");
  text.replace(text.find("\"step\": 7"), 9, "\"step\": 6");
  write_file_atomic(d + "/manifest.json", text);
  p = first_problem(d, &key);
  EXPECT_NE(p.find("HMAC does not verify"), std::string::npos) << p;
  d = fresh("manifest", false);
  text = read_file(d + "/manifest.json");
  text.replace(text.find("\"tokens\": 700"), 13, "\"tokens\": 701");
  write_file_atomic(d + "/manifest.json", text);
  p = first_problem(d, nullptr);
  EXPECT_NE(p.find("checksum does not match"), std::string::npos) << p;
  // No manifest: not a checkpoint.
  d = fresh("nomanifest", false);
  fs::remove(d + "/manifest.json");
  p = first_problem(d, nullptr);
  EXPECT_NE(p.find("no manifest"), std::string::npos) << p;
}

// Issue 14.3: a checkpoint never stores non-finite state (the save refuses, naming the tensor),
// and one that holds it — written by an older build — fails verification and cannot be read.
TEST(CkptFormat, NonFiniteStateIsNeverSavedNorCertified) {
  ModelConfig mc;
  Reference ref(mc);
  std::string root = scratch("nonfinite");
  Reference bad = ref;
  bad.t[1]["model.norm.weight"][3] = std::numeric_limits<float>::quiet_NaN();
  try {
    write_offline_checkpoint(root + "/refused", base_manifest(5), config(1, 1, 0), bad.filler(), nullptr, 4096);
    ADD_FAILURE() << "a NaN in exp_avg was saved";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("the exp_avg of model.norm.weight hold a non-finite value (nan at element 3 of "
                                   "its shard): not saved"),
        std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(root + "/refused/manifest.json"));
  // An older build's checkpoint with an inf in the weights and checksums that match it.
  const std::string d = root + "/old";
  write_offline_checkpoint(d, base_manifest(5), config(1, 1, 0), ref.filler(), nullptr, 4096);
  CheckpointManifest m = CheckpointManifest::load(d, nullptr);
  TensorRecord* t = nullptr;
  for (TensorRecord& x : m.tensors)
    if (x.name == "model.layers.1.mlp.up_proj.weight") t = &x;
  ASSERT_NE(t, nullptr);
  PieceRecord& piece = t->pieces[0];
  std::vector<float> w(static_cast<size_t>(piece.count()));
  {
    std::fstream f(d + "/" + m.files[static_cast<size_t>(piece.file)].name,
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(64 + piece.offset));
    f.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(piece.bytes()));
    w[10] = std::numeric_limits<float>::infinity();
    f.seekp(static_cast<std::streamoff>(64 + piece.offset));
    f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(piece.bytes()));
  }
  piece.xxh3[0] = xxh3_64(w.data(), piece.bytes());
  write_file_atomic(d + "/manifest.json", m.to_json_text(nullptr));
  const std::string p = first_problem(d, nullptr);
  EXPECT_NE(p.find("the weights of model.layers.1.mlp.up_proj.weight hold a non-finite value (inf at element " +
                   std::to_string(piece.begin + 10)),
            std::string::npos)
      << p;
  CheckpointReader r(d, CheckpointManifest::load(d, nullptr), nullptr);
  EXPECT_THROW(r.tensor("model.layers.1.mlp.up_proj.weight"), Error);  // export, generate, resume
}

TEST(CkptFormat, KeysAreCheckedAndIdentified) {
  EXPECT_THROW(CkptKey::from_hex("abcd", "FLUXTRAIN_CKPT_KEY"), Error);
  EXPECT_THROW(CkptKey::from_hex(std::string(63, '0') + "g", "FLUXTRAIN_CKPT_KEY"), Error);
  CkptKey a = CkptKey::from_hex(std::string("  ") + kKeyHex + "\n", "file");
  CkptKey b = CkptKey::from_hex(kKeyHex, "env");
  EXPECT_EQ(a.id(), b.id());
  EXPECT_NE(a.id(), CkptKey::from_hex(std::string(64, '1'), "x").id());
  try {
    CkptKey::from_hex("xyz", "ckpt.key_file /k");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt.key_file /k"), std::string::npos);
  }
}

TEST(CkptFormat, ManifestRejectsPiecesThatDoNotTile) {
  ModelConfig mc;
  Reference ref(mc);
  std::string d = scratch("tile") + "/c";
  write_offline_checkpoint(d, base_manifest(1), config(2, 1, 1), ref.filler(), nullptr, 4096);
  CheckpointManifest m = CheckpointManifest::load(d, nullptr);
  // Make one piece overlap its neighbour: the re-written manifest is refused.
  ASSERT_GE(m.tensors[0].pieces.size(), 2u);
  m.tensors[0].pieces[1].begin -= 1;
  std::string text = m.to_json_text(nullptr);
  try {
    CheckpointManifest::parse(text, "m.json", nullptr);
    FAIL() << "accepted overlapping pieces";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlaps"), std::string::npos) << e.what();
  }
  m.tensors[0].pieces[1].begin += 2;  // now a gap
  try {
    CheckpointManifest::parse(m.to_json_text(nullptr), "m.json", nullptr);
    FAIL() << "accepted a gap";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cover"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ft
