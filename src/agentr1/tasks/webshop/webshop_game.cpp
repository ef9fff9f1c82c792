#include "agentr1/tasks/webshop/webshop_game.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/core/strings.h"

namespace agentr1::tasks {
namespace {

constexpr const char* kSep = " [SEP] ";
constexpr const char* kBackToSearch = "Back to Search";
constexpr const char* kPrev = "< Prev";
constexpr const char* kNext = "Next >";
constexpr const char* kBuyNow = "Buy Now";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "name[arg]" -> {lower(name), arg}; nullopt without that shape.
std::optional<std::pair<std::string, std::string>> parse_action(const std::string& command) {
  const std::string c = trim(command);
  const size_t open = c.find('[');
  const size_t close = c.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 1 != c.size()) {
    return std::nullopt;
  }
  return std::make_pair(lower(trim(c.substr(0, open))), c.substr(open + 1, close - open - 1));
}

std::string reward_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", r);
  return buf;
}

}  // namespace

void WebshopGameOptions::validate() const {
  catalogue.validate();
  AGENTR1_CHECK(step_limit >= 0 && step_limit <= 1000,
                "webshop game option 'step_limit' must be in 0..1000 (0 = none), got " << step_limit);
}

WebshopGameOptions WebshopGameOptions::from_json(const json& j) {
  return bind_config<WebshopGameOptions>(json{{"env_kwargs", {{"game", j}}}}, "env_kwargs.game");
}

json WebshopGameOptions::to_json() const {
  json j = catalogue.to_json();
  j["step_limit"] = step_limit;
  j["repeat_instruction"] = repeat_instruction;
  return j;
}

WebshopGame::WebshopGame(WebshopGameOptions opts) : opts_(std::move(opts)), cat_(get_webshop_catalogue(opts_.catalogue)) {}

const char* WebshopGame::page_name(Page p) {
  switch (p) {
    case Page::kSearch: return "search";
    case Page::kResults: return "results";
    case Page::kItem: return "item";
    case Page::kDescription: return "description";
    case Page::kFeatures: return "features";
    case Page::kReviews: return "reviews";
    case Page::kDone: return "done";
  }
  return "?";
}

std::string WebshopGame::reset(const Sample& sample) {
  AGENTR1_CHECK(sample.extra_info.is_object() && sample.extra_info.contains("goal"),
                "webshop: the sample has no extra_info.goal (a webshop sample carries its goal there; "
                "make it with the webshop task family)");
  const WebshopGoal goal = with_context("webshop sample extra_info.goal",
                                        [&] { return WebshopGoal::from_json(sample.extra_info["goal"]); });
  return reset_goal(goal);
}

std::string WebshopGame::reset_goal(const WebshopGoal& goal) {
  const int64_t t = cat_->find(goal.asin);
  AGENTR1_CHECK(t >= 0, "webshop: the goal's target asin '" << goal.asin << "' is not in the catalogue "
                                                             << opts_.catalogue.to_json().dump()
                                                             << ". HINT: the sample's env_kwargs.game must name the "
                                                                "catalogue its goal was drawn from");
  goal_ = goal;
  target_ = t;
  started_ = true;
  page_ = Page::kSearch;
  keywords_.clear();
  results_.clear();
  page_no_ = 1;
  item_ = -1;
  options_.clear();
  steps_ = 0;
  done_ = false;
  bought_ = -1;
  terms_ = {};
  expert_query_ = pick_expert_query();
  observation_ = render();
  return observation_;
}

std::string WebshopGame::instruction_block() const {
  return std::string("Instruction:") + kSep + goal_.instruction_text;
}

std::vector<std::string> WebshopGame::clickables() const {
  std::vector<std::string> out;
  switch (page_) {
    case Page::kSearch:
    case Page::kDone:
      break;
    case Page::kResults: {
      out.push_back(kBackToSearch);
      if (page_no_ > 1) out.push_back(kPrev);
      out.push_back(kNext);
      const size_t b = static_cast<size_t>(page_no_ - 1) * kWebshopProductWindow;
      for (size_t i = b; i < std::min(results_.size(), b + kWebshopProductWindow); ++i) {
        out.push_back(cat_->products[results_[i]].asin);
      }
      break;
    }
    case Page::kItem: {
      out.push_back(kBackToSearch);
      out.push_back(kPrev);
      for (const WebshopOptionGroup& g : cat_->products[static_cast<size_t>(item_)].options) {
        out.insert(out.end(), g.values.begin(), g.values.end());
      }
      out.insert(out.end(), {"Description", "Features", "Reviews", kBuyNow});
      break;
    }
    case Page::kDescription:
    case Page::kFeatures:
    case Page::kReviews:
      out.push_back(kBackToSearch);
      out.push_back(kPrev);
      break;
  }
  return out;
}

