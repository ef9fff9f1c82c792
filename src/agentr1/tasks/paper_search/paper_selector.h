// agentr1/tasks/paper_search/paper_selector.h — who decides which found papers are kept and
// how much each is worth: the selector of the paper-search recipe.
//
//   auto sel = make_paper_selector("rule");                       // gold-set membership
//   auto sel = make_paper_selector({{"type", "remote"}, {"url", "http://127.0.0.1:8000"},
//                                   {"parser", "yes_no"}});       // a judge model
//   std::vector<double> s = sel->score(question, {&p1, &p2}, gold_ids);   // one per paper
//
// "rule" (the default: exact and reproducible): 1 for a paper in the gold set, else 0.
// "remote": a model behind an OpenAI-compatible endpoint (agentr1 serve, vLLM) answers,
// for each paper, a prompt built from `prompt_template` with {question}, {title},
// {abstract} (default kSelectorTemplate); the reward service (tasks/reward_service.h)
// batches the papers of all concurrent episodes, times out, retries, and parses the
// answer (yes_no or score); scores are mapped onto [0, 1] by (s - min_score) /
// (max_score - min_score). Its other keys are the service's (url, model, parser, ...).
// A service that fails throws InfraError: the episode is marked, never scored 0.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/tasks/paper_search/paper_corpus.h"

namespace agentr1::tasks {

extern const char* const kSelectorTemplate;

class PaperSelector {
 public:
  virtual ~PaperSelector() = default;
  virtual std::string name() const = 0;
  // One score per paper, in order. gold: the sample's gold ids (may be empty). Throws
  // InfraError when a service behind it fails. Thread-safe.
  virtual std::vector<double> score(const std::string& question, const std::vector<const Paper*>& papers,
                                    const std::unordered_set<std::string>& gold) = 0;
};

// spec: "rule" | "remote" | {"type": "rule" | "remote", ...}. Throws Error naming the key
// (env_kwargs.selector...), the rule and the known types.
std::unique_ptr<PaperSelector> make_paper_selector(const json& spec);
// The remote selector from its options (the spec without "type"): prompt_template plus
// the reward service's keys. Throws Error naming the key.
std::unique_ptr<PaperSelector> make_remote_paper_selector(const json& options);

}  // namespace agentr1::tasks
