// agentr1/serve/sglang_api.h — SGLang's native wire format on `agentr1 serve`:
// POST /generate (GenerateReqInput in, the tokenizer manager's output dicts out) and
// GET /get_model_info. No sockets, no torch: pure functions over a ServedModel
// (openai_api.h), tested without a server or a model. rollout::RemoteGenerator with
// rollout.remote.api=sglang speaks this to SGLang and to `agentr1 serve` alike.
//
//   GenerateRequest req = parse_generate_request(body, served_model, /*default_seed=*/rng());  // throws ApiError
//   std::vector<GenResult> out = generator.generate(req.gen_requests());                       // prompts x n
//   json response = generate_response(req, out, served_model, "a1b2c3");   // an object, or a list (batch)
//
// Request (SGLang's GenerateReqInput; fields not listed are ignored, as SGLang ignores
// unknown ones, unless listed as refused):
//   text            a string, or a list of strings (a batch); encoded as HF's encode
//                   does (BOS prepended when tokenizer_config.json sets add_bos_token)
//   input_ids       a list of token ids, or a list of lists (a batch). Exactly one of
//                   text / input_ids (SGLang takes either; both is refused here)
//   sampling_params an object, or a list with one object per prompt:
//       max_new_tokens (default 128; null = the rest of the context window; >= 1 here,
//       SGLang's 0 = prefill only is refused; as in SGLang, a given max_new_tokens plus
//       the prompt must be below the context window, the default ends with the window), temperature (0 = greedy), top_p in (0, 1],
//       top_k (-1 = off, else >= 1), stop (a string or a list), stop_token_ids (with the
//       model's eos ids, ServedModel::eos_ids, the tokens that stop generation),
//       ignore_eos (as in SGLang: true turns off every stop token, stop_token_ids
//       included; stop strings still apply), skip_special_tokens (default true),
//       no_stop_trim (default false),
//       spaces_between_special_tokens (accepted; agentr1's decode never adds spaces),
//       n (samples per prompt, the same in every object), sampling_seed (a signed or
//       unsigned 64-bit integer: -1 and 18446744073709551615 are the same seed),
//       stream_interval (accepted, ignored). min_p, penalties and min_new_tokens must
//       hold their no-op values; json_schema, regex, ebnf, structural_tag, stop_regex,
//       logit_bias and custom_params are refused; any other key is refused naming the
//       known ones (SGLang's SamplingParams(**d) fails on it too).
//   return_logprob  bool, or a list (one per prompt); logprob_start_len must be -1 or
//                   absent (prompt log-probs are not computed); top_logprobs_num 0
//   return_text_in_logprobs  the third element of each log-prob triple is the token's
//                   text instead of null
//   rid             a string (the batch's ids become rid_0, rid_1, ...) or a list (one
//                   per prompt); default: the id the server passes to generate_response
//   stream          server-sent events, see generate_stream_chunks
//   refused:        input_embeds, image_data, video_data, audio_data, lora_path,
//                   session_params, custom_logit_processor, token_ids_logprob,
//                   return_hidden_states: true
//
// Response, per sample (prompt-major: prompt 0's n samples, then prompt 1's ...; a list
// when the body was a batch or n > 1, else the one object, as SGLang answers):
//   {"text", "output_ids", "meta_info": {"id", "finish_reason", "prompt_tokens",
//    "completion_tokens", "weight_version", "policy_version", "output_token_logprobs"?,
//    "input_token_logprobs"?}}
//   - output_ids: exactly the engine's GenResult::token_ids (a stop token that fired
//     included), so output_token_logprobs has one [logprob, token_id, text|null] triple
//     per id, each exactly GenResult::logprobs (log_softmax(logits / T), T = 1 when
//     greedy). input_token_logprobs is [] (logprob_start_len -1).
//   - finish_reason: {"type": "stop", "matched": <token id>} for a stop token (eos or
//     stop_token_ids), {"type": "stop", "matched": "<string>"} for a stop string (the
//     earliest in the decoded output), {"type": "length", "length": <tokens generated>}
//     for max_new_tokens or a full context window, {"type": "abort", "message"}.
//   - text: decoded from output_ids (special tokens dropped unless skip_special_tokens
//     is false). Unless no_stop_trim, a matched stop token is left out and the text ends
//     before the matched stop string; with no_stop_trim the stop token's text is kept
//     (unless skipped as special) and the text ends right after the stop string.
//   - weight_version: the policy version as a string (what SGLang reports after
//     /update_weights_from_disk {"weight_version"}; agentr1's clients send it equal to
//     policy_version); policy_version (agentr1 extension): GenResult::policy_version.
//   - Seeds: sample j of every prompt uses sampling_seed + j (SGLang gives all n the
//     same seed, which with deterministic sampling makes them identical). Without a
//     seed the server draws one per request (default_seed).
// Errors: ApiError 400 (SGLang answers {"error": {"message"}} with 400; error_body adds
// type, param and code), naming the field and the rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/generator.h"
#include "agentr1/core/json.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/serve/openai_api.h"

