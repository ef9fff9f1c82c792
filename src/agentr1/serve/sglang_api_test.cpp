// SGLang's /generate wire format (sglang_api.h) on scripted engine results, and its
// agreement with rollout::RemoteGenerator's reader (parse_sglang_generate). Expected
// values are SGLang's contract written out by hand (GenerateReqInput, SamplingParams,
// the tokenizer manager's output dicts, FINISH_* to_json), not output of the code under
// test.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/rollout/remote_generator.h"
#include "agentr1/serve/sglang_api.h"

namespace agentr1::serve {
namespace {

const std::string kTokDir = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3";
constexpr int kContext = 1024;

ServedModel tiny_model() {
  text::Tokenizer tok = text::Tokenizer::load(kTokDir);
  ServedModel m{"tiny", kContext, tok.vocab_size(), 1700000000, tok, std::nullopt, "hermes", {}};
  m.eos_ids = {*tok.token_to_id("<|im_end|>")};
  return m;
}

TokenId im_end(const ServedModel& m) { return *m.tokenizer.token_to_id("<|im_end|>"); }

GenResult result(TokenIds ids, FinishReason finish, float lp0 = -0.5f) {
  GenResult r;
  r.token_ids = std::move(ids);
  for (size_t i = 0; i < r.token_ids.size(); ++i) r.logprobs.push_back(lp0 - 0.25f * static_cast<float>(i));
  r.finish = finish;
  r.policy_version = 7;
  return r;
}

TokenIds cat(TokenIds a, const TokenIds& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

GenerateRequest parse(const std::string& body, const ServedModel& m, uint64_t seed = 99) {
  return parse_generate_request(json::parse(body), m, seed);
}

// Status, param and message of the ApiError fn throws (0 if none).
struct Caught {
  int status = 0;
  std::string param, message;
};
Caught api_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return {e.status, e.param, e.what()};
  }
  return {};
}

TEST(SGLangApi, PromptForms) {
  const ServedModel m = tiny_model();
  const TokenIds hi = m.tokenizer.encode("Hello there");
  const GenerateRequest t = parse(R"({"text": "Hello there"})", m);
  ASSERT_EQ(t.items.size(), 1u);
  EXPECT_EQ(t.items[0].prompt, hi);
  EXPECT_FALSE(t.batch);
  EXPECT_FALSE(t.list_response());
  const GenerateRequest tb = parse(R"({"text": ["Hello there", "x"]})", m);
  ASSERT_EQ(tb.items.size(), 2u);
  EXPECT_EQ(tb.items[0].prompt, hi);
  EXPECT_EQ(tb.items[1].prompt, m.tokenizer.encode("x"));
  EXPECT_TRUE(tb.list_response());
  EXPECT_EQ(parse(R"({"input_ids": [5, 6, 7]})", m).items[0].prompt, (TokenIds{5, 6, 7}));
  const GenerateRequest ib = parse(R"({"input_ids": [[5], [6, 7]]})", m);
  ASSERT_EQ(ib.items.size(), 2u);
  EXPECT_EQ(ib.items[1].prompt, (TokenIds{6, 7}));
  EXPECT_TRUE(ib.batch);
  // Special tokens in text are recognised (one id), as HF's encode does.
  EXPECT_EQ(parse(R"({"text": "<|im_end|>"})", m).items[0].prompt, TokenIds{im_end(m)});
  // A single prompt with n > 1 answers a list (SGLang turns it into a batch).
  EXPECT_TRUE(parse(R"({"input_ids": [1], "sampling_params": {"n": 2}})", m).list_response());
}

TEST(SGLangApi, SamplingDefaultsAreSGLangs) {
  const ServedModel m = tiny_model();
  const GenerateRequest d = parse(R"({"input_ids": [1, 2]})", m, 1234);
  const GenerateItem& it = d.items[0];
  EXPECT_EQ(it.sampling.max_new_tokens, 128);  // SamplingParams.max_new_tokens = 128
  EXPECT_EQ(it.sampling.temperature, 1.0f);
  EXPECT_EQ(it.sampling.top_p, 1.0f);
  EXPECT_EQ(it.sampling.top_k, 0);  // the whole vocabulary
  EXPECT_EQ(it.sampling.seed, 1234u);
  EXPECT_EQ(it.sampling.stop_token_ids, TokenIds{im_end(m)});  // eos unless ignore_eos
  EXPECT_TRUE(it.sampling.stop_strings.empty());
  EXPECT_TRUE(it.skip_special_tokens);
  EXPECT_FALSE(it.no_stop_trim);
  EXPECT_FALSE(it.return_logprob);
  EXPECT_EQ(d.n, 1);
  EXPECT_FALSE(d.stream);

  const GenerateRequest s = parse(R"({"input_ids": [1, 2, 3], "return_logprob": true, "stream": true,
      "sampling_params": {"max_new_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3, "stop": "\n\n",
                          "stop_token_ids": [9], "skip_special_tokens": false, "no_stop_trim": true,
                          "sampling_seed": 17, "spaces_between_special_tokens": false, "stream_interval": 4,
                          "min_p": 0, "repetition_penalty": 1.0, "frequency_penalty": 0, "presence_penalty": 0,
                          "min_new_tokens": 0, "logit_bias": {}}})",
                                  m);
  const GenerateItem& si = s.items[0];
  EXPECT_EQ(si.sampling.max_new_tokens, 7);
  EXPECT_TRUE(si.sampling.greedy());
  EXPECT_EQ(si.sampling.top_p, 0.5f);
  EXPECT_EQ(si.sampling.top_k, 3);
  EXPECT_EQ(si.sampling.stop_strings, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(si.sampling.stop_token_ids, (TokenIds{9, im_end(m)}));
  EXPECT_EQ(si.request_stop_ids, TokenIds{9});
  EXPECT_EQ(si.sampling.seed, 17u);
  EXPECT_FALSE(si.skip_special_tokens);
  EXPECT_TRUE(si.no_stop_trim);
  EXPECT_TRUE(si.return_logprob);
  EXPECT_TRUE(s.stream);

  // ignore_eos turns off every stop token, the request's too (SGLang's Req.check_finished
  // tests stop_token_ids and eos inside `if not ignore_eos`); stop strings stay. top_k -1 =
  // off; stop as a list.
  const GenerateRequest e = parse(
      R"({"input_ids": [1], "sampling_params": {"ignore_eos": true, "stop_token_ids": [9, 3], "top_k": -1,
          "stop": ["a", "bc"]}})",
      m);
  EXPECT_TRUE(e.items[0].sampling.stop_token_ids.empty());
  EXPECT_EQ(e.items[0].request_stop_ids, (TokenIds{9, 3}));
  EXPECT_EQ(e.items[0].sampling.top_k, 0);
  EXPECT_EQ(e.items[0].sampling.stop_strings, (std::vector<std::string>{"a", "bc"}));
  // max_new_tokens null: the rest of the context window (prompt of 3 -> 1021).
  EXPECT_EQ(parse(R"({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": null}})", m)
                .items[0].sampling.max_new_tokens,
            kContext - 3);
  // A null field is unset (SGLang's SamplingParams.__post_init__).
  EXPECT_EQ(parse(R"({"input_ids": [1], "sampling_params": {"temperature": null, "top_k": null}})", m)
                .items[0].sampling.temperature,
            1.0f);
}

