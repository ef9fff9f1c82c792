// agentr1 — native framework for training LLM agents with multi-turn RL.
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>

#include "agentr1/core/config.h"
#include "agentr1/core/log.h"
#include "blas_core.h"
#include "command.h"

namespace agentr1::cli {
std::vector<CommandSpec>& commands() {
  static std::vector<CommandSpec> c;
  return c;
}
}  // namespace agentr1::cli

int main(int argc, char** argv) {
  using namespace agentr1;
  cli::maybe_restart_for_blas(argv);  // may restart the process once (blas_core.h)
  // Keep freed tensor memory in the heap instead of returning it to the kernel after
  // every step: training allocates the same large buffers over and over, and glibc's
  // defaults (mmap for >= 128 KiB, trim at 128 KiB) made ~30% of SFT time page faults.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  CLI::App app{"agentr1: train language-model agents with multi-turn reinforcement learning"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug|info|warn|error|off")->capture_default_str();
  auto& specs = cli::commands();
  std::sort(specs.begin(), specs.end(),
            [](const cli::CommandSpec& a, const cli::CommandSpec& b) { return a.name < b.name; });
  std::map<CLI::App*, cli::RunFn> runs;
  for (auto& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.description);
    sub->fallthrough();
    runs[sub] = spec.setup(*sub);
  }
  std::string cmd_name = "agentr1";
  std::string cmd_name_suffix;
  // An unknown first word: name it and the nearest command (CLI11 would only say that a
  // subcommand is required).
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::string nearest, known;
    size_t best = static_cast<size_t>(-1);
    bool found = false;
    for (const auto& spec : specs) {
      found = found || spec.name == word;
      known += (known.empty() ? "" : ", ") + spec.name;
      const size_t d = edit_distance(word, spec.name);
      if (d < best) best = d, nearest = spec.name;
    }
    if (!found) {
      const std::string hint = best <= 2 ? "did you mean '" + nearest + "'? " : "";
      std::fprintf(stderr, "agentr1: error: unknown command '%s'; %scommands: %s (see --help)\n", word.c_str(),
                   hint.c_str(), known.c_str());
      return 2;
    }
  }
  // `launch`: everything from its command on goes to that command untouched.
  std::vector<const char*> args(argv, argv + argc);
  if (const int sep = cli::launch_separator_index(argc, argv); sep > 0) args.insert(args.begin() + sep, "--");
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "agentr1";
    for (auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    std::fprintf(stderr, "%s: error: %s (see --help)\n", where.c_str(), e.what());
    return 2;
  }
  try {
    // Data-parallel ranks other than 0 log warnings and errors only, unless asked.
    const char* rank = std::getenv("RANK");
    const char* world = std::getenv("WORLD_SIZE");
    const bool other_rank = rank != nullptr && world != nullptr && std::string(rank) != "0" && std::string(world) != "1";
    if (other_rank) cmd_name_suffix = std::string(" (rank ") + rank + ")";
    set_log_level(parse_log_level(other_rank && app.get_option("--log-level")->count() == 0 ? "warn" : log_level));
    for (auto* sub : app.get_subcommands()) {
      cmd_name = "agentr1 " + sub->get_name() + cmd_name_suffix;
      return runs.at(sub)();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", cmd_name.c_str(), e.what());
    return 1;
  }
  return 0;
}