namespace agentr1::serve {

// One prompt of a /generate request and its own options.
struct GenerateItem {
  TokenIds prompt;                       // the prompt's token ids
  SamplingParams sampling;               // seed = the base seed of its n samples
  TokenIds request_stop_ids;             // sampling_params.stop_token_ids as given
  bool no_stop_trim = false;             // keep the matched stop token / string in text
  bool skip_special_tokens = true;       // drop special tokens from text
  bool return_logprob = false;           // meta_info.output_token_logprobs / input_token_logprobs
  std::string rid;                       // meta_info.id base ("" = the id given to generate_response)
};

struct GenerateRequest {
  std::vector<GenerateItem> items;       // one per prompt, in request order
  int n = 1;                             // samples per prompt
  bool batch = false;                    // text / input_ids was a list of prompts
  bool stream = false;                   // server-sent events
  bool return_text_in_logprobs = false;  // token text in the log-prob triples
  // True when the response is a list (a batch, or n > 1), false when one object.
  bool list_response() const { return batch || n > 1; }
  // items x n engine requests, prompt-major; sample j uses seed + j.
  std::vector<GenRequest> gen_requests() const;
};

// Validates a /generate body (see the top of this file). Throws ApiError (400) naming
// the field and the rule; never calls the generator.
GenerateRequest parse_generate_request(const json& body, const ServedModel& model, uint64_t default_seed);

// The response body: one output dict per result (results are gen_requests()'s, in
// order), a list when req.list_response(). `id` names results whose item has no rid:
// `id` itself for a single sample, id + "_" + k for sample k of a list response (a
// given rid likewise: rid for one sample, rid + "_" + j for n > 1).
json generate_response(const GenerateRequest& req, const std::vector<GenResult>& results, const ServedModel& model,
                       const std::string& id);

// The chunks of a streamed /generate response (stream: true), made as tokens arrive;
// each is sent as "data: <json>\n\n", then "data: [DONE]\n\n". As SGLang streams by
// default (incremental_streaming_output off), every chunk is cumulative: text and
// output_ids so far (text never ends inside a UTF-8 character), meta_info with
// finish_reason null, completion_tokens and output_token_logprobs so far (no
// weight_version / policy_version: the result says which weights sampled), until the
// sample's last chunk, which is generate_response's dict for that sample. One chunk per
// generated token: push() answers the previous token's chunk (a token's chunk goes out
// when the next one arrives, so the last token's is the final one, as in SGLang). List
// responses add "index" (the sample's position in generate_response's list). Not
// thread-safe; `req` and `model` must outlive it. The same interface as Streamer
// (openai_api.h):
//
//   GenerateStreamer st(req, model, id);
//   send(st.begin());                               // nothing (SGLang sends no header chunk)
//   send(st.push(i, token, logprob));               // on each sampled token of sample i
//   send(st.finish(i, result_i));                   // once sample i's result is ready
//   send(st.end());                                 // nothing
class GenerateStreamer {
 public:
  GenerateStreamer(const GenerateRequest& req, const ServedModel& model, std::string id);
  size_t choices() const;  // items x n
  std::vector<json> begin();
  std::vector<json> push(size_t choice, TokenId id, float logprob);
  std::vector<json> finish(size_t choice, const GenResult& result);
  std::vector<json> end();

 private:
  struct Sample {
    GenResult so_far;                     // tokens and log-probs pushed
    std::vector<text::StreamDecoder> dec;  // one, decoding so_far
    std::string text;                     // decoded text of so_far minus its last token
    std::string last_piece;               // what the last token added
  };
  json chunk(size_t choice, size_t tokens) const;
  const GenerateRequest* req_;
  const ServedModel* model_;
  std::string id_;
  std::vector<Sample> samples_;
};

// A streamed response whose results are all known: a GenerateStreamer fed every token,
// then every result, sample after sample (what a client receives from a generator that
// streams).
std::vector<json> generate_stream_chunks(const GenerateRequest& req, const std::vector<GenResult>& results,
                                         const ServedModel& model, const std::string& id);

// GET /get_model_info: {"model_path", "tokenizer_path", "is_generation": true,
// "weight_version", "model_type"?, "architectures"?}: model_path is what
// /update_weights_from_disk last loaded (or the served directory), model_type and
// architectures are copied from its config.json (`config`, may be null).
json model_info_response(const std::string& model_path, int64_t policy_version, const json& config = json());

}  // namespace agentr1::serve
