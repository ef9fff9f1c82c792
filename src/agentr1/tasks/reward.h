// agentr1/tasks/reward.h — final-answer extraction, GSM8K-style scoring, and the
// reward-function registry (keyed by data_source).
//
//   std::optional<std::string> a = extract_answer("... so 5 * 3 = 15.\n#### 15", AnswerMethod::kStrict);
//   float s = gsm8k_score("#### 1,234", json("1234"));          // 1.0
//
//   register_builtin_tasks();                                   // tasks/builtin.h
//   RewardFn fn = make_reward_fn("arith_calc");                 // or "gsm8k", "openai/gsm8k"
//   float r = fn(response_text, sample.ground_truth, sample.extra_info);
//
// Follows verl/utils/reward_score/gsm8k.py (checked against verl main, Jan 2026):
//   * only the last 300 characters of the response are searched;
//   * strict: the LAST match of `#### (\-?[0-9\.\,]+)`, commas (and '$') removed;
//   * flexible: the last match of `(\-?[0-9\.\,]+)` that is not "" or ".";
//   * no answer -> 0; correct -> score (1.0); found but wrong -> format_score (0.0).
// Deliberate differences from verl:
//   * answers and ground truths are compared as exact decimal numbers, not strings:
//     "12.0" == "12", "72." == "72", "007" == "7", "-0" == "0" (verl: string equality);
//   * flexible mode also removes commas ("1,234" matches 1234; verl keeps them) and
//     skips every match without a digit (verl skips only "" and ".", so "Hi, there"
//     yields "," there; and when all matches are invalid verl returns the invalid one);
//   * the 300-character clip counts bytes, not code points (equal for ASCII text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::tasks {

enum class AnswerMethod {
  kStrict,    // the last "#### <number>"
  kFlexible,  // the last number anywhere
};

// "strict" | "flexible"; anything else throws Error naming both.
AnswerMethod parse_answer_method(const std::string& name);

// The extracted answer text (commas and '$' removed), or nullopt when none was found.
// Only the last `clip_chars` bytes of `text` are searched (0 = search everything).
std::optional<std::string> extract_answer(const std::string& text, AnswerMethod method,
                                          size_t clip_chars = 300);

// Canonical decimal text of a number written like "1,234", "-12.50", "$7", ".5", "72.":
// optional sign, digits with at most one '.', commas and '$' ignored. Returns nullopt
// when `s` is not such a number (e.g. "1.2.3", ",", "abc", "1e5").
std::optional<std::string> normalize_number(const std::string& s);

// The ground truth (a JSON string or number) as canonical decimal text. Throws Error
// naming the value when it is not a plain decimal number (a data error, not a policy one).
std::string normalize_ground_truth(const json& ground_truth);

struct Gsm8kScoreOptions {
  AnswerMethod method = AnswerMethod::kStrict;  // how the answer is extracted
  float score = 1.0f;           // reward for a correct answer
  float format_score = 0.0f;    // reward when an answer was found but is wrong
  size_t clip_chars = 300;      // search only the last N bytes (verl: 300); 0 = all

  // Reads {"method": "strict"|"flexible", "score": f, "format_score": f, "clip_chars": n}
  // (null = defaults) through Gsm8kScoreKwargs and bind_into, the keys named
  // reward_kwargs.<key>: an unknown key fails with the nearest and the valid keys, a
  // wrong type or range with the key, the rule and the value.
  static Gsm8kScoreOptions from_json(const json& kwargs);
};

// Gsm8kScoreOptions as reward kwargs spell them (the method by name, strings at the
// edge). Its values, defaults included, are those of the options it is made from.
struct Gsm8kScoreKwargs {
  std::string method;   // "strict" | "flexible"
  float score;          // Gsm8kScoreOptions::score
  float format_score;   // Gsm8kScoreOptions::format_score
  int64_t clip_chars;   // Gsm8kScoreOptions::clip_chars; >= 0

  explicit Gsm8kScoreKwargs(const Gsm8kScoreOptions& o = {});
  template <class V>
  void visit(V& v) {
    v.field("method", method, "answer extraction: strict (the last '#### <n>') | flexible (the last number)");
    v.field("score", score, "reward for a correct answer");
    v.field("format_score", format_score, "reward when an answer was found but is wrong");
    v.field("clip_chars", clip_chars, "search only the last N bytes of the response; 0 = all");
  }
  // Throws Error naming the key, the rule and the value.
  void validate() const;
  Gsm8kScoreOptions options() const;
};

// 0 when no answer is found, opts.score when it equals the ground truth as a number,
// opts.format_score otherwise. Throws Error only for an invalid ground truth.
float gsm8k_score(const std::string& response, const json& ground_truth,
                  const Gsm8kScoreOptions& opts = {});

// --- registry --------------------------------------------------------------------

// response_text: the policy's final text; extra: the sample's extra_info.
using RewardFn =
    std::function<float(const std::string& response_text, const json& ground_truth, const json& extra)>;
// Builds a RewardFn from per-run kwargs (e.g. {"method": "flexible"}).
using RewardFnFactory = std::function<RewardFn(const json& kwargs)>;

// A core/registry.h Registry (what: "reward function"). Throws Error when `name` is
// empty or already registered, or the factory is empty. Thread-safe.
void register_reward_fn(const std::string& name, RewardFnFactory factory);
// Throws Error listing the known names when `name` is unknown (names are data_source
// values such as "arith_calc", "gsm8k", "openai/gsm8k"; see register_builtin_tasks()),
// and the factory's errors prefixed "reward function '<name>'".
RewardFn make_reward_fn(const std::string& name, const json& kwargs = json::object());
bool has_reward_fn(const std::string& name);
std::vector<std::string> reward_fn_names();

}  // namespace agentr1::tasks
