// Corpus extraction: turns input paths into raw documents for `fluxtrain prepare`.
//
// An input is a file, a directory (walked recursively, in sorted order) or a glob. By name:
//   *.txt, *.text  one document per file        *.md, *.markdown  one document per file
//   *.jsonl        one document per line, its "text" field
//   manual pages   NAME.SECTION[.gz] (e.g. ls.1, printf.3.gz): rendered by groff to UTF-8 text;
//                  ".so" alias pages are skipped (they only include another page)
// Other files inside a directory are skipped (counted, the first three named; an unreadable
// sub-directory is warned about by name); a file named explicitly with another
// extension is read as plain text.
//
//   auto files = expand_inputs({"docs/", "notes/*.md"});
//   for_each_document(files[0], [](const std::string& source, std::string&& text, uint64_t bad) { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ft {

enum class InputKind : uint8_t { kText, kMarkdown, kJsonl, kManPage };

struct InputFile {
  std::string path;
  InputKind kind = InputKind::kText;
  uint64_t bytes = 0;  // on disk
};

struct ExpandResult {
  std::vector<InputFile> files;
  uint64_t skipped = 0;                    // files in walked directories that are not text we read
  std::vector<std::string> skipped_names;  // the first kSkippedNamed of them
  std::vector<std::string> unreadable;     // sub-directories the walk could not enter (warned about)
  static constexpr size_t kSkippedNamed = 3;
  // "2 other files skipped: in/LICENSE, in/README" (then "and N more"); "0 other files skipped".
  std::string skipped_summary() const;
};

// Throws ft::Error naming the input when it does not exist or a glob matches nothing.
ExpandResult expand_inputs(const std::vector<std::string>& inputs);

// The built-in corpus: the manual pages installed by Debian's manpages, manpages-dev and
// manpages-ru packages (English and Russian), found through `dpkg-query -L`. Throws with an
// install hint when none is installed.
std::vector<std::string> default_corpus_inputs();

// Calls emit(source, raw_text, invalid_utf8) for each document of the file (source names the
// file, and the line for JSONL; invalid_utf8 counts bytes sequences already replaced while
// parsing JSONL). Throws ft::Error naming file:line for malformed JSONL.
using EmitDocument = std::function<void(const std::string& source, std::string&& text, uint64_t invalid_utf8)>;
void for_each_document(const InputFile& f, const EmitDocument& emit);

// Renders one manual page (plain or .gz roff) with groff to UTF-8 text without overstrikes or
// escape sequences, one paragraph per line; drops the running header and footer lines.
// Returns "" for ".so" alias pages.
std::string render_man_page(const std::string& path);

// A file that is not text: more than a tenth of its `file_bytes` are invalid UTF-8 or NUL
// (`not_text_bytes`). prepare and tokenizer training skip such files, naming each.
bool mostly_binary(uint64_t not_text_bytes, uint64_t file_bytes);
uint64_t count_nul_bytes(const std::string& s);

// Whole file, gunzipped when it ends in .gz.
std::string read_maybe_gz(const std::string& path);

}  // namespace ft
