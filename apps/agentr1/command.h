// apps/agentr1/command.h — how a subcommand plugs into the CLI.
//
// Each subcommand lives in its own cmd_<name>.cpp and registers itself:
//
//   static agentr1::cli::Registrar reg("tokenize", "Text <-> token ids", [](CLI::App& app) {
//     auto opts = std::make_shared<Opts>();
//     app.add_option("--tokenizer", opts->dir, "...")->required();
//     return [opts]() -> int { ...; return 0; };     // run: exit code
//   });
//
// Errors: throw agentr1::Error; main prints "agentr1 <cmd>: error: <message>" as one
// line on stderr and exits 1. Results go to stdout, logs to stderr.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace agentr1::cli {

using RunFn = std::function<int()>;
using SetupFn = std::function<RunFn(CLI::App&)>;

struct CommandSpec {
  std::string name;
  std::string description;
  SetupFn setup;
};

std::vector<CommandSpec>& commands();

struct Registrar {
  Registrar(std::string name, std::string description, SetupFn setup) {
    commands().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

// Sets the torch/OpenMP thread count (0 = all cores) for commands that use torch.
void set_threads(int n);

}  // namespace agentr1::cli
