#include "agentr1/serve/sglang_api.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::serve {
namespace {

constexpr int kMaxN = 128;              // samples per prompt (as openai_api)
constexpr int kDefaultMaxNewTokens = 128;  // SGLang's SamplingParams default
constexpr int64_t kMaxTokens = 1 << 24;

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, message, param, "invalid_request_error");
}

bool as_bool(const json& v, const std::string& name) {
  if (!v.is_boolean()) throw bad(name, "'" + name + "' must be true or false, got " + type_name(v));
  return v.get<bool>();
}

bool get_bool(const json& obj, const char* key, bool def, const std::string& name) {
  const json* v = field(obj, key);
  return v ? as_bool(*v, name) : def;
}

double get_number(const json& obj, const char* key, double def, const std::string& name) {
  const json* v = field(obj, key);
  if (!v) return def;
  if (!v->is_number()) throw bad(name, "'" + name + "' must be a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x)) throw bad(name, "'" + name + "' must be finite");
  return x;
}

int64_t get_int(const json& obj, const char* key, int64_t def, int64_t lo, int64_t hi, const std::string& name) {
  const json* v = field(obj, key);
  if (!v) return def;
  if (!v->is_number_integer())
    throw bad(name, "'" + name + "' must be an integer, got " + type_name(*v) + " " + v->dump());
  const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t x = too_big ? hi : v->get<int64_t>();
  if (too_big || x < lo || x > hi)
    throw bad(name, "'" + name + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                        v->dump());
  return x;
}

TokenIds ids_from_json(const json& list, const ServedModel& m, const std::string& name) {
  TokenIds ids;
  ids.reserve(list.size());
  for (const json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= m.vocab_size)
      throw bad(name, "'" + name + "' must hold token ids in 0.." + std::to_string(m.vocab_size - 1) + ", got " +
                          id.dump());
    ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
  return ids;
}

TokenIds encode_text(const std::string& s, const ServedModel& m) {
  TokenIds ids;
  const auto bos = m.tokenizer.bos_token_id();
  if (m.tokenizer.add_bos_token() && bos) ids.push_back(*bos);
  const TokenIds body = m.tokenizer.encode(s);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

// The keys of sampling_params this server knows (accepted or refused by value).
const std::vector<std::string>& known_sampling_keys() {
  static const std::vector<std::string> k = {
      "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids", "stop_regex",
      "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "n", "sampling_seed",
      "stream_interval", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
      "json_schema", "regex", "ebnf", "structural_tag", "logit_bias", "custom_params"};
  return k;
}

// One sampling_params object into item (prefix names the object in errors).
void parse_sampling(const json& sp, const std::string& prefix, const ServedModel& m, uint64_t default_seed,
                    GenerateItem& item, int& n) {
  if (!sp.is_object()) throw bad(prefix, "'" + prefix + "' must be an object, got " + type_name(sp));
  auto name = [&](const char* key) { return prefix + "." + key; };
  for (auto it = sp.begin(); it != sp.end(); ++it) {
    const auto& known = known_sampling_keys();
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw bad(name(it.key().c_str()), "unknown sampling parameter '" + it.key() + "' in " + prefix + " (known: " +
                                            list + ")");
    }
  }
  for (const char* key : {"json_schema", "regex", "ebnf", "structural_tag", "stop_regex", "custom_params"})
    if (field(sp, key))
      throw bad(name(key), "'" + name(key) + "' is not supported by agentr1 serve (no constrained decoding or "
                                              "custom processors); leave it out");
  if (const json* v = field(sp, "logit_bias"); v && !(v->is_object() && v->empty()))
    throw bad(name("logit_bias"), "'" + name("logit_bias") + "' is not supported by agentr1 serve; leave it out");
  for (const char* key : {"frequency_penalty", "presence_penalty", "min_p"})
    if (get_number(sp, key, 0.0, name(key)) != 0.0)
      throw bad(name(key), "'" + name(key) + "' is not supported by agentr1 serve; send 0 or leave it out");
  if (get_number(sp, "repetition_penalty", 1.0, name("repetition_penalty")) != 1.0)
    throw bad(name("repetition_penalty"),
              "'" + name("repetition_penalty") + "' is not supported by agentr1 serve; send 1 or leave it out");
  if (get_int(sp, "min_new_tokens", 0, 0, kMaxTokens, name("min_new_tokens")) != 0)
    throw bad(name("min_new_tokens"),
              "'" + name("min_new_tokens") + "' is not supported by agentr1 serve; send 0 or leave it out");
  get_int(sp, "stream_interval", 1, 1, kMaxTokens, name("stream_interval"));
  get_bool(sp, "spaces_between_special_tokens", true, name("spaces_between_special_tokens"));

  SamplingParams& s = item.sampling;
  // max_new_tokens: absent = 128 (SGLang's default); null = the rest of the context
  // window (SGLang clips an unset one there); set later once the prompt is known.
  if (!sp.contains("max_new_tokens")) {
    s.max_new_tokens = -1;  // resolved by the caller: 128, not checked against the window
  } else if (sp["max_new_tokens"].is_null()) {
    s.max_new_tokens = 0;  // resolved by the caller: the room the prompt leaves
  } else {
    s.max_new_tokens = static_cast<int>(get_int(sp, "max_new_tokens", kDefaultMaxNewTokens, 1, kMaxTokens,
                                                name("max_new_tokens")));
  }
  const double t = get_number(sp, "temperature", 1.0, name("temperature"));
  if (t < 0 || t > 1e4)
    throw bad(name("temperature"), "'" + name("temperature") + "' must be in [0, 10000] (0 = greedy), got " +
                                       json(t).dump());
  s.temperature = static_cast<float>(t);
  const double p = get_number(sp, "top_p", 1.0, name("top_p"));
  if (!(p > 0 && p <= 1)) throw bad(name("top_p"), "'" + name("top_p") + "' must be in (0, 1], got " + json(p).dump());
  s.top_p = static_cast<float>(p);
  const int64_t k = get_int(sp, "top_k", -1, -1, std::numeric_limits<int32_t>::max(), name("top_k"));
  if (k == 0) throw bad(name("top_k"), "'" + name("top_k") + "' must be -1 (off) or at least 1, got 0");
  s.top_k = k < 0 ? 0 : static_cast<int>(k);
  // A top_k of 1 is greedy; so is SGLang's temperature 0 (it samples with top_k 1 at T = 1).
  n = static_cast<int>(get_int(sp, "n", 1, 1, kMaxN, name("n")));

  if (const json* v = field(sp, "sampling_seed")) {
    if (!v->is_number_integer())
      throw bad(name("sampling_seed"), "'" + name("sampling_seed") + "' must be an integer in -2^63..2^64-1, got " +
                                           v->dump());
    // The 64 bits: SGLang (torch) takes a signed seed, agentr1 an unsigned one.
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  } else {
    s.seed = default_seed;
  }

  if (const json* v = field(sp, "stop")) {
    std::vector<std::string> stops;
    if (v->is_string()) {
      stops.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const json& x : *v) {
        if (!x.is_string())
          throw bad(name("stop"), "'" + name("stop") + "' must be a string or a list of strings, got an element " +
                                      x.dump());
        stops.push_back(x.get<std::string>());
      }
    } else {
      throw bad(name("stop"), "'" + name("stop") + "' must be a string or a list of strings, got " + type_name(*v));
    }
    for (const std::string& x : stops)
      if (x.empty()) throw bad(name("stop"), "'" + name("stop") + "' strings must not be empty");
    s.stop_strings = stops;
  }
  if (const json* v = field(sp, "stop_token_ids")) {
    if (!v->is_array())
      throw bad(name("stop_token_ids"), "'" + name("stop_token_ids") + "' must be a list of token ids, got " +
                                            type_name(*v));
    item.request_stop_ids = ids_from_json(*v, m, name("stop_token_ids"));
  }
  // SGLang checks every stop token, the request's and the model's eos, only when
  // ignore_eos is false (Req.check_finished); stop strings apply either way.
  if (!get_bool(sp, "ignore_eos", false, name("ignore_eos"))) {
    s.stop_token_ids = item.request_stop_ids;
    for (TokenId id : m.eos_ids)
      if (std::find(s.stop_token_ids.begin(), s.stop_token_ids.end(), id) == s.stop_token_ids.end())
        s.stop_token_ids.push_back(id);
  }
  item.skip_special_tokens = get_bool(sp, "skip_special_tokens", true, name("skip_special_tokens"));
  item.no_stop_trim = get_bool(sp, "no_stop_trim", false, name("no_stop_trim"));
}

