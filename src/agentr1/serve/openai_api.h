// agentr1/serve/openai_api.h — the OpenAI wire format of `agentr1 serve`: request bodies
// in, engine requests out; engine results in, response bodies out. No sockets, no
// torch: every function here is pure and tested without a server or a model.
//
//   ServedModel m{"tiny", /*max_context=*/2048, tok.vocab_size(), created, tok, tmpl, "hermes", eos};
//   CompletionRequest req = parse_completion_request(body, m, /*default_seed=*/rng());  // throws ApiError
//   std::vector<GenResult> out = generator.generate(req.gen_requests());                 // prompts x n
//   json response = completion_response(req, out, m, "cmpl-1", now);
//
// Semantics (vLLM's where OpenAI says nothing; the choices are written here once):
//   - Stops: the request's `stop` strings and `stop_token_ids`, plus, unless
//     `ignore_eos` is true, ServedModel::eos_ids (the tokenizer's eos token and the
//     eos ids of config.json and generation_config.json). finish_reason is "stop" for
//     a stop token or string, "length" for max_tokens or a full context window (a
//     max_tokens beyond the window is accepted: generation ends when it is full).
//     stop_reason: the stop string, the token id when it was one of the request's
//     `stop_token_ids`, null otherwise (eos, length).
//   - Text: decoded from the generated ids (special tokens dropped unless
//     skip_special_tokens is false). It ends before the stop token or stop string that
//     fired; with include_stop_str_in_output it ends after it (the stop token's text,
//     unless skipped as special; the stop string, not what its last token decoded past it).
//   - Token ids (return_token_ids, a vLLM extension): choices[i].token_ids are exactly
//     the engine's GenResult::token_ids (the stop token INCLUDED when it fired) and
//     choices[i].prompt_token_ids the prompt; logprobs list one entry per token id
//     (stop token included), each exactly GenResult::logprobs (a float printed as the
//     shortest decimal that parses back to the same double, hence the same float).
//   - Log-probs: the engine returns the sampled token's log-prob only (log_softmax of
//     logits / temperature, before top-k/top-p), so `top_logprobs` lists hold that one
//     token whatever k the request asked for (k in 0..20 is accepted).
//   - Prompt log-probs (/v1/completions `prompt_logprobs`: k in 0..20, vLLM's field and
//     shape): each choice gets prompt_logprobs, one entry per prompt token, the first
//     null, each other an object mapping token-id strings to {"logprob", "rank",
//     "decoded_token"}: the actual prompt token (rank = 1 + the ids more likely than it)
//     and the k most likely ids (ranks 1..k), so k or k + 1 entries; k = 0: the actual
//     token only. They come from a scoring forward of the served model over the prompt
//     (OpenAIServer's PromptScorer), not from generation: log_softmax(logits /
//     temperature) at the request's `temperature`, where 0 or absent counts as 1. This
//     differs from vLLM, whose prompt log-probs are the raw model's (temperature 1)
//     whatever the request says. With prompt_logprobs, max_tokens may be 0 (nothing is
//     generated: text "", finish_reason "length"); stream is refused.
//   - Seeds: with `seed` s the j-th sample of every prompt (j < n) uses seed s + j, so a
//     request with n = 1 and seed s gives what the in-process engine gives for
//     SamplingParams::seed = s. Without a seed the server draws one per request.
//   - choices[i].policy_version (agentr1 extension): the weights version that sampled
//     the choice (GenResult::policy_version).
//   - Text prompts of /v1/completions are encoded with special tokens recognised; a BOS
//     token is prepended when tokenizer_config.json sets add_bos_token (as HF's
//     encode with add_special_tokens does). Chat prompts are the rendered template
//     (which writes BOS itself), encoded as is.
//   - Chat tool calls: with `tools` given and tool_choice "auto" (default), the
//     response text is parsed with ServedModel::tool_format; when it holds well-formed
//     calls, message.tool_calls lists them (arguments as a JSON string), content is the
//     text outside the calls (null if empty), reasoning_content the format's reasoning
//     channel if it has one (gpt_oss analysis) and finish_reason is "tool_calls";
//     otherwise content is the raw text. Call ids are "call_" + 24 hex digits, or 9
//     alphanumerics for formats whose template requires them (mistral: the model's
//     own id when valid). tool_choice "none" renders the tools but
//     parses nothing. Assistant messages whose tool_calls arguments are JSON strings
//     are passed to the template with the arguments decoded into objects (as vLLM does);
//     a null content is passed as "".
//   - Streaming (`stream: true`, both endpoints): server-sent events as the engine
//     samples (GenRequest::on_token; see Streamer). Chat: a role chunk per choice, then
//     content deltas, then a chunk with finish_reason (and stop_reason, token ids,
//     policy_version as the non-streamed choice has them), then usage when
//     stream_options.include_usage. Completions: text deltas, then the finish chunk, then
//     usage. A delta holds only text the final response is certain to contain, so the
//     deltas concatenate to the non-streamed text: while a stop string may still
//     complete, its length - 1 last bytes wait; a stop token adds no text; with tools,
//     only text before any tool-call markup goes out early (ToolFormat::
//     stream_safe_prefix; trailing whitespace waits, as message.content is trimmed
//     before calls), reasoning and calls go out in one delta each at the end. One
//     documented difference: with tool calls, whitespace that began the response was
//     already sent while message.content trims it. Log-probs go out with each token.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::serve {

