// Context policies and the learner: whatever policy builds the prompts, every Step keeps
// the exact prompt ids the generator saw, and packing merges a step into the previous
// row only where its prompt really extends the previous prompt + response (append-only);
// otherwise the step is its own row, token for token.
#include <gtest/gtest.h>

#include "agentr1/flow/agent_env_loop.h"
#include "agentr1/flow/test_support.h"
#include "agentr1/train/batch.h"

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

}  // namespace
}  // namespace agentr1::train
