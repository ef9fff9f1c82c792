#include "agentr1/tasks/webshop/webshop_family.h"

#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/env/text_game.h"
#include "agentr1/tasks/game_demo.h"

namespace agentr1::tasks {

const char* const kWebshopShortInstruction =
    "Reply with exactly one action per turn, inside <action>...</action>: search[query] or click[button].";

const char* const kWebshopSystemPrompt =
    "You are shopping online in WebShop. The first page shows your instruction: buy the product it "
    "describes. Pages are text whose elements are separated by [SEP]. Each turn, reply with exactly one "
    "action inside <action>...</action>:\n"
    "- search[keywords] on the search page, e.g. <action>search[machine wash cotton t-shirt]</action>\n"
    "- click[button] to press a button or link shown on the page: a product id on a results page, an "
    "option value on an item page, Back to Search, < Prev, Next >, Description, Features, Reviews or Buy "
    "Now.\n"
    "Choose every option the instruction asks for before you click Buy Now. Buy Now ends the episode; the "
    "reward is how well the product, its options and its price match the instruction.";

void WebshopFamilyOptions::validate() const {
  WebshopGoalOptions g;
  g.min_level = min_level;
  g.max_level = max_level;
  g.validate();
  game.validate();
  AGENTR1_CHECK(split_by != WebshopSplitBy::kWebshopIndex || !game.catalogue.generated(),
                "webshop task option 'split_by' = \"webshop_index\" needs WebShop's files (products_file ...); "
                "generated catalogues split by asin");
}

WebshopFamilyOptions WebshopFamilyOptions::from_json(const json& kw) {
  WebshopFamilyOptions o =
      bind_config<WebshopFamilyOptions>(json{{"data", {{"task_kwargs", kw}}}}, "data.task_kwargs");
  o.webshop_index_split = o.split_by == WebshopSplitBy::kWebshopIndex;
  return o;
}

json WebshopFamilyOptions::to_json() const {
  // Not config_to_json: the game writes only its catalogue kind's keys (as samples carry them).
  json j = {{"min_level", min_level}, {"max_level", max_level}};
  const json g = game.to_json();
  for (auto it = g.begin(); it != g.end(); ++it) j[it.key()] = it.value();
  j["split_by"] = config_detail::Codec<WebshopSplitBy>::write(split_by);
  j["show_admissible"] = show_admissible;
  j["use_system_prompt"] = use_system_prompt;
  return j;
}

WebshopFamily::WebshopFamily(WebshopFamilyOptions opts) : opts_(std::move(opts)) {
  opts_.validate();
  opts_.webshop_index_split = opts_.split_by == WebshopSplitBy::kWebshopIndex;
}

Sample WebshopFamily::goal_to_sample(const WebshopGoal& goal, DataSplit split, int64_t index) const {
  Sample s;
  s.prompt = json::array();
  // Without the system prompt one short user line remains (a sample's prompt may not be
  // empty, and the model still needs the action syntax).
  if (opts_.use_system_prompt)
    s.prompt.push_back({{"role", "system"}, {"content", kWebshopSystemPrompt}});
  else
    s.prompt.push_back({{"role", "user"}, {"content", kWebshopShortInstruction}});
  s.agent_name = "webshop";
  s.reward_style = "env";
  s.ground_truth = {{"asin", goal.asin},
                    {"attributes", goal.attributes},
                    {"goal_options", goal.options},
                    {"price_upper", goal.price_upper}};
  s.env_kwargs = {{"game", opts_.game.to_json()}};
  if (opts_.show_admissible) s.env_kwargs["show_admissible"] = true;
  s.data_source = "webshop";
  s.extra_info = {{"goal", goal.to_json()}, {"split", data_split_name(split)}, {"index", index}};
  return s;
}

std::vector<Sample> WebshopFamily::make_dataset(DataSplit split, int64_t n, uint64_t seed) const {
  AGENTR1_CHECK(n >= 0, "webshop dataset: n must be >= 0, got " << n);
  const auto cat = get_webshop_catalogue(opts_.game.catalogue);
  WebshopGoalOptions go;
  go.min_level = opts_.min_level;
  go.max_level = opts_.max_level;
  go.webshop_index_split = opts_.split_by == WebshopSplitBy::kWebshopIndex;
  const std::vector<WebshopGoal> goals = webshop_dataset_goals(*cat, split, n, seed, go);
  std::vector<Sample> out;
  out.reserve(goals.size());
  for (size_t i = 0; i < goals.size(); ++i) out.push_back(goal_to_sample(goals[i], split, static_cast<int64_t>(i)));
  return out;
}

std::vector<json> WebshopFamily::demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                                const std::string& end_of_turn,
                                                std::vector<std::string>* rendered) const {
  AGENTR1_CHECK(n >= 0, "webshop demonstrations: n must be >= 0, got " << n);
  const bool files = !opts_.game.catalogue.generated();
  // With WebShop's files some goals have no perfect purchase: draw more and skip those.
  const int64_t pool = files ? 4 * n : n;
  const std::vector<Sample> samples = make_dataset(DataSplit::kTrain, pool, seed);
  const int max_actions = opts_.game.step_limit > 0 ? opts_.game.step_limit : 50;
  std::vector<json> demos;
  demos.reserve(static_cast<size_t>(n));
  for (const Sample& s : samples) {
    if (static_cast<int64_t>(demos.size()) == n) break;
    WebshopGame game(opts_.game);
    if (!files) {
      demos.push_back(game_expert_demonstration(game, s, tmpl, end_of_turn, rendered, max_actions));
      continue;
    }
    try {
      demos.push_back(game_expert_demonstration(game, s, tmpl, end_of_turn, rendered, max_actions));
    } catch (const Error&) {
      // an imperfect goal of WebShop's data (its expert purchase scores < 1): skipped
    }
  }
  AGENTR1_CHECK(static_cast<int64_t>(demos.size()) == n,
                "webshop demonstrations: only " << demos.size() << " of " << n << " goals have a purchase with reward 1");
  return demos;
}

