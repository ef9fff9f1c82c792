#include "agentr1/tasks/paper_search/paper_family.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/rng.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/tasks/dataset.h"
#include "agentr1/tasks/game_demo.h"
#include "agentr1/tasks/paper_search/paper_env.h"
#include "agentr1/tasks/paper_search/paper_pool.h"
#include "agentr1/tasks/play.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::tasks {

const char* const kPaperSystemPrompt =
    "Find the papers that answer the query. Call search with keywords to look up papers by title and abstract, "
    "and expand with a paper id to list the papers citing it and the papers it cites. You may make up to {calls} "
    "calls at once. Relevant papers are kept in the paper pool, best first. Do not repeat a query or expand a paper "
    "twice. When the pool holds every paper the query asks for, answer Done.";

void PaperFamilyOptions::validate() const {
  // The environment's keys first, so an error names the family's key (top_k, not the
  // generator's search_top_k).
  PaperSearchEnvOptions::from_json(env_kwargs()).validate();
  world().validate();
  AGENTR1_CHECK(min_level >= 1 && min_level <= 3 && max_level >= min_level && max_level <= 3,
                "paper_search options 'min_level' and 'max_level' must satisfy 1 <= min_level <= max_level <= 3, got "
                    << min_level << " and " << max_level);
  AGENTR1_CHECK(max_pool >= 1, "paper_search option 'max_pool' must be >= 1, got " << max_pool);
  AGENTR1_CHECK(max_words >= 0, "paper_search option 'max_words' must be >= 0, got " << max_words);
  const bool any = !corpus_file.empty() || !train_file.empty() || !test_file.empty();
  AGENTR1_CHECK(!any || (!corpus_file.empty() && !train_file.empty() && !test_file.empty()),
                "paper_search options 'corpus_file', 'train_file' and 'test_file' go together (a corpus and its "
                "query files); got corpus_file='"
                    << corpus_file << "', train_file='" << train_file << "', test_file='" << test_file << "'");
}

PaperFamilyOptions PaperFamilyOptions::from_json(const json& kw) {
  return bind_config<PaperFamilyOptions>(json{{"data", {{"task_kwargs", kw}}}}, "data.task_kwargs");
}

PaperWorldOptions PaperFamilyOptions::world() const {
  PaperWorldOptions w;
  w.seed = seed;
  w.methods = methods;
  w.tasks_per_method = tasks_per_method;
  w.search_top_k = top_k;
  w.expand_limit = expand_limit;
  w.max_calls_per_step = max_calls_per_step;
  return w;
}

json PaperFamilyOptions::env_kwargs() const {
  json corpus = uses_files() ? json{{"file", std::filesystem::absolute(corpus_file).lexically_normal().string()}}
                             : json{{"generated", world().to_json()}};
  return {{"corpus", corpus},
          {"top_k", top_k},
          {"expand_limit", expand_limit},
          {"max_calls_per_step", max_calls_per_step},
          {"call_cost", call_cost},
          {"repeat_cost", repeat_cost},
          {"reward_top", reward_top},
          {"keep_threshold", keep_threshold},
          {"recall_weight", recall_weight},
          {"selector", selector},
          {"context", {{"type", "paper_pool"}, {"max_pool", max_pool}, {"max_words", max_words}}}};
}

namespace {

std::string fold_title(const std::string& t) {
  std::string out;
  for (char c : t)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

json prompt_messages(const std::string& question, const PaperFamilyOptions& o) {
  json m = json::array();
  if (o.use_system_prompt) {
    std::string sys = kPaperSystemPrompt;
    sys.replace(sys.find("{calls}"), 7, std::to_string(o.max_calls_per_step));
    m.push_back({{"role", "system"}, {"content", sys}});
  }
  m.push_back({{"role", "user"}, {"content", "Query: " + question}});
  return m;
}

Sample query_sample(const ScholarQuery& q, int64_t index, const PaperFamilyOptions& o) {
  Sample s;
  s.prompt = prompt_messages(q.question, o);
  s.agent_name = "paper_search";
  s.data_source = "paper_search";
  s.reward_style = "env";
  s.ground_truth = q.gold;
  s.env_kwargs = o.env_kwargs();
  s.extra_info = {{"question", q.question}, {"level", q.level}, {"plan", q.plan}, {"query_id", q.id},
                  {"split", data_split_name(q.split)}, {"index", index}};
  return s;
}

const json& sample_plan(const Sample& s) {
  AGENTR1_CHECK(s.extra_info.is_object() && s.extra_info.contains("plan") && s.extra_info["plan"].is_array() &&
                    !s.extra_info["plan"].empty(),
                "paper_search expert: the sample has no extra_info.plan (only generated queries have an expert "
                "plan); query " << s.extra_info.value("query_id", "?"));
  return s.extra_info["plan"];
}

std::string hermes_calls(const json& step) {
  json msg = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array()}};
  for (const json& c : step) msg["tool_calls"].push_back({{"type", "function"}, {"function", c}});
  return assistant_action_text(msg, "");
}

