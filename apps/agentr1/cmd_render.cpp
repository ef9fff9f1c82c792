// agentr1 render — chat messages -> the exact prompt text the model sees.
//
//   agentr1 render --tokenizer models/qwen3 --messages chat.json --add-generation-prompt
//   agentr1 render --tokenizer models/qwen3 --messages - --tools tools.json --no-thinking < chat.json
//
// --messages: a JSON array of OpenAI-style messages, or an object {"messages": [...]};
// "-" reads stdin. --tools: a JSON array of OpenAI function schemas. The template comes
// from DIR/tokenizer_config.json "chat_template" (a string, or a list of {"name",
// "template"} where "default" wins), else DIR/chat_template.jinja, and is rendered by
// agentr1's native renderer for its family (qwen2.5, qwen3). Prints the prompt exactly,
// without an added newline; errors are one line on stderr, exit code 1.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/text/jinja/chat_template.h"
#include "command.h"

namespace {

namespace fs = std::filesystem;
using agentr1::Error;
using agentr1::json;

struct RenderOpts {
  std::string tokenizer_dir;           // directory with tokenizer_config.json or chat_template.jinja
  std::string messages_path;           // JSON messages file, "-" = stdin
  std::string tools_path;              // JSON tools file; empty = no tools
  bool add_generation_prompt = false;  // append the assistant turn opener
  bool no_thinking = false;            // qwen3: enable_thinking=false
};

std::string read_text(const std::string& path, const std::string& what) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + what + " file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json(const std::string& path, const std::string& what) {
  const std::string text = read_text(path, what);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(what + " file " + path + " is not valid JSON: " + e.what());
  }
}

std::string load_chat_template(const std::string& dir) {
  const fs::path cfg_path = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    const json cfg = read_json(cfg_path.string(), "tokenizer config");
    if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) return ct.get<std::string>();
      if (ct.is_array() && !ct.empty()) {
        const json* chosen = &ct[0];
        for (const auto& e : ct)
          if (e.is_object() && e.value("name", std::string()) == "default") chosen = &e;
        if (chosen->is_object() && chosen->contains("template") && (*chosen)["template"].is_string())
          return (*chosen)["template"].get<std::string>();
      }
      throw Error(cfg_path.string() + ": chat_template must be a string or a list of "
                  "{\"name\", \"template\"} objects");
    }
  }
  const fs::path jinja = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja)) return read_text(jinja.string(), "chat template");
  throw Error("tokenizer directory " + dir + " has no chat template (looked for \"chat_template\" "
              "in tokenizer_config.json and for chat_template.jinja)");
}

int run_render(const RenderOpts& o) {
  const auto tmpl = agentr1::text::ChatTemplate::from_template_text(load_chat_template(o.tokenizer_dir), fs::exists(fs::path(o.tokenizer_dir) / "tokenizer_config.json") ? read_json((fs::path(o.tokenizer_dir) / "tokenizer_config.json").string(), "tokenizer config") : json::object());
  json messages = read_json(o.messages_path, "messages");
  if (messages.is_object() && messages.contains("messages")) messages = json(messages["messages"]);
  if (!messages.is_array()) {
    throw Error("messages file " + o.messages_path + " must hold a JSON array of messages or an "
                "object {\"messages\": [...]}, got " + messages.type_name());
  }
  json tools;
  if (!o.tools_path.empty()) tools = read_json(o.tools_path, "tools");
  agentr1::text::RenderOptions ropts;
  ropts.enable_thinking = !o.no_thinking;
  const std::string prompt = tmpl.render(messages, tools, o.add_generation_prompt, ropts);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

agentr1::cli::Registrar reg(
    "render", "Render chat messages with a model's chat template (prints the exact prompt)",
    [](CLI::App& app) {
      auto opts = std::make_shared<RenderOpts>();
      app.add_option("--tokenizer", opts->tokenizer_dir,
                     "Directory with tokenizer_config.json (chat_template) or chat_template.jinja")
          ->required();
      app.add_option("--messages", opts->messages_path,
                     "JSON file: array of {role, content, tool_calls?, reasoning_content?} "
                     "messages or {\"messages\": [...]}; - for stdin")
          ->required();
      app.add_option("--tools", opts->tools_path, "JSON file: array of OpenAI function schemas");
      app.add_flag("--add-generation-prompt", opts->add_generation_prompt,
                   "Append the assistant turn opener (<|im_start|>assistant\\n)");
      app.add_flag("--no-thinking", opts->no_thinking,
                   "Qwen3: enable_thinking=false (empty <think></think> after the opener)");
      return [opts]() { return run_render(*opts); };
    });

}  // namespace