std::vector<std::string> WebshopFamily::recipe_defaults() const {
  const int steps = opts_.game.step_limit > 0 ? opts_.game.step_limit : 15;
  const int max_new = 64;  // "<action>search[<4 attributes> <query> <2 options>]</action>" is ~40 tokens
  return {"rollout.max_steps=" + std::to_string(steps), "rollout.max_new_tokens=" + std::to_string(max_new),
          "rollout.max_response_tokens=" + std::to_string(max_new * steps), "rollout.max_prompt_tokens=1984",
          "++rollout.env_kwargs.context={type: sliding_window, keep_last: 4}"};
}

void register_webshop_family() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_webshop_game();
    register_task_family("webshop", [](const json& kwargs) -> std::unique_ptr<TaskFamily> {
      return std::make_unique<WebshopFamily>(WebshopFamilyOptions::from_json(kwargs));
    });
  });
}

}  // namespace agentr1::tasks

namespace agentr1::config_detail {

void Codec<tasks::WebshopSplitBy>::read(const json& v, tasks::WebshopSplitBy& out, const std::string& key,
                                        BindContext& ctx) {
  if (v.is_string() && (v == "asin" || v == "webshop_index")) {
    out = v == "webshop_index" ? tasks::WebshopSplitBy::kWebshopIndex : tasks::WebshopSplitBy::kAsin;
    return;
  }
  ctx.errors.push_back(type_error(key, "\"asin\" or \"webshop_index\"", v));
}

json Codec<tasks::WebshopSplitBy>::write(const tasks::WebshopSplitBy& x) {
  return x == tasks::WebshopSplitBy::kWebshopIndex ? "webshop_index" : "asin";
}

}  // namespace agentr1::config_detail
