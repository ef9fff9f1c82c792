// The Jinja interpreter against jinja2 3.1 (Debian's python3-jinja2) in transformers'
// environment: every snippet of tests/fixtures/chat/jinja_snippets.json (hand-written,
// one or more constructs each) is rendered by both and byte-compared; where jinja2
// raises, ours must raise too.
#include "agentr1/text/jinja/jinja.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/text/jinja/text_test_util.h"

namespace agentr1::text::jinja {
namespace {

namespace fs = std::filesystem;

const std::string kSource = AGENTR1_SOURCE_DIR;
const std::string kPython = AGENTR1_PYTHON;
const std::string kSnippets = kSource + "/tests/fixtures/chat/jinja_snippets.json";

using test_util::read_file;

Variables vars_from(const json& obj) {
  Variables vars;
  for (auto it = obj.begin(); it != obj.end(); ++it) vars.emplace_back(it.key(), Value::from_json(it.value()));
  return vars;
}

// Renders template text; "ERROR: ..." when parse or render throws.
std::string render_or_error(const std::string& text, const Variables& vars) {
  try {
    return Template::parse(text).render(vars);
  } catch (const std::exception& e) {
    return std::string("ERROR: ") + e.what();
  }
}

std::string first_diff(const std::string& a, const std::string& b) { return test_util::first_diff(a, b, 30, 90); }

TEST(JinjaParity, SnippetsMatchPythonJinja2) {
  ASSERT_EQ(std::system((kPython + " -c 'import jinja2' >/dev/null 2>&1").c_str()), 0)
      << kPython << " with jinja2 is missing; run `bash scripts/setup.sh`";
  std::string dir = (fs::temp_directory_path() / "agentr1_jinja_XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string cmd = kPython + " '" + kSource + "/tests/ref/chat_render.py' --snippets '" + kSnippets +
                          "' --out '" + dir + "/py.json'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const json spec = json::parse(read_file(kSnippets));
  const json ref = json::parse(read_file(dir + "/py.json"));
  fs::remove_all(dir);
  const Variables vars = vars_from(spec["vars"]);
  int texts = 0, errors = 0, mismatches = 0;
  for (const json& snip : spec["snippets"]) {
    const std::string id = snip["id"].get<std::string>();
    const std::string text = snip["template"].get<std::string>();
    const json& r = ref.at(id);
    const std::string ours = render_or_error(text, vars);
    const bool ours_error = ours.rfind("ERROR: ", 0) == 0;
    if (r.contains("error")) {
      ++errors;
      if (!ours_error) ++mismatches;
      EXPECT_TRUE(ours_error) << id << ": " << text << "\n  jinja2 raised " << r["error"] << "\n  ours rendered "
                              << json(ours).dump();
      continue;
    }
    ++texts;
    const std::string expected = r["text"].get<std::string>();
    if (ours != expected) ++mismatches;
    EXPECT_EQ(ours, expected) << id << ": " << text << "\n" << first_diff(ours, expected);
  }
  EXPECT_GE(texts + errors, 300);
  std::printf("[jinja parity] %d snippets: %d renders and %d errors compared with jinja2, %d mismatches\n",
              texts + errors, texts, errors, mismatches);
}

TEST(Jinja, SyntaxErrorsNameLineColumnAndConstruct) {
  try {
    Template::parse("line one\n{% for x in xs %}\n  {{ x + }}\n{% endfor %}");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("line 3"), std::string::npos) << w;
    EXPECT_NE(w.find("column"), std::string::npos) << w;
    EXPECT_NE(w.find("'for'"), std::string::npos) << w;
  }
  try {
    Template::parse("{% if x %}\nno end");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'endif'"), std::string::npos) << e.what();
  }
  try {
    Template::parse("{{ x | no_such_filter }}");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no filter named 'no_such_filter'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Template::parse("{% include 'x.jinja' %}"), Error);
}

TEST(Jinja, RaiseExceptionPassesTheMessageThrough) {
  const Template t = Template::parse("{% if n > 1 %}{{ raise_exception('n must be <= 1, got ' ~ n) }}{% endif %}ok");
  EXPECT_EQ(t.render({{"n", Value(1)}}), "ok");
  try {
    t.render({{"n", Value(5)}});
    FAIL() << "no error";
  } catch (const RenderError& e) {
    EXPECT_TRUE(e.raised_by_template);
    EXPECT_EQ(std::string(e.what()), "n must be <= 1, got 5");
  }
}

TEST(Jinja, GuardsAgainstRunawayTemplates) {
  const Template rec = Template::parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  try {
    rec.render({});
    FAIL() << "no error";
  } catch (const RenderError& e) {
    EXPECT_NE(std::string(e.what()).find("recursed deeper than"), std::string::npos) << e.what();
  }
  const Template big = Template::parse("{% for i in range(100000) %}{{ s }}{% endfor %}");
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  try {
    big.render({{"s", Value(std::string(100, 'x'))}}, limits);
    FAIL() << "no error";
  } catch (const RenderError& e) {
    EXPECT_NE(std::string(e.what()).find("output exceeds"), std::string::npos) << e.what();
  }
}

TEST(Jinja, RendersConcurrentlyFromOneParsedTemplate) {
  const Template t = Template::parse(
      "{% set ns = namespace(total=0) %}{% for i in xs %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}");
  std::vector<std::thread> threads;
  std::vector<std::string> outs(8);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 200; ++rep) {
        List xs;
        for (int i = 0; i <= k; ++i) xs.emplace_back(i);
        outs[k] = t.render({{"xs", Value::list(xs)}});
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(outs[k], std::to_string(k * (k + 1) / 2));
}

}  // namespace
}  // namespace agentr1::text::jinja
