// The "remote" paper selector: a judge model behind an OpenAI-compatible endpoint scores
// each found paper through the shared reward service (tasks/reward_service.h).
#include "agentr1/core/error.h"
#include "agentr1/tasks/paper_search/paper_selector.h"
#include "agentr1/tasks/reward_service.h"

namespace agentr1::tasks {

namespace {

const std::vector<std::string> kSelectorFields = {"question", "title", "abstract", "authors", "venue", "year", "id"};

class RemoteSelector : public PaperSelector {
 public:
  RemoteSelector(std::shared_ptr<RewardService> service, PromptTemplate tmpl)
      : service_(std::move(service)), tmpl_(std::move(tmpl)) {}
  std::string name() const override { return "remote"; }
  std::vector<double> score(const std::string& question, const std::vector<const Paper*>& papers,
                            const std::unordered_set<std::string>&) override {
    std::vector<std::string> prompts;
    prompts.reserve(papers.size());
    for (const Paper* p : papers) {
      std::string authors;
      for (const auto& a : p->authors) authors += (authors.empty() ? "" : ", ") + a;
      prompts.push_back(tmpl_.render({{"question", question},
                                      {"title", p->title},
                                      {"abstract", p->abstract},
                                      {"authors", authors},
                                      {"venue", p->venue},
                                      {"year", p->year},
                                      {"id", p->id}}));
    }
    const std::vector<float> s = service_->score(prompts);  // InfraError as is
    // Onto [0, 1] (parser score with max_score 10: 7 -> 0.7), so keep_threshold and the
    // top-3 sum mean the same with every judge.
    const double lo = service_->options().min_score, hi = service_->options().max_score;
    std::vector<double> out;
    out.reserve(s.size());
    for (float x : s) out.push_back((static_cast<double>(x) - lo) / (hi - lo));
    return out;
  }

 private:
  std::shared_ptr<RewardService> service_;
  PromptTemplate tmpl_;
};

}  // namespace

std::unique_ptr<PaperSelector> make_remote_paper_selector(const json& options) {
  AGENTR1_CHECK(options.is_object(), "env_kwargs.selector: the remote selector's options must be an object, got "
                                         << options.dump().substr(0, 80));
  json rest = options;
  std::string tmpl = kSelectorTemplate;
  if (rest.contains("prompt_template")) {
    AGENTR1_CHECK(rest["prompt_template"].is_string(),
                  "env_kwargs.selector.prompt_template must be a string, got " << rest["prompt_template"].dump());
    tmpl = rest["prompt_template"].get<std::string>();
  }
  rest["prompt_template"] = tmpl;
  RewardServiceOptions so = RewardServiceOptions::from_json(rest, "env_kwargs.selector");
  PromptTemplate t = with_context("env_kwargs.selector.prompt_template",
                                  [&] { return PromptTemplate(tmpl, kSelectorFields); });
  return std::make_unique<RemoteSelector>(shared_reward_service(so, "env_kwargs.selector."), std::move(t));
}

}  // namespace agentr1::tasks