// agentr1 play: calls as JSON or hermes markup; observations are the pool messages.
class PaperEpisode : public PlayEpisode {
 public:
  PaperEpisode(Sample sample, PaperSearchEnvOptions opts)
      : sample_(std::move(sample)), opts_(std::move(opts)), format_(text::make_tool_format("hermes")) {
    corpus_ = paper_corpus_for(opts_.corpus);
    selector_ = make_paper_selector(opts_.selector);
    const json plan = sample_.extra_info.is_object() ? sample_.extra_info.value("plan", json()) : json();
    if (plan.is_array() && !plan.empty()) {  // generated queries; file queries have no expert
      for (const json& step : plan) expert_.push_back(hermes_calls(step));
      expert_.push_back("Done.");
    }
    pool_opts_ = context_pool_options(opts_.context);
  }
  json reset() override {
    session_ = std::make_unique<PaperSearchSession>(*corpus_, *selector_, opts_, pool_opts_.max_pool,
                                                    paper_question(sample_), paper_gold(sample_));
    messages_ = json::array();
    emitted_ = 0;
    done_ = false;
    next_ = 0;
    return {{"observation", paper_question(sample_)}, {"info", {{"tools", {"search", "expand"}}}}};
  }
  json step(const std::string& action) override {
    AGENTR1_CHECK(session_ && !done_, "play: step before reset or after the episode ended");
    ++next_;
    std::vector<text::ToolCall> calls;
    std::vector<text::ToolCallError> errors;
    const json as_json = json::parse(action, nullptr, /*allow_exceptions=*/false);
    const json list = as_json.is_array() ? as_json : json::array({as_json});
    bool all_calls = !list.empty();
    for (const json& c : list) all_calls = all_calls && c.is_object() && c.contains("name") && c["name"].is_string();
    if (all_calls) {  // {"name": ..., "arguments": {...}} or a list of them
      for (const json& c : list) {
        text::ToolCall call;
        call.name = c["name"].get<std::string>();
        call.arguments = c.value("arguments", json::object());
        calls.push_back(std::move(call));
      }
    } else {
      text::ParsedResponse p = format_->parse(action);
      calls = p.calls;
      errors = p.errors;
    }
    PaperSearchSession::Outcome o = session_->run(calls, errors);
    const float gain = static_cast<float>(opts_.recall_weight * session_->recall() - emitted_);
    emitted_ += static_cast<double>(gain);
    const float reward = o.reward + gain;
    json out = {{"reward", reward}, {"info", o.info}};
    if (calls.empty() && errors.empty()) {
      done_ = true;
      out["observation"] = "";
      out["done"] = true;
      out["info"]["recall"] = session_->recall();
      return out;
    }
    messages_.push_back({{"role", "assistant"}, {"content", ""}});
    for (json& m : o.tool_messages) messages_.push_back(std::move(m));
    const PoolView view = read_pool_view(messages_, 0);
    out["observation"] = pool_message(view.actions, session_->pool(), pool_opts_);
    out["done"] = false;
    return out;
  }
  std::optional<std::string> expert_action() override {
    if (next_ >= expert_.size()) return std::nullopt;
    return expert_[next_];
  }
  bool done() const override { return done_; }

 private:
  Sample sample_;
  PaperSearchEnvOptions opts_;
  std::unique_ptr<text::ToolFormat> format_;
  std::shared_ptr<const PaperCorpus> corpus_;
  std::unique_ptr<PaperSelector> selector_;
  std::unique_ptr<PaperSearchSession> session_;
  PaperPoolOptions pool_opts_;
  json messages_ = json::array();
  std::vector<std::string> expert_;
  double emitted_ = 0;  // recall rewards emitted (as the env does)
  size_t next_ = 0;
  bool done_ = false;
};

}  // namespace

