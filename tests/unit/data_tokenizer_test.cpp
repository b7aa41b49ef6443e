// The SentencePiece tokenizer: training on bilingual text, exact round trips (byte fallback: no
// <unk>), parallel encoding equal to serial, and the same ids as SentencePiece's own spm_encode.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "data/tokenizer.h"
#include "data_test_util.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft {
namespace {

std::vector<std::string> fixture_lines() {
  std::ifstream in(std::string(FT_SOURCE_DIR) + "/tests/data/bilingual.txt");
  std::vector<std::string> lines;
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  return lines;
}

const Tokenizer& tokenizer() {
  static Tokenizer* tok = [] {
    auto lines = fixture_lines();
    size_t i = 0;
    TokenizerTrainOptions o;
    o.vocab_size = 400;
    std::string model = train_tokenizer(o, [&](std::string* line) {
      if (i >= lines.size() * 5) return false;  // a few passes so merges have counts
      *line = lines[i++ % lines.size()];
      return true;
    });
    return new Tokenizer(Tokenizer::from_bytes(model, "test.model"));
  }();
  return *tok;
}

TEST(Tokenizer, TrainsBpeCoveringCyrillicAndLatin) {
  const Tokenizer& t = tokenizer();
  EXPECT_GT(t.vocab_size(), 300);
  EXPECT_LE(t.vocab_size(), 400);
  EXPECT_EQ(t.eos_id(), 2);
  // Frequent words of both scripts became multi-byte pieces, not byte fallback.
  EXPECT_LT(t.encode("дескриптор").size(), 5u);
  EXPECT_LT(t.encode("descriptor").size(), 5u);
}

TEST(Tokenizer, RoundTripsAnyTextWithoutUnknown) {
  const Tokenizer& t = tokenizer();
  for (std::string s : {std::string("Привет, мир! naïve café"), std::string("日本語 🙂 ∑ x² ≠ y"),
                        std::string("  leading, double  spaces\tand tab\nsecond line\n"), std::string("ёЁ ґ Ї")}) {
    std::vector<int32_t> ids = t.encode(s);
    for (int32_t id : ids) EXPECT_NE(id, 0) << "unknown token in " << s;
    EXPECT_EQ(t.decode(ids), s);
  }
  EXPECT_THROW(t.decode({1000000}), Error);
}

TEST(Tokenizer, ParallelBatchEqualsSerial) {
  const Tokenizer& t = tokenizer();
  auto lines = fixture_lines();
  std::vector<std::string> texts;
  for (int r = 0; r < 8; ++r)
    for (auto& l : lines) texts.push_back(l + " " + std::to_string(r));
  auto batch = t.encode_batch(texts);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], t.encode(texts[i]));
}

TEST(Tokenizer, SameIdsAsSpmEncode) {
  if (std::system("command -v spm_encode >/dev/null 2>&1") != 0) GTEST_SKIP() << "spm_encode missing";
  const Tokenizer& t = tokenizer();
  std::string dir = testing::scratch_dir("spm");
  write_file_atomic(dir + "/m.model", t.bytes());
  auto lines = fixture_lines();
  lines.push_back("Ранее не виденный текст: epoll_wait(2) и mmap(2).");
  {
    std::ofstream out(dir + "/in.txt");
    for (auto& l : lines) out << l << "\n";
  }
  std::string cmd = "spm_encode --model=" + dir + "/m.model --output_format=id < " + dir + "/in.txt";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[65536];
  size_t i = 0;
  while (std::fgets(buf, sizeof buf, p)) {
    std::istringstream ss(buf);
    std::vector<int32_t> want;
    int v;
    while (ss >> v) want.push_back(v);
    ASSERT_LT(i, lines.size());
    EXPECT_EQ(t.encode(lines[i]), want) << lines[i];
    ++i;
  }
  EXPECT_EQ(::pclose(p), 0);
  EXPECT_EQ(i, lines.size());
}

TEST(Tokenizer, BadModelAndBadOptionsAreExplained) {
  try {
    Tokenizer::from_bytes("garbage", "/x/tok.model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/x/tok.model: not a SentencePiece model"), std::string::npos) << e.what();
  }
  TokenizerTrainOptions o;
  o.vocab_size = 10;
  EXPECT_THROW(train_tokenizer(o, [](std::string*) { return false; }), Error);
}

}  // namespace
}  // namespace ft
