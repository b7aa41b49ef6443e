// Subcommands register themselves; main() dispatches on argv[1].
//
//   // cli/cmd_hello.cpp
//   static int run_hello(int argc, char** argv) {
//     CLI::App app{"say hello"};
//     app.add_option("--times", n, "how often")->check(ft::cli::at_least(1));
//     FT_PARSE(app, argc, argv);   // --help: prints it, returns 0; bad flags: ft::Error
//     ... return 0;
//   }
//   static ft::cli::Register register_hello("hello", "say hello", run_hello);  // unique: unity builds
//
// A command receives argv starting at its own name and returns the exit code. ft::Error
// thrown out of it is printed by main() as "error: ..." plus "hint: ...", exit code 2 — command-line
// mistakes (an unknown flag, a missing required one, a value out of range) included.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace ft::cli {

using CommandFn = std::function<int(int argc, char** argv)>;

struct Command {
  std::string summary;
  CommandFn run;
};

std::map<std::string, Command>& commands();

struct Register {
  Register(const std::string& name, const std::string& summary, CommandFn fn) {
    commands()[name] = Command{summary, std::move(fn)};
  }
};

// Parses the command line. --help: prints the help and returns 0 (the command returns it). A
// parse error throws ft::Error naming the command and the flag, with `--help` as the hint.
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// A validator for integer options: the value must be >= lo ("--nodes 0: must be at least 1").
CLI::Validator at_least(int64_t lo);

}  // namespace ft::cli

#define FT_PARSE(app, argc, argv)                                                          \
  do {                                                                                     \
    if (auto ft_parse_rc_ = ::ft::cli::parse((app), (argc), (argv))) return *ft_parse_rc_; \
  } while (0)
