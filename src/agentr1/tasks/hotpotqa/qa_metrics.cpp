#include "agentr1/tasks/hotpotqa/qa_metrics.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1::tasks {
namespace {

constexpr const char* kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (is_space(c)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool is_article(const std::string& w) { return w == "a" || w == "an" || w == "the"; }

bool is_yes_no(const std::string& s) { return s == "yes" || s == "no" || s == "noanswer"; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

}  // namespace

QaMetric parse_qa_metric(const std::string& name) {
  if (name == "em") return QaMetric::kExactMatch;
  if (name == "f1") return QaMetric::kF1;
  throw Error("unknown QA metric '" + name + "'; known: em (exact match), f1 (token F1)");
}

std::string qa_metric_name(QaMetric metric) { return metric == QaMetric::kF1 ? "f1" : "em"; }

std::string normalize_answer(const std::string& s) {
  std::string kept;
  kept.reserve(s.size());
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != '\0' && std::strchr(kPunctuation, c) != nullptr) continue;
    kept.push_back(c);
  }
  // After punctuation is gone a word boundary can only be whitespace, so the articles
  // are exactly the whitespace-separated tokens a / an / the.
  std::string out;
  for (const std::string& w : split_ws(kept)) {
    if (is_article(w)) continue;
    if (!out.empty()) out.push_back(' ');
    out += w;
  }
  return out;
}

double exact_match(const std::string& prediction, const std::string& ground_truth) {
  return normalize_answer(prediction) == normalize_answer(ground_truth) ? 1.0 : 0.0;
}

double token_f1(const std::string& prediction, const std::string& ground_truth) {
  const std::string p = normalize_answer(prediction);
  const std::string g = normalize_answer(ground_truth);
  if ((is_yes_no(p) || is_yes_no(g)) && p != g) return 0.0;
  const std::vector<std::string> pt = split_ws(p);
  const std::vector<std::string> gt = split_ws(g);
  std::map<std::string, int> counts;
  for (const auto& w : gt) ++counts[w];
  int same = 0;
  for (const auto& w : pt) {
    auto it = counts.find(w);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / static_cast<double>(pt.size());
  const double recall = static_cast<double>(same) / static_cast<double>(gt.size());
  return 2.0 * precision * recall / (precision + recall);
}

std::optional<std::string> extract_final_answer(const std::string& response) {
  static const std::string kOpen = "<answer>", kClose = "</answer>";
  const size_t close = response.rfind(kClose);
  if (close == std::string::npos) return std::nullopt;
  const size_t open = response.rfind(kOpen, close);
  if (open == std::string::npos) return std::nullopt;
  const size_t b = open + kOpen.size();
  return trim(response.substr(b, close - b));
}

double score_prediction(const std::string& prediction, const json& ground_truth, QaMetric metric) {
  auto one = [&](const json& g) {
    AGENTR1_CHECK(g.is_string(), "QA ground truth must be a string or an array of strings, got "
                                     << g.dump() << ". HINT: fix reward_model.ground_truth in the dataset");
    const std::string& gs = g.get_ref<const std::string&>();
    return metric == QaMetric::kF1 ? token_f1(prediction, gs) : exact_match(prediction, gs);
  };
  if (!ground_truth.is_array()) return one(ground_truth);
  double best = 0.0;
  for (const json& g : ground_truth) best = std::max(best, one(g));
  return best;
}

double score_answer(const std::string& response, const json& ground_truth, QaMetric metric) {
  const std::optional<std::string> a = extract_final_answer(response);
  if (!a) {
    // Still reject malformed ground truths, so a data error never hides behind a bad response.
    score_prediction("", ground_truth, metric);
    return 0.0;
  }
  return score_prediction(*a, ground_truth, metric);
}

}  // namespace agentr1::tasks
