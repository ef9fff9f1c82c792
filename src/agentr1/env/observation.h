// agentr1/env/observation.h — what an environment shows the policy, and what the
// policy did.
//
//   Observation o = Observation::from_messages(sample.prompt);  // flow renders + encodes
//   Observation o = Observation::from_tokens(ids);              // used verbatim (exact)
//   Action a{gen.token_ids, action_text(tokenizer, gen.token_ids)};
//
// An Observation is exactly one of: text, chat messages, token ids, and it is always
// the FULL next prompt (not a delta): the environment owns the context. Token ids are
// the exact form (append-only contexts keep the sampled ids); text and messages are
// encoded by the flow (messages through the chat template with a generation prompt).
#pragma once

#include <optional>
#include <string>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"

namespace agentr1::text {
class Tokenizer;
}

namespace agentr1::env {

class Observation {
 public:
  enum class Kind { kText, kMessages, kTokens };

  static Observation from_text(std::string text);
  static Observation from_messages(json messages);   // throws Error unless a JSON array
  static Observation from_tokens(TokenIds ids);

  Kind kind() const { return kind_; }
  const std::string& text() const;      // throws Error unless kind() == kText
  const json& messages() const;         // throws Error unless kind() == kMessages
  const TokenIds& tokens() const;       // throws Error unless kind() == kTokens

 private:
  Kind kind_ = Kind::kText;
  std::string text_;
  json messages_;
  TokenIds tokens_;
};

const char* observation_kind_name(Observation::Kind k);

struct Action {
  TokenIds ids;        // exactly what the policy sampled, its stop token included
  std::string text;    // action_text(tokenizer, ids): the decoded response without its
                       // trailing special tokens (<|im_end|>, eos), what tool-call parsers,
                       // games and chat messages read. The flow decodes it once per turn
                       // (Step::response_text); environments use it and never decode ids
};

// The number of trailing ids of `ids` that are special tokens (e.g. 1 for a response
// ending with <|im_end|>).
size_t trailing_special_count(const text::Tokenizer& tokenizer, const TokenIds& ids);

// Action::text of `ids`: tokenizer.decode of ids without their trailing special tokens.
std::string action_text(const text::Tokenizer& tokenizer, const TokenIds& ids);

struct StepResult {
  Observation observation;   // next prompt (ignored when done)
  float reward = 0.0f;       // per-step reward
  bool done = false;         // episode over
  std::string anchor;        // the raw environment state the action was taken in, for
                             // GiGPO (see AgentEnv::step); "" = unknown. Step::anchor
  std::optional<float> game_reward;  // a text game's reward for this step (GameEnv);
                             // unset for other envs. Step::game_reward
  json info = json::object();  // tool calls, errors, per-step metrics (namespaced keys);
                               // logged only, and never a key of a Step field
                               // (is_step_field_info_key: anchor, game_reward, ...)
  std::vector<Step> side_steps;  // model calls the env made itself and wants trained (e.g.
                                 // a summarize context policy with train_summary), in order;
                                 // the flow records them as Steps before the next turn
};

}  // namespace agentr1::env
