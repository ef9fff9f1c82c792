#include "agentr1/tasks/hotpotqa/hotpotqa_family.h"

#include <filesystem>
#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/env/tool.h"
#include "agentr1/tasks/game_demo.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_search.h"
#include "agentr1/tasks/play.h"
#include "agentr1/tasks/reward.h"

namespace agentr1::tasks {

const char* const kHotpotSystemPrompt =
    "Answer the question with the help of the search tool. A search returns the best-matching passages of a "
    "knowledge base, each as Doc i(Title: ...) text. Search for one name or title at a time and use what you find "
    "in the next search. When you know the answer, write it inside <answer> and </answer>, without explanation. "
    "For example: <answer> Beijing </answer>.";
const char* const kHotpotOpenToolHint = " To read a whole passage, call the open tool with its title.";

namespace {

json corpus_kwargs(const json& corpus_entry, int top_k) {
  json k = corpus_entry;
  k["top_k"] = top_k;
  return k;
}

// env_kwargs for a corpus given as {"docs": ...} or {"corpus_file": ...}.
json tool_env_kwargs(const json& corpus_entry, const HotpotFamilyOptions& o) {
  json tools = json::array({"search"});
  json kw = json::object();
  kw["search"] = corpus_kwargs(corpus_entry, o.top_k);
  if (o.open_tool) {
    tools.push_back("open");
    kw["open"] = corpus_entry;
  }
  return {{"tools", tools}, {"tool_kwargs", kw}};
}

json tools_schema(const Sample& s) {
  json out = json::array();
  for (const json& name : s.env_kwargs.at("tools")) {
    const std::string n = name.get<std::string>();
    out.push_back(env::make_tool(n, s.env_kwargs.at("tool_kwargs").value(n, json::object()))->schema());
  }
  return out;
}

std::string first_answer(const json& ground_truth) {
  if (ground_truth.is_array() && !ground_truth.empty() && ground_truth[0].is_string())
    return ground_truth[0].get<std::string>();
  AGENTR1_CHECK(ground_truth.is_string(), "hotpotqa expert: ground truth must be a string or an array of strings, got "
                                              << ground_truth.dump());
  return ground_truth.get<std::string>();
}

const json& sample_hops(const Sample& s) {
  AGENTR1_CHECK(s.extra_info.contains("hops") && s.extra_info["hops"].is_array() && !s.extra_info["hops"].empty(),
                "hotpotqa expert: sample has no extra_info.hops (a list of {query, title}); got extra_info "
                    << s.extra_info.dump() << ". HINT: only samples made by the hotpotqa family have an expert");
  return s.extra_info["hops"];
}

}  // namespace

void HotpotFamilyOptions::validate() const {
  KbOptions k;
  k.min_level = min_level;
  k.max_level = max_level;
  k.distractors = distractors;
  k.validate();
  AGENTR1_CHECK(top_k >= 1 && top_k <= 100, "hotpotqa task option 'top_k' must be in 1..100 (passages per search), got "
                                                << top_k);
}

HotpotFamilyOptions HotpotFamilyOptions::from_json(const json& kw) {
  return bind_config<HotpotFamilyOptions>(json{{"data", {{"task_kwargs", kw}}}}, "data.task_kwargs");
}

json HotpotFamilyOptions::to_json() const { return config_to_json(*this); }

json hotpot_prompt_messages(const std::string& question, const HotpotFamilyOptions& opts) {
  json msgs = json::array();
  if (opts.use_system_prompt) {
    std::string sys = kHotpotSystemPrompt;
    if (opts.open_tool) sys += kHotpotOpenToolHint;
    msgs.push_back({{"role", "system"}, {"content", sys}});
  }
  msgs.push_back({{"role", "user"}, {"content", "Question: " + question}});
  return msgs;
}

Sample kb_question_to_sample(const KbQuestion& q, DataSplit split, const HotpotFamilyOptions& opts) {
  Sample s;
  s.prompt = hotpot_prompt_messages(q.question, opts);
  s.agent_name = "tool";
  s.reward_style = qa_metric_name(opts.reward);
  s.ground_truth = q.answer;
  s.env_kwargs = tool_env_kwargs({{"docs", passages_to_json(q.docs)}}, opts);
  s.data_source = "hotpotqa";
  s.extra_info = kb_question_info(q);
  s.extra_info["index"] = q.index;
  s.extra_info["seed"] = q.seed;
  s.extra_info["split"] = data_split_name(split);
  s.extra_info["question"] = q.question;
  return s;
}

Sample hotpot_example_to_sample(const HotpotExample& ex, int64_t index, DataSplit split, const std::string& file,
                                const HotpotFamilyOptions& opts) {
  Sample s;
  s.prompt = hotpot_prompt_messages(ex.question, opts);
  s.agent_name = "tool";
  s.reward_style = qa_metric_name(opts.reward);
  s.ground_truth = ex.answer;
  const json corpus = opts.corpus == HotpotCorpus::kGlobal ? json{{"corpus_file", file}}
                                                           : json{{"docs", passages_to_json(context_passages(ex))}};
  s.env_kwargs = tool_env_kwargs(corpus, opts);
  s.data_source = "hotpotqa";
  json hops = json::array();
  for (const std::string& t : supporting_titles(ex)) hops.push_back({{"query", t}, {"title", t}, {"found", ""}});
  json facts = json::array();
  for (const auto& [t, i] : ex.supporting_facts) facts.push_back(json::array({t, i}));
  s.extra_info = {{"id", ex.id},         {"type", ex.type},     {"level", ex.level},
                  {"hops", hops},        {"supporting_facts", facts}, {"index", index},
                  {"split", data_split_name(split)}, {"question", ex.question}, {"source_file", file}};
  return s;
}

std::vector<json> hotpot_expert_calls(const Sample& sample) {
  std::vector<json> calls;
  for (const json& h : sample_hops(sample)) {
    AGENTR1_CHECK(h.is_object() && h.contains("query") && h["query"].is_string(),
                  "hotpotqa expert: each extra_info.hops entry needs a string 'query', got " << h.dump());
    calls.push_back({{"name", "search"}, {"arguments", {{"query", h["query"]}}}});
  }
  return calls;
}

json hotpot_expert_messages(const Sample& sample) {
  const json& hops = sample_hops(sample);
  const std::vector<json> calls = hotpot_expert_calls(sample);
  auto search = env::make_tool("search", sample.env_kwargs.at("tool_kwargs").at("search"));
  json msgs = sample.prompt;
  for (size_t i = 0; i < calls.size(); ++i) {
    const env::ToolResult r = search->execute(calls[i]["arguments"]);
    const std::string title = hops[i].value("title", "");
    const std::string found = hops[i].value("found", "");
    bool hit = false;
    for (const json& t : r.info.value("titles", json::array())) hit = hit || t == title;
    AGENTR1_CHECK(hit, "hotpotqa expert: searching '" << calls[i]["arguments"]["query"].get<std::string>()
                                                      << "' did not return the passage '" << title << "'; got: "
                                                      << r.text);
    AGENTR1_CHECK(found.empty() || r.text.find(found) != std::string::npos,
                  "hotpotqa expert: the results for '" << calls[i]["arguments"]["query"].get<std::string>()
                                                       << "' do not contain '" << found << "'");
    json call = {{"type", "function"}, {"function", calls[i]}};
    msgs.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}});
    msgs.push_back({{"role", "tool"}, {"content", r.text}});
  }
  msgs.push_back({{"role", "assistant"}, {"content", "<answer>" + first_answer(sample.ground_truth) + "</answer>"}});
  return msgs;
}

