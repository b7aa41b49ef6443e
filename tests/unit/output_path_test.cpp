// util/output_path: where commands may write (issue 14, "nothing lost").
#include "util/output_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data_test_util.h"
#include "util/error.h"

namespace ft {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& out, const OutputRule& r) {
  try {
    check_output_path(out, r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OutputPath, WithinResolvesDotsAndSymlinks) {
  std::string root = testing::scratch_dir("output_path_within");
  fs::create_directories(root + "/a/b");
  fs::create_directory_symlink(root + "/a", root + "/link");
  EXPECT_TRUE(path_within(root + "/a/b", root + "/a"));
  EXPECT_TRUE(path_within(root + "/a", root + "/a/"));
  EXPECT_TRUE(path_within(root + "/link/b/new", root + "/a"));  // through the link, not yet existing
  EXPECT_TRUE(path_within(root + "/a/b/../b", root + "/a/b"));
  EXPECT_FALSE(path_within(root + "/a", root + "/a/b"));
  EXPECT_FALSE(path_within(root + "/ab", root + "/a"));  // a prefix of the name is not a parent
}

TEST(OutputPath, RulesNameWhatIsWrong) {
  std::string root = testing::scratch_dir("output_path_rules");
  fs::create_directories(root + "/in");
  std::ofstream(root + "/in/a.txt") << "text";
  fs::create_directories(root + "/mine");
  std::ofstream(root + "/mine/manifest.json") << "{}";
  fs::create_directories(root + "/theirs");
  std::ofstream(root + "/theirs/x") << "x";
  fs::create_directories(root + "/empty");
  OutputRule r{.flag = "--out",
               .kind = "dataset",
               .inputs = {root + "/in"},
               .force = false,
               .is_ours = [](const std::string& p) { return fs::exists(p + "/manifest.json"); }};
  EXPECT_NE(error_of(root + "/in", r).find("is also an input"), std::string::npos);
  EXPECT_NE(error_of(root + "/in/sub", r).find("is inside the input"), std::string::npos);
  EXPECT_NE(error_of(root, r).find("contains the input"), std::string::npos);
  EXPECT_NE(error_of(root + "/mine", r).find("already holds a dataset"), std::string::npos);
  EXPECT_NE(error_of(root + "/theirs", r).find("already exists and is not a dataset"), std::string::npos);
  EXPECT_FALSE(check_output_path(root + "/new", r));
  EXPECT_TRUE(check_output_path(root + "/empty", r));
  r.force = true;
  EXPECT_TRUE(check_output_path(root + "/mine", r));
  EXPECT_NE(error_of(root + "/theirs", r).find("--force only replaces a dataset"), std::string::npos);
  r.inputs = {root + "/in/*.txt"};  // a glob: its directory part counts
  EXPECT_NE(error_of(root + "/in/out", r).find("is inside the input"), std::string::npos);
  r.inputs = {"s3://bucket/in"};  // not a local path
  EXPECT_FALSE(check_output_path(root + "/new", r));
}

TEST(OutputPath, RootIsAMountPoint) {
  EXPECT_TRUE(is_mount_point("/"));
  std::string root = testing::scratch_dir("output_path_mount");
  EXPECT_FALSE(is_mount_point(root));
}

}  // namespace
}  // namespace ft
