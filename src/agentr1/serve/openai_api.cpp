#include "agentr1/serve/openai_api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "agentr1/core/error.h"
#include "agentr1/core/hash.h"
#include "agentr1/core/log.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::serve {

const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string type_name(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

namespace {

constexpr int kMaxN = 128;             // samples per prompt
constexpr int kMaxLogprobs = 20;       // vLLM's default cap on logprobs / top_logprobs
constexpr int64_t kMaxTokens = 1 << 24;

ApiError bad(const std::string& param, const std::string& message, const std::string& code = "") {
  return ApiError(400, message, param, "invalid_request_error", code);
}

bool get_bool(const json& body, const char* key, bool def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_boolean()) throw bad(key, std::string("'") + key + "' must be true or false, got " + type_name(*v));
  return v->get<bool>();
}

// An integer in [lo, hi].
int64_t get_int(const json& body, const char* key, int64_t def, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number_integer())
    throw bad(key, std::string("'") + key + "' must be an integer, got " + type_name(*v) + " " + v->dump());
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    throw bad(key, std::string("'") + key + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
                       ", got " + v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad(key, std::string("'") + key + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
                       ", got " + std::to_string(x));
  return x;
}

double get_number(const json& body, const char* key, double def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number()) throw bad(key, std::string("'") + key + "' must be a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x)) throw bad(key, std::string("'") + key + "' must be finite");
  return x;
}

// Options agentr1 does not implement are refused unless they hold their no-op value.
void refuse_unsupported(const json& body, bool chat) {
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (get_number(body, key, 0.0) != 0.0)
      throw bad(key, std::string("'") + key + "' is not supported by agentr1 serve; send 0 or leave it out");
  if (get_number(body, "repetition_penalty", 1.0) != 1.0)
    throw bad("repetition_penalty", "'repetition_penalty' is not supported by agentr1 serve; send 1 or leave it out");
  if (get_int(body, "min_tokens", 0, 0, kMaxTokens) != 0)
    throw bad("min_tokens", "'min_tokens' is not supported by agentr1 serve; send 0 or leave it out");
  if (const json* v = field(body, "logit_bias"); v && !(v->is_object() && v->empty()))
    throw bad("logit_bias", "'logit_bias' is not supported by agentr1 serve; leave it out");
  if (!chat) {
    if (field(body, "suffix")) throw bad("suffix", "'suffix' is not supported by agentr1 serve; leave it out");
  } else {
    if (const json* v = field(body, "response_format")) {
      if (!v->is_object() || v->value("type", "") != "text")
        throw bad("response_format", "only response_format {\"type\": \"text\"} is supported by agentr1 serve");
    }
  }
}

void check_model(const json& body, const ServedModel& m) {
  const json* v = field(body, "model");
  if (!v) return;
  if (!v->is_string()) throw bad("model", "'model' must be a string, got " + type_name(*v));
  if (v->get<std::string>() != m.name)
    throw bad("model", "model '" + v->get<std::string>() + "' is not served here; this server serves '" + m.name +
                           "' (GET /v1/models)",
              "model_not_found");
}

// Sampling and output fields common to both endpoints. max_new_tokens is set by the caller.
void parse_common(const json& body, const ServedModel& m, uint64_t default_seed, SamplingParams& sp,
                  OutputOptions& out) {
  check_model(body, m);
  const double t = get_number(body, "temperature", 1.0);
  if (t < 0 || t > 1e4) throw bad("temperature", "'temperature' must be in [0, 10000] (0 = greedy), got " + json(t).dump());
  sp.temperature = static_cast<float>(t);
  const double p = get_number(body, "top_p", 1.0);
  if (!(p > 0 && p <= 1)) throw bad("top_p", "'top_p' must be in (0, 1], got " + json(p).dump());
  sp.top_p = static_cast<float>(p);
  const int64_t k = get_int(body, "top_k", 0, -1, std::numeric_limits<int32_t>::max());
  sp.top_k = k <= 0 ? 0 : static_cast<int>(k);  // -1 (vLLM) and 0 both mean off
  out.n = static_cast<int>(get_int(body, "n", 1, 1, kMaxN));
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0))
      throw bad("seed", "'seed' must be an integer in 0..18446744073709551615, got " + v->dump());
    out.seed = v->get<uint64_t>();
  } else {
    out.seed = default_seed;
  }
  sp.seed = out.seed;

  if (const json* v = field(body, "stop")) {
    std::vector<std::string> stops;
    if (v->is_string()) {
      stops.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const json& s : *v) {
        if (!s.is_string()) throw bad("stop", "'stop' must be a string or a list of strings, got an element " + s.dump());
        stops.push_back(s.get<std::string>());
      }
    } else {
      throw bad("stop", "'stop' must be a string or a list of strings, got " + type_name(*v));
    }
    for (const std::string& s : stops)
      if (s.empty()) throw bad("stop", "'stop' strings must not be empty");
    sp.stop_strings = stops;
  }
  if (const json* v = field(body, "stop_token_ids")) {
    if (!v->is_array()) throw bad("stop_token_ids", "'stop_token_ids' must be a list of token ids, got " + type_name(*v));
    for (const json& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= m.vocab_size)
        throw bad("stop_token_ids", "'stop_token_ids' must hold token ids in 0.." + std::to_string(m.vocab_size - 1) +
                                        ", got " + id.dump());
      out.request_stop_ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
    }
  }
  sp.stop_token_ids = out.request_stop_ids;
  if (!get_bool(body, "ignore_eos", false))
    for (TokenId id : m.eos_ids)
      if (std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), id) == sp.stop_token_ids.end())
        sp.stop_token_ids.push_back(id);

  out.return_token_ids = get_bool(body, "return_token_ids", false);
  out.skip_special_tokens = get_bool(body, "skip_special_tokens", true);
  out.include_stop_str_in_output = get_bool(body, "include_stop_str_in_output", false);
  out.stream = get_bool(body, "stream", false);
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) throw bad("stream_options", "'stream_options' must be an object, got " + type_name(*v));
    out.include_usage = get_bool(*v, "include_usage", false);
  }
}

