// agentr1/tasks/webshop/webshop_game.h — WebShop's simplified text site as a TextGame (the game
// env "webshop"): search, result pages, item pages, options, Buy Now.
//
//   register_webshop_game();                            // game env "webshop" (idempotent)
//   WebshopGame game(WebshopGameOptions::from_json({{"catalogue_size", 300}}));
//   std::string page = game.reset(sample);              // the search page with the instruction
//   env::GameStep s = game.step("search[long lasting eau de toilette]");
//   s = game.step("click[B07XYZ1234]");                 // an asin on the results page
//   s = game.step("click[6.76 fl oz]");                 // an option value
//   s = game.step("click[Buy Now]");                    // s.done, s.reward = get_reward
//
// Pages, as WebShop's "text" observation mode (web_agent_text_env.py: the visible texts
// joined by " [SEP] "):
//   search   "WebShop [SEP] Instruction: [SEP] <instruction> [SEP] Search"
//   results  "Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] <asin> [SEP]
//            <title> [SEP] <price> [SEP] ..."   (10 per page; "< Prev" before "Next >" from
//            page 2; "Next >" always, as WebShop, past the last result too)
//   item     "Back to Search [SEP] < Prev [SEP] <group> [SEP] <value> ... [SEP] <title> [SEP]
//            Price: <price> [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP]
//            Reviews [SEP] Buy Now"
//   Description / Features / Reviews: "Back to Search [SEP] < Prev [SEP] <text or bullets>"
//   done     "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] <r>"
// Actions: search[keywords] and click[button] (names and buttons case-insensitive; the
// keywords lower-cased). Clickables (admissible_commands, as "click[<text>]" in page
// order): results: Back to Search, < Prev (page > 1), Next >, the page's asins; item:
// Back to Search, < Prev, every option value, Description, Features, Reviews, Buy Now;
// sub pages: Back to Search, < Prev. On the search page the only command is
// "search[<query>]" (a placeholder: any keywords). As WebShop: a search or Back to
// Search clears the chosen options and every results page does too; an option click
// sets its group's value (a value in two groups: the later group, as WebShop's dict);
// < Prev goes from a sub page to the item, from the item to its results page.
// An invalid action (unparsable, unknown button, search off the search page, empty
// keywords, click[search]) changes nothing: the same page again, reward 0, info
// "valid" false and "reason". Buy Now ends the episode with reward webshop_reward(goal,
// product, its price, the chosen values). After step_limit actions without Buy Now the
// episode ends with reward 0 (the page gets " [SEP] Step limit reached.").
// Deviations, to keep pages short for small models: the instruction is shown on the
// search page only (repeat_instruction = true shows it atop every page, as WebShop);
// search works only on the search page (WebShop's text env accepts search[...]
// anywhere although only that page has a search bar); the done page omits the MTurk
// code; reviews are empty and ratings "N.A." (WebShop's loader leaves them so too).
//
// Samples (tasks/webshop/webshop_family.h): extra_info.goal = WebshopGoal::to_json(),
// env_kwargs.game = WebshopGameOptions::to_json(). reset(sample) throws Error when the
// goal is missing or malformed or its asin is not in the catalogue.
// The expert: searches the goal's attributes and query ("sulfate free tea tree body
// wash"; if the target is not among the 50 results: with the option values too, then
// the target's title), pages with Next > to the target, opens it, clicks each goal
// option (the product's value with the highest token-set ratio), then Buy Now.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/env/text_game.h"
#include "agentr1/tasks/webshop/webshop_catalog.h"
#include "agentr1/tasks/webshop/webshop_reward.h"

namespace agentr1::tasks {

struct WebshopGameOptions {
  WebshopCatalogueSpec catalogue;    // which catalogue (its keys sit at the top level)
  int step_limit = 15;               // actions before the episode ends unbought (WebShop's IL/RL use 15); 0 = none
  bool repeat_instruction = false;   // "Instruction: [SEP] ..." atop every page, as WebShop

  // Names every key once (core/config.h); the catalogue's keys sit at the top level.
  template <class V>
  void visit(V& v) {
    catalogue.visit(v);
    v.field("step_limit", step_limit, "actions before the episode ends unbought (0..1000; 0 = none)");
    v.field("repeat_instruction", repeat_instruction, "the instruction atop every page, as WebShop");
  }
  // The catalogue's rules and step_limit's range. Throws Error naming the key and the rule.
  void validate() const;
  // The catalogue's keys plus step_limit, repeat_instruction, bound with bind_config at
  // "env_kwargs.game" (null = defaults). Throws one Error listing unknown keys (with the
  // valid ones), wrong types and invalid values, each with its dotted key.
  static WebshopGameOptions from_json(const json& j);
  json to_json() const;
};

class WebshopGame : public env::TextGame {
 public:
  // Builds (or takes from the process cache) the catalogue. Throws Error for bad options
  // or unreadable files.
  explicit WebshopGame(WebshopGameOptions opts = {});

  std::string reset(const Sample& sample) override;
  // Starts an episode for `goal` directly (tests, tools). Throws Error if its asin is not
  // in the catalogue.
  std::string reset_goal(const WebshopGoal& goal);
  env::GameStep step(const std::string& command) override;
  std::vector<std::string> admissible_commands() const override;
  std::optional<std::string> expert_action() override;
  json summary() const override;

  const WebshopCatalogue& catalogue() const { return *cat_; }
  const std::string& observation() const { return observation_; }
  // The keywords the expert searches with for the current goal.
  const std::string& expert_query() const { return expert_query_; }

 private:
  enum class Page { kSearch, kResults, kItem, kDescription, kFeatures, kReviews, kDone };
  static const char* page_name(Page p);

  std::vector<std::string> clickables() const;   // display texts, page order
  std::string render() const;
  std::string instruction_block() const;
  void invalid(const std::string& reason, env::GameStep& out);  // marks the step invalid
  void do_search(const std::string& keywords, env::GameStep& out);
  void do_click(const std::string& button, env::GameStep& out);
  void buy(env::GameStep& out);
  void show_results(int page_no);
  void choose_option(const std::string& value);
  std::vector<std::string> chosen_values() const;
  std::string option_of(const std::string& value) const;  // the group a click sets
  std::string expert_value(const std::string& goal_option) const;
  std::string pick_expert_query() const;

  WebshopGameOptions opts_;
  std::shared_ptr<const WebshopCatalogue> cat_;
  WebshopGoal goal_;
  int64_t target_ = -1;
  bool started_ = false;
  Page page_ = Page::kSearch;
  std::string keywords_;
  std::vector<size_t> results_;
  int page_no_ = 1;
  int64_t item_ = -1;
  std::vector<std::pair<std::string, std::string>> options_;  // group -> chosen value, click order
  int steps_ = 0;
  bool done_ = false;
  int64_t bought_ = -1;
  WebshopRewardTerms terms_;
  std::string observation_;
  std::string expert_query_;
};

// Registers the game env "webshop" (WebshopGame over WebshopGameOptions::from_json of
// the game kwargs). Idempotent, thread-safe.
void register_webshop_game();

}  // namespace agentr1::tasks