std::vector<ScholarQuery> load_scholar_queries(const std::string& path, const PaperCorpus& corpus) {
  AGENTR1_CHECK(std::filesystem::is_regular_file(path),
                "cannot read query file '" << path << "'. HINT: check train_file / test_file in data.task_kwargs");
  std::vector<std::pair<json, std::string>> rows;
  std::ifstream in(path, std::ios::binary);
  char first = 0;
  while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  if (first == '[') {  // one JSON array
    std::stringstream ss;
    ss << std::ifstream(path, std::ios::binary).rdbuf();
    json arr;
    try {
      arr = json::parse(ss.str());
    } catch (const std::exception& e) {
      throw Error("query file '" + path + "' is not valid JSON: " + e.what());
    }
    for (size_t i = 0; i < arr.size(); ++i) rows.emplace_back(arr[i], path + ": row " + std::to_string(i + 1));
  } else {  // JSONL
    const std::vector<json> lines = read_jsonl_rows(path);
    for (size_t i = 0; i < lines.size(); ++i) rows.emplace_back(lines[i], path + ": row " + std::to_string(i + 1));
  }
  std::unordered_map<std::string, std::string> by_title;
  for (const Paper& p : corpus.papers()) by_title.emplace(fold_title(p.title), p.id);
  std::vector<ScholarQuery> out;
  size_t skipped = 0, missing = 0;
  for (auto& [row, where] : rows) {
    AGENTR1_CHECK(row.is_object() && row.contains("question") && row["question"].is_string(),
                  where << ": a query row needs a string 'question' (AutoScholarQuery format: question, answer, "
                           "answer_arxiv_id); got "
                        << row.dump().substr(0, 120));
    ScholarQuery q;
    q.question = row["question"].get<std::string>();
    q.id = row.contains("qid") && row["qid"].is_string() ? row["qid"].get<std::string>() : where;
    const json ids = row.value("answer_arxiv_id", json::array());
    const json titles = row.value("answer", json::array());
    AGENTR1_CHECK(ids.is_array() && titles.is_array(),
                  where << ": 'answer' and 'answer_arxiv_id' must be lists, got " << row.dump().substr(0, 120));
    const size_t n = std::max(ids.size(), titles.size());
    for (size_t i = 0; i < n; ++i) {
      std::string id;
      if (i < ids.size() && ids[i].is_string() && corpus.find(ids[i].get<std::string>())) id = ids[i].get<std::string>();
      if (id.empty() && i < titles.size() && titles[i].is_string()) {
        auto it = by_title.find(fold_title(titles[i].get<std::string>()));
        if (it != by_title.end()) id = it->second;
      }
      if (id.empty())
        ++missing;
      else if (std::find(q.gold.begin(), q.gold.end(), id) == q.gold.end())
        q.gold.push_back(id);
    }
    if (q.gold.empty()) {
      ++skipped;
      continue;
    }
    out.push_back(std::move(q));
  }
  if (skipped > 0 || missing > 0) {
    AGENTR1_LOG(WARN) << "query file '" << path << "': " << missing << " answer papers are not in the corpus; "
                      << skipped << " queries without any were skipped";
  }
  return out;
}

json paper_expert_messages(const Sample& sample) {
  json out = json::array();
  for (const json& step : sample_plan(sample)) {
    json msg = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array()}};
    for (const json& c : step) msg["tool_calls"].push_back({{"type", "function"}, {"function", c}});
    out.push_back(std::move(msg));
  }
  out.push_back({{"role", "assistant"}, {"content", "Done."}});
  return out;
}

PaperSearchFamily::PaperSearchFamily(PaperFamilyOptions opts) : opts_(std::move(opts)) { opts_.validate(); }

