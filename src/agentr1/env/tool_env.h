// agentr1/env/tool_env.h — multi-turn tool calling: you only define tools.
//
//   ToolEnvOptions opts = ToolEnvOptions::from_json({{"tools", {"calculator"}}});
//   ToolEnv env(ctx, opts);                       // ctx: tokenizer, chat template, pool
//   Observation obs = env.reset(sample);          // tokens: template(prompt, tools) + gen prompt
//   StepResult r = env.step({gen.token_ids, tok.decode(gen.token_ids)});
//   // r.done: the response had no tool call; else r.observation is the next prompt:
//   // previous prompt + response ids verbatim + tool turn + generation prompt.
//
// Registered as AgentEnv "tool"; its kwargs are ToolEnvOptions' fields.
//
// The tool format (text/tool_format/tool_format.h) is options.tool_format, or with "auto" (the
// default) the one the chat template's family writes: text::default_tool_format of
// ctx.chat_template->source() ("hermes" for Qwen, "llama3_json", "deepseek_v3",
// "mistral", "gpt_oss"; "hermes" when the source is empty or shows no known markers).
//
// One step:
//   - the response text (without its trailing special tokens) is parsed with the
//     ToolFormat ("hermes": <tool_call>{"name": ..., "arguments": {...}}</tool_call>);
//   - no tool call and no malformed tool-call markup: the episode ends (done), the
//     response recorded as the final assistant message;
//   - otherwise the calls (up to max_tool_calls_per_turn) all start on the EnvContext
//     pool, in parallel, each with its own timeout counted from when it starts running
//     (a timed-out call's thread keeps running until the tool returns; its result is
//     dropped). With a null pool they run inline, in order, without a timeout. Unknown tool,
//     malformed call, a tool that throws, a timeout, or calls over the limit each give
//     the model an error text as that call's tool response ("Error: unknown tool
//     'calc'; available tools: calculator") and are counted; the episode goes on.
//   - the messages follow the format's ToolMessageRules, so the family's template can
//     render them: at most max_calls_per_message calls are run and listed (Llama 3.x:
//     one; the rest get an error text), arguments as a JSON string and content null
//     (DeepSeek-V3), and with call_ids (Mistral) every listed call an "id" (the
//     model's when it is 9 letters/digits and unused in the episode, else one derived
//     from EnvContext.seed, the turn and the call) and every tool message the matching
//     "tool_call_id". A format's reasoning (gpt_oss analysis) goes to
//     "reasoning_content";
//   - tool rewards are summed into StepResult.reward;
//   - a result whose info has an "items" array (e.g. [{id, title, text, score}]) passes it
//     on as the tool message's "items", for context policies that keep a pool of them
//     (tasks/paper_search/paper_pool.h);
//   - the next prompt comes from the context policy (see context_policy.h for the
//     token-exact append-only rule).
// StepResult.info holds ints "tool_calls" (calls attempted, malformed included),
// "tool_errors" (all failed calls), "tool_timeouts", "malformed_calls",
// "unknown_tools", "context_omitted_turns" (earlier turns the next prompt leaves out,
// by the context policy), "infra_failures" (calls whose tool threw ToolInfraError: not
// the model's fault; with string "infra_error", the first one's message, which marks the
// trajectory), plus "calls": [{"name", "status"}] with status one of ok, error, timeout,
// unknown_tool, malformed, over_limit, infra_error. StepResult.anchor is the previous
// turn's tool responses, joined by "\n" ("<start>" at the first step).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/latency.h"
#include "agentr1/core/rng.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/env/context_policy.h"
#include "agentr1/env/mcp.h"
#include "agentr1/env/tool.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::text {
class ToolFormat;
}

namespace agentr1::env {

struct ToolEnvOptions {
  std::vector<std::string> tools;     // registered tool names offered to the model, in the
                                      // order the tools block lists them
  json tool_kwargs = json::object();  // {tool name: kwargs object} passed to make_tool
  std::string tool_format = "auto";   // how tool calls are written (text::make_tool_format
                                      // name), or "auto": the chat template's default
  double tool_timeout_s = 5.0;        // per-call limit on execution time, counted from the
                                      // moment the call starts running; > 0
  double tool_queue_timeout_s = 60.0; // give up on a call that waited this long for a free
                                      // pool thread without starting (counted as timeout); > 0
  int max_tool_calls_per_turn = 4;    // calls beyond this in one response are not run
                                      // (each gets an error text); >= 1
  int max_tool_response_chars = 4096; // longer tool outputs are cut, with a note; 0 = no limit
  json context = "append_only";       // context policy spec (context_policy.h): a name or
                                      // {"type": name, ...options}, e.g. {"type":
                                      // "sliding_window", "keep_last": 2}
  std::vector<double> tool_latency_ms;  // simulated latency of every tool call (core/latency.h):
                                        // [] none, [ms] fixed, [lo, hi] uniform; spent on the
                                        // tool's thread, inside tool_timeout_s
  bool tools_in_prompt = true;        // render the tools' schemas into the prompt (the chat
                                      // template's tools block); false: a model that learned
                                      // its tools in training sees no schema (shorter prompts)
  std::vector<McpServerSpec> mcp_servers;  // MCP servers (env/mcp.h) whose tools are offered
                                           // after `tools`; each started once per process

