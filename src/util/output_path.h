// Where a command writes: checked before any work, so that nothing a user has is lost.
//
//   OutputRule rule{.flag = "--out", .kind = "dataset", .inputs = opt.inputs, .force = opt.force,
//                   .is_ours = [](const std::string& p) { return looks_like_dataset(p); }};
//   bool replacing = check_output_path(out, rule);   // ft::Error when the output may not go there
//
// The rules (issue 14, "nothing lost"):
//   - an output that is an input, lies inside one, or contains one is refused;
//   - an existing output is refused unless --force, and --force replaces only the command's own kind
//     of output (a dataset, a tokenizer model, ...): never a directory of other files;
//   - an output that must be renamed into place cannot be a mount point (`rename` cannot replace it)
//     — said before the work, not after it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ft {

struct OutputRule {
  std::string flag;                                 // how the user named the output: "--out"
  std::string kind;                                 // what the command writes: "dataset", "tokenizer model"
  std::vector<std::string> inputs;                  // what it reads: files, directories, globs (s3:// ignored)
  bool force = false;                               // --force given
  std::function<bool(const std::string&)> is_ours;  // an existing output --force may replace
  bool renamed_into_place = false;                  // built beside the output and renamed over it
  // A regenerable file (a report, a calibration, an oracle dump): one of its own kind is replaced
  // without --force; anything else at that path is refused all the same.
  bool replaces_own = false;
};

// Returns whether `out` exists (and, the rules passed, will be replaced). Throws ft::Error naming
// the output, the rule and what to do instead.
bool check_output_path(const std::string& out, const OutputRule& rule);

// Only the first rule: `out` is not one of `inputs`, inside one, or holding one.
void check_not_an_input(const std::string& out, const std::vector<std::string>& inputs, const std::string& flag,
                        const std::string& kind);

// `inner` is `outer` or lies below it (after resolving ".", "..", symbolic links of the part that exists).
bool path_within(const std::string& inner, const std::string& outer);

// Whether the file at `path` begins with `prefix` (false when it cannot be read).
bool file_starts_with(const std::string& path, const std::string& prefix);

// A directory another file system is mounted on (its device differs from its parent's).
bool is_mount_point(const std::string& dir);

}  // namespace ft