int max_tokens_field(const json& body, const char* key, int def) {
  return static_cast<int>(get_int(body, key, def, 1, kMaxTokens));
}

void check_prompt_fits(size_t len, const ServedModel& m, const char* param) {
  if (len == 0) throw bad(param, std::string("'") + param + "' is empty; give at least one token");
  if (static_cast<int64_t>(len) >= m.max_context)
    throw bad(param, std::string("the prompt has ") + std::to_string(len) + " tokens but the context window is " +
                         std::to_string(m.max_context) +
                         " tokens (prompt + generated); shorten the prompt, or start the server with a larger "
                         "--max-context",
              "context_length_exceeded");
}

TokenIds ids_from_json(const json& list, const ServedModel& m) {
  TokenIds ids;
  ids.reserve(list.size());
  for (const json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= m.vocab_size)
      throw bad("prompt", "prompt token ids must be integers in 0.." + std::to_string(m.vocab_size - 1) + ", got " +
                              id.dump());
    ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
  return ids;
}

TokenIds encode_text_prompt(const std::string& s, const ServedModel& m) {
  TokenIds ids;
  const auto bos = m.tokenizer.bos_token_id();
  if (m.tokenizer.add_bos_token() && bos) ids.push_back(*bos);
  const TokenIds body = m.tokenizer.encode(s);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::vector<GenRequest> expand(const std::vector<TokenIds>& prompts, const SamplingParams& sp, const OutputOptions& out) {
  std::vector<GenRequest> reqs;
  for (const TokenIds& p : prompts)
    for (int j = 0; j < out.n; ++j) {
      GenRequest r;
      r.prompt_ids = p;
      r.sampling = sp;
      r.sampling.seed = out.seed + static_cast<uint64_t>(j);  // wraps past 2^64 - 1, as unsigned does
      reqs.push_back(std::move(r));
    }
  return reqs;
}

// One result decoded: the response text and each token's share of it.
struct Decoded {
  std::string text;                 // what the client sees (stop token / stop string cut)
  std::vector<std::string> pieces;  // one per token id, concatenating to text (stream deltas)
  std::vector<size_t> offsets;      // byte offset in text where each token's piece starts
  json stop_reason;                 // string, token id or null
};

Decoded decode_result(const GenResult& r, const SamplingParams& sp, const OutputOptions& out, const ServedModel& m) {
  Decoded d;
  const size_t n = r.token_ids.size();
  const bool stop_token = r.finish == FinishReason::kStopToken && n > 0;
  const bool drop_last = stop_token && !out.include_stop_str_in_output;
  text::StreamDecoder sd(m.tokenizer, out.skip_special_tokens);
  d.pieces.resize(n);
  const size_t keep = drop_last ? n - 1 : n;  // the dropped stop token gets an empty piece
  for (size_t i = 0; i < keep; ++i) d.pieces[i] = sd.push(r.token_ids[i]);
  if (keep > 0) d.pieces[keep - 1] += sd.flush();
  for (const std::string& p : d.pieces) d.text += p;

  if (stop_token) {
    const TokenId last = r.token_ids.back();
    const bool asked = std::find(out.request_stop_ids.begin(), out.request_stop_ids.end(), last) !=
                       out.request_stop_ids.end();
    d.stop_reason = asked ? json(last) : json(nullptr);
  } else if (r.finish == FinishReason::kStopString) {
    // Which stop string fired: the earliest in the raw decode (the engine's view).
    const std::string raw = m.tokenizer.decode(r.token_ids);
    size_t best = std::string::npos;
    std::string which;
    for (const std::string& s : sp.stop_strings) {
      const size_t p = raw.find(s);
      if (p != std::string::npos && (p < best || (p == best && s.size() > which.size()))) best = p, which = s;
    }
    d.stop_reason = which.empty() ? json(nullptr) : json(which);
    if (!which.empty()) {
      // Cut at the stop string (or right after it): text the last token decoded past it goes.
      size_t cut = d.text.find(which);
      if (cut != std::string::npos) {
        if (out.include_stop_str_in_output) cut += which.size();
        size_t pos = 0;
        for (std::string& p : d.pieces) {
          if (pos + p.size() > cut) p.resize(cut > pos ? cut - pos : 0);
          pos += p.size();
        }
        d.text.resize(cut);
      }
    }
  } else {
    d.stop_reason = nullptr;
  }
  size_t pos = 0;
  for (const std::string& p : d.pieces) {
    d.offsets.push_back(pos);
    pos += p.size();
  }
  return d;
}

const char* finish_name(FinishReason f) {
  switch (f) {
    case FinishReason::kStopToken:
    case FinishReason::kStopString: return "stop";
    case FinishReason::kLength:
    case FinishReason::kContextFull: return "length";
    case FinishReason::kAborted: return "abort";
  }
  return "stop";
}

std::string token_text(const ServedModel& m, TokenId id) { return m.tokenizer.decode(TokenIds{id}); }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// Legacy completions log-probs: tokens, token_logprobs, top_logprobs, text_offset.
json completion_logprobs(const GenResult& r, const Decoded& d, const ServedModel& m, size_t base_offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (size_t i = 0; i < r.token_ids.size(); ++i) {
    const std::string t = token_text(m, r.token_ids[i]);
    const double lp = i < r.logprobs.size() ? static_cast<double>(r.logprobs[i]) : 0.0;
    tokens.push_back(t);
    lps.push_back(lp);
    json top = json::object();
    top[t] = lp;
    tops.push_back(top);
    offs.push_back(base_offset + std::min(d.offsets[i], d.text.size()));
  }
  return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json chat_logprob_entry(const ServedModel& m, TokenId id, float logprob, int top) {
  const std::string t = token_text(m, id);
  json e{{"token", t}, {"logprob", static_cast<double>(logprob)}, {"bytes", bytes_of(t)}};
  json tops = json::array();
  if (top > 0) tops.push_back(json{{"token", t}, {"logprob", static_cast<double>(logprob)}, {"bytes", bytes_of(t)}});
  e["top_logprobs"] = tops;
  return e;
}

// vLLM's prompt_logprobs of one prompt: [null, {"<id>": {"logprob", "rank",
// "decoded_token"}, ...}, ...], the actual token and the top k at each position.
json prompt_logprobs_json(const TokenIds& ids, const PromptLogprobs& lp, int k, const ServedModel& m) {
  const size_t n = ids.size(), kk = static_cast<size_t>(k);
  AGENTR1_CHECK(lp.logprob.size() == n && lp.rank.size() == n && lp.top_ids.size() == n * kk &&
                    lp.top_logprob.size() == n * kk,
                "internal: prompt log-probs of " << lp.logprob.size() << " tokens (top " << lp.top_ids.size()
                                                 << ") for a prompt of " << n << " with k " << k);
  json out = json::array();
  out.push_back(nullptr);
  for (size_t t = 1; t < n; ++t) {
    json e = json::object();
    e[std::to_string(ids[t])] = json{{"logprob", static_cast<double>(lp.logprob[t])},
                                     {"rank", lp.rank[t]},
                                     {"decoded_token", token_text(m, ids[t])}};
    for (size_t j = 0; j < kk; ++j) {
      const TokenId id = lp.top_ids[t * kk + j];
      if (id == ids[t]) continue;  // the actual token, listed already
      e[std::to_string(id)] = json{{"logprob", static_cast<double>(lp.top_logprob[t * kk + j])},
                                   {"rank", static_cast<int64_t>(j + 1)},
                                   {"decoded_token", token_text(m, id)}};
    }
    out.push_back(std::move(e));
  }
  return out;
}

json usage(size_t prompt, size_t completion) {
  return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

void check_results(size_t want, size_t got) {
  AGENTR1_CHECK(want == got, "internal: " << got << " results for " << want << " requests");
}

// Seed of the first FNV-1a hash of a tool-call id. It is not the FNV offset basis
// (14695981039346656037, kFnv1a64Offset) but that number without its last digit; kept so
// that a response id keeps giving the call ids it always gave.
constexpr uint64_t kCallIdSeed = 1469598103934665603ull;

// A call id stable for (response, choice, call): "call_" + 24 hex digits, or, for
// formats whose template wants 9 alphanumerics (mistral), the model's own id when it
// wrote a valid one, else 9 alphanumerics.
std::string tool_call_id(const std::string& response_id, size_t choice, size_t call, const std::string& model_id,
                         bool nine_alnum) {
  static const char kAlnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  const std::string key = response_id + "/" + std::to_string(choice) + "/" + std::to_string(call);
  const uint64_t a = fnv1a64(key, kCallIdSeed), b = fnv1a64(key, a);
  if (nine_alnum) {
    const bool valid = model_id.size() == 9 && std::all_of(model_id.begin(), model_id.end(), [](char ch) {
      return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
    });
    if (valid) return model_id;
    std::string id;
    uint64_t x = a ^ (b << 1);
    for (int i = 0; i < 9; ++i, x /= 62) id += kAlnum[x % 62];
    return id;
  }
  std::string id = "call_";
  for (uint64_t x : {a, b})
    for (int i = 0; i < 12; ++i) id += kAlnum[(x >> (4 * i)) & 0xF];
  return id;
}

// One chat choice: the message content, its tool calls and finish reason.
struct ChatChoice {
  Decoded d;
  json content;                 // string or null
  json tool_calls = json::array();
  std::string reasoning;        // the format's reasoning channel (gpt_oss analysis), "" if none
  std::string finish;
};

ChatChoice chat_choice(const ChatRequest& req, const GenResult& r, const ServedModel& m, const std::string& id,
                       size_t index) {
  ChatChoice c;
  c.d = decode_result(r, req.sampling, req.out, m);
  c.content = c.d.text;
  c.finish = finish_name(r.finish);
  if (req.parse_tools) {
    const std::unique_ptr<text::ToolFormat> fmt = text::make_tool_format(m.tool_format);
    const text::ParsedResponse parsed = fmt->parse(c.d.text);
    if (!parsed.calls.empty()) {
      const bool nine_alnum = fmt->message_rules().call_ids;
      c.content = parsed.content.empty() ? json(nullptr) : json(parsed.content);
      c.reasoning = parsed.reasoning;
      for (size_t k = 0; k < parsed.calls.size(); ++k) {
        const text::ToolCall& call = parsed.calls[k];
        c.tool_calls.push_back(json{{"id", tool_call_id(id, index, k, call.id, nine_alnum)},
                                    {"type", "function"},
                                    {"function", {{"name", call.name}, {"arguments", call.arguments.dump()}}}});
      }
      c.finish = "tool_calls";
    }
  }
  return c;
}

// Chat message content: a string, or a list of {"type": "text", "text": ...} parts
// (joined with "\n", as vLLM does); anything else is passed to the template as is.
json normalize_messages(const json& messages) {
  if (!messages.is_array() || messages.empty())
    throw bad("messages", "'messages' must be a non-empty list of {\"role\", \"content\"} objects");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    json msg = messages[i];
    if (!msg.is_object()) throw bad("messages", where + " must be an object, got " + type_name(msg));
    if (auto it = msg.find("content"); it != msg.end() && it->is_array()) {
      std::string text;
      for (size_t k = 0; k < it->size(); ++k) {
        const json& part = (*it)[k];
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          throw bad("messages", where + ".content[" + std::to_string(k) +
                                    "]: only {\"type\": \"text\", \"text\": \"...\"} parts are supported");
        text += (k ? "\n" : "") + part["text"].get<std::string>();
      }
      *it = text;
    }
    // OpenAI clients send "content": null on assistant tool-call turns; templates that
    // test `'x' in content` fail on None (as in Python), so it becomes "".
    if (auto it = msg.find("content"); it != msg.end() && it->is_null()) *it = "";
    if (auto it = msg.find("tool_calls"); it != msg.end() && it->is_array()) {
      for (json& call : *it) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        json& fn = call["function"];
        if (auto a = fn.find("arguments"); a != fn.end() && a->is_string()) {
          json parsed = json::parse(a->get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (parsed.is_object()) *a = parsed;
        }
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// chat_template_kwargs (vLLM): enable_thinking as RenderOptions has it, the rest passed
// to the template as variables.
text::RenderOptions render_options(const json& body) {
  text::RenderOptions ro;
  const json* kw = field(body, "chat_template_kwargs");
  if (!kw) return ro;
  if (!kw->is_object())
    throw bad("chat_template_kwargs", "'chat_template_kwargs' must be an object, got " + type_name(*kw));
  for (auto it = kw->begin(); it != kw->end(); ++it) {
    const std::string& key = it.key();
    if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt")
      throw bad("chat_template_kwargs", "chat_template_kwargs cannot set '" + key + "'; send it as a request field");
    if (key == "enable_thinking") {
      if (!it.value().is_boolean())
        throw bad("chat_template_kwargs", "chat_template_kwargs.enable_thinking must be true or false");
      ro.enable_thinking = it.value().get<bool>();
    } else {
      ro.kwargs[key] = it.value();
    }
  }
  return ro;
}

}  // namespace

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return json{{"error",
               {{"message", message},
                {"type", type},
                {"param", param.empty() ? json(nullptr) : json(param)},
                {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json error_body(const ApiError& e) { return error_body(e.what(), e.type, e.param, e.code); }

json models_response(const ServedModel& m) {
  return json{{"object", "list"},
              {"data", json::array({json{{"id", m.name},
                                         {"object", "model"},
                                         {"created", m.created},
                                         {"owned_by", "agentr1"},
                                         {"root", m.name},
                                         {"max_model_len", m.max_context}}})}};
}

std::vector<GenRequest> CompletionRequest::gen_requests() const { return expand(prompts, sampling, out); }
std::vector<GenRequest> ChatRequest::gen_requests() const { return expand({prompt}, sampling, out); }

CompletionRequest parse_completion_request(const json& body, const ServedModel& m, uint64_t default_seed) {
  if (!body.is_object()) throw bad("", "the request body must be a JSON object, got " + type_name(body));
  refuse_unsupported(body, /*chat=*/false);
  CompletionRequest req;
  parse_common(body, m, default_seed, req.sampling, req.out);
  if (const json* v = field(body, "prompt_logprobs")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxLogprobs)
      throw bad("prompt_logprobs", "'prompt_logprobs' must be an integer in 0.." + std::to_string(kMaxLogprobs) +
                                       " (the top ids listed besides the prompt token), got " + v->dump());
    req.prompt_logprobs = v->get<int>();
    if (req.out.stream)
      throw bad("prompt_logprobs", "'prompt_logprobs' is not supported with 'stream': true");
    req.prompt_temperature = req.sampling.temperature == 0 ? 1.0 : get_number(body, "temperature", 1.0);
  }
  // max_tokens 0 (nothing generated) only makes sense with prompt log-probs.
  req.sampling.max_new_tokens =
      static_cast<int>(get_int(body, "max_tokens", 16, req.prompt_logprobs ? 0 : 1, kMaxTokens));
  if (const json* v = field(body, "logprobs")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxLogprobs)
      throw bad("logprobs", "'logprobs' must be an integer in 0.." + std::to_string(kMaxLogprobs) + ", got " + v->dump());
    req.out.logprobs = v->get<int>();
  }
  req.out.echo = get_bool(body, "echo", false);
  if (req.out.echo && req.out.logprobs)
    throw bad("echo", "'echo' together with 'logprobs' is not supported (prompt log-probs are not computed)");
  if (const json* v = field(body, "best_of"); v && (!v->is_number_integer() || v->get<int64_t>() != req.out.n))
    throw bad("best_of", "'best_of' must equal n (" + std::to_string(req.out.n) + ") or be left out, got " + v->dump());

  const json* p = field(body, "prompt");
  if (!p) throw bad("prompt", "'prompt' is required: a string, a list of strings, a list of token ids, or a list of lists");
  auto fail = [&] {
    return bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of lists of "
                         "token ids, got " + type_name(*p));
  };
  if (p->is_string()) {
    req.prompts.push_back(encode_text_prompt(p->get<std::string>(), m));
  } else if (p->is_array()) {
    if (p->empty()) throw bad("prompt", "'prompt' is an empty list; give at least one prompt");
    const json& first = p->front();
    if (first.is_number()) {
      req.prompts.push_back(ids_from_json(*p, m));
    } else if (first.is_string()) {
      for (const json& s : *p) {
        if (!s.is_string()) throw fail();
        req.prompts.push_back(encode_text_prompt(s.get<std::string>(), m));
      }
    } else if (first.is_array()) {
      for (const json& l : *p) {
        if (!l.is_array()) throw fail();
        req.prompts.push_back(ids_from_json(l, m));
      }
    } else {
      throw fail();
    }
  } else {
    throw fail();
  }
  for (const TokenIds& ids : req.prompts) check_prompt_fits(ids.size(), m, "prompt");
  return req;
}

json completion_response(const CompletionRequest& req, const std::vector<GenResult>& results,
                         const ServedModel& m, const std::string& id, int64_t created,
                         const std::vector<PromptLogprobs>* prompt_lps) {
  check_results(req.prompts.size() * req.out.n, results.size());
  std::vector<json> prompt_lp_json;
  if (req.prompt_logprobs) {
    AGENTR1_CHECK(prompt_lps != nullptr && prompt_lps->size() == req.prompts.size(),
                  "internal: prompt log-probs for " << (prompt_lps ? prompt_lps->size() : 0) << " of "
                                                    << req.prompts.size() << " prompts");
    for (size_t p = 0; p < req.prompts.size(); ++p)
      prompt_lp_json.push_back(prompt_logprobs_json(req.prompts[p], (*prompt_lps)[p], *req.prompt_logprobs, m));
  }
  json choices = json::array();
  size_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t p = 0; p < req.prompts.size(); ++p) {
    prompt_tokens += req.prompts[p].size();
    const std::string prompt_text = req.out.echo ? m.tokenizer.decode(req.prompts[p], req.out.skip_special_tokens) : "";
    for (int j = 0; j < req.out.n; ++j) {
      const size_t i = p * req.out.n + j;
      const GenResult& r = results[i];
      completion_tokens += r.token_ids.size();
      const Decoded d = decode_result(r, req.sampling, req.out, m);
      json c{{"index", i},
             {"text", prompt_text + d.text},
             {"logprobs", req.out.logprobs ? completion_logprobs(r, d, m, prompt_text.size()) : json(nullptr)},
             {"finish_reason", finish_name(r.finish)},
             {"stop_reason", d.stop_reason}};
      if (req.out.return_token_ids) {
        c["token_ids"] = r.token_ids;
        c["prompt_token_ids"] = req.prompts[p];
      }
      if (req.prompt_logprobs) {
        c["prompt_logprobs"] = prompt_lp_json[p];
        if (!req.out.return_token_ids) c["prompt_token_ids"] = req.prompts[p];
      }
      c["policy_version"] = r.policy_version;
      choices.push_back(std::move(c));
    }
  }
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", m.name},
              {"choices", choices},
              {"usage", usage(prompt_tokens, completion_tokens)}};
}

ChatRequest parse_chat_request(const json& body, const ServedModel& m, uint64_t default_seed) {
  if (!body.is_object()) throw bad("", "the request body must be a JSON object, got " + type_name(body));
  refuse_unsupported(body, /*chat=*/true);
  ChatRequest req;
  parse_common(body, m, default_seed, req.sampling, req.out);
  if (get_bool(body, "logprobs", false)) req.out.logprobs = static_cast<int>(get_int(body, "top_logprobs", 0, 0, kMaxLogprobs));
  else if (field(body, "top_logprobs")) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (get_bool(body, "continue_final_message", false))
    throw bad("continue_final_message", "'continue_final_message' is not supported by agentr1 serve");
  const bool add_generation_prompt = get_bool(body, "add_generation_prompt", true);

  if (!m.chat_template)
    throw bad("messages", "this model's tokenizer has no chat_template (tokenizer_config.json), so "
                          "/v1/chat/completions is unavailable; use /v1/completions, or start the server with "
                          "--tokenizer pointing at an instruct model's tokenizer");
  const json* msgs = field(body, "messages");
  if (!msgs) throw bad("messages", "'messages' is required");
  const json messages = normalize_messages(*msgs);

  json tools;
  if (const json* t = field(body, "tools")) {
    if (!t->is_array()) throw bad("tools", "'tools' must be a list of {\"type\": \"function\", \"function\": {...}}");
    for (size_t i = 0; i < t->size(); ++i) {
      const json& tool = (*t)[i];
      if (!tool.is_object() || tool.value("type", "function") != "function" || !tool.contains("function") ||
          !tool["function"].is_object() || !tool["function"].contains("name") || !tool["function"]["name"].is_string())
        throw bad("tools", "tools[" + std::to_string(i) +
                               "] must be {\"type\": \"function\", \"function\": {\"name\": \"...\", ...}}");
    }
    if (!t->empty()) tools = *t;
  }
  std::string tool_choice = "auto";
  if (const json* c = field(body, "tool_choice")) {
    if (!c->is_string() || (c->get<std::string>() != "auto" && c->get<std::string>() != "none"))
      throw bad("tool_choice", "'tool_choice' must be \"auto\" or \"none\" (agentr1 serve does not force tool calls), got " +
                                   c->dump());
    tool_choice = c->get<std::string>();
  }
  req.parse_tools = !tools.is_null() && tool_choice == "auto";

  const text::RenderOptions ro = render_options(body);
  std::string prompt;
  try {
    prompt = m.chat_template->render(messages, tools, add_generation_prompt, ro);
  } catch (const std::exception& e) {
    throw bad("messages", std::string("rendering the chat template: ") + e.what());
  }
  req.prompt = m.tokenizer.encode(prompt);
  check_prompt_fits(req.prompt.size(), m, "messages");
  const int room = m.max_context - static_cast<int>(req.prompt.size());
  int max_tokens = room;
  if (field(body, "max_completion_tokens")) max_tokens = max_tokens_field(body, "max_completion_tokens", room);
  else if (field(body, "max_tokens")) max_tokens = max_tokens_field(body, "max_tokens", room);
  req.sampling.max_new_tokens = max_tokens;
  return req;
}

json chat_response(const ChatRequest& req, const std::vector<GenResult>& results, const ServedModel& m,
                   const std::string& id, int64_t created) {
  check_results(static_cast<size_t>(req.out.n), results.size());
  json choices = json::array();
  size_t completion_tokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const GenResult& r = results[i];
    completion_tokens += r.token_ids.size();
    const ChatChoice c = chat_choice(req, r, m, id, i);
    json message{{"role", "assistant"}, {"content", c.content}};
    if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
    if (!c.tool_calls.empty()) message["tool_calls"] = c.tool_calls;
    json lp = nullptr;
    if (req.out.logprobs) {
      lp = json{{"content", json::array()}};
      for (size_t k = 0; k < r.token_ids.size(); ++k)
        lp["content"].push_back(chat_logprob_entry(m, r.token_ids[k], k < r.logprobs.size() ? r.logprobs[k] : 0.f,
                                                   *req.out.logprobs));
    }
    json choice{{"index", i},
                {"message", message},
                {"logprobs", lp},
                {"finish_reason", c.finish},
                {"stop_reason", c.d.stop_reason}};
    if (req.out.return_token_ids) {
      choice["token_ids"] = r.token_ids;
      choice["prompt_token_ids"] = req.prompt;
    }
    choice["policy_version"] = r.policy_version;
    choices.push_back(std::move(choice));
  }
  return json{{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", m.name},
              {"choices", choices},
              {"usage", usage(req.prompt.size(), completion_tokens)}};
}

// ---- streaming ----

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The part of `final_text` not yet sent, given that `sent` went out. When `sent` is not
// a prefix of it (which the rules in openai_api.h are there to prevent) the rest after
// the common prefix goes out and the error is logged.
std::string remainder(const std::string& final_text, const std::string& sent, const std::string& id) {
  if (final_text.compare(0, sent.size(), sent) == 0) return final_text.substr(sent.size());
  size_t k = 0;
  while (k < sent.size() && k < final_text.size() && sent[k] == final_text[k]) ++k;
  AGENTR1_LOG(ERROR) << "serve: stream " << id << " sent text the final response does not have (sent "
                     << sent.size() << " bytes, final " << final_text.size() << " bytes, common " << k << ")";
  return final_text.substr(k);
}

}  // namespace

struct Streamer::Impl {
  const ChatRequest* chat = nullptr;
  const CompletionRequest* cmpl = nullptr;
  const ServedModel& m;
  std::string id;
  int64_t created;
  const SamplingParams& sp;
  const OutputOptions& out;
  std::unique_ptr<text::ToolFormat> fmt;  // chat with tools parsed
  size_t holdback = 0;                    // longest stop string - 1
  struct Choice {
    explicit Choice(const text::Tokenizer& t, bool skip) : sd(t, skip) {}
    text::StreamDecoder sd;
    std::string text;         // decoded so far (the stop token not included)
    size_t sent = 0;          // bytes of text sent
    size_t tokens = 0;        // tokens seen through push()
    std::string prompt_text;  // completions with echo
    bool finished = false;
  };
  std::vector<Choice> cs;
  size_t completion_tokens = 0;

  Impl(const ChatRequest* c, const CompletionRequest* q, const ServedModel& model, std::string i, int64_t t,
       const SamplingParams& s, const OutputOptions& o, size_t n)
      : chat(c), cmpl(q), m(model), id(std::move(i)), created(t), sp(s), out(o) {
    for (const std::string& stop : sp.stop_strings) holdback = std::max(holdback, stop.size() - 1);
    if (chat && chat->parse_tools) fmt = text::make_tool_format(m.tool_format);
    for (size_t k = 0; k < n; ++k) cs.emplace_back(m.tokenizer, out.skip_special_tokens);
  }

  json chunk(size_t index, json delta_or_text, json logprobs, json finish) const {
    json choice{{"index", index}};
    if (chat) choice["delta"] = std::move(delta_or_text);
    else choice["text"] = std::move(delta_or_text);
    choice["logprobs"] = std::move(logprobs);
    choice["finish_reason"] = std::move(finish);
    return json{{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", m.name},
                {"choices", json::array({std::move(choice)})}};
  }

  // Log-probs of tokens [from, to) of a result, in the endpoint's shape; null if not asked.
  json logprobs(const TokenIds& ids, const std::vector<float>& lps, size_t from, size_t to, size_t offset) const {
    if (!out.logprobs || from >= to) return nullptr;
    if (chat) {
      json content = json::array();
      for (size_t k = from; k < to; ++k)
        content.push_back(chat_logprob_entry(m, ids[k], k < lps.size() ? lps[k] : 0.f, *out.logprobs));
      return json{{"content", content}};
    }
    json tokens = json::array(), tl = json::array(), tops = json::array(), offs = json::array();
    for (size_t k = from; k < to; ++k) {
      const std::string t = token_text(m, ids[k]);
      const double lp = k < lps.size() ? static_cast<double>(lps[k]) : 0.0;
      tokens.push_back(t);
      tl.push_back(lp);
      json top = json::object();
      top[t] = lp;
      tops.push_back(top);
      offs.push_back(offset);
    }
    return json{{"tokens", tokens}, {"token_logprobs", tl}, {"top_logprobs", tops}, {"text_offset", offs}};
  }

  // How many bytes of c.text the final response is certain to start with.
  size_t certain(const Choice& c) const {
    size_t end = c.text.size();
    if (holdback > 0) end = end > holdback ? end - holdback : 0;
    for (const std::string& stop : sp.stop_strings)  // completed: the text ends before it
      end = std::min(end, c.text.find(stop));
    if (fmt) {
      end = std::min(end, fmt->stream_safe_prefix(c.text));
      while (end > 0 && is_space(c.text[end - 1])) --end;
    }
    while (end > 0 && end < c.text.size() && (static_cast<unsigned char>(c.text[end]) & 0xC0) == 0x80) --end;
    return end;
  }

  json text_delta(const std::string& t) const { return chat ? json{{"content", t}} : json(t); }
};

Streamer::Streamer(const ChatRequest& req, const ServedModel& model, std::string id, int64_t created)
    : impl_(std::make_unique<Impl>(&req, nullptr, model, std::move(id), created, req.sampling, req.out,
                                   static_cast<size_t>(req.out.n))) {}

Streamer::Streamer(const CompletionRequest& req, const ServedModel& model, std::string id, int64_t created)
    : impl_(std::make_unique<Impl>(nullptr, &req, model, std::move(id), created, req.sampling, req.out,
                                   req.prompts.size() * static_cast<size_t>(req.out.n))) {
  if (req.out.echo)
    for (size_t i = 0; i < impl_->cs.size(); ++i)
      impl_->cs[i].prompt_text = model.tokenizer.decode(req.prompts[i / req.out.n], req.out.skip_special_tokens);
}

Streamer::~Streamer() = default;
Streamer::Streamer(Streamer&&) noexcept = default;
size_t Streamer::choices() const { return impl_->cs.size(); }

std::vector<json> Streamer::begin() {
  Impl& s = *impl_;
  std::vector<json> chunks;
  for (size_t i = 0; i < s.cs.size(); ++i) {
    if (s.chat) chunks.push_back(s.chunk(i, json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
    else if (s.out.echo) chunks.push_back(s.chunk(i, s.cs[i].prompt_text, nullptr, nullptr));
  }
  return chunks;
}

std::vector<json> Streamer::push(size_t choice, TokenId token, float logprob) {
  Impl& s = *impl_;
  AGENTR1_CHECK(choice < s.cs.size(), "internal: stream choice " << choice << " of " << s.cs.size());
  Impl::Choice& c = s.cs[choice];
  if (c.finished) return {};
  const size_t offset = c.prompt_text.size() + c.text.size();
  ++c.tokens;
  const bool stop_token =
      std::find(s.sp.stop_token_ids.begin(), s.sp.stop_token_ids.end(), token) != s.sp.stop_token_ids.end();
  if (!stop_token || s.out.include_stop_str_in_output) c.text += c.sd.push(token);
  const size_t end = s.certain(c);
  std::string delta;
  if (end > c.sent) {
    delta = c.text.substr(c.sent, end - c.sent);
    c.sent = end;
  }
  json lp = s.logprobs(TokenIds{token}, std::vector<float>{logprob}, 0, 1, offset);
  if (delta.empty() && lp.is_null()) return {};
  return {s.chunk(choice, s.text_delta(delta), std::move(lp), nullptr)};
}

std::vector<json> Streamer::finish(size_t choice, const GenResult& r) {
  Impl& s = *impl_;
  AGENTR1_CHECK(choice < s.cs.size(), "internal: stream choice " << choice << " of " << s.cs.size());
  Impl::Choice& c = s.cs[choice];
  AGENTR1_CHECK(!c.finished, "internal: stream choice " << choice << " finished twice");
  c.finished = true;
  s.completion_tokens += r.token_ids.size();
  std::vector<json> chunks;
  const std::string sent = c.text.substr(0, c.sent);
  const size_t seen = std::min(c.tokens, r.token_ids.size());
  json unseen_lp = s.logprobs(r.token_ids, r.logprobs, seen, r.token_ids.size(), c.prompt_text.size() + sent.size());
  json last;
  if (s.chat) {
    const ChatChoice cc = chat_choice(*s.chat, r, s.m, s.id, choice);
    std::string rest;
    if (cc.tool_calls.empty()) {
      rest = remainder(cc.content.get<std::string>(), sent, s.id);
    } else {
      size_t lead = 0;  // whitespace that began the response went out; content trims it
      while (lead < sent.size() && is_space(sent[lead])) ++lead;
      rest = remainder(cc.content.is_string() ? cc.content.get<std::string>() : "", sent.substr(lead), s.id);
    }
    if (!rest.empty() || !unseen_lp.is_null())
      chunks.push_back(s.chunk(choice, json{{"content", rest}}, std::move(unseen_lp), nullptr));
    if (!cc.reasoning.empty())
      chunks.push_back(s.chunk(choice, json{{"reasoning_content", cc.reasoning}}, nullptr, nullptr));
    if (!cc.tool_calls.empty()) {
      json calls = json::array();
      for (size_t k = 0; k < cc.tool_calls.size(); ++k) {
        json call = cc.tool_calls[k];
        call["index"] = k;
        calls.push_back(std::move(call));
      }
      chunks.push_back(s.chunk(choice, json{{"tool_calls", calls}}, nullptr, nullptr));
    }
    last = s.chunk(choice, json::object(), nullptr, cc.finish);
    last["choices"][0]["stop_reason"] = cc.d.stop_reason;
    if (s.out.return_token_ids) {
      last["choices"][0]["token_ids"] = r.token_ids;
      last["choices"][0]["prompt_token_ids"] = s.chat->prompt;
    }
  } else {
    const Decoded d = decode_result(r, s.sp, s.out, s.m);
    const std::string rest = remainder(d.text, sent, s.id);
    if (!rest.empty() || !unseen_lp.is_null()) chunks.push_back(s.chunk(choice, rest, std::move(unseen_lp), nullptr));
    last = s.chunk(choice, "", nullptr, finish_name(r.finish));
    last["choices"][0]["stop_reason"] = d.stop_reason;
    if (s.out.return_token_ids) {
      last["choices"][0]["token_ids"] = r.token_ids;
      last["choices"][0]["prompt_token_ids"] = s.cmpl->prompts[choice / s.out.n];
    }
  }
  last["choices"][0]["policy_version"] = r.policy_version;
  chunks.push_back(std::move(last));
  return chunks;
}

std::vector<json> Streamer::end() {
  Impl& s = *impl_;
  if (!s.out.include_usage) return {};
  size_t prompt_tokens = 0;
  if (s.chat) {
    prompt_tokens = s.chat->prompt.size();
  } else {
    for (const TokenIds& p : s.cmpl->prompts) prompt_tokens += p.size();
  }
  json u = s.chunk(0, "", nullptr, nullptr);
  u["choices"] = json::array();
  u["usage"] = usage(prompt_tokens, s.completion_tokens);
  return {u};
}

namespace {

template <class Req>
std::vector<json> all_chunks(const Req& req, const std::vector<GenResult>& results, const ServedModel& m,
                             const std::string& id, int64_t created) {
  Streamer st(req, m, id, created);
  check_results(st.choices(), results.size());
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

}  // namespace

std::vector<json> chat_stream_chunks(const ChatRequest& req, const std::vector<GenResult>& results,
                                     const ServedModel& m, const std::string& id, int64_t created) {
  return all_chunks(req, results, m, id, created);
}

std::vector<json> completion_stream_chunks(const CompletionRequest& req, const std::vector<GenResult>& results,
                                           const ServedModel& m, const std::string& id, int64_t created) {
  return all_chunks(req, results, m, id, created);
}

TokenIds default_eos_ids(const text::Tokenizer& tok, const json& config, const json& generation_config,
                         int64_t vocab_size) {
  TokenIds ids;
  auto add = [&](int64_t id) {
    if (id >= 0 && id < vocab_size && std::find(ids.begin(), ids.end(), id) == ids.end())
      ids.push_back(static_cast<TokenId>(id));
  };
  auto add_json = [&](const json& j) {
    if (j.is_number_integer()) add(j.get<int64_t>());
    if (j.is_array())
      for (const json& x : j)
        if (x.is_number_integer()) add(x.get<int64_t>());
  };
  if (auto e = tok.eos_token_id()) add(*e);
  if (config.is_object() && config.contains("eos_token_id")) add_json(config["eos_token_id"]);
  if (generation_config.is_object() && generation_config.contains("eos_token_id"))
    add_json(generation_config["eos_token_id"]);
  return ids;
}

}  // namespace agentr1::serve
