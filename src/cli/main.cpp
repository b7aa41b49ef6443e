// fluxtrain — one binary, one TOML file. Subcommands live in cli/cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>

#include "cli/command.h"
#include "cli/device_plugins.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft::cli {
std::map<std::string, Command>& commands() {
  static std::map<std::string, Command> c;
  return c;
}
}  // namespace ft::cli

static void usage() {
  std::printf("fluxtrain — pretraining LLaMA-class models on many ranks\n\nusage: fluxtrain COMMAND [options]\n\n");
  for (auto& [name, c] : ft::cli::commands()) std::printf("  %-14s %s\n", name.c_str(), c.summary.c_str());
  std::printf("\nRun `fluxtrain COMMAND --help` for a command's options.\n");
}

int main(int argc, char** argv) {
  ft::cli::register_backends();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  auto& cmds = ft::cli::commands();
  auto it = cmds.find(argv[1]);
  if (it == cmds.end()) {
    std::vector<std::string> names;
    for (auto& [n, c] : cmds) names.push_back(n);
    std::fprintf(stderr, "error: unknown command '%s'\nhint: did you mean '%s'? (`fluxtrain --help` lists all)\n",
                 argv[1], ft::closest_match(argv[1], names).c_str());
    return 2;
  }
  try {
    return it->second.run(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    // --help and bad flags: CLI11 prints its own message.
    return e.get_exit_code() == 0 ? 0 : 2;
  } catch (const ft::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    if (!e.hint().empty()) std::fprintf(stderr, "hint: %s\n", e.hint().c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    // An allocation the machine cannot satisfy: say so in words, not as a C++ type name.
    std::fprintf(stderr,
                 "error: fluxtrain %s: out of memory (an allocation failed)\n"
                 "hint: check the sizes asked for (`fluxtrain train --dry-run --gpu cpu` shows a run's memory), "
                 "or run on a machine with more memory\n",
                 argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
