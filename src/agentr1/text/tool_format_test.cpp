#include "agentr1/text/tool_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/text/chat_template.h"

namespace agentr1::text {
namespace {

const HermesToolFormat kHermes;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(HermesToolFormat, PlainTextHasNoMarkup) {
  const ParsedResponse r = kHermes.parse("  The answer is 4.\n");
  EXPECT_EQ(r.content, "The answer is 4.");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_TRUE(r.errors.empty());
  EXPECT_FALSE(r.has_tool_call_markup());
  EXPECT_FALSE(kHermes.parse("").has_tool_call_markup());
  // Mentioning the tag name without the brackets is not markup.
  EXPECT_FALSE(kHermes.parse("I could use tool_call here, {\"name\": 1}").has_tool_call_markup());
}

TEST(HermesToolFormat, OneCallWithContentAndWhitespace) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
      "\"Paris\", \"unit\": \"celsius\"}}\n</tool_call>";
  const ParsedResponse r = kHermes.parse(text);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.content, "Let me check.");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, json::parse(R"J({"location": "Paris", "unit": "celsius"})J"));
  EXPECT_EQ(r.calls[0].arguments.begin().key(), "location");  // order kept
  EXPECT_EQ(r.calls[0].raw, text.substr(text.find("<tool_call>")));
  EXPECT_TRUE(r.has_tool_call_markup());
  // No whitespace at all, and lots of it.
  for (const std::string& t :
       {std::string("<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>"),
        std::string("<tool_call> \n\t\r\n {\"name\" : \"f\" ,\n \"arguments\" : { } }\n\n </tool_call>")}) {
    const ParsedResponse p = kHermes.parse(t);
    ASSERT_EQ(p.calls.size(), 1u) << t;
    EXPECT_EQ(p.calls[0].name, "f");
    EXPECT_EQ(p.calls[0].arguments, json::object());
    EXPECT_EQ(p.content, "");
  }
}

TEST(HermesToolFormat, SeveralCallsAndContentBetween) {
  const std::string text =
      "<think>\nplan\n</think>\n\nFirst:\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": [1, 2]}}\n</tool_call>\n"
      "then\n<tool_call>{\"name\": \"c\", \"arguments\": {}}</tool_call>\n";
  const ParsedResponse r = kHermes.parse(text);
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments["y"], json::array({1, 2}));
  EXPECT_EQ(r.calls[2].name, "c");
  EXPECT_EQ(r.content, "<think>\nplan\n</think>\n\nFirst:\n\n\nthen");
}

TEST(HermesToolFormat, ArgumentsAsJsonString) {
  const ParsedResponse r = kHermes.parse(
      "<tool_call>\n{\"name\": \"py\", \"arguments\": \"{\\\"code\\\": \\\"print(1)\\\"}\"}\n"
      "</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u) << (r.errors.empty() ? "" : r.errors[0].message);
  EXPECT_EQ(r.calls[0].arguments, json::parse(R"J({"code": "print(1)"})J"));
}

TEST(HermesToolFormat, UnicodeQuotesAndNewlinesInArguments) {
  const std::string text =
      "<tool_call>\n{\"name\": \"write\", \"arguments\": {\"text\": \"say \\\"hi\\\" — 你好 🚀\\n"
      "next\\tline\", \"path\": \"C:\\\\tmp\"}}\n</tool_call>";
  const ParsedResponse r = kHermes.parse(text);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments["text"], "say \"hi\" — 你好 🚀\nnext\tline");
  EXPECT_EQ(r.calls[0].arguments["path"], "C:\\tmp");
}

struct BadCase {
  const char* text;
  const char* expect;  // a part of the message
};

