#include "agentr1/env/observation.h"

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::env {

Observation Observation::from_text(std::string text) {
  Observation o;
  o.kind_ = Kind::kText;
  o.text_ = std::move(text);
  return o;
}

Observation Observation::from_messages(json messages) {
  AGENTR1_CHECK(messages.is_array(),
                "an Observation's messages must be a JSON array of chat messages, got "
                    << messages.type_name());
  Observation o;
  o.kind_ = Kind::kMessages;
  o.messages_ = std::move(messages);
  return o;
}

Observation Observation::from_tokens(TokenIds ids) {
  Observation o;
  o.kind_ = Kind::kTokens;
  o.tokens_ = std::move(ids);
  return o;
}

const char* observation_kind_name(Observation::Kind k) {
  switch (k) {
    case Observation::Kind::kText: return "text";
    case Observation::Kind::kMessages: return "messages";
    case Observation::Kind::kTokens: return "tokens";
  }
  return "?";
}

const std::string& Observation::text() const {
  AGENTR1_CHECK(kind_ == Kind::kText,
                "Observation holds " << observation_kind_name(kind_) << ", not text");
  return text_;
}

const json& Observation::messages() const {
  AGENTR1_CHECK(kind_ == Kind::kMessages,
                "Observation holds " << observation_kind_name(kind_) << ", not messages");
  return messages_;
}

const TokenIds& Observation::tokens() const {
  AGENTR1_CHECK(kind_ == Kind::kTokens,
                "Observation holds " << observation_kind_name(kind_) << ", not tokens");
  return tokens_;
}

size_t trailing_special_count(const text::Tokenizer& tokenizer, const TokenIds& ids) {
  size_t n = 0;
  while (n < ids.size() && tokenizer.is_special(ids[ids.size() - 1 - n])) ++n;
  return n;
}

std::string action_text(const text::Tokenizer& tokenizer, const TokenIds& ids) {
  const size_t n_special = trailing_special_count(tokenizer, ids);
  return tokenizer.decode(TokenIds(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(n_special)));
}

}  // namespace agentr1::env
