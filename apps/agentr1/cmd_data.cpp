// agentr1 data — datasets in their original formats -> the sample schema, and checks of
// sample files.
//
//   agentr1 data convert --from gsm8k test.jsonl data/gsm8k_test.jsonl --split test
//   agentr1 data convert --from hotpotqa hotpot_dev_distractor_v1.json data/hotpot_dev.jsonl --split test reward=f1
//   agentr1 data convert --from webshop items_shuffle.json data/webshop_test.jsonl --split test
//       attributes_file=items_ins_v2.json human_instructions_file=items_human_ins.json   (one line)
//   agentr1 data validate data/hotpot_dev.jsonl --task hotpotqa
//
// convert: the converters of tasks/data_convert.h (formats and options there); the output
// is JSONL in the sample schema, written to OUT.partial and renamed to OUT when complete
// (a failed conversion leaves no OUT). OUT must not exist unless --overwrite. The first
// bad row stops it ("agentr1 data: error: <file>:<line>: <rule>"); with --skip-bad-rows
// each bad row is a warning on stderr and counted. Prints a JSON summary on stdout:
// {"from", "in", "out", "split", "rows", "written", "bad_rows"}.
//
// validate: every row must parse as JSON and as a Sample; with --task, each row's agent,
// reward function and env (its tools, context policy and options: rollout.env_kwargs
// merged with the row's, as the trainer builds it, including the family's recipe
// defaults and any dotted overrides given) must resolve, as the trainer checks rows at
// start-up (flow::SampleChecker). The env is constructed with --model's tokenizer and
// chat template, or else a stand-in byte-level tokenizer and the Qwen3 template (the
// built-in model's). Prints every bad row as "<file>:<line>: <rule>", then a summary
// (rows, bad rows, data_source counts of the good rows); --json prints one JSON object
// instead. Exit code 1 when any row is bad or the file has no rows.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/flow/agent_env_loop.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/data_convert.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/bpe_trainer/bpe_trainer.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/train_config.h"
#include "command.h"

namespace {

namespace fs = std::filesystem;
using agentr1::Error;
using agentr1::json;
namespace tasks = agentr1::tasks;

struct ConvertArgs {
  std::string from;
  std::string in;
  std::string out;
  std::vector<std::string> kwargs;  // key=value format options
  std::string split = "train";
  std::string system_prompt;
  bool no_system_prompt = false;
  int64_t limit = 0;
  bool skip_bad_rows = false;
  bool overwrite = false;
  uint64_t seed = 0;
};

struct ValidateArgs {
  std::string file;
  std::string task;
  std::string model;
  std::vector<std::string> overrides;  // dotted train-config overrides
  bool json_out = false;
};

json parse_kwargs(const std::vector<std::string>& kv) {
  json out = json::object();
  for (const auto& a : kv) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("format option '" + a + "' is not key=value; write e.g. reward=f1");
    out[a.substr(0, eq)] = agentr1::parse_override_value(a.substr(eq + 1));
  }
  return out;
}

int run_convert(const ConvertArgs& a) {
  const tasks::DataFormat format = tasks::parse_data_format(a.from);
  tasks::ConvertOptions o;
  o.split = tasks::parse_data_split(a.split);
  o.limit = a.limit;
  o.skip_bad_rows = a.skip_bad_rows;
  o.seed = a.seed;
  o.kwargs = parse_kwargs(a.kwargs);
  if (a.no_system_prompt) o.use_system_prompt = false;
  if (!a.system_prompt.empty()) o.system_prompt = a.system_prompt;

  if (!fs::exists(a.in)) throw Error("input file '" + a.in + "' does not exist; check the path");
  if (fs::exists(a.out)) {
    if (fs::equivalent(a.in, a.out)) throw Error("OUT '" + a.out + "' is the input file; write to another path");
    if (fs::is_directory(a.out)) throw Error("OUT '" + a.out + "' is a directory; give a file path");
    if (!a.overwrite) throw Error("OUT '" + a.out + "' exists; pass --overwrite to replace it");
  }
  const std::string partial = a.out + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out.good()) throw Error("cannot open '" + partial + "' for writing; check that the directory exists");
  tasks::ConvertReport r;
  try {
    r = tasks::convert_dataset(format, a.in, o, [&](const agentr1::Sample& s) {
      out << s.to_json().dump() << '\n';
      if (!out.good()) throw Error("writing '" + partial + "' failed (disk full?)");
    });
    out.close();
    if (!out.good()) throw Error("writing '" + partial + "' failed (disk full?)");
    for (const tasks::RowError& e : r.errors) AGENTR1_LOG(WARN) << "skipped bad row " << e.describe(a.in);
    if (r.written == 0) {
      throw Error("no samples written from '" + a.in + "' (" + std::to_string(r.rows) + " rows read, " +
                  std::to_string(r.errors.size()) + " bad); nothing to train on");
    }
    fs::rename(partial, a.out);
  } catch (...) {
    std::error_code ec;
    fs::remove(partial, ec);
    throw;
  }
  const json summary = {{"from", tasks::data_format_name(format)},
                        {"in", a.in},
                        {"out", a.out},
                        {"split", tasks::data_split_name(o.split)},
                        {"rows", r.rows},
                        {"written", r.written},
                        {"bad_rows", static_cast<int64_t>(r.errors.size())}};
  std::cout << summary.dump() << "\n";
  return 0;
}