TEST(HermesToolFormat, MalformedCallsBecomeErrorsForTheModel) {
  const BadCase cases[] = {
      {"<tool_call>\n{name: \"f\", \"arguments\": {}}\n</tool_call>", "tool call 1: invalid JSON at byte 3: syntax error"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}</tool_call>", "invalid JSON at byte"},
      {"<tool_call>{'name': 'f', 'arguments': {}}</tool_call>", "invalid JSON at byte 2"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing</tool_call>", "invalid JSON"},
      {"<tool_call>{\"arguments\": {}}</tool_call>", "tool call 1: missing \"name\""},
      {"<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>", "\"name\" must be a string, got number"},
      {"<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", "\"name\" is empty"},
      {"<tool_call>{\"name\": \"f\"}</tool_call>", "missing \"arguments\" for 'f'"},
      {"<tool_call>{\"name\": \"f\", \"parameters\": {}}</tool_call>", "found \"parameters\""},
      {"<tool_call>{\"name\": \"f\", \"arguments\": [1, 2]}</tool_call>", "must be a JSON object, got array"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", "must be a JSON object, got number"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": null}</tool_call>", "must be a JSON object, got null"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": \"x=1\"}</tool_call>", "is a string that is not valid JSON"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": \"[1]\"}</tool_call>", "is a string holding array"},
      {"<tool_call>[{\"name\": \"f\", \"arguments\": {}}]</tool_call>", "expected a JSON object, got array"},
      {"<tool_call>\n\n</tool_call>", "empty <tool_call> block"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1e999}}</tool_call>", "tool call 1: invalid JSON"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": \"\xff\"}}</tool_call>", "invalid JSON at byte"},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {}}", "tool call 1: <tool_call> is not closed"},
      {"done.</tool_call>", "stray </tool_call>"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    ParsedResponse r;
    ASSERT_NO_THROW(r = kHermes.parse(c.text));
    EXPECT_TRUE(r.calls.empty());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_TRUE(has(r.errors[0].message, c.expect)) << r.errors[0].message;
    EXPECT_TRUE(r.has_tool_call_markup());
    // Every message tells the model the expected shape (and stays one line).
    EXPECT_TRUE(has(r.errors[0].message, "expected {\"name\": <tool-name>, \"arguments\": {...}}"))
        << r.errors[0].message;
    EXPECT_FALSE(has(r.errors[0].message, "\n")) << r.errors[0].message;
    EXPECT_FALSE(r.errors[0].raw.empty());
    EXPECT_NO_THROW(json(r.errors[0].message).dump()) << "message must be valid UTF-8";
  }
}

TEST(HermesToolFormat, ErrorsAndCallsKeepTheirOrderAndNumbers) {
  const std::string bad = "<tool_call>{\"name\": \"a\", \"arguments\": {}}";  // unclosed
  const std::string good = "<tool_call>{\"name\": \"b\", \"arguments\": {\"k\": true}}</tool_call>";
  const std::string broken = "<tool_call>{\"name\": \"c\", \"arguments\": {</tool_call>";
  const std::string good2 = "<tool_call>{\"name\": \"d\", \"arguments\": {}}</tool_call>";
  const ParsedResponse r = kHermes.parse("intro " + bad + "\n" + good + "\n" + broken + good2 + " outro");
  ASSERT_EQ(r.calls.size(), 2u);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "b");
  EXPECT_EQ(r.calls[0].raw, good);
  EXPECT_EQ(r.calls[1].name, "d");
  EXPECT_TRUE(has(r.errors[0].message, "tool call 1: <tool_call> is not closed"));
  EXPECT_EQ(r.errors[0].raw, bad + "\n");
  EXPECT_TRUE(has(r.errors[1].message, "tool call 3: invalid JSON"));
  EXPECT_EQ(r.errors[1].raw, broken);
  // The unclosed block runs up to the next <tool_call>, so its "\n" is not content.
  EXPECT_EQ(r.content, "intro \n outro");
}

// Parsing never throws, whatever the model wrote: every prefix of a valid response
// (generation cut by max tokens) and random mixes of markup fragments.
TEST(HermesToolFormat, NeverThrows) {
  const std::string valid =
      "ok\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"s\": \"x\\\"y\", \"n\": [1, {\"z\": "
      "null}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"q\\\": 1}\"}\n"
      "</tool_call>";
  size_t with_errors = 0;
  for (size_t n = 0; n <= valid.size(); ++n) {
    ParsedResponse r;
    ASSERT_NO_THROW(r = kHermes.parse(valid.substr(0, n))) << n;
    if (!r.errors.empty()) ++with_errors;
  }
  EXPECT_GT(with_errors, 0u);
  EXPECT_EQ(kHermes.parse(valid).calls.size(), 2u);
  const std::string pieces[] = {"<tool_call>", "</tool_call>", "{", "}", "\"name\"", ":", "\"arguments\"",
                                "\"", "\\", "[", "]", ",", " ", "\n", "é", "\xff", "\xc3", "1e999", "null"};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 20);
    for (int k = 0; k < len; ++k) s += pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
    ASSERT_NO_THROW(kHermes.parse(s)) << s;
  }
}

