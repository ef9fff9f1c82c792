// agentr1 train — the RL loop (GRPO). With no arguments: the built-in default
// (tokenizer + small Qwen3 model trained by SFT, then GRPO on the calculator task).
// Ctrl-C / SIGTERM stop after the current step with a checkpoint (exit 130 / 143);
// a run directory that holds a run needs --resume or --overwrite.
#include <iostream>
#include <memory>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/train_config.h"
#include "command.h"
#include "stop_signals.h"
#include "train_setup.h"

namespace agentr1::cli {
namespace {

struct TrainArgs {
  std::string config_file;
  std::vector<std::string> overrides;
  bool resume = false;
  bool overwrite = false;
  bool help_config = false;
  std::string chat_template;
};

int run_train(const TrainArgs& a) {
  using namespace agentr1::train;
  if (a.help_config) {
    std::cout << describe_config(TrainConfig{});
    return 0;
  }
  TrainTree resolved = resolve_train_tree(a.config_file, a.overrides, a.chat_template);
  json& tree = resolved.tree;
  if (resolved.builtin_model) {
    const json& t = tree["trainer"];
    if (t["run_name"].get<std::string>().empty() && t["output_dir"].get<std::string>().empty())
      tree["trainer"]["run_name"] = "default";
  }
  TrainConfig cfg = load_train_config(tree);
  RLTrainer trainer(cfg, tree);
  trainer.set_stop_flag(install_stop_signals());
  RunSummary s;
  try {
    s = trainer.run(a.resume ? RunMode::kResume : a.overwrite ? RunMode::kOverwrite : RunMode::kFresh);
  } catch (const StopRequested& e) {
    if (ProcessGroup* pg = trainer.process_group(); pg == nullptr || pg->rank() == 0)
      std::cerr << "agentr1 train: " << e.what() << "\n";
    return stop_exit_code();
  } catch (const std::exception& e) {
    // Data parallel: the other ranks name this rank and its error when they fail.
    if (ProcessGroup* pg = trainer.process_group()) pg->report_failure(e.what());
    throw;
  }
  // Data parallel: rank 0 reports (every rank holds the same result).
  if (ProcessGroup* pg = trainer.process_group(); pg != nullptr && pg->rank() != 0) return 0;
  std::cout << "\nrun: " << s.run_dir << "  (" << s.steps << " steps, " << static_cast<int>(s.wall_s)
            << " s)\n"
            << format_before_after(s.baseline, s.final_eval) << std::flush;
  return 0;
}

Registrar reg("train", "RL training (GRPO) of a tool-using agent; no arguments = built-in default",
              [](CLI::App& app) {
                auto a = std::make_shared<TrainArgs>();
                app.add_option("--config", a->config_file, "YAML config (keys as in --help-config)");
                CLI::Option* resume =
                    app.add_flag("--resume", a->resume, "continue from the last checkpoint of the run directory");
                app.add_flag("--overwrite", a->overwrite,
                             "start over in a run directory that holds an earlier run (its logs, dumps and "
                             "checkpoints are removed first)")
                    ->excludes(resume);
                app.add_flag("--help-config", a->help_config, "print every config key with its default and doc");
                app.add_option("--chat-template", a->chat_template,
                               "built-in default only: tokenizer_config.json holding the Qwen3 chat template "
                               "(default: qwen3_tokenizer_config.json in the data dir)");
                app.add_option("overrides", a->overrides, "dotted overrides, e.g. rollout.n=8 actor.optim.lr=1e-4");
                app.footer("Example: agentr1 train trainer.total_steps=10 data.train_batch_size=8 rollout.n=4");
                return [a]() { return run_train(*a); };
              });

}  // namespace
}  // namespace agentr1::cli