TEST(SGLangApi, SeedsAreSignedOrUnsigned64BitsPlusSampleIndex) {
  const ServedModel m = tiny_model();
  // RemoteGenerator sends the 64 bits as a signed integer (torch's manual_seed takes int64).
  EXPECT_EQ(parse(R"({"input_ids": [1], "sampling_params": {"sampling_seed": -1}})", m).items[0].sampling.seed,
            18446744073709551615ull);
  EXPECT_EQ(parse(R"({"input_ids": [1], "sampling_params": {"sampling_seed": 18446744073709551615}})", m)
                .items[0]
                .sampling.seed,
            18446744073709551615ull);
  EXPECT_EQ(parse(R"({"input_ids": [1], "sampling_params": {"sampling_seed": -9223372036854775808}})", m)
                .items[0]
                .sampling.seed,
            9223372036854775808ull);
  // Prompt-major expansion, as SGLang's tokenizer manager sends a batch with n > 1:
  // prompt 0's samples, then prompt 1's; sample j seeded seed + j.
  const GenerateRequest r = parse(R"({"input_ids": [[1], [2, 3]], "sampling_params": {"n": 3, "sampling_seed": 40}})", m);
  const std::vector<GenRequest> g = r.gen_requests();
  ASSERT_EQ(g.size(), 6u);
  const uint64_t want_seed[] = {40, 41, 42, 40, 41, 42};
  const TokenIds want_prompt[] = {{1}, {1}, {1}, {2, 3}, {2, 3}, {2, 3}};
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].sampling.seed, want_seed[i]) << i;
    EXPECT_EQ(g[i].prompt_ids, want_prompt[i]) << i;
  }
  // Per-prompt sampling_params and return_logprob lists.
  const GenerateRequest per = parse(R"({"input_ids": [[1], [2]], "return_logprob": [false, true],
      "sampling_params": [{"max_new_tokens": 4, "sampling_seed": 1}, {"max_new_tokens": 5, "sampling_seed": 2}]})",
                                    m);
  EXPECT_EQ(per.items[0].sampling.max_new_tokens, 4);
  EXPECT_EQ(per.items[1].sampling.max_new_tokens, 5);
  EXPECT_EQ(per.items[1].sampling.seed, 2u);
  EXPECT_FALSE(per.items[0].return_logprob);
  EXPECT_TRUE(per.items[1].return_logprob);
}