std::vector<Sample> PaperSearchFamily::make_dataset(DataSplit split, int64_t n, uint64_t seed) const {
  AGENTR1_CHECK(n >= 0, "paper_search make_dataset: n must be >= 0, got " << n);
  std::vector<ScholarQuery> pool;
  if (opts_.uses_files()) {
    auto corpus = load_paper_corpus_file(opts_.corpus_file);
    const bool train = split != DataSplit::kTest;
    pool = load_scholar_queries(train ? opts_.train_file : opts_.test_file, *corpus);
    for (auto& q : pool) q.split = train ? DataSplit::kTrain : DataSplit::kTest;
    AGENTR1_CHECK(!pool.empty(), "paper_search: no usable query in '" << (train ? opts_.train_file : opts_.test_file)
                                                                      << "' (none has an answer paper in the corpus)");
    std::vector<Sample> out;
    if (static_cast<size_t>(n) > pool.size()) {
      AGENTR1_LOG(WARN) << "paper_search: asked for " << n << " samples, the file has " << pool.size()
                        << " usable queries; using all of them";
    }
    for (size_t i = 0; i < pool.size() && static_cast<int64_t>(i) < n; ++i)
      out.push_back(query_sample(pool[i], static_cast<int64_t>(i), opts_));
    return out;
  }
  for (const ScholarQuery& q : generated_paper_world(opts_.world())->queries(split))
    if (q.level >= opts_.min_level && q.level <= opts_.max_level) pool.push_back(q);
  AGENTR1_CHECK(!pool.empty(), "paper_search: the generated corpus has no " << data_split_name(split)
                                                                            << " query of levels " << opts_.min_level
                                                                            << ".." << opts_.max_level
                                                                            << ". HINT: raise methods or widen the levels");
  // Samples cycle through a seeded shuffle of the split's queries (a query repeats only
  // after all were used).
  Rng rng(derive_seed(seed, {0x71756572ULL}));  // "quer"
  std::vector<size_t> order;
  std::vector<Sample> out;
  for (int64_t i = 0; i < n; ++i) {
    if (order.empty()) {
      order.resize(pool.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = pool.size() - 1 - k;
      rng.shuffle(order.begin(), order.end());
    }
    out.push_back(query_sample(pool[order.back()], i, opts_));
    order.pop_back();
  }
  return out;
}

std::vector<json> PaperSearchFamily::demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                                    const std::string& end_of_turn,
                                                    std::vector<std::string>* rendered) const {
  AGENTR1_CHECK(n >= 0, "paper_search demonstrations: n must be >= 0, got " << n);
  AGENTR1_CHECK(!opts_.uses_files(), "paper_search demonstrations: only generated queries have an expert plan; "
                                     "unset corpus_file/train_file/test_file for SFT demonstrations");
  text::RenderOptions ro;
  ro.enable_thinking = false;
  std::vector<json> demos;
  for (const Sample& s : make_dataset(DataSplit::kTrain, n, seed)) {
    const json msgs = paper_expert_messages(s);
    json actions = json::array();
    for (const json& m : msgs) actions.push_back(assistant_action_text(m, end_of_turn));
    if (rendered != nullptr) {
      // Each turn's prompt as the env shows it (the pool rebuilt), then the response.
      auto ep = play_episode(s);
      ep->reset();
      json head = s.prompt;
      const json tools = paper_tools_schema(opts_.top_k, opts_.expand_limit);
      std::string text = tmpl.render(head, tools, /*add_generation_prompt=*/true, ro);
      for (size_t k = 0; k < msgs.size(); ++k) {
        text += actions[k].get<std::string>();
        const json r = ep->step(k + 1 < msgs.size() ? hermes_calls(sample_plan(s)[k]) : "Done.");
        if (r["done"].get<bool>()) break;
        json next = head;
        next.push_back({{"role", "user"}, {"content", r["observation"]}});
        text += "\n" + tmpl.render(next, tools, /*add_generation_prompt=*/true, ro);
      }
      rendered->push_back(std::move(text));
    }
    demos.push_back({{"sample", s.to_json()}, {"actions", actions}});
  }
  return demos;
}

std::vector<std::string> PaperSearchFamily::recipe_defaults() const {
  // The recipe's 5 steps; prompts within a 2,048-position model (the built-in ones): the
  // pool of 20 generated papers is ~1,200 tokens. Real corpora's abstracts are longer:
  // raise max_prompt_tokens (or lower max_pool / max_words) with a longer-context model.
  return {"rollout.max_steps=5", "rollout.max_new_tokens=256", "rollout.max_prompt_tokens=1792",
          "rollout.max_response_tokens=1280"};
}

std::unique_ptr<PlayEpisode> PaperSearchFamily::play_episode(const Sample& sample) const {
  PaperSearchEnvOptions o = PaperSearchEnvOptions::from_json(sample.env_kwargs);
  o.validate();
  return std::make_unique<PaperEpisode>(sample, std::move(o));
}

void register_paper_search_family() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_paper_pool_policy();
    env::register_env("paper_search", [](const env::EnvContext& ctx, const json& kwargs) -> std::unique_ptr<env::AgentEnv> {
      return std::make_unique<PaperSearchEnv>(ctx, PaperSearchEnvOptions::from_json(kwargs));
    });
    register_task_family("paper_search", [](const json& kwargs) -> std::unique_ptr<TaskFamily> {
      return std::make_unique<PaperSearchFamily>(PaperFamilyOptions::from_json(kwargs));
    });
  });
}

}  // namespace agentr1::tasks
