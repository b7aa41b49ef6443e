#include "cli/command.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ft::cli {

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    std::string what = e.what();
    if (!what.empty() && what.back() == '\n') what.pop_back();
    throw Error(fmt::format("fluxtrain {}: {}", argc > 0 ? argv[0] : "", what),
                fmt::format("`fluxtrain {} --help` lists the options", argc > 0 ? argv[0] : ""));
  }
}

CLI::Validator at_least(int64_t lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        try {
          size_t used = 0;
          long long v = std::stoll(s, &used);
          if (used == s.size() && v >= lo) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("{} is not valid: expected an integer >= {}", s, lo);
      },
      fmt::format("INT>={}", lo));
}

}  // namespace ft::cli
