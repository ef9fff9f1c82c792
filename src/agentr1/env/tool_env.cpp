#include "agentr1/env/tool_env.h"

#include <thread>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::env {
namespace {

using Clock = std::chrono::steady_clock;

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

std::string format_seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

// ---------------------------------------------------------------------------------
// Options

ToolEnvOptions ToolEnvOptions::from_json(const json& kwargs) {
  json tree = json::object();
  tree["env_kwargs"] = kwargs;
  // A number is the one-element list (a fixed latency, core/latency.h).
  json& kw = tree["env_kwargs"];
  if (kw.is_object() && kw.contains("tool_latency_ms") && kw["tool_latency_ms"].is_number())
    kw["tool_latency_ms"] = json::array({kw["tool_latency_ms"]});
  ToolEnvOptions o;
  bind_into(o, tree, "env_kwargs");  // unknown keys, types, then validate()
  return o;
}

json ToolEnvOptions::to_json() const { return config_to_json(*this); }

void ToolEnvOptions::validate() const {
  AGENTR1_CHECK(tool_timeout_s > 0, "'tool_timeout_s' must be > 0 (seconds), got " << tool_timeout_s);
  AGENTR1_CHECK(tool_queue_timeout_s > 0,
                "'tool_queue_timeout_s' must be > 0 (seconds), got " << tool_queue_timeout_s);
  AGENTR1_CHECK(max_tool_calls_per_turn >= 1,
                "'max_tool_calls_per_turn' must be >= 1, got " << max_tool_calls_per_turn);
  Latency::from_ms(tool_latency_ms, "'tool_latency_ms'");
  AGENTR1_CHECK(max_tool_response_chars >= 0,
                "'max_tool_response_chars' must be >= 0 (0 = no limit), got " << max_tool_response_chars);
  for (size_t i = 0; i < tools.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      AGENTR1_CHECK(tools[i] != tools[j], "'tools' lists '" << tools[i] << "' twice; list each tool once");
  AGENTR1_CHECK(tool_kwargs.is_object(),
                "'tool_kwargs' must be a map {tool name: kwargs}, got " << tool_kwargs.dump().substr(0, 80));
  if (tool_format != "auto") {
    const std::vector<std::string> formats = text::tool_format_names();
    AGENTR1_CHECK(std::find(formats.begin(), formats.end(), tool_format) != formats.end(),
                  "'tool_format' is '" << tool_format << "', which is not a registered tool format; known: "
                                     << join(formats) << ", or auto (the chat template's own)");
  }
  for (size_t i = 0; i < mcp_servers.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      AGENTR1_CHECK(mcp_servers[i].name != mcp_servers[j].name,
                    "'mcp_servers' names '" << mcp_servers[i].name << "' twice; give each server its own name");
  AGENTR1_CHECK(context.is_string() || context.is_object(),
                "'context' must be a policy name or {\"type\": name, ...options}, got " << context.dump());
  for (const auto& kv : tool_kwargs.items()) {
    bool offered = false;
    for (const auto& t : tools) offered = offered || t == kv.key();
    AGENTR1_CHECK(offered, "'tool_kwargs' has kwargs for '" << kv.key() << "', which is not in 'tools' (" << join(tools)
                                                          << "); add it to tools or drop its kwargs");
    AGENTR1_CHECK(kv.value().is_object(), "'tool_kwargs." << kv.key() << "' must be a map of the tool's options, got "
                                                         << kv.value().dump().substr(0, 80));
  }
}

// ---------------------------------------------------------------------------------
// ToolEnv

ToolEnv::ToolEnv(const EnvContext& ctx, ToolEnvOptions options)
    : ctx_(ctx), options_(std::move(options)) {
  AGENTR1_CHECK(ctx_.tokenizer != nullptr && ctx_.chat_template != nullptr,
                "ToolEnv needs EnvContext.tokenizer and EnvContext.chat_template (got null)");
  with_context("tool env options", [&] { options_.validate(); });
  if (ctx_.render_options != nullptr) render_options_ = *ctx_.render_options;
  tools_schema_ = json();
  if (!options_.tools.empty()) tools_schema_ = json::array();
  for (const auto& name : options_.tools) {
    const json kw = options_.tool_kwargs.contains(name) ? options_.tool_kwargs[name]
                                                        : json::object();
    std::shared_ptr<Tool> tool = with_context("tool env option 'tools'", [&] {
      return std::shared_ptr<Tool>(make_tool(name, kw));
    });
    tools_schema_.push_back(tool->schema());
    tools_.push_back(std::move(tool));
  }
  for (const auto& spec : options_.mcp_servers) {  // MCP tools, after the named ones
    // The MCP call's own limit sits just under the env's, so a server that does not
    // answer is the server's failure (ToolInfraError), not a timeout counted to the model.
    const double mcp_timeout_s = std::max(0.5 * options_.tool_timeout_s, options_.tool_timeout_s - 0.5);
    for (auto& tool : make_mcp_tools(spec, mcp_timeout_s)) {  // ToolInfraError as is
      for (const auto& t : tools_)
        AGENTR1_CHECK(t->name() != tool->name(),
                      "tool env option 'mcp_servers': MCP server '"
                          << spec.name << "' offers a tool '" << tool->name()
                          << "', a name already taken; set prefix_tools: true on that server (its tools become "
                          << spec.name << "__<tool>) or leave the tool out of its 'tools' list");
      if (tools_schema_.is_null()) tools_schema_ = json::array();
      tools_schema_.push_back(tool->schema());
      tools_.push_back(std::move(tool));
    }
  }
  if (!options_.tools_in_prompt) tools_schema_ = json();  // tools stay callable, unlisted
  const std::string format_name = options_.tool_format == "auto"
                                      ? text::default_tool_format(ctx_.chat_template->source())
                                      : options_.tool_format;
  format_ = with_context("tool env option 'tool_format'",
                         [&] { return text::make_tool_format(format_name); });
  policy_ = make_env_context_policy(options_.context, ctx_, render_options_, "tool");
  latency_ = Latency::from_ms(options_.tool_latency_ms, "tool env option 'tool_latency_ms'");
  latency_rng_ = Rng(derive_seed(ctx_.seed, {0x746f6f6cULL}));  // "tool": its own stream
}

ToolEnv::~ToolEnv() = default;

Observation ToolEnv::reset(const Sample& sample) {
  AGENTR1_CHECK(sample.prompt.is_array() && !sample.prompt.empty(),
                "ToolEnv::reset: the sample's prompt must be a non-empty list of chat messages");
  messages_ = sample.prompt;
  head_size_ = messages_.size();
  turn_index_ = 0;
  call_ids_.clear();
  anchor_ = "<start>";
  const std::string text = ctx_.chat_template->render(messages_, tools_schema_,
                                                      /*add_generation_prompt=*/true,
                                                      render_options_);
  prompt_ids_ = ctx_.tokenizer->encode(text, /*allow_special=*/true);
  started_ = true;
  finished_ = false;
  return Observation::from_tokens(prompt_ids_);
}

std::string ToolEnv::clip(std::string text) const {
  const size_t limit = static_cast<size_t>(options_.max_tool_response_chars);
  if (limit == 0 || text.size() <= limit) return text;
  size_t cut = limit;
  // Do not split a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  const size_t dropped = text.size() - cut;
  text.resize(cut);
  text += "\n... (" + std::to_string(dropped) + " more bytes cut)";
  return text;
}

namespace {

// Shared between a pooled call and its waiter.
struct CallState {
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  bool abandoned = false;
  Clock::time_point start;
};

}  // namespace

struct ToolEnv::PendingCall {
  std::string tool_name;
  std::optional<CallOutcome> done;          // set when finished without the pool
  std::shared_ptr<CallState> state;
  std::future<ToolResult> future;
};

ToolEnv::PendingCall ToolEnv::start_call(const std::string& tool_name, const json& arguments) {
  PendingCall call;
  call.tool_name = tool_name;
  std::shared_ptr<Tool> tool;
  for (const auto& t : tools_)
    if (t->name() == tool_name) tool = t;
  if (!tool) {
    call.done = CallOutcome{
        "Error: unknown tool '" + tool_name + "'; available tools: " + join(tool_names()),
        "unknown_tool", std::nullopt};
    return call;
  }
  const double delay_ms = latency_.draw_ms(latency_rng_);
  if (ctx_.pool == nullptr) {  // inline: no timeout can be enforced
    try {
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
      call.done = ok_outcome(tool->execute(arguments));
    } catch (const InfraError& e) {
      call.done = infra_outcome(tool_name, e);
    } catch (const std::exception& e) {
      call.done = CallOutcome{"Error: tool '" + tool_name + "' failed: " + e.what(), "error",
                              std::nullopt};
    } catch (...) {
      call.done = CallOutcome{"Error: tool '" + tool_name + "' failed: unknown exception",
                              "error", std::nullopt};
    }
    return call;
  }
  // On the pool. The task holds the tool and the arguments, so a call that outlives its
  // timeout (its thread keeps running) never touches a destroyed env.
  auto state = std::make_shared<CallState>();
  call.state = state;
  call.future = ctx_.pool->submit([state, tool, arguments, delay_ms]() -> ToolResult {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->abandoned) return ToolResult{};
      state->started = true;
      state->start = Clock::now();
    }
    state->cv.notify_all();
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
    return tool->execute(arguments);
  });
  return call;
}

std::vector<std::string> ToolEnv::tool_names() const {
  std::vector<std::string> names;
  for (const auto& t : tools_) names.push_back(t->name());
  return names;
}

// A call that failed for the infrastructure's reasons (ToolInfraError: a dead server, a
// sandbox that could not start). The model is told, as for any failure; the status marks
// the trajectory so the trainer leaves it out of its group's advantage.
ToolEnv::CallOutcome ToolEnv::infra_outcome(const std::string& name, const InfraError& e) {
  CallOutcome out{"Error: tool '" + name + "' is unavailable (" + e.what() + ")", "infra_error", std::nullopt};
  out.detail = e.what();
  return out;
}

ToolEnv::CallOutcome ToolEnv::ok_outcome(ToolResult r) const {
  CallOutcome out{clip(std::move(r.text)), "ok", r.reward};
  auto it = r.info.find("items");
  if (it != r.info.end() && it->is_array()) out.items = std::move(*it);
  return out;
}

ToolEnv::CallOutcome ToolEnv::finish_call(PendingCall& call) {
  if (call.done) return *call.done;
  const std::string& name = call.tool_name;
  const auto queue_limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.tool_queue_timeout_s));
  const auto run_limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.tool_timeout_s));
  Clock::time_point start;
  {
    std::unique_lock<std::mutex> lock(call.state->mu);
    if (!call.state->cv.wait_for(lock, queue_limit, [&] { return call.state->started; })) {
      call.state->abandoned = true;
      return {"Error: tool '" + name + "' did not start within " +
                  format_seconds(options_.tool_queue_timeout_s) +
                  " s (all tool threads are busy); try again later",
              "timeout", std::nullopt};
    }
    start = call.state->start;
  }
  if (call.future.wait_until(start + run_limit) != std::future_status::ready) {
    return {"Error: tool '" + name + "' timed out after " +
                format_seconds(options_.tool_timeout_s) + " s",
            "timeout", std::nullopt};
  }
  try {
    return ok_outcome(call.future.get());
  } catch (const InfraError& e) {
    return infra_outcome(name, e);
  } catch (const std::exception& e) {
    return {"Error: tool '" + name + "' failed: " + e.what(), "error", std::nullopt};
  } catch (...) {
    return {"Error: tool '" + name + "' failed: unknown exception", "error", std::nullopt};
  }
}

