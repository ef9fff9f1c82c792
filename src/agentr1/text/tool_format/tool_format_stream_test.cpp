// ToolFormat::stream_safe_prefix: what a streaming server may send as content before
// the response ends. Hand-worked values per format, and the property the server relies
// on: for every prefix of a response with calls, the safe part (trimmed) starts the
// final content that parse() gives for the whole response.
#include "agentr1/text/tool_format/tool_format.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "agentr1/core/strings.h"

namespace agentr1::text {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

size_t safe(const std::string& format, const std::string& partial) {
  return make_tool_format(format)->stream_safe_prefix(partial);
}

TEST(StreamSafePrefix, HandWorkedValues) {
  // hermes: text before <tool_call> or </tool_call>, or before a tail that may become one.
  EXPECT_EQ(safe("hermes", "Hi there"), 8u);
  EXPECT_EQ(safe("hermes", "Hi <tool"), 3u);
  EXPECT_EQ(safe("hermes", "Hi <"), 3u);
  EXPECT_EQ(safe("hermes", "Hi <b>"), 6u);                  // not a tag prefix any more
  EXPECT_EQ(safe("hermes", "Hi <tool_call>{\"na"), 3u);
  EXPECT_EQ(safe("hermes", "a</tool_call>b"), 1u);          // a stray close tag is markup
  EXPECT_EQ(safe("hermes", "a </tool_"), 2u);
  EXPECT_EQ(safe("hermes", ""), 0u);
  // mistral: [TOOL_CALLS].
  EXPECT_EQ(safe("mistral", "ok [TOOL"), 3u);
  EXPECT_EQ(safe("mistral", "ok [TOOL_CALLS][{"), 3u);
  EXPECT_EQ(safe("mistral", "ok [x]"), 6u);
  // deepseek_v3: <｜tool▁calls▁begin｜> or a first <｜tool▁call▁begin｜>; a partial UTF-8
  // tag at the end waits too.
  EXPECT_EQ(safe("deepseek_v3", "Let me<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"), 6u);
  EXPECT_EQ(safe("deepseek_v3", "Let me<｜tool▁call▁begin｜>function"), 6u);
  EXPECT_EQ(safe("deepseek_v3", "Let me<｜tool"), 6u);
  EXPECT_EQ(safe("deepseek_v3", std::string("Let me<\xef\xbd")), 6u);
  EXPECT_EQ(safe("deepseek_v3", "x<｜tool▁call▁end｜>y"), 27u);  // a stray end tag stays content
  // llama3_json: a response opening with '{' may be all calls; later, <|python_tag|> or a
  // '{' that may still become {"name".
  EXPECT_EQ(safe("llama3_json", "  {"), 0u);
  EXPECT_EQ(safe("llama3_json", "   "), 0u);
  EXPECT_EQ(safe("llama3_json", "Sure {"), 5u);
  EXPECT_EQ(safe("llama3_json", "Sure { \"na"), 5u);
  EXPECT_EQ(safe("llama3_json", "Sure {x"), 7u);
  EXPECT_EQ(safe("llama3_json", "Sure {\"value\": 1}"), 17u);
  EXPECT_EQ(safe("llama3_json", "Sure <|python"), 5u);
  EXPECT_EQ(safe("llama3_json", "Sure <|python_tag|>{"), 5u);
  // gpt_oss: nothing early.
  EXPECT_EQ(safe("gpt_oss", "<|channel|>final<|message|>Hello"), 0u);
}

// Responses with calls in each format, with text before, between and after.
std::vector<std::pair<std::string, std::string>> corpus() {
  const std::string ds_call =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n{\"a\": 1}\n```<｜tool▁call▁end｜>";
  return {
      {"hermes", "I will add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"},
      {"hermes", "  Lead space <b>bold</b> then\n\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> tail"},
      {"hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"},
      {"hermes", "a < b and c <tool_ d\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n"
                 "<tool_call>{\"name\": \"g\", \"arguments\": {\"x\": \"y\"}}</tool_call>"},
      {"hermes", "text </tool_call> more <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"},
      {"mistral", "Checking [x] now [TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}, \"id\": \"abcDEF123\"}]"},
      {"mistral", "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}]"},
      {"deepseek_v3", "Let me check.<｜tool▁calls▁begin｜>" + ds_call + "<｜tool▁calls▁end｜>after"},
      {"deepseek_v3", "plain " + ds_call},
      {"llama3_json", "{\"name\": \"add\", \"parameters\": {\"a\": 1}}"},
      {"llama3_json", "Sure, {x} here: {\"name\": \"add\", \"parameters\": {\"a\": 1}}"},
      {"llama3_json", "Calling <|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1}}"},
      {"llama3_json", "Set {\"value\": 2} then { \"name\": \"add\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {}}"},
  };
}

void check_every_prefix(const std::string& format, const std::string& full) {
  const auto fmt = make_tool_format(format);
  const ParsedResponse final_parse = fmt->parse(full);
  ASSERT_FALSE(final_parse.calls.empty()) << format << ": corpus entry without calls: " << full;
  for (size_t len = 0; len <= full.size(); ++len) {
    const std::string partial = full.substr(0, len);
    const size_t s = fmt->stream_safe_prefix(partial);
    ASSERT_LE(s, len) << format << " " << partial;
    const std::string sent = trim(partial.substr(0, s));
    EXPECT_TRUE(starts_with(final_parse.content, sent))
        << format << ": after " << len << " bytes the safe part '" << sent << "' does not start the content '"
        << final_parse.content << "' of " << full;
  }
}

TEST(StreamSafePrefix, EveryPrefixStartsTheFinalContent) {
  for (const auto& [format, full] : corpus()) check_every_prefix(format, full);
}

// Random mixes of tags, tag fragments, braces and words, kept when they parse to calls.
TEST(StreamSafePrefix, RandomResponsesWithCalls) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> parts = {
      {"hermes", {"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", "<tool_call>", "</tool_call>",
                  "{\"name\": \"f\", \"arguments\": {}}", "<tool", "</", "<", "a",
                  " ", "\n", "x y"}},
      {"mistral", {"[TOOL_CALLS][{\"name\": \"g\", \"arguments\": {}}]", "[TOOL_CALLS]", "[{\"name\": \"f\", \"arguments\": {}}]", "[TOOL", "[", "a", " ", "\n"}},
      {"deepseek_v3", {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```",
                       "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool", "a", " ", "\n"}},
      {"llama3_json", {"{\"name\": \"f\", \"parameters\": {}}", "<|python_tag|>", "; ", "{", "}", "\"name\"",
                       "a", " ", "{x}", "<|py"}},
  };
  std::mt19937 g(1234);
  int checked = 0;
  for (const auto& [format, pieces] : parts) {
    const auto fmt = make_tool_format(format);
    int with_calls = 0;
    for (int trial = 0; trial < 20000 && with_calls < 150; ++trial) {
      std::string text;
      const int n = 1 + static_cast<int>(g() % 8);
      for (int i = 0; i < n; ++i) text += pieces[g() % pieces.size()];
      if (fmt->parse(text).calls.empty()) continue;
      ++with_calls;
      check_every_prefix(format, text);
      if (HasFailure()) return;
    }
    EXPECT_GE(with_calls, 50) << format;
    checked += with_calls;
  }
  std::printf("checked every prefix of %d random responses with calls\n", checked);
}

}  // namespace
}  // namespace agentr1::text
