#include "agentr1/tasks/reward.h"

#include <memory>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/registry.h"

namespace agentr1::tasks {
namespace {

bool is_num_char(char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; }

// Python's re.findall("(\-?[0-9\.\,]+)", s) starting the scan at each offset in turn;
// appends [begin, end) of each non-overlapping match.
void find_numbers(const std::string& s, size_t from, bool anchored_once,
                  std::vector<std::pair<size_t, size_t>>* out) {
  size_t i = from;
  while (i < s.size()) {
    size_t j = i;
    if (s[j] == '-' && j + 1 < s.size() && is_num_char(s[j + 1])) ++j;
    if (is_num_char(s[j])) {
      size_t k = j;
      while (k < s.size() && is_num_char(s[k])) ++k;
      out->push_back({i, k});
      i = k;
    } else {
      ++i;
    }
    if (anchored_once) return;
  }
}

std::string strip_chars(const std::string& s, const std::string& drop) {
  std::string out;
  for (char c : s) {
    if (drop.find(c) == std::string::npos) out += c;
  }
  return out;
}

bool has_digit(const std::string& s) {
  for (char c : s) {
    if (c >= '0' && c <= '9') return true;
  }
  return false;
}

// Reward functions are std::function values; the registry holds them behind a pointer.
using RewardRegistry = Registry<RewardFn, const json&>;
constexpr const char* kWhat = "reward function";

}  // namespace

AnswerMethod parse_answer_method(const std::string& name) {
  if (name == "strict") return AnswerMethod::kStrict;
  if (name == "flexible") return AnswerMethod::kFlexible;
  throw Error("unknown answer extraction method '" + name + "'; known: strict, flexible");
}

std::optional<std::string> extract_answer(const std::string& text, AnswerMethod method,
                                          size_t clip_chars) {
  size_t start = 0;
  if (clip_chars > 0 && text.size() > clip_chars) {
    start = text.size() - clip_chars;
    // Do not start inside a UTF-8 sequence.
    while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  }
  if (method == AnswerMethod::kStrict) {
    std::optional<std::string> last;
    size_t i = start;
    const std::string marker = "#### ";
    while (true) {
      size_t m = text.find(marker, i);
      if (m == std::string::npos) break;
      std::vector<std::pair<size_t, size_t>> hit;
      find_numbers(text, m + marker.size(), /*anchored_once=*/true, &hit);
      if (!hit.empty() && hit[0].first == m + marker.size()) {
        last = strip_chars(text.substr(hit[0].first, hit[0].second - hit[0].first), ",$");
        i = hit[0].second;
      } else {
        i = m + 1;
      }
    }
    return last;
  }
  std::vector<std::pair<size_t, size_t>> hits;
  find_numbers(text, start, /*anchored_once=*/false, &hits);
  for (auto it = hits.rbegin(); it != hits.rend(); ++it) {
    std::string cand = text.substr(it->first, it->second - it->first);
    if (has_digit(cand)) return strip_chars(cand, ",$");
  }
  return std::nullopt;
}

std::optional<std::string> normalize_number(const std::string& s_in) {
  std::string s = strip_chars(s_in, ",$");
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
    neg = s[i] == '-';
    ++i;
  }
  std::string ip, fp;
  bool point = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c >= '0' && c <= '9') {
      (point ? fp : ip) += c;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      return std::nullopt;
    }
  }
  if (ip.empty() && fp.empty()) return std::nullopt;
  size_t nz = ip.find_first_not_of('0');
  ip = nz == std::string::npos ? "0" : ip.substr(nz);
  size_t lz = fp.find_last_not_of('0');
  fp = lz == std::string::npos ? "" : fp.substr(0, lz + 1);
  std::string out = ip;
  if (!fp.empty()) out += "." + fp;
  if (neg && out != "0") out = "-" + out;
  return out;
}

std::string normalize_ground_truth(const json& gt) {
  std::optional<std::string> norm;
  if (gt.is_string()) {
    norm = normalize_number(gt.get<std::string>());
  } else if (gt.is_number_integer() || gt.is_number_unsigned()) {
    norm = normalize_number(gt.dump());
  } else if (gt.is_number_float()) {
    norm = normalize_number(gt.dump());  // shortest round-trip text, e.g. 12.5
  }
  AGENTR1_CHECK(norm.has_value(), "ground truth " << gt.dump().substr(0, 60)
                                                  << " is not a plain decimal number (such as \"1234\" or "
                                                     "\"-3.5\"); fix reward_model.ground_truth in the data");
  return *norm;
}

Gsm8kScoreKwargs::Gsm8kScoreKwargs(const Gsm8kScoreOptions& o)
    : method(o.method == AnswerMethod::kFlexible ? "flexible" : "strict"),
      score(o.score),
      format_score(o.format_score),
      clip_chars(static_cast<int64_t>(o.clip_chars)) {}

void Gsm8kScoreKwargs::validate() const {
  with_context("'method'", [&] { return parse_answer_method(method); });
  AGENTR1_CHECK(clip_chars >= 0, "'clip_chars' must be >= 0 (0 = search the whole response), got " << clip_chars);
}

Gsm8kScoreOptions Gsm8kScoreKwargs::options() const {
  Gsm8kScoreOptions o;
  o.method = parse_answer_method(method);
  o.score = score;
  o.format_score = format_score;
  o.clip_chars = static_cast<size_t>(clip_chars);
  return o;
}

Gsm8kScoreOptions Gsm8kScoreOptions::from_json(const json& kwargs) {
  json tree = json::object();
  tree["reward_kwargs"] = kwargs;
  Gsm8kScoreKwargs k;
  bind_into(k, tree, "reward_kwargs");  // unknown keys, types, then validate()
  return k.options();
}

float gsm8k_score(const std::string& response, const json& ground_truth, const Gsm8kScoreOptions& opts) {
  std::string gt = normalize_ground_truth(ground_truth);
  std::optional<std::string> answer = extract_answer(response, opts.method, opts.clip_chars);
  if (!answer) return 0.0f;
  std::optional<std::string> norm = normalize_number(*answer);
  return (norm && *norm == gt) ? opts.score : opts.format_score;
}

void register_reward_fn(const std::string& name, RewardFnFactory factory) {
  AGENTR1_CHECK(factory, "reward function '" << name << "' registered with an empty factory");
  RewardRegistry::instance().add(
      name,
      [name, factory = std::move(factory)](const json& kwargs) {
        return std::make_unique<RewardFn>(with_context("reward function '" + name + "'", [&] { return factory(kwargs); }));
      },
      kWhat);
}

RewardFn make_reward_fn(const std::string& name, const json& kwargs) {
  return *RewardRegistry::instance().create(name, kwargs, kWhat);
}

bool has_reward_fn(const std::string& name) { return RewardRegistry::instance().contains(name); }

std::vector<std::string> reward_fn_names() { return RewardRegistry::instance().names(); }

}  // namespace agentr1::tasks