// The trainer's env setup needs a generator only for context policies that call the
// model (summarize); validation constructs envs and never generates.
class NoGenerator : public agentr1::Generator {
 public:
  explicit NoGenerator(int max_context) : max_context_(max_context) {}
  std::future<agentr1::GenResult> submit(agentr1::GenRequest) override {
    throw Error("agentr1 data validate does not generate");
  }
  int max_context() const override { return max_context_; }

 private:
  int max_context_;
};

// Everything the trainer's row check needs, built as the trainer builds it.
struct RowChecker {
  agentr1::train::TrainConfig cfg;
  std::unique_ptr<agentr1::text::Tokenizer> tokenizer;
  std::unique_ptr<agentr1::text::ChatTemplate> chat;
  std::unique_ptr<NoGenerator> generator;
  agentr1::flow::FlowContext ctx;
  std::unique_ptr<agentr1::flow::SampleChecker> checker;
};

// defaults < the family's recipe defaults < the overrides, with data.task = task.
agentr1::train::TrainConfig validate_config(const std::string& task, const std::vector<std::string>& overrides) {
  auto layered = [&](const std::vector<std::string>& family_defaults) {
    json tree = agentr1::train::default_train_tree();
    tree["data"]["task"] = task;
    for (const auto& d : family_defaults)
      agentr1::with_context("recipe default of task '" + task + "'", [&] {
        agentr1::apply_override(tree, d);
        return 0;
      });
    for (const auto& o : overrides) agentr1::apply_override(tree, o);
    tree["data"]["task"] = task;
    return tree;
  };
  const json first = layered({});
  const auto family = agentr1::with_context("--task", [&] {
    return tasks::make_task_family(task, first["data"].value("task_kwargs", json::object()));
  });
  return agentr1::train::load_train_config(layered(family->recipe_defaults()));
}

std::unique_ptr<RowChecker> make_row_checker(const ValidateArgs& a) {
  tasks::register_builtin_tasks();
  auto c = std::make_unique<RowChecker>();
  c->cfg = validate_config(a.task, a.overrides);
  const std::string model = a.model.empty() ? c->cfg.model.path : a.model;
  if (!model.empty()) {
    c->tokenizer = std::make_unique<agentr1::text::Tokenizer>(agentr1::with_context(
        "loading tokenizer from '" + model + "'", [&] { return agentr1::text::Tokenizer::load(model); }));
    c->chat = std::make_unique<agentr1::text::ChatTemplate>(agentr1::with_context("chat template of '" + model + "'", [&] {
      return agentr1::text::ChatTemplate::from_template_text(c->tokenizer->chat_template());
    }));
  } else {
    // A stand-in: the 256 byte tokens plus Qwen's special tokens (envs only need a
    // tokenizer to exist when they are constructed).
    agentr1::text::BpeTrainerOptions bo;
    bo.vocab_size = 256 + static_cast<int>(bo.special_tokens.size());
    const agentr1::LogLevel level = agentr1::log_level();
    if (level < agentr1::LogLevel::kWarn) agentr1::set_log_level(agentr1::LogLevel::kWarn);  // no training log line
    const json tok_json = agentr1::text::train_bpe({"x"}, bo);
    agentr1::set_log_level(level);
    c->tokenizer = std::make_unique<agentr1::text::Tokenizer>(agentr1::text::Tokenizer::from_json(
        tok_json, agentr1::text::make_tokenizer_config("", "<|im_end|>", "<|endoftext|>")));
    c->chat = std::make_unique<agentr1::text::ChatTemplate>(
        agentr1::text::ChatTemplate::for_family(agentr1::text::ChatFamily::kQwen3));
  }
  const agentr1::flow::FlowOptions& fo = c->cfg.rollout.flow;
  c->generator = std::make_unique<NoGenerator>(fo.max_prompt_tokens + fo.max_new_tokens);
  c->ctx.generator = c->generator.get();
  c->ctx.tokenizer = c->tokenizer.get();
  c->ctx.chat_template = c->chat.get();
  c->checker = std::make_unique<agentr1::flow::SampleChecker>(c->ctx, fo);
  return c;
}

