// agentr1 serve without a model: the wire format (openai_api.h) on scripted engine
// results, and the HTTP server (openai_server.h) over a scripted Generator on
// 127.0.0.1. Expected values are the OpenAI/vLLM contract written out by hand (texts,
// statuses, literal template renderings), not output of the code under test.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <cctype>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "agentr1/core/error.h"
#include "agentr1/serve/openai_api.h"
#include "agentr1/serve/openai_server.h"

namespace agentr1::serve {
namespace {

const std::string kTokDir = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3";
constexpr int kContext = 1024;  // the served context window

ServedModel tiny_model() {
  text::Tokenizer tok = text::Tokenizer::load(kTokDir);
  ServedModel m{"tiny", kContext, tok.vocab_size(), 1700000000, tok, std::nullopt, "hermes", {}};
  m.chat_template = text::ChatTemplate::from_template_text(tok.chat_template());
  m.eos_ids = {*tok.token_to_id("<|im_end|>")};
  return m;
}

TokenId im_end(const ServedModel& m) { return *m.tokenizer.token_to_id("<|im_end|>"); }

GenResult result(TokenIds ids, FinishReason finish, float lp0 = -0.5f) {
  GenResult r;
  r.token_ids = std::move(ids);
  for (size_t i = 0; i < r.token_ids.size(); ++i) r.logprobs.push_back(lp0 - 0.37f * static_cast<float>(i));
  r.finish = finish;
  r.policy_version = 7;
  return r;
}

TokenIds cat(TokenIds a, const TokenIds& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Status and param of the ApiError fn throws (0 if none).
std::pair<int, std::string> api_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
  return {0, ""};
}

TEST(OpenAIApi, CompletionPromptForms) {
  const ServedModel m = tiny_model();
  const TokenIds hi = m.tokenizer.encode("Hello there");
  auto parse = [&](const std::string& body) { return parse_completion_request(json::parse(body), m, 99); };
  EXPECT_EQ(parse(R"({"prompt": "Hello there"})").prompts, std::vector<TokenIds>({hi}));
  EXPECT_EQ(parse(R"({"prompt": ["Hello there", "x"]})").prompts.size(), 2u);
  EXPECT_EQ(parse(R"({"prompt": [5, 6, 7]})").prompts, std::vector<TokenIds>({{5, 6, 7}}));
  EXPECT_EQ(parse(R"({"prompt": [[5], [6, 7]]})").prompts, std::vector<TokenIds>({{5}, {6, 7}}));
  // Special tokens in a text prompt are recognised (one id), as HF's encode does.
  EXPECT_EQ(parse(R"({"prompt": "<|im_end|>"})").prompts[0], TokenIds{im_end(m)});

  const CompletionRequest d = parse(R"({"prompt": [1, 2], "model": "tiny"})");
  EXPECT_EQ(d.sampling.max_new_tokens, 16);  // OpenAI's default
  EXPECT_EQ(d.sampling.temperature, 1.0f);
  EXPECT_EQ(d.sampling.top_k, 0);
  EXPECT_EQ(d.out.seed, 99u);                // the server's draw when no seed is given
  EXPECT_EQ(d.sampling.stop_token_ids, TokenIds{im_end(m)});  // eos unless ignore_eos
  EXPECT_FALSE(d.out.logprobs.has_value());
  const CompletionRequest k = parse(R"({"prompt": [1], "top_k": -1, "ignore_eos": true, "stop_token_ids": [9, 3]})");
  EXPECT_EQ(k.sampling.top_k, 0);
  EXPECT_EQ(k.sampling.stop_token_ids, (TokenIds{9, 3}));
  const CompletionRequest s = parse(R"({"prompt": [1], "stop_token_ids": [9], "stop": "\n\n", "top_k": 5,
                                        "temperature": 0, "top_p": 0.5, "max_tokens": 3, "logprobs": 0})");
  EXPECT_EQ(s.sampling.stop_token_ids, (TokenIds{9, im_end(m)}));
  EXPECT_EQ(s.sampling.stop_strings, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(s.sampling.top_k, 5);
  EXPECT_EQ(s.sampling.temperature, 0.0f);
  EXPECT_EQ(s.sampling.top_p, 0.5f);
  EXPECT_EQ(s.sampling.max_new_tokens, 3);
  EXPECT_EQ(s.out.logprobs, 0);
}

TEST(OpenAIApi, SeedsAreBasePlusSampleIndexPerPrompt) {
  const ServedModel m = tiny_model();
  const CompletionRequest r =
      parse_completion_request(json::parse(R"({"prompt": [[1], [2, 3]], "n": 3, "seed": 40})"), m, 0);
  const std::vector<GenRequest> g = r.gen_requests();
  ASSERT_EQ(g.size(), 6u);
  const uint64_t want_seed[] = {40, 41, 42, 40, 41, 42};
  const TokenIds want_prompt[] = {{1}, {1}, {1}, {2, 3}, {2, 3}, {2, 3}};
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].sampling.seed, want_seed[i]) << i;
    EXPECT_EQ(g[i].prompt_ids, want_prompt[i]) << i;
  }
  // The full unsigned range is accepted.
  EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt": [1], "seed": 18446744073709551615})"), m, 0).out.seed,
            18446744073709551615ull);
}