std::string WebshopGame::render() const {
  std::vector<std::string> parts;
  if (page_ == Page::kSearch) {
    return std::string("WebShop") + kSep + instruction_block() + kSep + "Search";
  }
  if (page_ == Page::kDone) {
    return std::string("Thank you for shopping with us!") + kSep + "Your score (min 0.0, max 1.0)" + kSep +
           reward_text(terms_.total);
  }
  if (opts_.repeat_instruction) parts.push_back(instruction_block());
  parts.push_back(kBackToSearch);
  if (page_ == Page::kResults) {
    parts.push_back("Page " + std::to_string(page_no_) + " (Total results: " + std::to_string(results_.size()) + ")");
    if (page_no_ > 1) parts.push_back(kPrev);
    parts.push_back(kNext);
    const size_t b = static_cast<size_t>(page_no_ - 1) * kWebshopProductWindow;
    for (size_t i = b; i < std::min(results_.size(), b + kWebshopProductWindow); ++i) {
      const WebshopProduct& p = cat_->products[results_[i]];
      parts.insert(parts.end(), {p.asin, p.title, p.price_tag});
    }
    return join(parts, kSep);
  }
  parts.push_back(kPrev);
  const WebshopProduct& p = cat_->products[static_cast<size_t>(item_)];
  if (page_ == Page::kItem) {
    for (const WebshopOptionGroup& g : p.options) {
      parts.push_back(g.name);
      parts.insert(parts.end(), g.values.begin(), g.values.end());
    }
    parts.insert(parts.end(), {p.title, "Price: " + p.price_tag, "Rating: " + p.rating, "Description", "Features",
                               "Reviews", kBuyNow});
  } else if (page_ == Page::kDescription) {
    parts.push_back(p.description);
  } else if (page_ == Page::kFeatures) {
    parts.insert(parts.end(), p.bullets.begin(), p.bullets.end());
  }
  return join(parts, kSep);
}

std::vector<std::string> WebshopGame::admissible_commands() const {
  if (!started_ || done_) return {};
  if (page_ == Page::kSearch) return {"search[<query>]"};
  std::vector<std::string> out;
  for (const std::string& c : clickables()) out.push_back("click[" + c + "]");
  return out;
}

void WebshopGame::invalid(const std::string& reason, env::GameStep& out) {
  out.info["valid"] = false;
  out.info["reason"] = reason;
}

void WebshopGame::show_results(int page_no) {
  page_ = Page::kResults;
  page_no_ = page_no;
  item_ = -1;
  options_.clear();
}

std::string WebshopGame::option_of(const std::string& value) const {
  std::string group;
  for (const WebshopOptionGroup& g : cat_->products[static_cast<size_t>(item_)].options) {
    if (std::find(g.values.begin(), g.values.end(), value) != g.values.end()) group = g.name;
  }
  return group;
}

void WebshopGame::choose_option(const std::string& value) {
  const std::string group = option_of(value);
  for (auto& [g, v] : options_) {
    if (g == group) {
      v = value;
      return;
    }
  }
  options_.emplace_back(group, value);
}

std::vector<std::string> WebshopGame::chosen_values() const {
  std::vector<std::string> out;
  for (const auto& [g, v] : options_) out.push_back(v);
  return out;
}

void WebshopGame::do_search(const std::string& raw, env::GameStep& out) {
  const std::string kw = lower(trim(raw));
  if (page_ != Page::kSearch) {
    invalid("search is only available on the search page (click Back to Search first)", out);
  } else if (kw.empty()) {
    invalid("empty search keywords", out);
  } else {
    keywords_ = kw;
    results_ = cat_->search(kw);
    show_results(1);
  }
}

void WebshopGame::do_click(const std::string& raw, env::GameStep& out) {
  const std::string arg = lower(trim(raw));
  std::string hit;
  for (const std::string& c : clickables()) {
    if (lower(c) == arg) hit = c;
  }
  if (hit.empty() || arg == "search") {
    invalid("'" + trim(raw) + "' is not a button on this page", out);
  } else if (hit == kBackToSearch) {
    page_ = Page::kSearch;
    keywords_.clear();
    results_.clear();
    item_ = -1;
    options_.clear();
  } else if (hit == kNext) {
    show_results(page_no_ + 1);
  } else if (hit == kPrev) {
    if (page_ == Page::kResults) {
      show_results(page_no_ - 1);
    } else if (page_ == Page::kItem) {
      show_results(page_no_);
    } else {
      page_ = Page::kItem;
    }
  } else if (page_ == Page::kResults) {
    item_ = cat_->find(hit);
    page_ = Page::kItem;
  } else if (hit == kBuyNow) {
    buy(out);
  } else if (hit == "Description") {
    page_ = Page::kDescription;
  } else if (hit == "Features") {
    page_ = Page::kFeatures;
  } else if (hit == "Reviews") {
    page_ = Page::kReviews;
  } else {
    choose_option(hit);
  }
}

void WebshopGame::buy(env::GameStep& out) {
  const WebshopProduct& p = cat_->products[static_cast<size_t>(item_)];
  terms_ = webshop_reward(goal_, p, p.price, chosen_values());
  bought_ = item_;
  done_ = true;
  page_ = Page::kDone;
  out.reward = static_cast<float>(terms_.total);
  out.done = true;
  out.info["reward_terms"] = terms_.to_json();
}

