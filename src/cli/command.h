// Subcommands register themselves; main() dispatches on argv[1].
//
//   // cli/cmd_hello.cpp
//   static int run_hello(int argc, char** argv) { ... return 0; }
//   static ft::cli::Register reg("hello", "say hello", run_hello);
//
// A command receives argv starting at its own name and returns the exit code. ft::Error
// thrown out of it is printed by main() as "error: ..." plus "hint: ...", exit code 2.
#pragma once

#include <functional>
#include <map>
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

}  // namespace ft::cli
