// Context policies and the learner: whatever policy builds the prompts, every Step keeps
// the exact prompt ids the generator saw, and packing merges a step into the previous
// row only where its prompt really extends the previous prompt + response (append-only);
// otherwise the step is its own row, token for token.
#include <gtest/gtest.h>

#include "agentr1/flow/agent_env_loop.h"
#include "agentr1/flow/test_support.h"
#include "agentr1/train/learner/batch.h"

namespace agentr1::train {
namespace {

using namespace flow::testing;

bool extends(const Step& prev, const Step& next) {
  TokenIds want = prev.prompt_ids;
  want.insert(want.end(), prev.response_ids.begin(), prev.response_ids.end());
  return next.prompt_ids.size() > want.size() && std::equal(want.begin(), want.end(), next.prompt_ids.begin());
}

TEST(ContextPackingTest, EachPolicysStepsAreTrainedOnTheirExactPrompts) {
  register_fakes();
  for (const json& context : {json("append_only"), json{{"type", "sliding_window"}, {"keep_last", 1}},
                              json{{"type", "token_budget"}, {"max_prompt_tokens", 120}}, json("rerender")}) {
    std::vector<TokenIds> script;
    for (int k = 1; k <= 3; ++k) script.push_back(turn_ids(call_text("adder", "{\"a\": " + std::to_string(k) +
                                                                                  ", \"b\": 1}")));
    script.push_back(turn_ids("Done.\n#### 4"));
    ScriptedGenerator gen(ScriptedGenerator::queue(script));
    flow::FlowContext ctx = make_context(&gen);
    flow::FlowOptions o;
    o.max_steps = 6;
    o.env_kwargs = {{"tools", {"adder"}}, {"context", context}};
    const Trajectory t = flow::AgentEnvLoop("tool").run(make_sample("Add.", "4"), ctx, o, /*seed=*/3);
    ASSERT_EQ(t.steps.size(), 4u) << context.dump();
    const auto reqs = gen.requests();
    size_t expected_rows = 1;
    for (size_t k = 0; k < t.steps.size(); ++k) {
      EXPECT_EQ(t.steps[k].prompt_ids, reqs[k].prompt_ids) << context.dump() << " step " << k;
      if (k > 0 && !extends(t.steps[k - 1], t.steps[k])) ++expected_rows;
    }
    // Context metrics: turns left out (sliding_window keep_last 1 over 3 tool turns leaves
    // out 0, 1, 2 turns from the next prompts), prompt tokens per step.
    const double omitted = t.metrics["context_omitted_turns"].get<double>();
    if (context == json("append_only") || context == json("rerender")) EXPECT_EQ(omitted, 0.0);
    if (context.is_object() && context["type"] == "sliding_window") EXPECT_EQ(omitted, 3.0);
    size_t pmax = 0;
    double psum = 0;
    for (const auto& st : t.steps) {
      pmax = std::max(pmax, st.prompt_ids.size());
      psum += static_cast<double>(st.prompt_ids.size());
    }
    EXPECT_EQ(t.metrics["prompt_tokens_max"].get<size_t>(), pmax);
    EXPECT_DOUBLE_EQ(t.metrics["prompt_tokens_mean"].get<double>(), psum / static_cast<double>(t.steps.size()));
    const std::vector<PackedRow> rows = pack_trajectories({t}, {1.0f}, /*merge_prefix_steps=*/true);
    EXPECT_EQ(rows.size(), expected_rows) << context.dump();
    if (context == json("append_only")) EXPECT_EQ(rows.size(), 1u);
    if (context.is_object() && context["type"] == "sliding_window") EXPECT_GT(rows.size(), 1u);
    // Every step's tokens appear in its row exactly: the row ends with the step's prompt
    // suffix + response, and the row's action tokens are the responses in order.
    TokenIds action_tokens, responses;
    for (const auto& r : rows)
      for (size_t i = 0; i < r.tokens.size(); ++i)
        if (r.action[i]) action_tokens.push_back(r.tokens[i]);
    for (const auto& st : t.steps) responses.insert(responses.end(), st.response_ids.begin(), st.response_ids.end());
    EXPECT_EQ(action_tokens, responses) << context.dump();
    for (const auto& r : rows) {
      const int32_t first = r.step_of[std::distance(r.action.begin(), std::find(r.action.begin(), r.action.end(), 1))];
      const Step& st = t.steps[static_cast<size_t>(first)];
      ASSERT_GE(r.tokens.size(), st.prompt_ids.size());
      EXPECT_TRUE(std::equal(st.prompt_ids.begin(), st.prompt_ids.end(), r.tokens.begin()))
          << "a row starts with its first step's exact prompt";
    }
  }
}

// summarize: the summary is written by the generator (scripted here) and replaces the
// left-out turns; with train_summary it is also a Step of the trajectory (its own prompt
// and response ids, trained with the trajectory's advantage), without it only context.
TEST(ContextPackingTest, SummarizeWritesTheSummaryAndTrainsItOnlyWhenAsked) {
  register_fakes();
  for (bool train : {false, true}) {
    std::vector<TokenIds> turns;
    for (int k = 1; k <= 3; ++k)
      turns.push_back(turn_ids(call_text("adder", "{\"a\": " + std::to_string(k) + ", \"b\": 1}")));
    turns.push_back(turn_ids("Done.\n#### 4"));
    auto policy = ScriptedGenerator::queue(turns);
    const TokenIds summary = turn_ids("SUMMARY-A");
    ScriptedGenerator gen([&](const GenRequest& r) {
      return contains(tok().decode(r.prompt_ids), "Summarize the earlier turns") ? summary : policy(r);
    });
    flow::FlowContext ctx = make_context(&gen);
    flow::FlowOptions o;
    o.max_steps = 6;
    o.env_kwargs = {{"tools", {"adder"}},
                    {"context", {{"type", "summarize"}, {"keep_last", 1}, {"train_summary", train}}}};
    const Sample sample = make_sample("Add.", "4");
    const Trajectory t = flow::AgentEnvLoop("tool").run(sample, ctx, o, /*seed=*/5);
    const auto reqs = gen.requests();
    ASSERT_EQ(reqs.size(), 6u) << "4 turns + a summary after turns 2 and 3";
    EXPECT_EQ(t.metrics["num_turns"], 4);
    EXPECT_EQ(t.metrics["summary_steps"], train ? 2 : 0);
    EXPECT_FLOAT_EQ(t.outcome_reward, 1.0f) << "the reward reads the final answer, not a summary";
    ASSERT_EQ(t.steps.size(), train ? 6u : 4u);
    // The prompt of turn 3 (after 2 turns, keep_last 1): head, the summary, turn 2.
    const Step& third = train ? t.steps[3] : t.steps[2];
    ASSERT_EQ(third.kind, StepKind::kAction);
    json convo = sample.prompt;
    convo.push_back({{"role", "user"}, {"content", "Summary of the 1 earlier turn: SUMMARY-A"}});
    const std::string third_text = tok().decode(third.prompt_ids);
    EXPECT_TRUE(contains(third_text, "<|im_start|>user\nSummary of the 1 earlier turn: SUMMARY-A<|im_end|>"))
        << third_text;
    EXPECT_FALSE(contains(third_text, "\"a\": 1,")) << "turn 1 is summarised away: " << third_text;
    EXPECT_TRUE(contains(third_text, "\"a\": 2,")) << third_text;
    // Trained summaries: own steps with the generator's exact prompt and response, packed
    // as action tokens with the trajectory's advantage.
    size_t summary_tokens = 0;
    for (size_t k = 0; k < t.steps.size(); ++k) {
      if (t.steps[k].kind != StepKind::kSummary) continue;
      EXPECT_EQ(t.steps[k].response_ids, summary);
      EXPECT_TRUE(contains(tok().decode(t.steps[k].prompt_ids), "Summarize the earlier turns"));
      summary_tokens += t.steps[k].response_ids.size();
    }
    const auto rows = pack_trajectories({t}, {0.5f}, /*merge_prefix_steps=*/true);
    size_t with_advantage = 0, in_summary_rows = 0;
    for (const auto& r : rows)
      for (size_t i = 0; i < r.tokens.size(); ++i) {
        if (!r.action[i]) continue;
        with_advantage += r.advantage[i] == 0.5f;
        if (t.steps[static_cast<size_t>(r.step_of[i])].kind == StepKind::kSummary) ++in_summary_rows;
      }
    EXPECT_EQ(in_summary_rows, summary_tokens);
    EXPECT_EQ(summary_tokens, train ? 2 * summary.size() : 0u);
    EXPECT_GT(with_advantage, 0u);
  }
}

// A summary request longer than the generator's context loses its oldest transcript
// lines until it fits, instead of failing the rollout.
TEST(ContextPackingTest, SummaryRequestsAreCutToTheGeneratorsContext) {
  register_fakes();
  auto run = [&](int max_context, std::vector<GenRequest>* summary_requests, size_t* longest_turn_prompt) {
    std::vector<TokenIds> turns;
    for (int k = 1; k <= 4; ++k)
      turns.push_back(turn_ids(call_text("adder", "{\"a\": " + std::to_string(k) + ", \"b\": 1}")));
    turns.push_back(turn_ids("Done.\n#### 5"));
    auto policy = ScriptedGenerator::queue(turns);
    ScriptedGenerator gen(
        [&](const GenRequest& r) {
          return contains(tok().decode(r.prompt_ids), "Summarize the earlier turns") ? turn_ids("S") : policy(r);
        },
        max_context);
    flow::FlowContext ctx = make_context(&gen);
    flow::FlowOptions o;
    o.max_steps = 8;
    o.env_kwargs = {{"tools", {"adder"}},
                    {"tools_in_prompt", false},  // short turn prompts: the summary request is the longest
                    {"context", {{"type", "summarize"}, {"keep_last", 1}, {"train_summary", true}}}};
    const Trajectory t = flow::AgentEnvLoop("tool").run(make_sample("Add.", "5"), ctx, o, /*seed=*/5);
    *longest_turn_prompt = 0;
    summary_requests->clear();
    for (const auto& r : gen.requests()) {
      if (contains(tok().decode(r.prompt_ids), "Summarize the earlier turns"))
        summary_requests->push_back(r);
      else
        *longest_turn_prompt = std::max(*longest_turn_prompt, r.prompt_ids.size());
    }
    return t;
  };
  std::vector<GenRequest> reqs;
  size_t longest_turn = 0;
  const Trajectory full = run(4096, &reqs, &longest_turn);
  ASSERT_EQ(reqs.size(), 3u) << "summaries after turns 2, 3 and 4";
  const size_t longest_summary = reqs.back().prompt_ids.size();
  ASSERT_GT(longest_summary, longest_turn) << "precondition: the last summary request is the longest prompt";
  // A context the last full request does not fit (a prompt needs < max_context).
  const int small = static_cast<int>(longest_summary);
  const Trajectory cut = run(small, &reqs, &longest_turn);
  ASSERT_EQ(reqs.size(), 3u);
  for (const auto& r : reqs) {
    EXPECT_LT(static_cast<int>(r.prompt_ids.size()), small);
    EXPECT_LE(r.sampling.max_new_tokens, small - static_cast<int>(r.prompt_ids.size()));
  }
  EXPECT_LT(reqs.back().prompt_ids.size(), longest_summary);
  int64_t dropped = 0;
  for (const Step& st : cut.steps)
    if (st.kind == StepKind::kSummary) dropped += st.info.value("transcript_lines_dropped", int64_t{0});
  EXPECT_GT(dropped, 0);
  EXPECT_FLOAT_EQ(cut.outcome_reward, 1.0f) << "the episode goes on to its answer";
  EXPECT_EQ(cut.metrics.at("num_turns"), full.metrics.at("num_turns"));
}

}  // namespace
}  // namespace agentr1::train