TEST(SGLangApi, BadRequestsName400AndField) {
  const ServedModel m = tiny_model();
  std::string ids_ctx = "[";  // kContext ids: no room left to generate
  for (int i = 0; i < kContext; ++i) ids_ctx += (i ? ",1" : "1");
  ids_ctx += "]";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([1, 2])", ""},
      {R"({})", "text"},
      {R"({"text": "a", "input_ids": [1]})", "text"},
      {R"({"text": 5})", "text"},
      {R"({"text": []})", "text"},
      {R"({"text": ["a", 1]})", "text"},
      {R"({"text": ""})", "text"},
      {R"({"input_ids": []})", "input_ids"},
      {R"({"input_ids": [[1], []]})", "input_ids"},
      {R"({"input_ids": [[1], 2]})", "input_ids"},
      {R"({"input_ids": [1.5]})", "input_ids"},
      {R"({"input_ids": [-1]})", "input_ids"},
      {R"({"input_ids": [283]})", "input_ids"},  // the vocabulary has 283 ids
      {R"({"input_ids": "abc"})", "input_ids"},
      {"{\"input_ids\": " + ids_ctx + "}", "input_ids"},
      {R"({"input_ids": [1], "sampling_params": 3})", "sampling_params"},
      {R"({"input_ids": [[1], [2]], "sampling_params": [{}]})", "sampling_params"},
      {R"({"input_ids": [[1], [2]], "sampling_params": [{"n": 2}, {"n": 3}]})", "sampling_params"},
      {R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 0}})", "sampling_params.max_new_tokens"},
      {R"({"input_ids": [1], "sampling_params": {"max_new_tokens": -1}})", "sampling_params.max_new_tokens"},
      {R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 2.5}})", "sampling_params.max_new_tokens"},
      {R"({"input_ids": [1], "sampling_params": {"temperature": -0.1}})", "sampling_params.temperature"},
      {R"({"input_ids": [1], "sampling_params": {"temperature": "hot"}})", "sampling_params.temperature"},
      {R"({"input_ids": [1], "sampling_params": {"top_p": 0}})", "sampling_params.top_p"},
      {R"({"input_ids": [1], "sampling_params": {"top_p": 1.5}})", "sampling_params.top_p"},
      {R"({"input_ids": [1], "sampling_params": {"top_k": 0}})", "sampling_params.top_k"},
      {R"({"input_ids": [1], "sampling_params": {"top_k": -2}})", "sampling_params.top_k"},
      {R"({"input_ids": [1], "sampling_params": {"n": 0}})", "sampling_params.n"},
      {R"({"input_ids": [1], "sampling_params": {"sampling_seed": 1.5}})", "sampling_params.sampling_seed"},
      {R"({"input_ids": [1], "sampling_params": {"stop": 5}})", "sampling_params.stop"},
      {R"({"input_ids": [1], "sampling_params": {"stop": [""]}})", "sampling_params.stop"},
      {R"({"input_ids": [1], "sampling_params": {"stop_token_ids": [400]}})", "sampling_params.stop_token_ids"},
      {R"({"input_ids": [1], "sampling_params": {"stop_token_ids": 3}})", "sampling_params.stop_token_ids"},
      {R"({"input_ids": [1], "sampling_params": {"ignore_eos": 1}})", "sampling_params.ignore_eos"},
      {R"({"input_ids": [1], "sampling_params": {"regex": "a+"}})", "sampling_params.regex"},
      {R"({"input_ids": [1], "sampling_params": {"json_schema": "{}"}})", "sampling_params.json_schema"},
      {R"({"input_ids": [1], "sampling_params": {"repetition_penalty": 1.1}})", "sampling_params.repetition_penalty"},
      {R"({"input_ids": [1], "sampling_params": {"min_p": 0.1}})", "sampling_params.min_p"},
      {R"({"input_ids": [1], "sampling_params": {"min_new_tokens": 2}})", "sampling_params.min_new_tokens"},
      {R"({"input_ids": [1], "sampling_params": {"logit_bias": {"1": 2}}})", "sampling_params.logit_bias"},
      {R"({"input_ids": [1], "sampling_params": {"max_tokens": 5}})", "sampling_params.max_tokens"},
      {R"({"input_ids": [[1], [2]], "sampling_params": [{}, {"topk": 1}]})", "sampling_params[1].topk"},
      // SGLang refuses prompt + max_new_tokens >= the context (1 + 1023 here).
      {R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 1023}})", "sampling_params.max_new_tokens"},
      {R"({"input_ids": [[1], [2]], "sampling_params": [{}, {"max_new_tokens": 5000}]})",
       "sampling_params[1].max_new_tokens"},
      {R"({"input_ids": [1], "return_logprob": "yes"})", "return_logprob"},
      {R"({"input_ids": [[1], [2]], "return_logprob": [true]})", "return_logprob"},
      {R"({"input_ids": [1], "return_logprob": true, "logprob_start_len": 0})", "logprob_start_len"},
      {R"({"input_ids": [1], "return_logprob": true, "top_logprobs_num": 2})", "top_logprobs_num"},
      {R"({"input_ids": [1], "stream": "no"})", "stream"},
      {R"({"input_ids": [1], "rid": 5})", "rid"},
      {R"({"input_ids": [[1], [2]], "rid": ["a"]})", "rid"},
      {R"({"input_ids": [1], "image_data": "x.png"})", "image_data"},
      {R"({"input_ids": [1], "lora_path": "l"})", "lora_path"},
      {R"({"input_ids": [1], "return_hidden_states": true})", "return_hidden_states"},
  };
  for (const auto& [body, param] : cases) {
    const Caught c = api_error([&] { parse_generate_request(json::parse(body), m, 0); });
    EXPECT_EQ(c.status, 400) << body;
    EXPECT_EQ(c.param, param) << body << ": " << c.message;
  }
  // Neutral values and fields SGLang has but agentr1 does not need are fine.
  EXPECT_NO_THROW(parse_generate_request(
      json::parse(R"({"input_ids": [1], "logprob_start_len": -1, "top_logprobs_num": 0, "return_hidden_states": false,
                      "image_data": null, "rid": "r1", "log_metrics": true, "modalities": null})"),
      m, 0));
  // The messages name the rule and the fix.
  const Caught unknown = api_error([&] { parse(R"({"input_ids": [1], "sampling_params": {"max_tokens": 5}})", m); });
  EXPECT_NE(unknown.message.find("known: max_new_tokens"), std::string::npos) << unknown.message;
  const Caught full = api_error([&] { parse("{\"input_ids\": " + ids_ctx + "}", m); });
  EXPECT_NE(full.message.find("1024 tokens"), std::string::npos) << full.message;
  EXPECT_NE(full.message.find("--max-context"), std::string::npos) << full.message;
  EXPECT_EQ(parse(R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 1022}})", m).items[0].sampling.max_new_tokens,
            1022);
  // The default (128) is not checked: a 1000-token prompt gets it and ends with the window.
  std::string ids1000 = "[";
  for (int i = 0; i < 1000; ++i) ids1000 += (i ? ",1" : "1");
  EXPECT_EQ(parse("{\"input_ids\": " + ids1000 + "]}", m).items[0].sampling.max_new_tokens, 128);
  const Caught over = api_error([&] { parse(R"({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2000}})", m); });
  EXPECT_NE(over.message.find("maximum context length of 1024 tokens. You requested a total of 2002 tokens: 2 tokens "
                              "from the input and 2000 tokens for the completion"),
            std::string::npos)
      << over.message;
  EXPECT_NE(over.message.find("at most 1021"), std::string::npos) << over.message;
  const Caught both = api_error([&] { parse(R"({"text": "a", "input_ids": [1]})", m); });
  EXPECT_NE(both.message.find("either 'text' or 'input_ids'"), std::string::npos) << both.message;
}