// What the model sees of a call (rendered by the chat template) parses back to the call.
TEST(HermesToolFormat, RoundTripsTheChatTemplatesRendering) {
  const json args = json::parse(R"J({"code": "print(\"hé\")\n", "n": [1, 2.5, null], "o": {}})J");
  const json messages = json::array(
      {{{"role", "user"}, {"content", "run"}},
       {{"role", "assistant"},
        {"content", "Sure."},
        {"tool_calls", json::array({{{"type", "function"},
                                     {"function", {{"name", "python"}, {"arguments", args}}}},
                                    {{"type", "function"},
                                     {"function", {{"name", "noop"}, {"arguments", json::object()}}}}})}}});
  for (ChatFamily fam : {ChatFamily::kQwen25, ChatFamily::kQwen3}) {
    SCOPED_TRACE(chat_family_name(fam));
    const std::string text = ChatTemplate::for_family(fam).render(messages);
    const size_t start = text.rfind("<|im_start|>assistant\n") + 22;
    const std::string response = text.substr(start, text.rfind("<|im_end|>") - start);
    const ParsedResponse r = kHermes.parse(response);
    ASSERT_EQ(r.calls.size(), 2u) << response;
    EXPECT_TRUE(r.errors.empty());
    EXPECT_EQ(r.calls[0].name, "python");
    EXPECT_EQ(r.calls[0].arguments, args);
    EXPECT_EQ(r.calls[1].name, "noop");
    EXPECT_TRUE(has(r.content, "Sure."));
  }
}

// The observation text equals what the chat templates render for role=tool messages.
TEST(HermesToolFormat, ToolResponsesMatchTheChatTemplates) {
  const std::vector<ToolResponse> responses = {
      {"calc", "4"}, {"search", "line one\nline two"}, {"noop", ""}};
  json prefix = json::array(
      {{{"role", "user"}, {"content", "q"}},
       {{"role", "assistant"},
        {"content", ""},
        {"reasoning_content", "need tools"},
        {"tool_calls", json::array({{{"name", "calc"}, {"arguments", {{"e", "2+2"}}}}})}}});
  json tool_msgs = json::array();
  for (const auto& r : responses)
    tool_msgs.push_back({{"role", "tool"}, {"name", r.name}, {"content", r.content}});
  for (ChatFamily fam : {ChatFamily::kQwen25, ChatFamily::kQwen3}) {
    SCOPED_TRACE(chat_family_name(fam));
    const ChatTemplate t = ChatTemplate::for_family(fam);
    EXPECT_EQ(kHermes.format_tool_responses(responses),
              t.render_suffix(prefix, tool_msgs, json(), /*add_generation_prompt=*/false));
  }
  EXPECT_EQ(HermesToolFormat::tool_response_text(responses),
            "<tool_response>\n4\n</tool_response>\n<tool_response>\nline one\nline two\n"
            "</tool_response>\n<tool_response>\n\n</tool_response>");
  EXPECT_EQ(kHermes.format_tool_responses({}), "");
}

TEST(ToolFormatRegistry, MakesHermesAndListsKnownNames) {
  auto f = make_tool_format("hermes");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name(), "hermes");
  try {
    make_tool_format("xml");
    ADD_FAILURE() << "unknown name accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "unknown tool format 'xml'")) << e.what();
    EXPECT_TRUE(has(e.what(), "known: hermes")) << e.what();
  }
  EXPECT_THROW(register_tool_format("hermes", [] { return std::make_unique<HermesToolFormat>(); }),
               Error);
  register_tool_format("hermes_copy", [] { return std::make_unique<HermesToolFormat>(); });
  const auto names = tool_format_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "hermes_copy"), names.end());
  EXPECT_EQ(make_tool_format("hermes_copy")->name(), "hermes");
}

}  // namespace
}  // namespace agentr1::text