// A per-prompt field: one value for all, or a list with one per prompt. Returns the
// value for prompt i (nullptr when absent).
const json* per_prompt(const json& body, const char* key, size_t i, size_t count) {
  const json* v = field(body, key);
  if (!v || !v->is_array()) return v;
  if (v->size() != count)
    throw bad(key, std::string("'") + key + "' as a list must have one entry per prompt (" + std::to_string(count) +
                       "), got " + std::to_string(v->size()));
  const json& e = (*v)[i];
  return e.is_null() ? nullptr : &e;
}

// A sample decoded for the client.
struct Output {
  std::string text;
  json finish;  // finish_reason object
};

// Which stop string fired: the earliest in the decoded output (longest on a tie).
std::string matched_stop_string(const GenResult& r, const SamplingParams& sp, const ServedModel& m) {
  const std::string raw = m.tokenizer.decode(r.token_ids);
  size_t best = std::string::npos;
  std::string which;
  for (const std::string& s : sp.stop_strings) {
    const size_t p = raw.find(s);
    if (p != std::string::npos && (p < best || (p == best && s.size() > which.size()))) best = p, which = s;
  }
  return which;
}

json finish_json(const GenResult& r, const std::string& matched_str) {
  switch (r.finish) {
    case FinishReason::kStopToken:
      if (!r.token_ids.empty()) return json{{"type", "stop"}, {"matched", r.token_ids.back()}};
      return json{{"type", "stop"}, {"matched", nullptr}};
    case FinishReason::kStopString:
      return json{{"type", "stop"}, {"matched", matched_str.empty() ? json(nullptr) : json(matched_str)}};
    case FinishReason::kLength:
    case FinishReason::kContextFull:
      return json{{"type", "length"}, {"length", r.token_ids.size()}};
    case FinishReason::kAborted:
      return json{{"type", "abort"}, {"message", "the request was aborted"}};
  }
  return json{{"type", "abort"}, {"message", "unknown finish reason"}};
}