TEST(SGLangApi, ResponseIsSGLangsOutputDict) {
  const ServedModel m = tiny_model();
  const TokenIds hello = m.tokenizer.encode("Hello there");
  const GenerateRequest req = parse(R"({"input_ids": [1, 2, 3], "return_logprob": true})", m);
  const GenResult r = result(cat(hello, {im_end(m)}), FinishReason::kStopToken);
  const json resp = json::parse(generate_response(req, {r}, m, "abc").dump());
  ASSERT_TRUE(resp.is_object());  // one prompt, n = 1: the dict itself
  EXPECT_EQ(resp["text"], "Hello there");  // the matched stop token is trimmed
  EXPECT_EQ(resp["output_ids"], json(r.token_ids));  // every generated id, the stop token included
  const json& mi = resp["meta_info"];
  EXPECT_EQ(mi["id"], "abc");
  EXPECT_EQ(mi["finish_reason"], json::parse("{\"type\": \"stop\", \"matched\": " + std::to_string(im_end(m)) + "}"));
  EXPECT_EQ(mi["prompt_tokens"], 3);
  EXPECT_EQ(mi["completion_tokens"], r.token_ids.size());
  EXPECT_EQ(mi["weight_version"], "7");
  EXPECT_EQ(mi["policy_version"], 7);
  EXPECT_EQ(mi["input_token_logprobs"], json::array());
  const json& olp = mi["output_token_logprobs"];
  ASSERT_EQ(olp.size(), r.token_ids.size());
  // [logprob, token_id, null] (return_text_in_logprobs false); the floats are the engine's exactly.
  EXPECT_EQ(olp[0], json::parse("[-0.5, " + std::to_string(hello[0]) + ", null]"));
  EXPECT_EQ(olp[2][0].get<double>(), -1.0);
  for (size_t k = 0; k < olp.size(); ++k) {
    EXPECT_EQ(olp[k][0].get<float>(), r.logprobs[k]) << k;
    EXPECT_EQ(olp[k][1], r.token_ids[k]) << k;
    EXPECT_TRUE(olp[k][2].is_null()) << k;
  }
  // Without return_logprob there are no log-prob fields.
  const json plain = generate_response(parse(R"({"input_ids": [1]})", m), {r}, m, "abc");
  EXPECT_FALSE(plain["meta_info"].contains("output_token_logprobs"));
  EXPECT_FALSE(plain["meta_info"].contains("input_token_logprobs"));
}