  // Names every field once (core/config.h's bind_into, config_to_json, describe_config).
  template <class V>
  void visit(V& v) {
    v.field("tools", tools, "registered tool names offered to the model");
    v.field("tool_kwargs", tool_kwargs, "{tool name: kwargs object} passed to make_tool");
    v.field("tool_format", tool_format,
            "tool-call format: auto (from the chat template) | hermes | llama3_json | "
            "deepseek_v3 | mistral | gpt_oss");
    v.field("tool_timeout_s", tool_timeout_s, "per-call execution time limit, seconds");
    v.field("tool_queue_timeout_s", tool_queue_timeout_s,
            "give up on a call that could not start within this many seconds");
    v.field("max_tool_calls_per_turn", max_tool_calls_per_turn,
            "calls beyond this in one response are not run");
    v.field("max_tool_response_chars", max_tool_response_chars,
            "longer tool outputs are cut; 0 = no limit");
    v.field("context", context,
            "context policy: append_only (token-exact) | rerender | sliding_window | token_budget, "
            "or {type: ..., options}");
    v.field("tool_latency_ms", tool_latency_ms,
            "simulated tool-call latency: [] none, [ms] fixed, [lo, hi] uniform (ms)");
    v.field("tools_in_prompt", tools_in_prompt,
            "render the tool schemas into the prompt; false = the model learned its tools");
    v.field("mcp_servers", mcp_servers,
            "MCP servers whose tools are offered: [{name, command, args, env, ...}] (env/mcp.h)");
  }

  // Builds options from kwargs (the flow defaults merged with the sample's env_kwargs;
  // null = defaults) with bind_into, the keys named env_kwargs.<key>: an unknown key
  // fails with the nearest and the valid keys, a wrong type or range with the key, the
  // rule and the value. tool_latency_ms may also be one number ([ms]).
  static ToolEnvOptions from_json(const json& kwargs);
  json to_json() const;  // config_to_json: every field; from_json(to_json()) is equal
  // Throws Error naming the field, the rule and the value.
  void validate() const;
};

class ToolEnv : public AgentEnv {
 public:
  // Makes the tools (make_tool; unknown names throw listing the registered ones) and the
  // tool format. ctx.tokenizer and ctx.chat_template must be set (Error otherwise).
  ToolEnv(const EnvContext& ctx, ToolEnvOptions options);
  ~ToolEnv() override;

  std::string name() const override { return "tool"; }
  // Resets the conversation to sample.prompt; returns the rendered prompt (tools block,
  // generation prompt) as token ids.
  Observation reset(const Sample& sample) override;
  StepResult step(const Action& action) override;

  const ToolEnvOptions& options() const { return options_; }
  // The tool format in use (options().tool_format, with "auto" resolved).
  const text::ToolFormat& tool_format() const { return *format_; }
  // The conversation so far (OpenAI-style messages: prompt, assistant turns with
  // tool_calls, tool results).
  const json& messages() const { return messages_; }
  // The tools block passed to the chat template (array of Tool::schema(), or null).
  const json& tools_schema() const { return tools_schema_; }

 private:
  struct CallOutcome {
    std::string text;            // what the model sees
    std::string status;          // ok, error, timeout, unknown_tool, infra_error
    std::optional<float> reward;
    std::string detail = "";     // infra_error: the failure's message (for the trajectory)
    json items = nullptr;        // the result's info "items" (an array), copied to the tool
                                 // message for context policies such as paper_pool; else null
  };
  CallOutcome ok_outcome(ToolResult r) const;  // status ok: the text clipped, reward, items
  static CallOutcome infra_outcome(const std::string& name, const InfraError& e);
  std::vector<std::string> tool_names() const;  // every tool offered (named, then MCP), in order
  struct PendingCall;
  PendingCall start_call(const std::string& tool_name, const json& arguments);
  CallOutcome finish_call(PendingCall& call);
  std::string clip(std::string text) const;

  EnvContext ctx_;
  ToolEnvOptions options_;
  text::RenderOptions render_options_;
  std::vector<std::shared_ptr<Tool>> tools_;   // shared: a timed-out call keeps its tool alive
  json tools_schema_;
  std::unique_ptr<text::ToolFormat> format_;
  std::unique_ptr<ContextPolicy> policy_;
  json messages_ = json::array();
  TokenIds prompt_ids_;                        // exact ids of the current prompt
  size_t head_size_ = 0;                       // the sample's prompt messages (never dropped)
  size_t turn_index_ = 0;                      // turns handed to the context policy so far
  bool started_ = false;
  bool finished_ = false;
  std::string anchor_;                         // the last turn's tool responses ("<start>" first)
  std::vector<std::string> call_ids_;          // ids given out this episode (call_ids rules)
  Latency latency_;                            // options_.tool_latency_ms
  Rng latency_rng_{0};                         // its draws (seeded from EnvContext.seed)
};

}  // namespace agentr1::env