TEST(OpenAIApi, CompletionBadRequestsName400AndParam) {
  const ServedModel m = tiny_model();
  std::string ids_ctx = "[";  // kContext ids: no room left to generate
  for (int i = 0; i < kContext; ++i) ids_ctx += (i ? ",1" : "1");
  ids_ctx += "]";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([1, 2])", ""},
      {R"({})", "prompt"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": [1, "a"]})", "prompt"},
      {R"({"prompt": ["a", 1]})", "prompt"},
      {R"({"prompt": [1.5]})", "prompt"},
      {R"({"prompt": [-1]})", "prompt"},
      {R"({"prompt": [283]})", "prompt"},  // vocab is 283 ids
      {R"({"prompt": {"a": 1}})", "prompt"},
      {"{\"prompt\": " + ids_ctx + "}", "prompt"},
      {R"({"prompt": [1], "model": "gpt-4"})", "model"},
      {R"({"prompt": [1], "model": 3})", "model"},
      {R"({"prompt": [1], "temperature": -0.1})", "temperature"},
      {R"({"prompt": [1], "temperature": "hot"})", "temperature"},
      {R"({"prompt": [1], "top_p": 0})", "top_p"},
      {R"({"prompt": [1], "top_p": 1.5})", "top_p"},
      {R"({"prompt": [1], "top_k": -2})", "top_k"},
      {R"({"prompt": [1], "top_k": 2.5})", "top_k"},
      {R"({"prompt": [1], "n": 0})", "n"},
      {R"({"prompt": [1], "n": 1000})", "n"},
      {R"({"prompt": [1], "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": [1], "max_tokens": true})", "max_tokens"},
      {R"({"prompt": [1], "seed": -1})", "seed"},
      {R"({"prompt": [1], "seed": 1.5})", "seed"},
      {R"({"prompt": [1], "stop": 5})", "stop"},
      {R"({"prompt": [1], "stop": [""]})", "stop"},
      {R"({"prompt": [1], "stop": ["a", 1]})", "stop"},
      {R"({"prompt": [1], "stop_token_ids": [400]})", "stop_token_ids"},
      {R"({"prompt": [1], "stop_token_ids": 3})", "stop_token_ids"},
      {R"({"prompt": [1], "logprobs": 21})", "logprobs"},
      {R"({"prompt": [1], "logprobs": true})", "logprobs"},
      {R"({"prompt": [1], "echo": true, "logprobs": 1})", "echo"},
      {R"({"prompt": [1], "best_of": 2})", "best_of"},
      {R"({"prompt": [1], "presence_penalty": 0.5})", "presence_penalty"},
      {R"({"prompt": [1], "frequency_penalty": 1})", "frequency_penalty"},
      {R"({"prompt": [1], "repetition_penalty": 1.1})", "repetition_penalty"},
      {R"({"prompt": [1], "logit_bias": {"1": 5}})", "logit_bias"},
      {R"({"prompt": [1], "suffix": "x"})", "suffix"},
      {R"({"prompt": [1], "ignore_eos": 1})", "ignore_eos"},
      {R"({"prompt": [1], "return_token_ids": "yes"})", "return_token_ids"},
  };
  for (const auto& [body, param] : cases) {
    const auto [status, got_param] = api_error([&] { parse_completion_request(json::parse(body), m, 0); });
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(got_param, param) << body;
  }
  // Neutral values of unsupported options are fine (clients send them).
  EXPECT_NO_THROW(parse_completion_request(
      json::parse(R"({"prompt": [1], "presence_penalty": 0, "frequency_penalty": 0, "logit_bias": {}, "best_of": 1,
                      "suffix": null, "user": "u", "model": null, "seed": null, "stop": null})"),
      m, 0));
  try {
    parse_completion_request(json::parse("{\"prompt\": " + ids_ctx + "}"), m, 0);
    ADD_FAILURE() << "a prompt filling the context was accepted";
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("1024 tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--max-context"), std::string::npos) << e.what();
    EXPECT_EQ(e.code, "context_length_exceeded");
  }
}