TEST(SGLangApi, StopTrimmingAndFinishReasons) {
  const ServedModel m = tiny_model();
  const TokenIds hello = m.tokenizer.encode("Hello there");
  auto one = [&](const std::string& body, const GenResult& r) { return generate_response(parse(body, m), {r}, m, "x"); };
  const GenResult eos = result(cat(hello, {im_end(m)}), FinishReason::kStopToken);
  // no_stop_trim keeps the stop token; skip_special_tokens false shows it.
  EXPECT_EQ(one(R"({"input_ids": [1], "sampling_params": {"no_stop_trim": true}})", eos)["text"], "Hello there");
  EXPECT_EQ(one(R"({"input_ids": [1], "sampling_params": {"no_stop_trim": true, "skip_special_tokens": false}})",
                eos)["text"],
            "Hello there<|im_end|>");
  EXPECT_EQ(one(R"({"input_ids": [1], "sampling_params": {"skip_special_tokens": false}})", eos)["text"],
            "Hello there");

  // A stop string: text ends before it (after it with no_stop_trim); matched is the string.
  const GenResult str = result(hello, FinishReason::kStopString);
  const json s = one(R"({"input_ids": [1], "sampling_params": {"stop": ["zz", "ther"]}})", str);
  EXPECT_EQ(s["text"], "Hello ");
  EXPECT_EQ(s["meta_info"]["finish_reason"], json::parse(R"({"type": "stop", "matched": "ther"})"));
  EXPECT_EQ(s["output_ids"], json(hello));
  EXPECT_EQ(one(R"({"input_ids": [1], "sampling_params": {"stop": "ther", "no_stop_trim": true}})", str)["text"],
            "Hello ther");
  // Two stop strings in the output: the earliest is the one that fired.
  EXPECT_EQ(one(R"({"input_ids": [1], "sampling_params": {"stop": ["re", "ll"]}})", str)["meta_info"]["finish_reason"]
               ["matched"],
            "ll");

  // Length (max_new_tokens or a full context): {"type": "length", "length": tokens}.
  const json len = one(R"({"input_ids": [1]})", result(hello, FinishReason::kLength));
  EXPECT_EQ(len["meta_info"]["finish_reason"],
            json::parse("{\"type\": \"length\", \"length\": " + std::to_string(hello.size()) + "}"));
  EXPECT_EQ(len["text"], "Hello there");
  EXPECT_EQ(one(R"({"input_ids": [1]})", result(hello, FinishReason::kContextFull))["meta_info"]["finish_reason"]["type"],
            "length");
  const json ab = one(R"({"input_ids": [1]})", result(hello, FinishReason::kAborted));
  EXPECT_EQ(ab["meta_info"]["finish_reason"]["type"], "abort");
  EXPECT_TRUE(ab["meta_info"]["finish_reason"]["message"].is_string());

  // return_text_in_logprobs: each token's own text (special tokens included).
  const json t = one(R"({"input_ids": [1], "return_logprob": true, "return_text_in_logprobs": true})", eos);
  const json& olp = t["meta_info"]["output_token_logprobs"];
  std::string joined;
  for (size_t k = 0; k + 1 < olp.size(); ++k) joined += olp[k][2].get<std::string>();
  EXPECT_EQ(joined, "Hello there");
  EXPECT_EQ(olp.back()[2], "<|im_end|>");
}