Output decode_output(const GenResult& r, const GenerateItem& item, const ServedModel& m) {
  Output o;
  const std::string matched = r.finish == FinishReason::kStopString ? matched_stop_string(r, item.sampling, m) : "";
  o.finish = finish_json(r, matched);
  TokenIds ids = r.token_ids;
  if (r.finish == FinishReason::kStopToken && !ids.empty() && !item.no_stop_trim) ids.pop_back();
  o.text = m.tokenizer.decode(ids, item.skip_special_tokens);
  if (!matched.empty()) {
    const size_t pos = o.text.find(matched);
    if (pos != std::string::npos) o.text.resize(item.no_stop_trim ? pos + matched.size() : pos);
  }
  return o;
}

json logprob_triples(const GenResult& r, size_t count, bool with_text, const ServedModel& m) {
  json out = json::array();
  for (size_t k = 0; k < count; ++k) {
    const double lp = k < r.logprobs.size() ? static_cast<double>(r.logprobs[k]) : 0.0;
    out.push_back(json::array({lp, r.token_ids[k],
                               with_text ? json(m.tokenizer.decode(TokenIds{r.token_ids[k]})) : json(nullptr)}));
  }
  return out;
}

std::string sample_id(const GenerateRequest& req, size_t item, int j, size_t index, const std::string& id) {
  const std::string& rid = req.items[item].rid;
  if (!rid.empty()) return req.n > 1 ? rid + "_" + std::to_string(j) : rid;
  return req.list_response() ? id + "_" + std::to_string(index) : id;
}

json meta_info(const GenerateRequest& req, const GenerateItem& item, const GenResult& r, size_t tokens,
               const json& finish, const std::string& id, const ServedModel& m) {
  json mi{{"id", id},
          {"finish_reason", finish},
          {"prompt_tokens", item.prompt.size()},
          {"completion_tokens", tokens},
          {"weight_version", std::to_string(r.policy_version)},
          {"policy_version", r.policy_version}};
  if (item.return_logprob) {
    mi["input_token_logprobs"] = json::array();
    mi["output_token_logprobs"] = logprob_triples(r, tokens, req.return_text_in_logprobs, m);
  }
  return mi;
}