TEST(OpenAIApi, CompletionResponseTokenIdsAndLogprobsAreTheEngines) {
  const ServedModel m = tiny_model();
  const CompletionRequest req = parse_completion_request(
      json::parse(R"({"prompt": [1, 2, 3], "return_token_ids": true, "logprobs": 1, "n": 2, "seed": 5})"), m, 0);
  const TokenIds hello = m.tokenizer.encode("Hello, world");
  GenResult a = result(cat(hello, {im_end(m)}), FinishReason::kStopToken);
  // Floats that need 9 significant digits to round-trip.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-20.f, 0.f);
  for (float& lp : a.logprobs) lp = u(rng);
  GenResult b = result(hello, FinishReason::kLength);
  const json resp = json::parse(completion_response(req, {a, b}, m, "cmpl-x", 123).dump());
  EXPECT_EQ(resp["object"], "text_completion");
  EXPECT_EQ(resp["model"], "tiny");
  EXPECT_EQ(resp["id"], "cmpl-x");
  EXPECT_EQ(resp["created"], 123);
  ASSERT_EQ(resp["choices"].size(), 2u);
  const json& c0 = resp["choices"][0];
  EXPECT_EQ(c0["index"], 0);
  EXPECT_EQ(c0["text"], "Hello, world");  // the stop token's text is not in the text
  EXPECT_EQ(c0["finish_reason"], "stop");
  EXPECT_TRUE(c0["stop_reason"].is_null());  // eos, not a requested stop id
  EXPECT_EQ(c0["token_ids"].get<TokenIds>(), a.token_ids);  // stop token included
  EXPECT_EQ(c0["prompt_token_ids"].get<TokenIds>(), (TokenIds{1, 2, 3}));
  EXPECT_EQ(c0["policy_version"], 7);
  const json& lp = c0["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), a.token_ids.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    EXPECT_EQ(static_cast<float>(lp["token_logprobs"][i].get<double>()), a.logprobs[i]) << i;
    EXPECT_EQ(lp["top_logprobs"][i].size(), 1u);
    EXPECT_EQ(lp["top_logprobs"][i].begin().value().get<double>(), lp["token_logprobs"][i].get<double>());
  }
  ASSERT_EQ(lp["tokens"].size(), a.token_ids.size());
  EXPECT_EQ(lp["tokens"][0], m.tokenizer.decode(TokenIds{hello[0]}));
  EXPECT_EQ(lp["tokens"].back(), "<|im_end|>");
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 1; i < lp["text_offset"].size(); ++i)
    EXPECT_GE(lp["text_offset"][i].get<int>(), lp["text_offset"][i - 1].get<int>());
  EXPECT_EQ(resp["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(resp["choices"][1]["text"], "Hello, world");
  EXPECT_EQ(resp["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(resp["usage"]["completion_tokens"], a.token_ids.size() + b.token_ids.size());
  EXPECT_EQ(resp["usage"]["total_tokens"], 3 + a.token_ids.size() + b.token_ids.size());
  // Without logprobs / return_token_ids those fields are null / absent.
  const CompletionRequest plain = parse_completion_request(json::parse(R"({"prompt": [1]})"), m, 0);
  const json p = completion_response(plain, {a}, m, "id", 0);
  EXPECT_TRUE(p["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(p["choices"][0].contains("token_ids"));
}

TEST(OpenAIApi, StopReasonsAndStopStrings) {
  const ServedModel m = tiny_model();
  auto text_of = [&](const std::string& body, const GenResult& r) {
    const CompletionRequest req = parse_completion_request(json::parse(body), m, 0);
    return completion_response(req, {r}, m, "id", 0)["choices"][0];
  };
  const TokenIds ids = m.tokenizer.encode("abc STOP def");
  // The engine's output ends with the token that completed the stop string.
  TokenIds upto;
  for (TokenId id : ids) {
    upto.push_back(id);
    if (m.tokenizer.decode(upto).find("STOP") != std::string::npos) break;
  }
  const GenResult s = result(upto, FinishReason::kStopString);
  json c = text_of(R"({"prompt": [1], "stop": ["zz", "STOP"]})", s);
  EXPECT_EQ(c["text"], "abc ");
  EXPECT_EQ(c["stop_reason"], "STOP");
  EXPECT_EQ(c["finish_reason"], "stop");
  c = text_of(R"({"prompt": [1], "stop": "STOP", "include_stop_str_in_output": true})", s);
  EXPECT_EQ(c["text"], "abc STOP");
  // A requested stop id is the stop_reason; its text is kept only when asked.
  const TokenIds nine = m.tokenizer.encode("9");
  const GenResult t = result(cat(m.tokenizer.encode("x"), nine), FinishReason::kStopToken);
  const std::string body = R"({"prompt": [1], "stop_token_ids": [)" + std::to_string(nine[0]) + "]";
  c = text_of(body + "}", t);
  EXPECT_EQ(c["stop_reason"], nine[0]);
  EXPECT_EQ(c["text"], "x");
  c = text_of(body + R"(, "include_stop_str_in_output": true})", t);
  EXPECT_EQ(c["text"], "x9");
  // Special tokens: dropped from the text by default, kept with skip_special_tokens false.
  const TokenId start = *m.tokenizer.token_to_id("<|im_start|>");
  const GenResult sp = result({start, nine[0]}, FinishReason::kLength);
  EXPECT_EQ(text_of(R"({"prompt": [1]})", sp)["text"], "9");
  EXPECT_EQ(text_of(R"({"prompt": [1], "skip_special_tokens": false})", sp)["text"], "<|im_start|>9");
  const GenResult eos = result(cat(m.tokenizer.encode("ok"), {im_end(m)}), FinishReason::kStopToken);
  EXPECT_EQ(text_of(R"({"prompt": [1], "skip_special_tokens": false, "include_stop_str_in_output": true})", eos)["text"],
            "ok<|im_end|>");
  // echo: the prompt's text first.
  const std::string echo = R"({"prompt": "Q: ", "echo": true})";
  EXPECT_EQ(text_of(echo, result(m.tokenizer.encode("A"), FinishReason::kLength))["text"], "Q: A");
}

ChatRequest chat(const ServedModel& m, const std::string& body) {
  return parse_chat_request(json::parse(body), m, 0);
}

TEST(OpenAIApi, ChatRendersTheTemplate) {
  const ServedModel m = tiny_model();
  const ChatRequest r = chat(m, R"({"messages": [{"role": "user", "content": "What is 2+3?"}]})");
  // The Qwen3 template's rendering, written out.
  EXPECT_EQ(m.tokenizer.decode(r.prompt), "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(r.sampling.max_new_tokens, kContext - static_cast<int>(r.prompt.size()));  // the rest of the window
  EXPECT_FALSE(r.parse_tools);
  const ChatRequest nt = chat(m, R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                   {"type": "text", "text": "b"}]}], "chat_template_kwargs": {"enable_thinking": false},
                                   "max_completion_tokens": 5})");
  EXPECT_EQ(m.tokenizer.decode(nt.prompt),
            "<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(nt.sampling.max_new_tokens, 5);
  // An assistant tool call with JSON-string arguments renders like object arguments.
  const std::string call_str = R"({"messages": [{"role": "user", "content": "add"}, {"role": "assistant",
      "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add",
      "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "2"}]})";
  std::string call_obj = call_str;
  call_obj.replace(call_obj.find(R"("{\"a\": 1}")"), std::string(R"("{\"a\": 1}")").size(), R"({"a": 1})");
  const std::string rendered = m.tokenizer.decode(chat(m, call_str).prompt);
  EXPECT_EQ(rendered, m.tokenizer.decode(chat(m, call_obj).prompt));
  EXPECT_NE(rendered.find("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"),
            std::string::npos)
      << rendered;
  const ChatRequest t = chat(m, R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function",
      "function": {"name": "add", "description": "adds", "parameters": {"type": "object"}}}]})");
  EXPECT_TRUE(t.parse_tools);
  EXPECT_NE(m.tokenizer.decode(t.prompt).find("<tools>"), std::string::npos);
  EXPECT_FALSE(chat(m, R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
      "tools": [{"type": "function", "function": {"name": "add"}}]})").parse_tools);
}

TEST(OpenAIApi, ChatTemplateKwargsAndSpecialTokensReachTheTemplate) {
  ServedModel m = tiny_model();
  m.chat_template = text::ChatTemplate::from_template_text(
      "{{ bos_token }}{{ greeting }}{% for m in messages %}{{ m.content }}{% endfor %}", json{{"bos_token", "<B>"}});
  const ChatRequest r = chat(m, R"({"messages": [{"role": "user", "content": "x"}],
      "chat_template_kwargs": {"greeting": "Hi "}})");
  EXPECT_EQ(m.tokenizer.decode(r.prompt), "<B>Hi x");
}

TEST(OpenAIApi, ChatBadRequests) {
  ServedModel m = tiny_model();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [3]})", "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}})", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function"}})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": 1}})",
       "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"tools": []}})",
       "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})", "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 30})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})",
       "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": ")" + std::string(2 * kContext, 'a') + R"("}]})", "messages"},
  };
  for (const auto& [body, param] : cases) {
    const auto [status, got_param] = api_error([&] { chat(m, body); });
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(got_param, param) << body;
  }
  m.chat_template.reset();
  EXPECT_EQ(api_error([&] { chat(m, R"({"messages": [{"role": "user", "content": "x"}]})"); }).first, 400);
}