TEST(SGLangApi, BatchesAnswerListsWithIds) {
  const ServedModel m = tiny_model();
  const TokenIds a = m.tokenizer.encode("ab"), b = m.tokenizer.encode("cd");
  const std::vector<GenResult> four = {result(a, FinishReason::kLength), result(b, FinishReason::kLength),
                                       result(b, FinishReason::kLength), result(a, FinishReason::kLength)};
  const json l = generate_response(parse(R"({"input_ids": [[1], [2, 3]], "sampling_params": {"n": 2}})", m), four, m,
                                   "gen");
  ASSERT_TRUE(l.is_array());
  ASSERT_EQ(l.size(), 4u);
  const char* want_text[] = {"ab", "cd", "cd", "ab"};
  const int want_prompt_tokens[] = {1, 1, 2, 2};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(l[i]["text"], want_text[i]) << i;
    EXPECT_EQ(l[i]["meta_info"]["id"], "gen_" + std::to_string(i)) << i;
    EXPECT_EQ(l[i]["meta_info"]["prompt_tokens"], want_prompt_tokens[i]) << i;
  }
  // rid: a string names a batch's prompts rid_0, rid_1; a list names each; n > 1 adds _j.
  const std::vector<GenResult> two = {four[0], four[1]};
  const json r1 = generate_response(parse(R"({"input_ids": [[1], [2]], "rid": "req"})", m), two, m, "gen");
  EXPECT_EQ(r1[0]["meta_info"]["id"], "req_0");
  EXPECT_EQ(r1[1]["meta_info"]["id"], "req_1");
  const json r2 = generate_response(parse(R"({"text": ["a", "b"], "rid": ["p", "q"]})", m), two, m, "gen");
  EXPECT_EQ(r2[1]["meta_info"]["id"], "q");
  const json r3 = generate_response(parse(R"({"input_ids": [1], "rid": "s", "sampling_params": {"n": 2}})", m), two, m,
                                    "gen");
  EXPECT_EQ(r3[1]["meta_info"]["id"], "s_1");
  EXPECT_EQ(generate_response(parse(R"({"input_ids": [1], "rid": "only"})", m), {four[0]}, m, "gen")["meta_info"]["id"],
            "only");
}