HotpotFamily::HotpotFamily(HotpotFamilyOptions opts) : opts_(std::move(opts)) { opts_.validate(); }

std::vector<Sample> HotpotFamily::make_dataset(DataSplit split, int64_t n, uint64_t seed) const {
  AGENTR1_CHECK(n >= 0, "hotpotqa make_dataset: n must be >= 0, got " << n);
  std::vector<Sample> out;
  if (opts_.uses_files()) {
    const bool train = split == DataSplit::kTrain || (split == DataSplit::kAny && !opts_.train_file.empty());
    const std::string& file = train ? opts_.train_file : opts_.test_file;
    AGENTR1_CHECK(!file.empty(), "hotpotqa: the " << data_split_name(split) << " split reads "
                                                  << (train ? "train_file" : "test_file")
                                                  << ", which is not set (the other file is). HINT: set both "
                                                     "train_file and test_file, or neither to generate questions");
    const std::vector<HotpotExample> rows = load_hotpot_file(file);
    // Absolute, so that a global-corpus sample written to JSONL plays the same from any directory.
    const std::string abs_file = std::filesystem::absolute(file).lexically_normal().string();
    if (static_cast<size_t>(n) > rows.size()) {
      AGENTR1_LOG(WARN) << "hotpotqa: asked for " << n << " " << data_split_name(split) << " samples but '" << file
                        << "' has " << rows.size() << " rows; using all of them";
    }
    const size_t m = std::min(rows.size(), static_cast<size_t>(n));
    for (size_t i = 0; i < m; ++i)
      out.push_back(hotpot_example_to_sample(rows[i], static_cast<int64_t>(i), split, abs_file, opts_));
    return out;
  }
  KbOptions k;
  k.min_level = opts_.min_level;
  k.max_level = opts_.max_level;
  k.distractors = opts_.distractors;
  k.split = split;
  for (int64_t i = 0; i < n; ++i) out.push_back(kb_question_to_sample(generate_kb_question(seed, i, k), split, opts_));
  return out;
}