TEST(OpenAIApi, ChatToolCallsAreParsed) {
  const ServedModel m = tiny_model();
  const std::string tools = R"(, "tools": [{"type": "function", "function": {"name": "add"}}]})";
  const std::string msgs = R"({"messages": [{"role": "user", "content": "1+2?"}])";
  const ChatRequest req = chat(m, msgs + tools);
  const std::string out = "Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"
                          "\n<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 3}\"}\n</tool_call>";
  const GenResult r = result(cat(m.tokenizer.encode(out), {im_end(m)}), FinishReason::kStopToken);
  const json resp = json::parse(chat_response(req, {r}, m, "chatcmpl-1", 5).dump());
  EXPECT_EQ(resp["object"], "chat.completion");
  const json& c = resp["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_EQ(c["message"]["content"], "Let me add.");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 2u);
  const json& t0 = c["message"]["tool_calls"][0];
  EXPECT_EQ(t0["type"], "function");
  EXPECT_EQ(t0["function"]["name"], "add");
  EXPECT_EQ(json::parse(t0["function"]["arguments"].get<std::string>()), json::parse(R"({"a": 1, "b": 2})"));
  EXPECT_EQ(json::parse(c["message"]["tool_calls"][1]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"a": 3})"));
  EXPECT_NE(t0["id"], c["message"]["tool_calls"][1]["id"]);
  EXPECT_EQ(t0["id"].get<std::string>().rfind("call_", 0), 0u);
  // Only calls: content null. tool_choice none: raw text. No tools: raw text.
  const GenResult only = result(m.tokenizer.encode("<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>"),
                                FinishReason::kLength);
  EXPECT_TRUE(chat_response(req, {only}, m, "i", 0)["choices"][0]["message"]["content"].is_null());
  const ChatRequest none = chat(m, msgs + R"(, "tool_choice": "none")" + tools);
  const json rn = chat_response(none, {r}, m, "i", 0)["choices"][0];
  EXPECT_EQ(rn["message"]["content"], out);
  EXPECT_FALSE(rn["message"].contains("tool_calls"));
  EXPECT_EQ(rn["finish_reason"], "stop");
  // Malformed calls are not tool_calls: the client gets the text.
  const GenResult bad = result(m.tokenizer.encode("<tool_call>\n{not json\n</tool_call>"), FinishReason::kLength);
  EXPECT_EQ(chat_response(req, {bad}, m, "i", 0)["choices"][0]["message"]["content"],
            "<tool_call>\n{not json\n</tool_call>");
}

TEST(OpenAIApi, ChatToolCallIdsFollowTheFormat) {
  ServedModel m = tiny_model();
  m.tool_format = "mistral";  // its template wants 9-alphanumeric call ids
  const ChatRequest req = chat(m, R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "add"}}]})");
  auto ids = [&](const std::string& text) {
    const json c = chat_response(req, {result(m.tokenizer.encode(text), FinishReason::kLength)}, m, "r", 0);
    std::vector<std::string> out;
    for (const json& t : c["choices"][0]["message"]["tool_calls"]) out.push_back(t["id"]);
    return out;
  };
  const std::vector<std::string> own =
      ids(R"([TOOL_CALLS][{"name": "add", "arguments": {"a": 1}, "id": "abcDEF123"}])");
  EXPECT_EQ(own, std::vector<std::string>{"abcDEF123"});
  const std::vector<std::string> made = ids(R"([TOOL_CALLS][{"name": "add", "arguments": {}}, {"name": "add",
      "arguments": {}}])");
  ASSERT_EQ(made.size(), 2u);
  for (const std::string& id : made) {
    EXPECT_EQ(id.size(), 9u) << id;
    for (char ch : id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << id;
  }
  EXPECT_NE(made[0], made[1]);
}

// Content deltas of the stream, concatenated; checks each chunk's shape on the way.
std::string streamed_content(const std::vector<json>& chunks, size_t index, std::string* finish = nullptr) {
  std::string s;
  for (const json& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    if (c["choices"].empty()) continue;
    const json& ch = c["choices"][0];
    if (ch["index"] != index) continue;
    EXPECT_NO_THROW(c.dump());  // strict: every delta is valid UTF-8
    if (ch["delta"].contains("content") && ch["delta"]["content"].is_string()) s += ch["delta"]["content"];
    if (finish && ch["finish_reason"].is_string()) *finish = ch["finish_reason"];
  }
  return s;
}