json output_dict(const GenerateRequest& req, size_t item, int j, size_t index, const GenResult& r,
                 const ServedModel& m, const std::string& id) {
  const GenerateItem& it = req.items[item];
  const Output o = decode_output(r, it, m);
  return json{{"text", o.text},
              {"output_ids", r.token_ids},
              {"meta_info", meta_info(req, it, r, r.token_ids.size(), o.finish, sample_id(req, item, j, index, id), m)}};
}

void check_results(const GenerateRequest& req, const std::vector<GenResult>& results) {
  const size_t want = req.items.size() * static_cast<size_t>(req.n);
  AGENTR1_CHECK(want == results.size(), "internal: " << results.size() << " results for " << want << " requests");
}

}  // namespace

std::vector<GenRequest> GenerateRequest::gen_requests() const {
  std::vector<GenRequest> reqs;
  reqs.reserve(items.size() * static_cast<size_t>(n));
  for (const GenerateItem& it : items)
    for (int j = 0; j < n; ++j) {
      GenRequest r;
      r.prompt_ids = it.prompt;
      r.sampling = it.sampling;
      r.sampling.seed = it.sampling.seed + static_cast<uint64_t>(j);  // wraps past 2^64 - 1
      reqs.push_back(std::move(r));
    }
  return reqs;
}