std::vector<json> HotpotFamily::demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                               const std::string& end_of_turn,
                                               std::vector<std::string>* rendered) const {
  AGENTR1_CHECK(n >= 0, "hotpotqa demonstrations: n must be >= 0, got " << n);
  text::RenderOptions ro;
  ro.enable_thinking = false;
  std::vector<json> demos;
  int64_t skipped = 0;
  for (const Sample& s : make_dataset(DataSplit::kTrain, n, seed)) {
    json msgs;
    if (opts_.uses_files()) {
      try {
        msgs = hotpot_expert_messages(s);
      } catch (const Error&) {
        ++skipped;
        continue;
      }
    } else {
      msgs = hotpot_expert_messages(s);
    }
    if (rendered != nullptr) rendered->push_back(tmpl.render(msgs, tools_schema(s), /*add_generation_prompt=*/false, ro));
    json actions = json::array();
    for (const json& m : msgs) {
      if (m["role"] == "assistant") actions.push_back(assistant_action_text(m, end_of_turn));
    }
    demos.push_back({{"sample", s.to_json()}, {"actions", actions}});
  }
  if (skipped > 0) {
    AGENTR1_LOG(WARN) << "hotpotqa demonstrations: skipped " << skipped << " of " << n
                      << " file rows whose supporting passages the expert's searches do not retrieve";
  }
  return demos;
}

std::vector<std::string> HotpotFamily::recipe_defaults() const {
  const int steps = opts_.uses_files() ? 4 : opts_.max_level + 2;
  return {"rollout.max_steps=" + std::to_string(steps), "rollout.max_new_tokens=128"};
}

std::unique_ptr<PlayEpisode> HotpotFamily::play_episode(const Sample& sample) const {
  std::vector<std::string> actions;
  for (const json& c : hotpot_expert_calls(sample)) actions.push_back(c.dump());
  actions.push_back("<answer>" + first_answer(sample.ground_truth) + "</answer>");
  return make_tool_episode(sample, std::move(actions));
}

void register_hotpotqa_family() {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_tool("search", [](const json& kwargs) -> std::unique_ptr<env::Tool> {
      return std::make_unique<SearchTool>(CorpusToolOptions::from_json(kwargs, "search"));
    });
    env::register_tool("open", [](const json& kwargs) -> std::unique_ptr<env::Tool> {
      return std::make_unique<OpenTool>(CorpusToolOptions::from_json(kwargs, "open"));
    });
    for (QaMetric m : {QaMetric::kExactMatch, QaMetric::kF1}) {
      register_reward_fn(qa_metric_name(m), [m](const json& kwargs) -> RewardFn {
        AGENTR1_CHECK(kwargs.is_null() || (kwargs.is_object() && kwargs.empty()),
                      "reward function '" << qa_metric_name(m) << "' takes no options, got " << kwargs.dump());
        return [m](const std::string& response, const json& ground_truth, const json&) {
          return static_cast<float>(score_answer(response, ground_truth, m));
        };
      });
    }
    register_task_family("hotpotqa", [](const json& kwargs) -> std::unique_ptr<TaskFamily> {
      return std::make_unique<HotpotFamily>(HotpotFamilyOptions::from_json(kwargs));
    });
  });
}

}  // namespace agentr1::tasks

namespace agentr1::config_detail {

void Codec<tasks::QaMetric>::read(const json& v, tasks::QaMetric& out, const std::string& key, BindContext& ctx) {
  if (!v.is_string()) {
    ctx.errors.push_back(type_error(key, "\"em\" (exact match) or \"f1\" (token F1)", v));
    return;
  }
  try {
    out = tasks::parse_qa_metric(v.get<std::string>());
  } catch (const std::exception& e) {
    ctx.errors.push_back(key + ": " + e.what());
  }
}

json Codec<tasks::QaMetric>::write(const tasks::QaMetric& x) { return tasks::qa_metric_name(x); }

void Codec<tasks::HotpotCorpus>::read(const json& v, tasks::HotpotCorpus& out, const std::string& key,
                                      BindContext& ctx) {
  if (v.is_string() && (v == "distractor" || v == "global")) {
    out = v == "global" ? tasks::HotpotCorpus::kGlobal : tasks::HotpotCorpus::kDistractor;
    return;
  }
  ctx.errors.push_back(type_error(key,
                                  "\"distractor\" (each question's own context) or \"global\" (all contexts of "
                                  "the file)",
                                  v));
}

json Codec<tasks::HotpotCorpus>::write(const tasks::HotpotCorpus& x) {
  return x == tasks::HotpotCorpus::kGlobal ? "global" : "distractor";
}

}  // namespace agentr1::config_detail