// An error answered to the client: HTTP status plus OpenAI's error object.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(message), status(status), param(std::move(param)), type(std::move(type)),
        code(std::move(code)) {}
  int status;         // 400, 401, 404, 405, 500 ...
  std::string param;  // the request field at fault ("" = none)
  std::string type;   // "invalid_request_error", "authentication_error", "server_error" ...
  std::string code;   // machine-readable code ("" = none)
};

// Request-body helpers shared by the OpenAI and SGLang wire formats (sglang_api.h):
// the value of `key`, or nullptr when absent or null (clients send null for unset); and
// a JSON value's kind for error messages ("an integer", "a list", ...).
const json* field(const json& body, const char* key);
std::string type_name(const json& v);

// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
json error_body(const std::string& message, const std::string& type = "invalid_request_error",
                const std::string& param = "", const std::string& code = "");
json error_body(const ApiError& e);

// What the server serves: the model's name and limits, its tokenizer and template.
struct ServedModel {
  std::string name;                               // id in /v1/models; requests may name it or omit "model"
  int max_context = 0;                            // prompt + generated tokens per sequence
  int64_t vocab_size = 0;                         // prompt ids must lie in [0, vocab_size)
  int64_t created = 0;                            // unix seconds, for /v1/models
  text::Tokenizer tokenizer;                      // encodes prompts, decodes results
  std::optional<text::ChatTemplate> chat_template;  // unset: /v1/chat/completions answers 400
  std::string tool_format = "hermes";             // registered ToolFormat that parses chat tool calls
                                                  // (text::default_tool_format of the template)
  TokenIds eos_ids;                               // stop ids unless a request sets ignore_eos
};

// /v1/models body.
json models_response(const ServedModel& model);

// Output options shared by both endpoints.
struct OutputOptions {
  int n = 1;                               // samples per prompt
  uint64_t seed = 0;                       // sample j of each prompt uses seed + j
  std::optional<int> logprobs;             // completions: `logprobs`; chat: `top_logprobs` when `logprobs`
  bool echo = false;                       // completions: prompt text before the completion
  bool return_token_ids = false;           // token_ids / prompt_token_ids per choice
  bool skip_special_tokens = true;         // drop special tokens from the text
  bool include_stop_str_in_output = false; // keep the stop string in the text
  TokenIds request_stop_ids;               // the request's stop_token_ids (stop_reason is the id)
  bool stream = false;                     // server-sent events
  bool include_usage = false;              // stream_options.include_usage
};

// One prompt's log-probs from a scoring forward (see prompt_logprobs at the top).
struct PromptLogprobs {
  std::vector<float> logprob;    // [len] log p(ids[t] | ids[<t]) at the temperature; [0] = 0 (unused)
  std::vector<int64_t> rank;     // [len] 1 + the ids more likely than ids[t]; [0] = 0 (unused)
  std::vector<TokenId> top_ids;  // [len * k] the k most likely ids at t, most likely first
  std::vector<float> top_logprob;  // [len * k] their log-probs
};

