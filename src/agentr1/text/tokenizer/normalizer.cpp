#include "agentr1/text/tokenizer/normalizer.h"

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/pretokenizer.h"

namespace agentr1::text {

namespace {

const char* const kSupportedNormalizers =
    "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence (or null)";

std::string string_field(const json& j, const char* key, const std::string& where) {
  AGENTR1_CHECK(j.contains(key) && j[key].is_string(),
                where << " needs a string \"" << key << "\", got " << j.dump());
  return j[key].get<std::string>();
}

}  // namespace

Pattern Pattern::from_json(const json& j, const std::string& where) {
  Pattern p;
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    p.literal_ = j["String"].get<std::string>();
    AGENTR1_CHECK(!p.literal_.empty(), where << ": an empty String pattern matches nowhere useful; "
                                                "give a non-empty \"String\"");
    return p;
  }
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    p.regex_ = std::make_shared<Regex>(j["Regex"].get<std::string>());
    return p;
  }
  throw Error(where + ": pattern must be {\"String\": ...} or {\"Regex\": ...}, got " + j.dump());
}

std::string Pattern::replace_all(std::string_view s, std::string_view content) const {
  std::string out;
  if (!regex_) {
    size_t pos = 0;
    while (true) {
      size_t hit = s.find(literal_, pos);
      if (hit == std::string_view::npos) break;
      out.append(s, pos, hit - pos);
      out.append(content);
      pos = hit + literal_.size();
    }
    if (pos == 0) return std::string(s);
    out.append(s, pos, std::string_view::npos);
    return out;
  }
  std::vector<Span> hits;
  regex_->find_all(s, 0, hits);
  size_t pos = 0;
  for (const Span& h : hits) {
    out.append(s, pos, h.begin - pos);
    out.append(content);
    pos = h.end;
  }
  out.append(s, pos, std::string_view::npos);
  return out;
}

void Normalizer::add(const json& j, std::vector<Step>& steps, const std::string& where) {
  if (j.is_null()) return;
  AGENTR1_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
                where << " must be null or an object with a string \"type\", got " << j.dump());
  const std::string type = j["type"].get<std::string>();
  Step step;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    step.kind = Kind::kUnicode;
    step.form = type == "NFC"    ? NormalForm::kNFC
                : type == "NFD"  ? NormalForm::kNFD
                : type == "NFKC" ? NormalForm::kNFKC
                                 : NormalForm::kNFKD;
  } else if (type == "Prepend") {
    step.kind = Kind::kPrepend;
    step.text = string_field(j, "prepend", where + " (Prepend)");
    if (step.text.empty()) return;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    AGENTR1_CHECK(j.contains("pattern"), where << ": Replace needs a \"pattern\"");
    step.pattern = std::make_shared<Pattern>(Pattern::from_json(j["pattern"], where + ".pattern"));
    step.text = string_field(j, "content", where + " (Replace)");
  } else if (type == "Sequence") {
    AGENTR1_CHECK(j.contains("normalizers") && j["normalizers"].is_array(),
                  where << ": Sequence needs an array \"normalizers\"");
    size_t k = 0;
    for (const auto& sub : j["normalizers"]) {
      add(sub, steps, where + ".normalizers[" + std::to_string(k++) + "]");
    }
    return;
  } else {
    throw Error(where + ": unsupported normalizer type \"" + type + "\"; supported: " +
                kSupportedNormalizers);
  }
  steps.push_back(std::move(step));
}

Normalizer Normalizer::from_json(const json& j, const std::string& where) {
  Normalizer n;
  add(j, n.steps_, where);
  return n;
}

std::string Normalizer::apply(std::string_view s) const {
  std::string out(s);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kUnicode:
        out = normalize(out, step.form);
        break;
      case Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case Kind::kReplace:
        out = step.pattern->replace_all(out, step.text);
        break;
    }
  }
  return out;
}

}  // namespace agentr1::text
