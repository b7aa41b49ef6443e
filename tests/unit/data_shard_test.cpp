// Shard files and manifests: round trip, checksum (against the xxhsum tool for the plain hash),
// and every corruption a reader must name.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "data/dataset_manifest.h"
#include "data/shard.h"
#include "data_test_util.h"
#include "util/checksum.h"
#include "util/error.h"

namespace ft {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Checksum, StreamingEqualsParallelAcrossChunkBoundaries) {
  std::mt19937_64 rng(1);
  std::vector<uint8_t> data(3 * kChecksumChunk + 12345);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n : {size_t{0}, size_t{1}, kChecksumChunk - 1, kChecksumChunk, kChecksumChunk + 1, data.size()}) {
    ChunkedHasher h;
    size_t pos = 0;
    while (pos < n) {  // uneven pieces
      size_t k = std::min(n - pos, static_cast<size_t>(rng() % 3000000));
      h.update(data.data() + pos, k);
      pos += k;
    }
    EXPECT_EQ(h.digest(42), chunked_hash(data.data(), n, 42)) << n;
  }
  uint64_t before = chunked_hash(data.data(), data.size(), 0);
  data[2 * kChecksumChunk + 7] ^= 1;
  EXPECT_NE(chunked_hash(data.data(), data.size(), 0), before);
}

TEST(Checksum, Xxh3MatchesTheXxhsumTool) {
  if (std::system("command -v xxhsum >/dev/null 2>&1") != 0) GTEST_SKIP() << "xxhsum (Debian package xxhash) missing";
  std::string dir = testing::scratch_dir("xxh");
  std::string text = "fluxtrain checks its shards with XXH3-64; Проверка.";
  std::ofstream(dir + "/f.bin", std::ios::binary) << text;
  FILE* p = ::popen(("xxhsum -H3 " + dir + "/f.bin").c_str(), "r");
  char buf[256] = {0};
  ASSERT_NE(std::fgets(buf, sizeof buf, p), nullptr);
  ::pclose(p);
  std::string line(buf);
  // "XXH3_<hex>  file" (xxhash 0.8.1 prefixes the algorithm name) or "<hex>  file".
  std::string want = hex64(xxh3_64(text.data(), text.size()));
  EXPECT_NE(line.find(want), std::string::npos) << line << " vs " << want;
}

class ShardTest : public ::testing::Test {
 protected:
  std::string write(int token_bytes, const std::vector<std::vector<int32_t>>& docs) {
    std::string path = dir_ + fmt::format("/s{}.ftshard", count_++);
    ShardWriter w(path, token_bytes);
    for (auto& d : docs) w.add_document(d.data(), d.size());
    info_ = w.commit();
    return path;
  }
  void poke(const std::string& path, size_t offset, const void* bytes, size_t n) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
  }
  std::string dir_ = testing::scratch_dir("shard");
  int count_ = 0;
  ShardInfo info_;
};

TEST_F(ShardTest, RoundTripBothWidths) {
  std::vector<std::vector<int32_t>> docs = {{5, 6, 7, 2}, {9, 2}, {65535, 100, 2}};
  for (int tb : {2, 4}) {
    if (tb == 4) docs[1][0] = 1 << 20;
    std::string p = write(tb, docs);
    Shard s(p);
    const ShardView& v = s.view();
    v.verify();
    EXPECT_EQ(v.token_bytes(), tb);
    EXPECT_EQ(v.num_docs(), 3u);
    EXPECT_EQ(v.num_tokens(), 9u);
    EXPECT_EQ(v.doc_offset(1), 4u);
    EXPECT_EQ(v.doc_offset(3), 9u);
    std::vector<int32_t> all(9);
    v.copy_tokens(0, 9, all.data());
    EXPECT_EQ(all, (std::vector<int32_t>{5, 6, 7, 2, docs[1][0], 2, 65535, 100, 2}));
    EXPECT_EQ(info_.checksum, v.header().checksum);
    EXPECT_EQ(info_.bytes, std::filesystem::file_size(p));
    EXPECT_FALSE(std::filesystem::exists(p + ".tmp." + std::to_string(::getpid())));
  }
}