TEST(OpenAIApi, StreamChunksConcatenateToTheMessage) {
  const ServedModel m = tiny_model();
  const ChatRequest req = chat(m, R"({"messages": [{"role": "user", "content": "x"}], "stream": true, "n": 2,
      "logprobs": true, "top_logprobs": 1, "stream_options": {"include_usage": true}, "return_token_ids": true})");
  // Multi-byte characters split over byte tokens: no chunk may carry half of one.
  const std::string text = "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82!";
  const GenResult a = result(cat(m.tokenizer.encode(text), {im_end(m)}), FinishReason::kStopToken);
  const GenResult b = result(m.tokenizer.encode("\xE4\xB8\x96 ok"), FinishReason::kLength);
  const std::vector<json> chunks = chat_stream_chunks(req, {a, b}, m, "chatcmpl-s", 9);
  const json whole = chat_response(req, {a, b}, m, "chatcmpl-s", 9);
  std::string finish0, finish1;
  EXPECT_EQ(streamed_content(chunks, 0, &finish0), text);
  EXPECT_EQ(streamed_content(chunks, 0), whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(streamed_content(chunks, 1, &finish1), "\xE4\xB8\x96 ok");
  EXPECT_EQ(finish0, "stop");
  EXPECT_EQ(finish1, "length");
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(chunks.back()["choices"].empty());
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], a.token_ids.size() + b.token_ids.size());
  // One log-prob per token id across the stream, equal to the engine's.
  std::vector<double> lps;
  for (const json& c : chunks)
    if (!c["choices"].empty() && c["choices"][0]["index"] == 0 && c["choices"][0]["logprobs"].is_object())
      for (const json& e : c["choices"][0]["logprobs"]["content"]) lps.push_back(e["logprob"].get<double>());
  ASSERT_EQ(lps.size(), a.logprobs.size());
  for (size_t i = 0; i < lps.size(); ++i) EXPECT_EQ(static_cast<float>(lps[i]), a.logprobs[i]);
  // Non-streamed logprobs likewise, with top_logprobs holding the sampled token.
  const json& wl = whole["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(wl.size(), a.token_ids.size());
  EXPECT_EQ(wl[0]["top_logprobs"].size(), 1u);
  EXPECT_EQ(wl[0]["top_logprobs"][0]["token"], wl[0]["token"]);

  // With tool calls: content outside the calls, then the calls, in one delta each.
  const ChatRequest treq = chat(m, R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
      "tools": [{"type": "function", "function": {"name": "add"}}]})");
  const GenResult t = result(m.tokenizer.encode("Sure.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n"
                                                "</tool_call>"),
                             FinishReason::kLength);
  const std::vector<json> tc = chat_stream_chunks(treq, {t}, m, "id", 0);
  std::string finish;
  EXPECT_EQ(streamed_content(tc, 0, &finish), "Sure.");
  EXPECT_EQ(finish, "tool_calls");
  int calls = 0;
  for (const json& c : tc)
    if (c["choices"][0]["delta"].contains("tool_calls")) {
      ++calls;
      EXPECT_EQ(c["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
      EXPECT_EQ(c["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "add");
    }
  EXPECT_EQ(calls, 1);
}

// Feeds a Streamer token by token, choices interleaved, and collects each choice's text
// deltas as they would reach the client before and after its result.
struct Fed {
  std::vector<json> chunks;
  std::vector<std::string> before_finish;  // per choice: deltas sent from push() alone
};

std::string delta_text(const json& c) {
  const json& ch = c["choices"][0];
  if (ch.contains("delta")) return ch["delta"].contains("content") ? ch["delta"]["content"].get<std::string>() : "";
  return ch["text"].get<std::string>();
}

template <class Req>
Fed feed(const Req& req, const ServedModel& m, const std::vector<GenResult>& results) {
  Streamer st(req, m, "s-1", 5);
  Fed f;
  f.before_finish.resize(results.size());
  auto add = [&](std::vector<json> more, int pushed_by) {
    for (json& c : more) {
      if (pushed_by >= 0 && !c["choices"].empty()) f.before_finish[pushed_by] += delta_text(c);
      f.chunks.push_back(std::move(c));
    }
  };
  add(st.begin(), -1);
  size_t longest = 0;
  for (const GenResult& r : results) longest = std::max(longest, r.token_ids.size());
  for (size_t k = 0; k < longest; ++k)  // round robin over the choices, as a batch decodes
    for (size_t i = 0; i < results.size(); ++i)
      if (k < results[i].token_ids.size())
        add(st.push(i, results[i].token_ids[k], results[i].logprobs[k]), static_cast<int>(i));
  for (size_t i = 0; i < results.size(); ++i) add(st.finish(i, results[i]), -1);
  add(st.end(), -1);
  return f;
}

std::string all_text(const std::vector<json>& chunks, size_t index) {
  std::string s;
  for (const json& c : chunks)
    if (!c["choices"].empty() && c["choices"][0]["index"] == index) s += delta_text(c);
  return s;
}

// Stop strings: text that a stop string may still claim waits (its length - 1 last
// bytes), so no delta is ever cut back; the stop string itself never goes out.
TEST(OpenAIApi, StreamerHoldsBackWhatAStopStringMayClaim) {
  const ServedModel m = tiny_model();
  const ChatRequest req = chat(m, R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
      "stop": ["world!"], "n": 2})");
  // Choice 0 is cut short while "Hello wor" is out: 9 bytes - 5 held = "Hell".
  const GenResult partial = result(m.tokenizer.encode("Hello wor"), FinishReason::kLength);
  Fed f = feed(req, m, {partial, partial});
  EXPECT_EQ(f.before_finish[0], "Hell");
  EXPECT_EQ(all_text(f.chunks, 0), "Hello wor");  // the rest at finish (kLength: nothing is cut)
  // It completes the stop string: the text ends before it.
  const GenResult stopped = result(m.tokenizer.encode("Hello world!"), FinishReason::kStopString);
  const GenResult other = result(m.tokenizer.encode("ok"), FinishReason::kLength);
  f = feed(req, m, {stopped, other});
  EXPECT_EQ(all_text(f.chunks, 0), "Hello ");
  EXPECT_EQ(all_text(f.chunks, 1), "ok");
  EXPECT_EQ(f.before_finish[0], "Hello ");  // 12 - 5 = 7 bytes certain before the stop fired
  const json whole = chat_response(req, {stopped, other}, m, "s-1", 5);
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Hello ");
  EXPECT_EQ(whole["choices"][0]["stop_reason"], "world!");
  // The stop token adds no text, even streamed, unless include_stop_str_in_output.
  const ChatRequest plain = chat(m, R"({"messages": [{"role": "user", "content": "x"}], "stream": true})");
  const GenResult eos = result(cat(m.tokenizer.encode("Hi"), {im_end(m)}), FinishReason::kStopToken);
  f = feed(plain, m, {eos});
  EXPECT_EQ(f.before_finish[0], "Hi");
  EXPECT_EQ(all_text(f.chunks, 0), "Hi");
}

// With tools, content before the call goes out while the call is still being written;
// whitespace before the call waits (message.content is trimmed); the call comes at the end.
TEST(OpenAIApi, StreamerSendsContentBeforeToolCallsEarly) {
  const ServedModel m = tiny_model();
  const ChatRequest treq = chat(m, R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
      "tools": [{"type": "function", "function": {"name": "add"}}]})");
  const GenResult t = result(m.tokenizer.encode("Sure, adding.\n<tool_call>\n{\"name\": \"add\", \"arguments\": "
                                                "{\"a\": 1}}\n</tool_call>"),
                             FinishReason::kLength);
  const Fed f = feed(treq, m, {t});
  EXPECT_EQ(f.before_finish[0], "Sure, adding.");
  EXPECT_EQ(all_text(f.chunks, 0), "Sure, adding.");
  const json whole = chat_response(treq, {t}, m, "s-1", 5);
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Sure, adding.");
  int calls = 0;
  for (const json& c : f.chunks)
    if (!c["choices"].empty() && c["choices"][0]["delta"].contains("tool_calls")) {
      ++calls;
      EXPECT_EQ(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
    }
  EXPECT_EQ(calls, 1);
  // Text that merely looks like a tag prefix goes out once it is not one.
  const GenResult lt = result(m.tokenizer.encode("a <b> c"), FinishReason::kLength);
  EXPECT_EQ(feed(treq, m, {lt}).before_finish[0], "a <b> c");
  // No calls after all: the whole raw text, as the non-streamed content.
  const GenResult none = result(m.tokenizer.encode("  plain answer  "), FinishReason::kLength);
  const Fed g = feed(treq, m, {none});
  EXPECT_EQ(all_text(g.chunks, 0), "  plain answer  ");
  EXPECT_EQ(chat_response(treq, {none}, m, "s-1", 5)["choices"][0]["message"]["content"], "  plain answer  ");
}

// /v1/completions streams text_completion chunks: echo first, text deltas, a finish
// chunk per choice, usage last; deltas concatenate to the non-streamed text.
TEST(OpenAIApi, CompletionStreamChunks) {
  const ServedModel m = tiny_model();
  const CompletionRequest req = parse_completion_request(
      json::parse(R"({"prompt": ["ab", "c"], "n": 2, "stream": true, "echo": true, "stop": "\n\n",
                     "stream_options": {"include_usage": true}, "return_token_ids": true})"),
      m, 0);
  std::vector<GenResult> rs = {result(m.tokenizer.encode("one\n\ntwo"), FinishReason::kStopString),
                               result(m.tokenizer.encode("x y z"), FinishReason::kLength),
                               result(cat(m.tokenizer.encode("q"), {im_end(m)}), FinishReason::kStopToken),
                               result(m.tokenizer.encode("\xE4\xB8\x96"), FinishReason::kLength)};
  const Fed f = feed(req, m, rs);
  const json whole = completion_response(req, rs, m, "s-1", 5);
  const char* want[] = {"abone", "abx y z", "cq", "c\xE4\xB8\x96"};  // hand-worked: echo + cut text
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(all_text(f.chunks, i), want[i]) << i;
    EXPECT_EQ(whole["choices"][i]["text"], want[i]) << i;
  }
  std::map<size_t, json> last;
  for (const json& c : f.chunks) {
    EXPECT_EQ(c["object"], "text_completion");
    if (!c["choices"].empty() && c["choices"][0]["finish_reason"].is_string())
      last[c["choices"][0]["index"].get<size_t>()] = c["choices"][0];
  }
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[0]["finish_reason"], "stop");
  EXPECT_EQ(last[0]["stop_reason"], "\n\n");
  EXPECT_EQ(last[1]["finish_reason"], "length");
  EXPECT_EQ(last[2]["finish_reason"], "stop");
  EXPECT_EQ(last[2]["token_ids"], rs[2].token_ids);
  EXPECT_EQ(last[3]["prompt_token_ids"], m.tokenizer.encode("c"));
  EXPECT_EQ(last[3]["policy_version"], 7);
  EXPECT_TRUE(f.chunks.back()["choices"].empty());
  EXPECT_EQ(f.chunks.back()["usage"]["prompt_tokens"],
            m.tokenizer.encode("ab").size() + m.tokenizer.encode("c").size());  // once each, not per sample
  size_t generated = 0;
  for (const GenResult& r : rs) generated += r.token_ids.size();
  EXPECT_EQ(f.chunks.back()["usage"]["completion_tokens"], generated);
}

