// agentr1/tasks/hotpotqa/qa_metrics.h — answer normalisation, exact match and token F1 for
// open-domain QA (the hotpotqa family's rewards "em" and "f1").
//
//   normalize_answer("The  Eiffel Tower!")        // "eiffel tower" ("Eiffel-Tower" -> "eiffeltower")
//   exact_match("the Eiffel Tower", "Eiffel Tower")  // 1
//   token_f1("Eiffel Tower in Paris", "Eiffel Tower")  // P 2/4, R 2/2 -> F1 2/3
//   token_f1("yes", "no")                        // 0 (yes/no/noanswer special case)
//   extract_final_answer("...<answer>a</answer> <answer>Paris</answer>")  // "Paris"
//   score_answer("<answer>Paris</answer>", json::array({"paris", "Paris, France"}),
//                QaMetric::kF1);                 // 1 (max over acceptable answers)
//
// Rules, as hotpot_evaluate_v1.py (HotpotQA) and SQuAD's normalize_answer:
//   normalize = lower case -> drop every ASCII punctuation character
//               (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~) -> drop the words a, an, the ->
//               collapse whitespace to single spaces, trimmed.
//   exact_match = normalize(pred) == normalize(gold).
//   token_f1    = F1 of the multiset overlap of the normalised tokens; 0 when there is
//               no overlap, and 0 when either side normalises to "yes", "no" or
//               "noanswer" and the two sides differ (hotpot's f1_score).
// Deviations: lower-casing and whitespace are ASCII only (Python lower-cases Unicode
// too), and a non-ASCII byte counts as a word character for the article rule. The same
// for every ASCII answer.
// The final answer of a response is the text inside its LAST <answer>...</answer>
// (trimmed); no complete tag -> no answer -> score 0. (Search-R1 needs two tags, as its
// prompt shows one example; our example lives in the system prompt, not the response.)
#pragma once

#include <optional>
#include <string>

#include "agentr1/core/json.h"

namespace agentr1::tasks {

enum class QaMetric {
  kExactMatch,  // "em"
  kF1,          // "f1"
};
// "em" | "f1"; anything else throws Error naming both.
QaMetric parse_qa_metric(const std::string& name);
std::string qa_metric_name(QaMetric metric);

// See the rules above.
std::string normalize_answer(const std::string& s);
// 1.0 or 0.0.
double exact_match(const std::string& prediction, const std::string& ground_truth);
// In [0, 1].
double token_f1(const std::string& prediction, const std::string& ground_truth);

// The trimmed text inside the last complete <answer>...</answer>, or nullopt.
std::optional<std::string> extract_final_answer(const std::string& response);

// The metric of prediction against ground_truth: a string, or an array of acceptable
// strings (the max over them). Throws Error when ground_truth is neither (or an array
// holds a non-string): a data error, not a policy one. An empty array scores 0.
double score_prediction(const std::string& prediction, const json& ground_truth, QaMetric metric);

// score_prediction on extract_final_answer(response); 0 when the response has no answer.
double score_answer(const std::string& response, const json& ground_truth, QaMetric metric);

}  // namespace agentr1::tasks