int run_validate(const ValidateArgs& a) {
  std::unique_ptr<RowChecker> checker;
  if (!a.task.empty()) checker = make_row_checker(a);
  std::function<void(const agentr1::Sample&)> check;
  if (checker) check = [&](const agentr1::Sample& s) { checker->checker->check(s); };
  const tasks::SampleFileReport r = tasks::check_sample_file(a.file, check);
  if (a.json_out) {
    std::cout << r.to_json().dump() << "\n";
  } else {
    for (const tasks::RowError& e : r.errors) std::cout << e.describe(a.file) << "\n";
    std::string sources;
    for (const auto& [name, n] : r.data_sources)
      sources += (sources.empty() ? "" : ", ") + (name.empty() ? std::string("(none)") : name) + " " + std::to_string(n);
    std::cout << a.file << ": " << r.rows << " rows, " << r.errors.size() << " bad"
              << (r.rows == 0 ? " (no rows: not a data set)" : "") << (r.ok() ? ": OK" : "") << "\n";
    if (!sources.empty()) std::cout << "data_source: " << sources << "\n";
  }
  return r.ok() ? 0 : 1;
}

agentr1::cli::Registrar reg("data", "Convert datasets to the sample schema (JSONL) and validate sample files",
                            [](CLI::App& app) {
  app.require_subcommand(1);
  auto c = std::make_shared<ConvertArgs>();
  CLI::App* conv = app.add_subcommand(
      "convert",
      "IN (a dataset in its original format) -> OUT (JSONL in the sample schema). Formats: gsm8k (GSM8K's JSONL "
      "{question, answer '... #### 72'}), hotpotqa (HotpotQA's JSON array, e.g. hotpot_dev_distractor_v1.json, or "
      "its rows as JSONL; streamed), webshop (IN = WebShop's items_shuffle*.json; attributes_file=..., "
      "human_instructions_file=... as options; writes the split's goals). arithmetic and alfworld have no real "
      "format: their data is generated (alfworld's games by agentr1 itself; ALFWorld's game files are not read); "
      "use `agentr1 train` with data.task instead.");
  conv->add_option("--from", c->from, "source format: gsm8k | hotpotqa | webshop")->required();
  conv->add_option("in", c->in, "input file")->required();
  conv->add_option("out", c->out, "output JSONL file")->required();
  conv->add_option("options", c->kwargs,
                   "format options key=value: gsm8k use_calculator, instruction, data_source; hotpotqa its task "
                   "options (top_k, open_tool, reward=em|f1, corpus=distractor|global); webshop its task options "
                   "(attributes_file, human_instructions_file, num_products, split_by, step_limit, ...)");
  conv->add_option("--split", c->split, "train | test | any: extra_info.split (webshop: which goals)")
      ->check(CLI::IsMember({"train", "test", "any"}))
      ->capture_default_str();
  auto* sp = conv->add_option("--system-prompt", c->system_prompt, "replace the format's system prompt text");
  conv->add_flag("--no-system-prompt", c->no_system_prompt, "prompts without a system message")->excludes(sp);
  conv->add_option("--limit", c->limit, "write at most N samples (0 = all)")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  conv->add_flag("--skip-bad-rows", c->skip_bad_rows, "warn about and count bad rows instead of stopping at the first");
  conv->add_flag("--overwrite", c->overwrite, "replace OUT if it exists");
  conv->add_option("--seed", c->seed, "webshop: the order of its goals")->check(agentr1::cli::uint64_text());

  auto v = std::make_shared<ValidateArgs>();
  CLI::App* val = app.add_subcommand(
      "validate",
      "Check a sample file: every row parses as a Sample (all bad rows are reported with their line); with --task, "
      "each row's agent, reward and env (tools, context policy) resolve as the trainer checks them. Exit 1 when a "
      "row is bad.");
  val->add_option("file", v->file, "JSONL sample file")->required();
  agentr1::tasks::register_builtin_tasks();
  std::string families;
  for (const auto& n : agentr1::tasks::task_family_names()) families += (families.empty() ? "" : ", ") + n;
  val->add_option("--task", v->task, "task family whose recipe defaults apply (data.task): " + families);
  val->add_option("--model", v->model, "HF model dir whose tokenizer and chat template the envs are built with "
                                       "(default: model.path, else a stand-in with the Qwen3 template)");
  val->add_option("overrides", v->overrides, "with --task: dotted train-config overrides, e.g. "
                                             "++rollout.env_kwargs.tool_format=hermes");
  val->add_flag("--json", v->json_out, "print one JSON object");
  return [conv, c, v]() -> int {
    if (conv->parsed()) return run_convert(*c);
    if (!v->overrides.empty() && v->task.empty())
      throw Error("validate: config overrides need --task (they configure the row check of that task)");
    return run_validate(*v);
  };
});

}  // namespace