TEST_F(ShardTest, EveryCorruptionIsNamed) {
  std::vector<std::vector<int32_t>> docs = {{5, 6, 7, 2}, {9, 2}};
  std::string p = write(2, docs);
  char x = 0x7f;
  poke(p, 64 + 2, &x, 1);  // a token
  EXPECT_NE(error_of([&] { Shard(p).view().verify(); }).find("checksum mismatch"), std::string::npos);

  p = write(2, docs);
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 8);
  std::string e = error_of([&] { Shard s(p); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(e.find(p), std::string::npos) << e;

  p = write(2, docs);
  poke(p, 0, "XXXX", 4);
  EXPECT_NE(error_of([&] { Shard s(p); }).find("bad magic"), std::string::npos);

  p = write(2, docs);
  uint32_t v2 = 2;
  poke(p, 8, &v2, 4);
  EXPECT_NE(error_of([&] { Shard s(p); }).find("version 2"), std::string::npos);

  p = write(2, docs);
  uint64_t docs_field = 5;
  poke(p, 24, &docs_field, 8);
  EXPECT_NE(error_of([&] { Shard s(p); }).find("inconsistent header"), std::string::npos);

  p = write(2, docs);
  uint64_t off = 9;  // document 1 would start past document 2's end
  poke(p, std::filesystem::file_size(p) - 16, &off, 8);
  EXPECT_NE(error_of([&] { Shard s(p); }).find("out of order"), std::string::npos);

  std::ofstream(dir_ + "/short.ftshard") << "FTSH";
  EXPECT_NE(error_of([&] { Shard s(dir_ + "/short.ftshard"); }).find("shorter than the 64-byte header"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Shard s(dir_ + "/missing.ftshard"); }).find("No such file"), std::string::npos);
}

TEST(Manifest, RoundTripAndNamedErrors) {
  std::string dir = testing::scratch_dir("manifest");
  auto ds = testing::make_fake_dataset(dir, {100, 120}, {50});
  DatasetManifest m = DatasetManifest::load(dir);
  EXPECT_EQ(m.train.shards.size(), 2u);
  EXPECT_EQ(m.train.tokens, 220u);
  EXPECT_EQ(DatasetManifest::parse(m.to_json_text(), "x").to_json_text(), m.to_json_text());
  m.check_tokenizer(dir);

  std::string good = m.to_json_text();
  auto err = [&](std::string text) { return error_of([&] { DatasetManifest::parse(text, "M.json"); }); };
  auto replace = [&](const std::string& a, const std::string& b) {
    std::string t = good;
    size_t p = t.find(a);
    EXPECT_NE(p, std::string::npos) << a;
    return t.replace(p, a.size(), b);
  };
  EXPECT_NE(err("{").find("M.json: not valid JSON"), std::string::npos);
  EXPECT_NE(err("[]").find("format"), std::string::npos);
  EXPECT_NE(err(replace("\"version\": 1", "\"version\": 9")).find("version 9"), std::string::npos);
  EXPECT_NE(err(replace("\"tokens\": 100", "\"tokens\": 101")).find("disagree"), std::string::npos);
  EXPECT_NE(err(replace("\"file\": \"train-00000.ftshard\"", "\"file\": \"../x\"")).find("plain file name"),
            std::string::npos);
  EXPECT_NE(err(replace("\"token_bytes\": 2", "\"token_bytes\": 3")).find("token_bytes"), std::string::npos);
  std::string e = err(replace("\"checksum\": \"", "\"checksum\": \"zz"));
  EXPECT_NE(e.find("splits.train.shards[0].checksum"), std::string::npos) << e;
}

}  // namespace
}  // namespace ft
