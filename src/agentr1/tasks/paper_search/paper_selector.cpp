#include "agentr1/tasks/paper_search/paper_selector.h"

#include "agentr1/core/error.h"

namespace agentr1::tasks {

const char* const kSelectorTemplate =
    "You judge whether a paper answers a literature search query.\n"
    "Query: {question}\n"
    "Paper title: {title}\n"
    "Abstract: {abstract}\n"
    "Does this paper satisfy the query? Answer yes or no.";

namespace {

class RuleSelector : public PaperSelector {
 public:
  std::string name() const override { return "rule"; }
  std::vector<double> score(const std::string&, const std::vector<const Paper*>& papers,
                            const std::unordered_set<std::string>& gold) override {
    std::vector<double> out;
    out.reserve(papers.size());
    for (const Paper* p : papers) out.push_back(gold.count(p->id) ? 1.0 : 0.0);
    return out;
  }
};

}  // namespace

std::unique_ptr<PaperSelector> make_paper_selector(const json& spec) {
  std::string type;
  json rest = json::object();
  if (spec.is_string()) {
    type = spec.get<std::string>();
  } else if (spec.is_object() && spec.contains("type") && spec["type"].is_string()) {
    type = spec["type"].get<std::string>();
    rest = spec;
    rest.erase("type");
  } else {
    throw Error("env_kwargs.selector must be \"rule\", \"remote\" or {\"type\": ..., options}, got " +
                spec.dump().substr(0, 120));
  }
  if (type == "rule") {
    AGENTR1_CHECK(rest.empty(), "env_kwargs.selector: the rule selector takes no options, got " << rest.dump());
    return std::make_unique<RuleSelector>();
  }
  if (type == "remote") return make_remote_paper_selector(rest);
  throw Error("env_kwargs.selector.type: unknown selector '" + type + "'; known: rule, remote");
}

}  // namespace agentr1::tasks