// A generator that never calls on_token: everything goes out at finish.
TEST(OpenAIApi, StreamerWithoutTokensSendsAllAtFinish) {
  const ServedModel m = tiny_model();
  const ChatRequest req = chat(m, R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
      "logprobs": true})");
  const GenResult r = result(m.tokenizer.encode("whole reply"), FinishReason::kLength);
  Streamer st(req, m, "s-2", 5);
  st.begin();
  const std::vector<json> fin = st.finish(0, r);
  ASSERT_GE(fin.size(), 2u);
  EXPECT_EQ(fin[0]["choices"][0]["delta"]["content"], "whole reply");
  EXPECT_EQ(fin[0]["choices"][0]["logprobs"]["content"].size(), r.token_ids.size());
  EXPECT_EQ(fin.back()["choices"][0]["finish_reason"], "length");
}

TEST(OpenAIApi, ModelsAndErrorBodies) {
  const ServedModel m = tiny_model();
  const json r = models_response(m);
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["data"][0]["id"], "tiny");
  EXPECT_EQ(r["data"][0]["object"], "model");
  EXPECT_EQ(r["data"][0]["owned_by"], "agentr1");
  EXPECT_EQ(r["data"][0]["max_model_len"], kContext);
  const json e = error_body(ApiError(400, "bad n", "n"));
  EXPECT_EQ(e["error"]["message"], "bad n");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "n");
  EXPECT_TRUE(e["error"]["code"].is_null());
}

TEST(OpenAIApi, DefaultEosIds) {
  const text::Tokenizer tok = text::Tokenizer::load(kTokDir);
  const TokenId eos = *tok.token_to_id("<|im_end|>");
  const TokenId eot = *tok.token_to_id("<|endoftext|>");
  EXPECT_EQ(default_eos_ids(tok, json(), json(), 283), TokenIds{eos});
  EXPECT_EQ(default_eos_ids(tok, json{{"eos_token_id", eot}}, json{{"eos_token_id", {eos, eot, 5000}}}, 283),
            (TokenIds{eos, eot}));
}

// --- The HTTP server over a scripted generator --------------------------------------

// Returns `script` (cut to max_new_tokens) with log-probs -(seed + 1 + i / 8); waits for
// `barrier` requests to be submitted before answering any (proves concurrency).
class ScriptedGenerator : public Generator {
 public:
  TokenIds script;
  int barrier = 0;
  bool fail = false;
  std::future<GenResult> submit(GenRequest req) override {
    if (req.prompt_ids.size() == 2 && req.prompt_ids[0] == 0 && req.prompt_ids[1] == 0)
      throw Error("scripted refusal of prompt [0, 0]");
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++submitted_;
      last_ = req;
    }
    cv_.notify_all();
    return std::async(std::launch::async, [this, req] {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait_for(lk, std::chrono::seconds(10), [&] { return submitted_ >= barrier; });
      }
      if (fail) throw Error("scripted engine failure");
      GenResult r;
      for (size_t i = 0; i < script.size() && static_cast<int>(i) < req.sampling.max_new_tokens; ++i) {
        if (static_cast<int>(i) == hold_after) {  // streaming tests: wait for the client's word
          std::unique_lock<std::mutex> lk(mu_);
          cv_.wait_for(lk, std::chrono::seconds(20), [&] { return released_; });
        }
        if (stream_delay_ms > 0 && static_cast<int>(i) >= hold_after)
          std::this_thread::sleep_for(std::chrono::milliseconds(stream_delay_ms));
        r.token_ids.push_back(script[i]);
        r.logprobs.push_back(-(static_cast<float>(req.sampling.seed) + 1.f + static_cast<float>(i) / 8.f));
        if (req.on_token && !req.on_token(r.token_ids.back(), r.logprobs.back())) {
          r.finish = FinishReason::kAborted;
          aborted_ = true;
          cv_.notify_all();
          r.policy_version = 3;
          return r;
        }
      }
      r.finish = r.token_ids.size() < script.size() ? FinishReason::kLength : FinishReason::kStopToken;
      r.policy_version = 3;
      return r;
    });
  }
  int max_context() const override { return kContext; }
  int hold_after = -1;      // >= 0: before token hold_after, wait for release()
  int stream_delay_ms = 0;  // pause before each token from hold_after on
  void rearm() {
    std::lock_guard<std::mutex> lk(mu_);
    released_ = false;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  bool wait_aborted(std::chrono::seconds within) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, within, [&] { return aborted_; });
  }
  GenRequest last() {
    std::lock_guard<std::mutex> lk(mu_);
    return last_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int submitted_ = 0;
  bool released_ = false;
  bool aborted_ = false;
  GenRequest last_;
};

