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
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "agentr1/core/strings.h"

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

// `agentr1 launch [options] <command> ...`: the index of <command> in argv, where main()
// inserts "--" so that the command's own options reach it untouched; -1 otherwise.
int launch_separator_index(int argc, const char* const* argv);

// "a,b,,c" -> {"a", "b", "c"} (list flags such as --methods).
inline std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Validator of an unsigned 64-bit option (seeds): plain decimal digits that fit, so that
// "--seed 1e5", "-3" or a 309-digit number is an error naming the value instead of a
// silently converted one.
inline CLI::Validator uint64_text() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::string max = "18446744073709551615";
        const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
        std::string t = s.substr(0, std::min(s.find_first_not_of('0') == std::string::npos ? s.size() - 1
                                                                                           : s.find_first_not_of('0'),
                                             s.size()));
        const std::string v = digits ? s.substr(t.size()) : s;
        if (!digits || v.size() > max.size() || (v.size() == max.size() && v > max))
          return "must be an integer in 0.." + max + ", got '" + (s.size() > 40 ? s.substr(0, 40) + "...'" : s + "'");
        return "";
      },
      "UINT64");
}

// Sets the torch/OpenMP thread count (0 = all cores) for commands that use torch.
void set_threads(int n);

}  // namespace agentr1::cli
