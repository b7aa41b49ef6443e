// fluxtrain config — prints the resolved configuration (or every key) without training.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "config/config.h"

namespace {

int run_config(int argc, char** argv) {
  CLI::App app{"Print the resolved configuration as JSON, or list every key"};
  std::string path;
  std::vector<std::string> sets;
  bool keys = false;
  app.add_option("--config", path, "TOML file");
  app.add_option("--set", sets, "override KEY=VALUE (repeatable)");
  app.add_flag("--keys", keys, "list every key with its default and meaning");
  FT_PARSE(app, argc, argv);
  if (keys) {
    std::fputs(ft::describe_config_keys().c_str(), stdout);
    return 0;
  }
  ft::Config cfg = ft::load_config(path, sets);
  for (const auto& n : cfg.config_notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  for (const auto& w : cfg.config_warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::printf("%s\n", cfg.to_json().dump(2).c_str());
  return 0;
}

ft::cli::Register register_config("config", "print the resolved configuration or list every key", run_config);

}  // namespace