struct Running {
  ScriptedGenerator gen;
  std::unique_ptr<OpenAIServer> server;
  std::thread thread;
  int port = 0;
  json last_update;
  Running(const ServerOptions& so, bool with_updater = true) {
    const ServedModel m = tiny_model();
    gen.script = cat(m.tokenizer.encode("Hi there"), {im_end(m)});
    WeightUpdater up;
    if (with_updater)
      up = [this](const json& body) -> std::string {
        if (body["model_path"] == "/mismatch") throw ApiError(400, "tensor 'w': expected [2], found [3]", "model_path");
        if (body["model_path"] == "/missing") throw Error("no such dir");
        last_update = body;
        return "loaded";
      };
    server = std::make_unique<OpenAIServer>(gen, m, so, up);
    port = server->bind();
    thread = std::thread([this] { server->serve(); });
  }
  ~Running() {
    server->stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
};

ServerOptions any_port() {
  ServerOptions so;
  so.port = 0;
  so.threads = 4;
  return so;
}

void expect_error(const httplib::Result& r, int status, const std::string& what) {
  ASSERT_TRUE(r) << what << ": no response";
  EXPECT_EQ(r->status, status) << what << ": " << r->body;
  const json b = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(b.is_object() && b.contains("error")) << what << ": " << r->body;
  EXPECT_TRUE(b["error"]["message"].is_string()) << what;
  EXPECT_TRUE(b["error"]["type"].is_string()) << what;
  EXPECT_TRUE(b["error"].contains("param") && b["error"].contains("code")) << what;
}

TEST(OpenAIServer, RoutesAndErrors) {
  Running s(any_port());
  ASSERT_GT(s.port, 0);
  httplib::Client c = s.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "tiny");

  auto r = c.Post("/v1/completions", R"({"prompt": [5, 6], "max_tokens": 4, "seed": 11, "return_token_ids": true,
                                        "logprobs": 0, "ignore_eos": true})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  const json& ch = body["choices"][0];
  EXPECT_EQ(ch["token_ids"].get<TokenIds>(), TokenIds(s.gen.script.begin(), s.gen.script.begin() + 4));
  EXPECT_EQ(ch["logprobs"]["token_logprobs"][0].get<double>(), -12.0);  // seed 11 reached the engine
  EXPECT_EQ(ch["logprobs"]["token_logprobs"][1].get<double>(), -12.125);
  EXPECT_EQ(ch["finish_reason"], "length");
  EXPECT_EQ(ch["policy_version"], 3);
  EXPECT_EQ(body["usage"]["total_tokens"], 6);
  const GenRequest seen = s.gen.last();
  EXPECT_EQ(seen.prompt_ids, (TokenIds{5, 6}));
  EXPECT_EQ(seen.sampling.max_new_tokens, 4);
  EXPECT_TRUE(seen.sampling.stop_token_ids.empty());  // ignore_eos

  expect_error(c.Post("/v1/completions", "{not json", "application/json"), 400, "bad JSON");
  expect_error(c.Post("/v1/completions", R"({"prompt": [1], "n": "two"})", "application/json"), 400, "bad n");
  expect_error(c.Post("/v1/completions", R"({"prompt": [0, 0]})", "application/json"), 400, "engine refusal");
  expect_error(c.Post("/v1/chat/completions", R"({"messages": []})", "application/json"), 400, "empty messages");
  expect_error(c.Get("/v1/nothing"), 404, "unknown route");
  expect_error(c.Post("/v2/completions", "{}", "application/json"), 404, "unknown route (POST)");
  auto m405 = c.Get("/v1/completions");
  expect_error(m405, 405, "GET on a POST route");
  EXPECT_EQ(m405->get_header_value("Allow"), "POST");
  expect_error(c.Post("/v1/models", "{}", "application/json"), 405, "POST on a GET route");
  expect_error(c.Delete("/health"), 405, "DELETE /health");

  // Weight updates go to the updater; its refusals keep the server up.
  auto u = c.Post("/update_weights_from_disk", R"({"model_path": "/ckpt", "policy_version": 4})", "application/json");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, 200);
  EXPECT_EQ(json::parse(u->body)["success"], true);
  EXPECT_EQ(s.last_update["policy_version"], 4);
  auto mm = c.Post("/update_weights_from_disk", R"({"model_path": "/mismatch"})", "application/json");
  expect_error(mm, 400, "mismatched checkpoint");
  EXPECT_EQ(json::parse(mm->body)["success"], false);
  EXPECT_NE(json::parse(mm->body)["message"].get<std::string>().find("tensor 'w'"), std::string::npos);
  expect_error(c.Post("/update_weights_from_disk", R"({"model_path": "/missing"})", "application/json"), 400,
               "missing checkpoint");
  expect_error(c.Post("/update_weights_from_disk", R"({})", "application/json"), 400, "no model_path");
  expect_error(c.Post("/update_weights_from_disk", R"({"model_path": "/x", "policy_version": "v"})",
                      "application/json"),
               400, "bad policy_version");
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST(OpenAIServer, GeneratorFailureIs500) {
  Running s(any_port(), /*with_updater=*/false);
  s.gen.fail = true;
  httplib::Client c = s.client();
  expect_error(c.Post("/v1/completions", R"({"prompt": [1]})", "application/json"), 500, "engine failure");
  expect_error(c.Post("/update_weights_from_disk", R"({"model_path": "/x"})", "application/json"), 400,
               "no updater");
}

TEST(OpenAIServer, ApiKey) {
  ServerOptions so = any_port();
  so.api_key = "sekrit";
  Running s(so);
  httplib::Client c = s.client();
  expect_error(c.Get("/v1/models"), 401, "no key");
  expect_error(c.Post("/update_weights_from_disk", R"({"model_path": "/ckpt"})", "application/json"), 401,
               "no key, update");
  httplib::Headers wrong = {{"Authorization", "Bearer nope"}};
  expect_error(c.Get("/v1/models", wrong), 401, "wrong key");
  httplib::Headers right = {{"Authorization", "Bearer sekrit"}};
  auto ok = c.Get("/v1/models", right);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);  // open
}