GenerateRequest parse_generate_request(const json& body, const ServedModel& m, uint64_t default_seed) {
  if (!body.is_object()) throw bad("", "the request body must be a JSON object, got " + type_name(body));
  for (const char* key : {"input_embeds", "image_data", "video_data", "audio_data", "lora_path", "session_params",
                          "custom_logit_processor", "token_ids_logprob"})
    if (field(body, key)) throw bad(key, std::string("'") + key + "' is not supported by agentr1 serve; leave it out");
  if (const json* v = field(body, "return_hidden_states"); v && !(v->is_boolean() && !v->get<bool>()))
    throw bad("return_hidden_states", "'return_hidden_states' is not supported by agentr1 serve; leave it out");

  GenerateRequest req;
  // The prompts.
  const json* text = field(body, "text");
  const json* input_ids = field(body, "input_ids");
  if (text && input_ids)
    throw bad("text", "give either 'text' or 'input_ids', not both (agentr1 serve would have to pick one)");
  if (!text && !input_ids)
    throw bad("text", "'text' (a string or a list of strings) or 'input_ids' (a list of token ids or a list of "
                      "lists) is required");
  std::vector<TokenIds> prompts;
  if (text) {
    if (text->is_string()) {
      prompts.push_back(encode_text(text->get<std::string>(), m));
    } else if (text->is_array()) {
      if (text->empty()) throw bad("text", "'text' is an empty list; give at least one prompt");
      req.batch = true;
      for (const json& s : *text) {
        if (!s.is_string()) throw bad("text", "'text' must be a string or a list of strings, got an element " + s.dump());
        prompts.push_back(encode_text(s.get<std::string>(), m));
      }
    } else {
      throw bad("text", "'text' must be a string or a list of strings, got " + type_name(*text));
    }
  } else {
    if (!input_ids->is_array())
      throw bad("input_ids", "'input_ids' must be a list of token ids or a list of lists, got " + type_name(*input_ids));
    if (input_ids->empty()) throw bad("input_ids", "'input_ids' cannot be empty; give at least one token id");
    if (input_ids->front().is_array()) {
      req.batch = true;
      for (const json& l : *input_ids) {
        if (!l.is_array())
          throw bad("input_ids", "'input_ids' as a batch must be a list of lists of token ids, got an element " +
                                     l.dump());
        prompts.push_back(ids_from_json(l, m, "input_ids"));
      }
    } else {
      prompts.push_back(ids_from_json(*input_ids, m, "input_ids"));
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string which = req.batch ? "prompt " + std::to_string(i) : "the prompt";
    if (prompts[i].empty())
      throw bad(text ? "text" : "input_ids", which + " is empty (0 tokens); give at least one token");
    if (static_cast<int64_t>(prompts[i].size()) >= m.max_context)
      throw bad(text ? "text" : "input_ids",
                "the input (" + std::to_string(prompts[i].size()) + " tokens) is longer than the model's context "
                "length (" + std::to_string(m.max_context) + " tokens, prompt + generated); shorten " + which +
                    ", or start the server with a larger --max-context");
  }

  // Per-prompt options.
  const json* sps = field(body, "sampling_params");
  if (sps && sps->is_array() && sps->size() != prompts.size())
    throw bad("sampling_params", "'sampling_params' as a list must have one object per prompt (" +
                                     std::to_string(prompts.size()) + "), got " + std::to_string(sps->size()));
  const json* rid = field(body, "rid");
  if (rid && !rid->is_string() && !rid->is_array())
    throw bad("rid", "'rid' must be a string or a list of strings, got " + type_name(*rid));
  if (rid && rid->is_array() && rid->size() != prompts.size())
    throw bad("rid", "'rid' as a list must have one id per prompt (" + std::to_string(prompts.size()) + "), got " +
                         std::to_string(rid->size()));
  const size_t count = prompts.size();
  for (size_t i = 0; i < count; ++i) {
    GenerateItem item;
    item.prompt = std::move(prompts[i]);
    int n = 1;
    if (sps) {
      const bool list = sps->is_array();
      parse_sampling(list ? (*sps)[i] : *sps, list ? "sampling_params[" + std::to_string(i) + "]" : "sampling_params",
                     m, default_seed, item, n);
    } else {
      parse_sampling(json::object(), "sampling_params", m, default_seed, item, n);
    }
    if (i == 0) req.n = n;
    if (n != req.n)
      throw bad("sampling_params", "'n' must be the same in every sampling_params object (" + std::to_string(req.n) +
                                       " and " + std::to_string(n) + ")");
    const int room = m.max_context - static_cast<int>(item.prompt.size());
    if (item.sampling.max_new_tokens == 0) {
      item.sampling.max_new_tokens = room;
    } else if (item.sampling.max_new_tokens < 0) {
      // SGLang checks only a max_new_tokens the request gave; its default of 128 ends
      // where the window does (the engine's context-full "length").
      item.sampling.max_new_tokens = kDefaultMaxNewTokens;
    } else if (static_cast<int64_t>(item.sampling.max_new_tokens) + static_cast<int64_t>(item.prompt.size()) >=
               m.max_context) {
      // SGLang's TokenizerManager._validate_one_request (without --allow-auto-truncate).
      const std::string where = sps && sps->is_array() ? "sampling_params[" + std::to_string(i) + "]" : "sampling_params";
      throw bad(where + ".max_new_tokens",
                "Requested token count exceeds the model's maximum context length of " +
                    std::to_string(m.max_context) + " tokens. You requested a total of " +
                    std::to_string(item.sampling.max_new_tokens + item.prompt.size()) + " tokens: " +
                    std::to_string(item.prompt.size()) + " tokens from the input and " +
                    std::to_string(item.sampling.max_new_tokens) + " tokens for the completion (" + where +
                    ".max_new_tokens); ask for at most " + std::to_string(room - 1) +
                    ", send null for the rest of the window, or start the server with a larger --max-context");
    }

    if (const json* v = per_prompt(body, "return_logprob", i, count))
      item.return_logprob = as_bool(*v, field(body, "return_logprob")->is_array()
                                            ? "return_logprob[" + std::to_string(i) + "]"
                                            : "return_logprob");
    if (const json* v = per_prompt(body, "logprob_start_len", i, count); v && *v != json(-1))
      throw bad("logprob_start_len", "'logprob_start_len' must be -1 (output log-probs only): agentr1 serve does "
                                     "not compute prompt log-probs, got " + v->dump());
    if (const json* v = per_prompt(body, "top_logprobs_num", i, count); v && *v != json(0))
      throw bad("top_logprobs_num", "'top_logprobs_num' must be 0: agentr1 serve returns the sampled token's "
                                    "log-prob only, got " + v->dump());
    if (rid) {
      const json& r = rid->is_array() ? (*rid)[i] : *rid;
      if (!r.is_string() || r.get<std::string>().empty())
        throw bad("rid", "'rid' must hold non-empty strings, got " + r.dump());
      item.rid = rid->is_array() || !req.batch ? r.get<std::string>() : r.get<std::string>() + "_" + std::to_string(i);
    }
    req.items.push_back(std::move(item));
  }
  req.stream = get_bool(body, "stream", false, "stream");
  req.return_text_in_logprobs = get_bool(body, "return_text_in_logprobs", false, "return_text_in_logprobs");
  return req;
}

json generate_response(const GenerateRequest& req, const std::vector<GenResult>& results, const ServedModel& m,
                       const std::string& id) {
  check_results(req, results);
  json list = json::array();
  size_t index = 0;
  for (size_t i = 0; i < req.items.size(); ++i)
    for (int j = 0; j < req.n; ++j, ++index) list.push_back(output_dict(req, i, j, index, results[index], m, id));
  return req.list_response() ? list : list[0];
}

GenerateStreamer::GenerateStreamer(const GenerateRequest& req, const ServedModel& model, std::string id)
    : req_(&req), model_(&model), id_(std::move(id)) {
  for (const GenerateItem& it : req.items)
    for (int j = 0; j < req.n; ++j) {
      Sample s;
      s.dec.emplace_back(model.tokenizer, it.skip_special_tokens);
      samples_.push_back(std::move(s));
    }
}

size_t GenerateStreamer::choices() const { return samples_.size(); }

std::vector<json> GenerateStreamer::begin() { return {}; }
std::vector<json> GenerateStreamer::end() { return {}; }

// The cumulative chunk of sample `choice` after its first `tokens` tokens.
json GenerateStreamer::chunk(size_t choice, size_t tokens) const {
  const size_t item = choice / static_cast<size_t>(req_->n);
  const int j = static_cast<int>(choice % static_cast<size_t>(req_->n));
  const GenerateItem& it = req_->items[item];
  const GenResult& r = samples_[choice].so_far;
  json mi{{"id", sample_id(*req_, item, j, choice, id_)},
          {"finish_reason", nullptr},
          {"prompt_tokens", it.prompt.size()},
          {"completion_tokens", tokens}};
  if (it.return_logprob) {
    mi["input_token_logprobs"] = json::array();
    mi["output_token_logprobs"] = logprob_triples(r, tokens, req_->return_text_in_logprobs, *model_);
  }
  json c{{"text", samples_[choice].text},
         {"output_ids", TokenIds(r.token_ids.begin(), r.token_ids.begin() + static_cast<std::ptrdiff_t>(tokens))},
         {"meta_info", std::move(mi)}};
  if (req_->list_response()) c["index"] = choice;
  return c;
}

std::vector<json> GenerateStreamer::push(size_t choice, TokenId id, float logprob) {
  AGENTR1_CHECK(choice < samples_.size(), "GenerateStreamer::push: sample " << choice << " of " << samples_.size());
  Sample& s = samples_[choice];
  std::vector<json> out;
  const size_t before = s.so_far.token_ids.size();
  if (before > 0) {  // the previous token's chunk: it was not the last
    s.text += s.last_piece;
    out.push_back(chunk(choice, before));
  }
  s.so_far.token_ids.push_back(id);
  s.so_far.logprobs.push_back(logprob);
  s.last_piece = s.dec[0].push(id);
  return out;
}

std::vector<json> GenerateStreamer::finish(size_t choice, const GenResult& result) {
  AGENTR1_CHECK(choice < samples_.size(), "GenerateStreamer::finish: sample " << choice << " of " << samples_.size());
  const size_t item = choice / static_cast<size_t>(req_->n);
  const int j = static_cast<int>(choice % static_cast<size_t>(req_->n));
  json last = output_dict(*req_, item, j, choice, result, *model_, id_);
  if (req_->list_response()) last["index"] = choice;
  return {std::move(last)};
}

std::vector<json> generate_stream_chunks(const GenerateRequest& req, const std::vector<GenResult>& results,
                                         const ServedModel& m, const std::string& id) {
  check_results(req, results);
  GenerateStreamer st(req, m, id);
  std::vector<json> chunks = st.begin();
  auto add = [&](std::vector<json> more) {
    for (json& c : more) chunks.push_back(std::move(c));
  };
  for (size_t i = 0; i < results.size(); ++i) {
    for (size_t k = 0; k < results[i].token_ids.size(); ++k)
      add(st.push(i, results[i].token_ids[k], k < results[i].logprobs.size() ? results[i].logprobs[k] : 0.f));
    add(st.finish(i, results[i]));
  }
  add(st.end());
  return chunks;
}

json model_info_response(const std::string& model_path, int64_t policy_version, const json& config) {
  json j{{"model_path", model_path},
         {"tokenizer_path", model_path},
         {"is_generation", true},
         {"weight_version", std::to_string(policy_version)}};
  if (config.is_object()) {
    if (config.contains("model_type")) j["model_type"] = config["model_type"];
    if (config.contains("architectures")) j["architectures"] = config["architectures"];
  }
  return j;
}

}  // namespace agentr1::serve