StepResult ToolEnv::step(const Action& action) {
  AGENTR1_CHECK(started_, "ToolEnv::step called before reset()");
  AGENTR1_CHECK(!finished_, "ToolEnv::step called after the episode ended; call reset() first");

  // The response text without its trailing special tokens (<|im_end|>, eos).
  const std::string& text = action.text;
  const text::ParsedResponse parsed = format_->parse(text);

  StepResult result;
  result.anchor = anchor_;
  json info = json::object();
  int n_calls = 0, n_errors = 0, n_timeouts = 0, n_malformed = 0, n_unknown = 0, n_infra = 0;
  std::string infra_error;  // the first infrastructure failure's message
  json calls_info = json::array();

  if (!parsed.has_tool_call_markup()) {
    json msg = json::object();
    msg["role"] = "assistant";
    msg["content"] = text;
    messages_.push_back(std::move(msg));
    finished_ = true;
    result.done = true;
    info["tool_calls"] = 0;
    info["tool_errors"] = 0;
    info["infra_failures"] = 0;
    info["tool_timeouts"] = 0;
    info["malformed_calls"] = 0;
    info["unknown_tools"] = 0;
    info["calls"] = calls_info;
    result.info = std::move(info);
    return result;
  }

  // The assistant turn, with the well-formed calls as structured tool_calls, written
  // the way the format's chat template needs them (ToolMessageRules).
  const text::ToolMessageRules rules = format_->message_rules();
  const bool format_limited = rules.max_calls_per_message > 0 &&
                              rules.max_calls_per_message < options_.max_tool_calls_per_turn;
  const size_t run_limit = static_cast<size_t>(
      format_limited ? rules.max_calls_per_message : options_.max_tool_calls_per_turn);
  const size_t listed = rules.max_calls_per_message > 0
                            ? std::min(parsed.calls.size(), static_cast<size_t>(rules.max_calls_per_message))
                            : parsed.calls.size();
  // Call ids (Mistral): the model's when valid and unused in this episode, else derived
  // from the seed, the turn and the call; malformed calls' tool messages get one too.
  std::vector<std::string> ids(parsed.calls.size() + parsed.errors.size());
  if (rules.call_ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string id = i < parsed.calls.size() ? parsed.calls[i].id : std::string();
      const auto used = [&](const std::string& x) {
        return std::find(call_ids_.begin(), call_ids_.end(), x) != call_ids_.end();
      };
      for (uint64_t k = 0; !text::MistralToolFormat::is_valid_call_id(id) || used(id); ++k)
        id = text::MistralToolFormat::make_call_id(
            derive_seed(ctx_.seed, {0x63616c6cULL, turn_index_, i, k}));  // "call"
      call_ids_.push_back(id);
      ids[i] = id;
    }
  }
  json assistant = json::object();
  assistant["role"] = "assistant";
  assistant["content"] = parsed.content;
  if (!parsed.reasoning.empty()) assistant["reasoning_content"] = parsed.reasoning;
  json tool_calls = json::array();
  for (size_t i = 0; i < listed; ++i) {
    const auto& c = parsed.calls[i];
    json fn = json::object();
    fn["name"] = c.name;
    fn["arguments"] = rules.arguments_as_string ? json(text::python_tojson(c.arguments)) : c.arguments;
    json tc = json::object();
    if (rules.call_ids) tc["id"] = ids[i];
    tc["type"] = "function";
    tc["function"] = std::move(fn);
    tool_calls.push_back(std::move(tc));
  }
  if (rules.content_null_with_calls && !tool_calls.empty()) assistant["content"] = nullptr;
  if (!tool_calls.empty() || rules.call_ids) assistant["tool_calls"] = std::move(tool_calls);
  const size_t assistant_index = messages_.size();
  messages_.push_back(std::move(assistant));

  auto add_tool_message = [&](const std::string& name, const std::string& content, size_t k,
                              json items = json()) {
    json m = json::object();
    m["role"] = "tool";
    m["name"] = name;
    if (rules.call_ids) m["tool_call_id"] = ids[k];
    m["content"] = content;
    if (!items.is_null()) m["items"] = std::move(items);
    messages_.push_back(std::move(m));
  };
  auto note = [&](const std::string& name, const std::string& status) {
    json c = json::object();
    c["name"] = name;
    c["status"] = status;
    calls_info.push_back(std::move(c));
  };

  // Start every runnable call (they run in parallel on the pool), then collect the
  // answers in call order.
  std::vector<std::optional<PendingCall>> pending(parsed.calls.size());
  for (size_t i = 0; i < parsed.calls.size(); ++i) {
    const auto& call = parsed.calls[i];
    if (i < run_limit && call.arguments.is_object())
      pending[i] = start_call(call.name, call.arguments);
  }
  float reward = 0.0f;
  for (size_t i = 0; i < parsed.calls.size(); ++i) {
    const auto& call = parsed.calls[i];
    ++n_calls;
    if (i >= run_limit) {
      ++n_errors;
      note(call.name, "over_limit");
      if (format_limited)
        add_tool_message(call.name, "Error: this model's chat template takes " +
                                        std::to_string(rules.max_calls_per_message) +
                                        " tool call(s) per response (tool format '" +
                                        format_->name() + "'); this call to '" + call.name +
                                        "' was not run. Make one call per response",
                         i);
      else
        add_tool_message(call.name, "Error: too many tool calls in one response (limit " +
                                        std::to_string(options_.max_tool_calls_per_turn) +
                                        "); this call to '" + call.name + "' was not run",
                         i);
      continue;
    }
    if (!pending[i]) {
      ++n_errors;
      ++n_malformed;
      note(call.name, "malformed");
      add_tool_message(call.name, "Error: malformed tool call to '" + call.name +
                                      "': \"arguments\" must be a JSON object, got " +
                                      call.arguments.dump().substr(0, 80),
                       i);
      continue;
    }
    CallOutcome out = finish_call(*pending[i]);
    if (out.status != "ok") ++n_errors;
    if (out.status == "timeout") ++n_timeouts;
    if (out.status == "unknown_tool") ++n_unknown;
    if (out.status == "infra_error") {
      if (n_infra++ == 0) infra_error = "tool '" + call.name + "': " + out.detail;
    }
    if (out.reward) reward += *out.reward;
    note(call.name, out.status);
    add_tool_message(call.name, out.text, i, std::move(out.items));
  }
  for (size_t e = 0; e < parsed.errors.size(); ++e) {
    ++n_calls;
    ++n_errors;
    ++n_malformed;
    note("", "malformed");
    add_tool_message("", "Error: malformed tool call: " + parsed.errors[e].message +
                             ". Write each call as the system prompt shows.",
                     parsed.calls.size() + e);
  }

  anchor_.clear();  // the next step's state: this turn's tool responses, in order
  for (size_t m = assistant_index + 1; m < messages_.size(); ++m)
    anchor_ += (m > assistant_index + 1 ? "\n" : "") + messages_[m]["content"].get<std::string>();
  info["tool_calls"] = n_calls;
  info["tool_errors"] = n_errors;
  info["tool_timeouts"] = n_timeouts;
  info["malformed_calls"] = n_malformed;
  info["unknown_tools"] = n_unknown;
  info["infra_failures"] = n_infra;
  if (n_infra > 0) info["infra_error"] = infra_error;
  info["calls"] = std::move(calls_info);

  ContextReport report;
  const ContextTurn turn{prompt_ids_, action, messages_, assistant_index, tools_schema_, head_size_, turn_index_, &report};
  ++turn_index_;
  Observation next = policy_->next(turn);
  info["context_omitted_turns"] = static_cast<int64_t>(report.omitted_turns);
  result.side_steps = std::move(report.side_steps);
  prompt_ids_ = next_prompt_ids(next, *policy_, *ctx_.tokenizer);
  result.observation = std::move(next);
  result.reward = reward;
  result.done = false;
  result.info = std::move(info);
  return result;
}

}  // namespace agentr1::env