TEST(SGLangApi, StreamChunksAreCumulativeAndEndWithTheResponse) {
  const ServedModel m = tiny_model();
  // "é" is two bytes: a byte-level tokenizer may split it, and no chunk may end inside it.
  const TokenIds ids = cat(m.tokenizer.encode("Hé!"), {im_end(m)});
  const GenResult r = result(ids, FinishReason::kStopToken);
  const GenerateRequest req = parse(R"({"input_ids": [1], "return_logprob": true, "stream": true})", m);
  const std::vector<json> chunks = generate_stream_chunks(req, {r}, m, "s");
  ASSERT_EQ(chunks.size(), ids.size());  // one per generated token
  for (size_t k = 0; k + 1 < chunks.size(); ++k) {
    const json& c = chunks[k];
    EXPECT_EQ(c["output_ids"], json(TokenIds(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k + 1)))) << k;
    EXPECT_TRUE(c["meta_info"]["finish_reason"].is_null()) << k;
    EXPECT_EQ(c["meta_info"]["completion_tokens"], k + 1) << k;
    EXPECT_EQ(c["meta_info"]["output_token_logprobs"].size(), k + 1) << k;
    EXPECT_FALSE(c.contains("index")) << k;
    EXPECT_FALSE(c["meta_info"].contains("weight_version")) << k;  // known with the result only
    const std::string t = c["text"];
    EXPECT_EQ(std::string("Hé!").compare(0, t.size(), t), 0) << k << ": '" << t << "'";  // a prefix, whole characters
  }
  EXPECT_EQ(chunks.back(), generate_response(req, {r}, m, "s"));
  EXPECT_EQ(chunks.back()["text"], "Hé!");

  // A list response's chunks carry the sample's index.
  const GenerateRequest b = parse(R"({"input_ids": [[1], [2]], "stream": true})", m);
  const GenResult r2 = result(m.tokenizer.encode("ok"), FinishReason::kLength);
  const std::vector<json> bc = generate_stream_chunks(b, {r, r2}, m, "s");
  ASSERT_EQ(bc.size(), ids.size() + r2.token_ids.size());
  EXPECT_EQ(bc.front()["index"], 0);
  EXPECT_EQ(bc.back()["index"], 1);
  json last = bc.back();
  last.erase("index");
  EXPECT_EQ(last, generate_response(b, {r, r2}, m, "s")[1]);

  // Fed live: a token's chunk goes out when the next token arrives; a generator that
  // never streams (a remote one) gives just the final chunk.
  GenerateStreamer st(req, m, "s");
  EXPECT_EQ(st.choices(), 1u);
  EXPECT_TRUE(st.begin().empty());
  EXPECT_TRUE(st.push(0, ids[0], r.logprobs[0]).empty());
  const std::vector<json> second = st.push(0, ids[1], r.logprobs[1]);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0], chunks[0]);
  EXPECT_EQ(st.finish(0, r), std::vector<json>{chunks.back()});
  EXPECT_TRUE(st.end().empty());
  GenerateStreamer quiet(req, m, "s");
  EXPECT_EQ(quiet.finish(0, r), std::vector<json>{chunks.back()});
}