env::GameStep WebshopGame::step(const std::string& command) {
  env::GameStep out;
  if (!started_ || done_) {
    out.observation = started_ ? observation_ : "The episode has not started.";
    out.done = done_;
    out.info["valid"] = false;
    out.info["reason"] = started_ ? "the episode is over" : "step before reset";
    return out;
  }
  out.info["valid"] = true;
  const auto parsed = parse_action(command);
  if (!parsed) {
    invalid("not of the form search[...] or click[...]", out);
  } else if (parsed->first == "search") {
    do_search(parsed->second, out);
  } else if (parsed->first == "click") {
    do_click(parsed->second, out);
  } else {
    invalid("unknown action '" + parsed->first + "'; actions are search[...] and click[...]", out);
  }
  ++steps_;
  observation_ = render();
  if (!done_ && opts_.step_limit > 0 && steps_ >= opts_.step_limit) {
    done_ = true;
    out.done = true;
    out.info["step_limit"] = true;
    observation_ += std::string(kSep) + "Step limit reached.";
  }
  out.observation = observation_;
  out.info["page"] = page_name(page_);
  out.info["step"] = steps_;
  return out;
}

std::string WebshopGame::expert_value(const std::string& goal_option) const {
  const WebshopProduct& p = cat_->products[static_cast<size_t>(target_)];
  std::string best;
  int best_score = -1;
  const std::string ng = normalize_color(goal_option);
  for (const WebshopOptionGroup& g : p.options) {
    for (const std::string& v : g.values) {
      const int s = v == goal_option ? 101 : fuzzy_token_set_ratio(normalize_color(v), ng);
      if (s > best_score) {
        best_score = s;
        best = v;
      }
    }
  }
  return best;
}

std::string WebshopGame::pick_expert_query() const {
  const WebshopProduct& target = cat_->products[static_cast<size_t>(target_)];
  std::vector<std::string> candidates;
  const std::string attrs = join(goal_.attributes, " ");
  candidates.push_back(lower(trim(attrs + " " + goal_.query)));
  candidates.push_back(lower(trim(attrs + " " + goal_.query + " " + join(goal_.options, " "))));
  candidates.push_back(lower(trim(target.title)));
  for (const std::string& q : candidates) {
    const std::vector<size_t> hits = cat_->search(q);
    if (std::find(hits.begin(), hits.end(), static_cast<size_t>(target_)) != hits.end()) return q;
  }
  return candidates.back();
}

std::optional<std::string> WebshopGame::expert_action() {
  if (!started_ || done_) return std::nullopt;
  const std::string& asin = cat_->products[static_cast<size_t>(target_)].asin;
  switch (page_) {
    case Page::kSearch:
      return "search[" + expert_query_ + "]";
    case Page::kResults: {
      const auto it = std::find(results_.begin(), results_.end(), static_cast<size_t>(target_));
      if (it == results_.end()) return std::string("click[") + kBackToSearch + "]";
      const int on_page = static_cast<int>(static_cast<size_t>(it - results_.begin()) / kWebshopProductWindow) + 1;
      if (on_page == page_no_) return "click[" + asin + "]";
      return std::string("click[") + (on_page > page_no_ ? kNext : kPrev) + "]";
    }
    case Page::kItem: {
      if (item_ != target_) return std::string("click[") + kPrev + "]";
      for (const std::string& g : goal_.options) {
        const std::string v = expert_value(g);
        if (v.empty()) continue;
        const std::string group = option_of(v);
        const auto chosen = std::find_if(options_.begin(), options_.end(),
                                         [&](const auto& gv) { return gv.first == group; });
        if (chosen == options_.end() || chosen->second != v) return "click[" + v + "]";
      }
      return std::string("click[") + kBuyNow + "]";
    }
    case Page::kDescription:
    case Page::kFeatures:
    case Page::kReviews:
      return std::string("click[") + kPrev + "]";
    case Page::kDone:
      break;
  }
  return std::nullopt;
}

json WebshopGame::summary() const {
  json j = json::object();
  j["goal"] = goal_.to_json();
  j["steps"] = steps_;
  j["done"] = done_;
  json chosen = json::object();
  for (const auto& [g, v] : options_) chosen[g] = v;
  if (bought_ >= 0) {
    const WebshopProduct& p = cat_->products[static_cast<size_t>(bought_)];
    j["bought"] = {{"asin", p.asin},
                   {"title", p.title},
                   {"query", p.query},
                   {"product_category", p.product_category},
                   {"attributes", p.attributes},
                   {"price", p.price},
                   {"chosen_options", chosen}};
    j["reward"] = terms_.to_json();
  } else {
    j["bought"] = nullptr;
    j["reward"] = nullptr;
  }
  return j;
}

void register_webshop_game() {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_game_env("webshop", [](const json& kwargs) -> std::unique_ptr<env::TextGame> {
      return std::make_unique<WebshopGame>(WebshopGameOptions::from_json(kwargs));
    });
  });
}

}  // namespace agentr1::tasks