struct CompletionRequest {
  std::vector<TokenIds> prompts;           // one or more prompts (a batch)
  SamplingParams sampling;                 // seed = the base seed; max_new_tokens may be 0
                                           // only with prompt_logprobs
  OutputOptions out;
  std::optional<int> prompt_logprobs;      // `prompt_logprobs` k (0..20); unset = none
  double prompt_temperature = 1.0;         // the request's temperature as sent, 0 -> 1
  // prompts x n engine requests, prompt-major, seeds as documented above.
  std::vector<GenRequest> gen_requests() const;
};

// Validates a /v1/completions body. Throws ApiError (400) naming the field and the
// rule: not an object, wrong types, unknown model, empty or too long prompt, ids out of
// the vocabulary, sampling values out of range, unsupported options (penalties,
// logit_bias, suffix, best_of > n, echo with logprobs, prompt_logprobs outside 0..20 or
// with stream, max_tokens 0 without prompt_logprobs).
CompletionRequest parse_completion_request(const json& body, const ServedModel& model, uint64_t default_seed);

// Builds the text_completion body. `results` are gen_requests()'s results in order;
// `prompt_lps` (one per prompt, k top ids each) when req.prompt_logprobs is set.
json completion_response(const CompletionRequest& req, const std::vector<GenResult>& results,
                         const ServedModel& model, const std::string& id, int64_t created,
                         const std::vector<PromptLogprobs>* prompt_lps = nullptr);

struct ChatRequest {
  TokenIds prompt;             // the rendered template, encoded
  SamplingParams sampling;
  OutputOptions out;
  bool parse_tools = false;    // tools given and tool_choice is not "none"
  std::vector<GenRequest> gen_requests() const;
};

// Validates a /v1/chat/completions body and renders its messages. Throws ApiError
// (400) as parse_completion_request does, and for malformed messages or tools (the
// template's error), tool_choice other than "auto"/"none", unknown
// chat_template_kwargs that set messages/tools/documents/add_generation_prompt, a model
// without a chat template. chat_template_kwargs reach the template as variables.
ChatRequest parse_chat_request(const json& body, const ServedModel& model, uint64_t default_seed);

// The chat.completion body.
json chat_response(const ChatRequest& req, const std::vector<GenResult>& results, const ServedModel& model,
                   const std::string& id, int64_t created);

// The chunks of one streamed response (chat.completion.chunk or text_completion), made
// as tokens arrive; each is sent as "data: <json>\n\n", then "data: [DONE]\n\n".
// Not thread-safe: the server calls it under its own lock. The request must outlive it.
//
//   Streamer st(chat_req, model, id, now);          // or a CompletionRequest
//   send(st.begin());                               // chat: role chunks; echo: prompts
//   send(st.push(i, token, logprob));               // on each sampled token of choice i
//   send(st.finish(i, result_i));                   // once choice i's result is ready
//   send(st.end());                                 // after every finish: usage
// finish() sends what the final response has beyond what push() sent (all of it for a
// generator that never called on_token) and checks nothing was sent that the final
// response does not have (logged as an error if it ever happens).
class Streamer {
 public:
  Streamer(const ChatRequest& req, const ServedModel& model, std::string id, int64_t created);
  Streamer(const CompletionRequest& req, const ServedModel& model, std::string id, int64_t created);
  ~Streamer();
  Streamer(Streamer&&) noexcept;
  size_t choices() const;
  std::vector<json> begin();
  std::vector<json> push(size_t choice, TokenId id, float logprob);
  std::vector<json> finish(size_t choice, const GenResult& result);
  std::vector<json> end();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The chunks of a streamed chat response whose results are all known (a Streamer fed
// every token, then every result): what a client of the server receives.
std::vector<json> chat_stream_chunks(const ChatRequest& req, const std::vector<GenResult>& results,
                                     const ServedModel& model, const std::string& id, int64_t created);
// Likewise for /v1/completions.
std::vector<json> completion_stream_chunks(const CompletionRequest& req, const std::vector<GenResult>& results,
                                           const ServedModel& model, const std::string& id, int64_t created);

// The stop ids of a model directory's tokenizer and configs, deduplicated: the
// tokenizer's eos token, config.json's eos_token_id and generation_config.json's
// eos_token_id (an int or a list), each kept only if < vocab_size. `config` and
// `generation_config` may be null (absent files).
TokenIds default_eos_ids(const text::Tokenizer& tok, const json& config, const json& generation_config,
                         int64_t vocab_size);

}  // namespace agentr1::serve