TEST(OpenAIServer, StreamsServerSentEvents) {
  Running s(any_port());
  httplib::Client c = s.client();
  auto r = c.Post("/v1/chat/completions",
                  R"({"messages": [{"role": "user", "content": "hi"}], "stream": true, "seed": 1})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::string content;
  std::vector<std::string> events;
  for (size_t pos = 0; pos < r->body.size();) {
    const size_t end = r->body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos) << r->body;
    const std::string ev = r->body.substr(pos, end - pos);
    ASSERT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    events.push_back(ev.substr(6));
    pos = end + 2;
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json j = json::parse(events[i]);
    const json& d = j["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(content, "Hi there");
  // The same request without streaming.
  auto w = c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "seed": 1})",
                  "application/json");
  ASSERT_TRUE(w);
  EXPECT_EQ(json::parse(w->body)["choices"][0]["message"]["content"], content);
}

// POST with the body read as it arrives (fn gets each piece; false hangs up).
httplib::Result post_streamed(httplib::Client& c, const std::string& path, const std::string& body,
                              const std::function<bool(const char*, size_t)>& fn) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [fn](const char* data, size_t n, uint64_t, uint64_t) { return fn(data, n); };
  return c.send(req);
}

// Streaming is token by token: the generator holds after 3 tokens until the client
// has read them, which it can only do if they were sent before generation ended.
TEST(OpenAIServer, StreamSendsTokensAsTheyAreSampled) {
  Running s(any_port());
  const ServedModel m = tiny_model();
  s.gen.script = cat(cat(m.tokenizer.encode("abc"), m.tokenizer.encode("defgh")), {im_end(m)});
  s.gen.hold_after = 3;
  ASSERT_EQ(m.tokenizer.encode("abc").size(), 3u);  // one token per letter in this vocabulary
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    const bool chat = std::string(path) == "/v1/chat/completions";
    const std::string body = chat ? R"({"messages": [{"role": "user", "content": "hi"}], "stream": true})"
                                  : R"({"prompt": "hi", "stream": true, "max_tokens": 20})";
    s.gen.rearm();
    httplib::Client c = s.client();
    std::string buf, text;
    bool released_early = false;
    auto r = post_streamed(c, path, body, [&](const char* data, size_t n) {
      buf.append(data, n);
      for (size_t end; (end = buf.find("\n\n")) != std::string::npos; buf.erase(0, end + 2)) {
        const std::string ev = buf.substr(6, end - 6);
        if (ev == "[DONE]") continue;
        const json j = json::parse(ev);
        if (j["choices"].empty()) continue;
        const json& ch = j["choices"][0];
        if (chat && ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
        if (!chat) text += ch["text"].get<std::string>();
      }
      if (!released_early && text == "abc") {  // the first three arrived while generation waits
        released_early = true;
        s.gen.release();
      }
      return true;
    });
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_TRUE(released_early) << path << ": the first tokens did not arrive before generation finished";
    EXPECT_EQ(text, "abcdefgh") << path;
    s.gen.release();  // in case the check above failed
  }
}

// A client that goes away mid-stream aborts the generation (on_token returns false).
TEST(OpenAIServer, StreamClientGoneAbortsGeneration) {
  Running s(any_port());
  const ServedModel m = tiny_model();
  TokenIds long_script;
  for (int i = 0; i < 400; ++i) long_script.push_back(m.tokenizer.encode("z")[0]);
  s.gen.script = long_script;
  s.gen.hold_after = 2;
  s.gen.stream_delay_ms = 10;  // 4 s if nobody aborts
  httplib::Client c = s.client();
  int events = 0;
  auto r = post_streamed(c, "/v1/completions", R"({"prompt": "hi", "stream": true, "max_tokens": 400})",
                        [&](const char*, size_t) {
                    if (++events == 1) s.gen.release();
                    return events < 5;  // hang up after a few chunks
                  });
  EXPECT_FALSE(r);  // the client cancelled
  EXPECT_TRUE(s.gen.wait_aborted(std::chrono::seconds(3))) << "generation went on after the client left";
}

TEST(OpenAIServer, ToolCallsOverHttp) {
  Running s(any_port());
  const ServedModel m = tiny_model();
  s.gen.script = cat(m.tokenizer.encode("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>"),
                     {im_end(m)});
  httplib::Client c = s.client();
  const std::string body = R"({"messages": [{"role": "user", "content": "2+?"}], "seed": 4,
      "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}])";
  auto r = c.Post("/v1/chat/completions", body + "}", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json ch = json::parse(r->body)["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  EXPECT_TRUE(ch["message"]["content"].is_null());
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "add");
  EXPECT_EQ(json::parse(ch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()), (json{{"a", 2}}));
  auto st = c.Post("/v1/chat/completions", body + R"(, "stream": true})", "application/json");
  ASSERT_TRUE(st);
  ASSERT_EQ(st->status, 200);
  json streamed_call;
  std::string finish;
  for (size_t pos = 0; (pos = st->body.find("data: {", pos)) != std::string::npos; pos += 6) {
    const json j = json::parse(st->body.substr(pos + 6, st->body.find("\n\n", pos) - pos - 6));
    const json& d = j["choices"][0]["delta"];
    if (d.contains("tool_calls")) streamed_call = d["tool_calls"][0];
    if (j["choices"][0]["finish_reason"].is_string()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(streamed_call["function"], ch["message"]["tool_calls"][0]["function"]);
  EXPECT_TRUE(streamed_call["id"].is_string());
  EXPECT_EQ(streamed_call["index"], 0);
}

TEST(OpenAIServer, ConcurrentRequestsReachTheGeneratorTogether) {
  Running s(any_port());
  s.gen.barrier = 4;  // no request is answered before 4 are submitted
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&s, &ok, i] {
      httplib::Client c = s.client();
      auto r = c.Post("/v1/completions", "{\"prompt\": [1], \"seed\": " + std::to_string(i) + "}", "application/json");
      if (r && r->status == 200 &&
          json::parse(r->body)["choices"][0]["text"].is_string())
        ++ok;
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 4);
  // Well under the generator's 10 s barrier timeout: the four were in flight at once.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(OpenAIServer, BindFailureNamesTheAddress) {
  Running s(any_port());
  ScriptedGenerator g;
  ServerOptions so;
  so.port = s.port;  // taken
  OpenAIServer other(g, tiny_model(), so);
  try {
    other.bind();
    FAIL() << "bound a taken port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(s.port)), std::string::npos) << e.what();
  }
}

TEST(OpenAIServer, StopBeforeServeReturns) {
  ScriptedGenerator g;
  OpenAIServer server(g, tiny_model(), any_port());
  server.bind();
  server.stop();
  std::thread t([&] { server.serve(); });
  t.join();  // does not hang
  SUCCEED();
}

}  // namespace
}  // namespace agentr1::serve