// What rollout::RemoteGenerator (api=sglang) sends, answered by these functions, reads back
// as the engine's result: token ids, log-probs, finish reason and policy version.
TEST(SGLangApi, RemoteGeneratorReadsTheResponseBackExactly) {
  const ServedModel m = tiny_model();
  // RemoteGenerator's request body (remote_generator.cpp request_body, api sglang), but
  // with "ignore_eos": false: it sends true, which with SGLang (and here) also turns off
  // its stop_token_ids, so generation would not stop at the end of a turn.
  const std::string stop = std::to_string(im_end(m));
  const json body = json::parse(R"({"input_ids": [4, 5, 6], "return_logprob": true,
      "sampling_params": {"max_new_tokens": 32, "temperature": 0.7, "top_p": 1, "sampling_seed": -2,
                          "stop_token_ids": [)" + stop + R"(], "stop": ["er"],
                          "skip_special_tokens": false, "no_stop_trim": true, "ignore_eos": false, "top_k": 5}})");
  json as_sent = body;
  as_sent["sampling_params"]["ignore_eos"] = true;
  EXPECT_TRUE(parse_generate_request(as_sent, m, 0).gen_requests()[0].sampling.stop_token_ids.empty());
  const GenerateRequest req = parse_generate_request(body, m, 0);
  const std::vector<GenRequest> g = req.gen_requests();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].prompt_ids, (TokenIds{4, 5, 6}));
  EXPECT_EQ(g[0].sampling.seed, 18446744073709551614ull);  // -2 as 64 bits
  EXPECT_EQ(g[0].sampling.temperature, 0.7f);
  EXPECT_EQ(g[0].sampling.top_k, 5);
  EXPECT_EQ(g[0].sampling.max_new_tokens, 32);
  EXPECT_EQ(g[0].sampling.stop_token_ids, TokenIds{im_end(m)});
  EXPECT_EQ(g[0].sampling.stop_strings, std::vector<std::string>{"er"});

  const TokenIds hello = m.tokenizer.encode("Hello there");
  const std::vector<std::pair<GenResult, FinishReason>> cases = {
      {result(cat(hello, {im_end(m)}), FinishReason::kStopToken, -0.123456789f), FinishReason::kStopToken},
      {result(hello, FinishReason::kStopString, -3.3f), FinishReason::kStopString},
      {result(hello, FinishReason::kLength), FinishReason::kLength},
      {result(hello, FinishReason::kContextFull), FinishReason::kLength},
      {result(hello, FinishReason::kAborted), FinishReason::kAborted},
  };
  for (const auto& [r, want] : cases) {
    const json wire = json::parse(generate_response(req, {r}, m, "id").dump());
    bool unknown = false;
    const GenResult back = rollout::parse_sglang_generate(wire, req.items[0].sampling.stop_token_ids, -1, &unknown);
    EXPECT_EQ(back.token_ids, r.token_ids) << finish_reason_name(r.finish);
    EXPECT_EQ(back.logprobs, r.logprobs) << finish_reason_name(r.finish);  // bit-exact floats
    EXPECT_EQ(back.finish, want) << finish_reason_name(r.finish);
    EXPECT_EQ(back.policy_version, 7) << finish_reason_name(r.finish);
    EXPECT_FALSE(unknown) << finish_reason_name(r.finish);
  }
}

TEST(SGLangApi, ModelInfo) {
  const json config = json::parse(R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "x": 1})");
  EXPECT_EQ(model_info_response("/m/v3", 3, config),
            json::parse(R"({"model_path": "/m/v3", "tokenizer_path": "/m/v3", "is_generation": true,
                            "weight_version": "3", "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]})"));
  EXPECT_EQ(model_info_response("/m", 0),
            json::parse(R"({"model_path": "/m", "tokenizer_path": "/m", "is_generation": true,
                            "weight_version": "0"})"));
}

}  // namespace
}  // namespace agentr1::serve
