// agentr1 compare — Agent-R1's headline experiment: the training-free baseline and
// several RL algorithms (GRPO, PPO with a GAE critic, RLOO, REINFORCE++) on the same
// task, model, seeds and budget; writes a table and a plot of held-out accuracy.
#include <iostream>
#include <memory>
#include <sstream>

#include "agentr1/core/error.h"
#include "agentr1/train/compare.h"
#include "agentr1/train/train_config.h"
#include "command.h"
#include "train_setup.h"

namespace agentr1::cli {
namespace {

struct CompareArgs {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string methods = "grpo,ppo,rloo,reinforce_plus_plus";
  std::string out = "runs/compare";
  int steps = 0;
  bool no_plot = false;
  std::string chat_template;
};

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int run_compare(const CompareArgs& a) {
  using namespace agentr1::train;
  CompareOptions o;
  o.methods = split_csv(a.methods);
  o.out_dir = a.out;
  o.plot = !a.no_plot;
  for (const auto& m : o.methods) method_overrides(m);  // unknown names fail before any work
  std::vector<std::string> overrides = a.overrides;
  if (a.steps > 0) overrides.push_back("trainer.total_steps=" + std::to_string(a.steps));
  TrainTree resolved = resolve_train_tree(a.config_file, overrides, a.chat_template);
  CompareResult r = run_comparison(resolved.tree, o);
  std::cout << "\n" << format_comparison(r) << "\ntable: " << o.out_dir << "/comparison.md, plot: " << o.out_dir
            << "/val_accuracy.png, runs: " << o.out_dir << "/<method>/\n"
            << std::flush;
  return 0;
}

Registrar reg("compare", "baseline vs GRPO, PPO (GAE critic), RLOO, REINFORCE++ on one task: table + plot",
              [](CLI::App& app) {
                auto a = std::make_shared<CompareArgs>();
                std::string known;
                for (const auto& k : train::known_methods()) known += (known.empty() ? "" : ", ") + k;
                app.add_option("--methods", a->methods, "comma-separated methods; known: " + known)
                    ->capture_default_str();
                app.add_option("--out", a->out, "output directory (one run directory per method inside)")
                    ->capture_default_str();
                app.add_option("--steps", a->steps,
                               "RL steps per method (0 = trainer.total_steps); raise it for longer runs")
                    ->capture_default_str();
                app.add_option("--config", a->config_file, "YAML config shared by every method");
                app.add_flag("--no-plot", a->no_plot, "skip running gnuplot (the .dat and .gp files are still written)");
                app.add_option("--chat-template", a->chat_template,
                               "built-in default only: tokenizer_config.json holding the Qwen3 chat template");
                app.add_option("overrides", a->overrides,
                               "dotted overrides shared by every method, e.g. data.train_batch_size=8");
                app.footer("Example: agentr1 compare --methods grpo,rloo --steps 20 --out runs/cmp");
                return [a]() { return run_compare(*a); };
              });

}  // namespace
}  // namespace agentr1::cli
