// Text normalisation against Python's own codecs (bytes.decode("utf-8", "replace")) and
// unicodedata.normalize("NFC"), via Debian's /usr/bin/python3.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "data/prepare/text_normalize.h"
#include "data_test_util.h"

namespace ft {
namespace {

std::string run_python(const std::string& script, const std::string& input_path) {
  std::string cmd = "/usr/bin/python3 -c '" + script + "' " + input_path;
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return out;
}

TEST(TextNormalize, InvalidUtf8IsReplacedLikePython) {
  std::mt19937 rng(7);
  std::string dir = testing::scratch_dir("utf8");
  // Random bytes biased towards UTF-8 lead/continuation bytes, plus valid Cyrillic.
  std::vector<std::string> cases;
  const unsigned char pool[] = {0x41, 0x20, 0x80, 0xBF, 0xC0, 0xC2, 0xD0, 0xE0, 0xED,
                                0xA0, 0xEF, 0xF0, 0xF4, 0x90, 0x8F, 0xF5, 0xFF, 0x9F};
  for (int c = 0; c < 200; ++c) {
    std::string s = "Привет ";
    int len = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) s.push_back(static_cast<char>(pool[rng() % sizeof pool]));
    s += " мир";
    cases.push_back(s);
  }
  std::string blob;
  for (auto& s : cases) blob += std::to_string(s.size()) + "\n" + s;
  std::string path = dir + "/cases.bin";
  std::ofstream(path, std::ios::binary) << blob;
  // Python prints each case decoded with errors="replace", records separated by NUL.
  std::string py = run_python(
      "import sys\n"
      "d=open(sys.argv[1],\"rb\").read(); i=0; out=[]\n"
      "while i < len(d):\n"
      "  j=d.index(b\"\\n\", i); n=int(d[i:j]); s=d[j+1:j+1+n]; i=j+1+n\n"
      "  out.append(s.decode(\"utf-8\",\"replace\").encode(\"utf-8\"))\n"
      "sys.stdout.buffer.write(b\"\\0\".join(out))",
      path);
  std::vector<std::string> want;
  size_t pos = 0;
  while (true) {
    size_t z = py.find('\0', pos);
    want.push_back(py.substr(pos, z == std::string::npos ? std::string::npos : z - pos));
    if (z == std::string::npos) break;
    pos = z + 1;
  }
  ASSERT_EQ(want.size(), cases.size());
  uint64_t total_replaced = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    uint64_t replaced = 0;
    // Python keeps C0 controls; ours drops them, so compare on cases without them (the pool has none).
    EXPECT_EQ(sanitize_utf8(cases[i], &replaced), want[i]) << "case " << i;
    total_replaced += replaced;
  }
  EXPECT_GT(total_replaced, 100u);
}

TEST(TextNormalize, NfcMatchesPython) {
  std::string dir = testing::scratch_dir("nfc");
  // Decomposed é (e + U+0301), й (и + U+0306), Å as A + ring, ё decomposed, Hangul jamo.
  std::string text = "Cafe\xCC\x81 \xD0\xB8\xCC\x86 A\xCC\x8A \xD0\xB5\xCC\x88 \xE1\x84\x80\xE1\x85\xA1 ok";
  std::ofstream(dir + "/in.txt", std::ios::binary) << text;
  std::string want = run_python(
      "import sys,unicodedata\n"
      "sys.stdout.buffer.write(unicodedata.normalize(\"NFC\", open(sys.argv[1],encoding=\"utf-8\").read()).encode())",
      dir + "/in.txt");
  std::string got = to_nfc(text);
  EXPECT_EQ(got, want);
  EXPECT_NE(got, text);
  EXPECT_NE(got.find("й"), std::string::npos);
}

TEST(TextNormalize, Whitespace) {
  EXPECT_EQ(normalize_whitespace("  a  b\t\tc   \n\n\n\nd  \n"), "  a b c\n\nd");
  EXPECT_EQ(normalize_whitespace("\n\n  \nx\ny\n\n"), "x\ny");
  EXPECT_EQ(normalize_whitespace("   \n \t "), "");
  EXPECT_EQ(normalize_document("a\r\nb\rc\x01\x7f").text, "a\nb\nc");
}

TEST(TextNormalize, CountsAndLanguage) {
  EXPECT_EQ(count_code_points("Привет, world"), 13u);
  EXPECT_EQ(detect_language("The open() system call opens a file."), "en");
  EXPECT_EQ(detect_language("Системный вызов open() открывает файл, заданный в pathname."), "ru");
  EXPECT_EQ(detect_language("12345 ..."), "other");
}

}  // namespace
}  // namespace ft
