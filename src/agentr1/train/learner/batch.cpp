#include "agentr1/train/learner/batch.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "agentr1/core/error.h"

namespace agentr1::train {

int64_t PackedRow::num_action_tokens() const {
  return std::count(action.begin(), action.end(), uint8_t{1});
}

namespace {

// True when `next` starts with `prev_prompt + prev_response` (append-only context).
bool extends(const Step& prev, const Step& next) {
  const size_t n = prev.prompt_ids.size() + prev.response_ids.size();
  if (next.prompt_ids.size() < n) return false;
  return std::equal(prev.prompt_ids.begin(), prev.prompt_ids.end(), next.prompt_ids.begin()) &&
         std::equal(prev.response_ids.begin(), prev.response_ids.end(),
                    next.prompt_ids.begin() + static_cast<std::ptrdiff_t>(prev.prompt_ids.size()));
}

void append_step(PackedRow& row, const Step& st, int32_t step_index) {
  // The row already holds a prefix of st.prompt_ids; append the rest, then the response.
  for (size_t i = row.tokens.size(); i < st.prompt_ids.size(); ++i) {
    row.tokens.push_back(st.prompt_ids[i]);
    row.action.push_back(0);
    row.advantage.push_back(0.0f);
    row.rollout_logprob.push_back(0.0f);
    row.step_of.push_back(-1);
  }
  for (size_t i = 0; i < st.response_ids.size(); ++i) {
    row.tokens.push_back(st.response_ids[i]);
    row.action.push_back(1);
    row.advantage.push_back(0.0f);  // the estimator's, scattered later
    row.rollout_logprob.push_back(st.response_logprobs[i]);
    row.step_of.push_back(step_index);
  }
}

}  // namespace

std::vector<PackedRow> pack_trajectories(const std::vector<Trajectory>& trajs, bool merge_prefix_steps) {
  std::vector<PackedRow> rows;
  for (size_t ti = 0; ti < trajs.size(); ++ti) {
    const Trajectory& t = trajs[ti];
    PackedRow* open = nullptr;
    for (size_t si = 0; si < t.steps.size(); ++si) {
      const Step& st = t.steps[si];
      AGENTR1_CHECK(st.response_logprobs.size() == st.response_ids.size(),
                    "trajectory " << t.uid << " step " << si << ": "
                                  << st.response_logprobs.size() << " log-probs for "
                                  << st.response_ids.size() << " response tokens");
      if (st.response_ids.empty()) continue;
      const bool merge = merge_prefix_steps && open != nullptr && si > 0 &&
                         extends(t.steps[si - 1], st) &&
                         open->tokens.size() ==
                             t.steps[si - 1].prompt_ids.size() + t.steps[si - 1].response_ids.size();
      if (!merge) {
        rows.emplace_back();
        open = &rows.back();
        open->trajectory = static_cast<int64_t>(ti);
        open->data_source = t.data_source;
      }
      append_step(*open, st, static_cast<int32_t>(si));
    }
  }
  return rows;
}

void set_trajectory_advantages(std::vector<PackedRow>& rows, const std::vector<float>& traj_advantage) {
  for (PackedRow& row : rows) {
    AGENTR1_CHECK(row.trajectory >= 0 && static_cast<size_t>(row.trajectory) < traj_advantage.size(),
                  "set_trajectory_advantages: a row of trajectory " << row.trajectory << " but advantages for "
                                                                   << traj_advantage.size() << " trajectories");
    row.advantage.assign(row.tokens.size(), 0.0f);
    for (size_t t = 0; t < row.tokens.size(); ++t)
      if (row.action[t]) row.advantage[t] = traj_advantage[static_cast<size_t>(row.trajectory)];
  }
}

std::vector<PackedRow> pack_trajectories(const std::vector<Trajectory>& trajs,
                                         const std::vector<float>& traj_advantage, bool merge_prefix_steps) {
  AGENTR1_CHECK(trajs.size() == traj_advantage.size(),
                "pack_trajectories: " << trajs.size() << " trajectories but " << traj_advantage.size()
                                      << " advantages");
  std::vector<PackedRow> rows = pack_trajectories(trajs, merge_prefix_steps);
  set_trajectory_advantages(rows, traj_advantage);
  return rows;
}

StepSpans step_spans(const std::vector<PackedRow>& rows, const std::vector<Trajectory>& trajs) {
  StepSpans out(trajs.size());
  for (size_t i = 0; i < trajs.size(); ++i) out[i].resize(trajs[i].steps.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const PackedRow& row = rows[r];
    AGENTR1_CHECK(row.trajectory >= 0 && static_cast<size_t>(row.trajectory) < trajs.size(),
                  "step_spans: row " << r << " is of trajectory " << row.trajectory << " but there are "
                                     << trajs.size() << " trajectories");
    std::vector<TokenSpan>& steps = out[static_cast<size_t>(row.trajectory)];
    for (size_t t = 0; t < row.tokens.size(); ++t) {
      if (!row.action[t]) continue;
      const int32_t s = row.step_of[t];
      AGENTR1_CHECK(s >= 0 && static_cast<size_t>(s) < steps.size(),
                    "step_spans: row " << r << " token " << t << " is of step " << s << " but trajectory "
                                       << row.trajectory << " has " << steps.size() << " steps");
      TokenSpan& sp = steps[static_cast<size_t>(s)];
      if (sp.n == 0) {
        sp = TokenSpan{static_cast<int64_t>(r), static_cast<int64_t>(t), 1};
        continue;
      }
      AGENTR1_CHECK(sp.row == static_cast<int64_t>(r) && sp.begin + sp.n == static_cast<int64_t>(t),
                    "step_spans: trajectory " << row.trajectory << " step " << s
                                              << "'s response tokens are not one contiguous run (row " << r
                                              << " token " << t << ")");
      ++sp.n;
    }
  }
  return out;
}

void scatter_step_tokens(std::vector<PackedRow>& rows, const StepTokenValues& x,
                         std::vector<float> PackedRow::*field) {
  for (PackedRow& row : rows) {
    std::vector<float>& out = row.*field;
    out.assign(row.tokens.size(), 0.0f);
    AGENTR1_CHECK(row.trajectory >= 0 && static_cast<size_t>(row.trajectory) < x.size(),
                  "scatter_step_tokens: row of trajectory " << row.trajectory << " but data for "
                                                            << x.size() << " trajectories");
    const auto& steps = x[static_cast<size_t>(row.trajectory)];
    int32_t cur = -1;
    size_t k = 0;
    for (size_t t = 0; t < row.tokens.size(); ++t) {
      if (!row.action[t]) continue;
      const int32_t s = row.step_of[t];
      if (s != cur) cur = s, k = 0;
      AGENTR1_CHECK(static_cast<size_t>(s) < steps.size() && k < steps[static_cast<size_t>(s)].size(),
                    "scatter_step_tokens: trajectory " << row.trajectory << " step " << s
                                                       << " has no entry for response token " << k);
      out[t] = steps[static_cast<size_t>(s)][k++];
    }
  }
}

StepTokenValues gather_step_tokens(const std::vector<PackedRow>& rows,
                                   const std::vector<Trajectory>& trajs,
                                   std::vector<float> PackedRow::*field) {
  StepTokenValues out(trajs.size());
  for (size_t i = 0; i < trajs.size(); ++i) out[i].resize(trajs[i].steps.size());
  for (const PackedRow& row : rows) {
    const std::vector<float>& v = row.*field;
    AGENTR1_CHECK(v.size() == row.tokens.size(), "gather_step_tokens: a row of trajectory "
                                                     << row.trajectory << " has " << v.size()
                                                     << " entries for " << row.tokens.size() << " tokens");
    for (size_t t = 0; t < row.tokens.size(); ++t)
      if (row.action[t]) out[static_cast<size_t>(row.trajectory)][static_cast<size_t>(row.step_of[t])].push_back(v[t]);
  }
  return out;
}

std::vector<std::vector<int64_t>> trajectory_mini_batches(const std::vector<PackedRow>& rows,
                                                          int64_t trajectories_per_mini) {
  std::vector<int64_t> trajs;  // in first-appearance order
  std::unordered_map<int64_t, std::vector<int64_t>> rows_of;
  for (size_t r = 0; r < rows.size(); ++r) {
    auto [it, fresh] = rows_of.try_emplace(rows[r].trajectory);
    if (fresh) trajs.push_back(rows[r].trajectory);
    it->second.push_back(static_cast<int64_t>(r));
  }
  const size_t per = trajectories_per_mini > 0 ? static_cast<size_t>(trajectories_per_mini) : trajs.size();
  std::vector<std::vector<int64_t>> out;
  for (size_t start = 0; start < trajs.size(); start += per) {
    out.emplace_back();
    for (size_t k = start; k < std::min(trajs.size(), start + per); ++k)
      for (int64_t r : rows_of[trajs[k]]) out.back().push_back(r);
  }
  return out;
}

std::vector<std::vector<int64_t>> make_micro_batches(const std::vector<PackedRow>& rows,
                                                     const std::vector<int64_t>& subset, int64_t max_rows,
                                                     int64_t max_tokens, bool by_prefix) {
  AGENTR1_CHECK(max_rows >= 1, "micro batch size must be >= 1, got " << max_rows);
  std::vector<int64_t> order = subset;
  if (by_prefix)
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rows[a].tokens < rows[b].tokens; });
  else
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return rows[a].tokens.size() < rows[b].tokens.size();
    });
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  int64_t longest = 0;
  for (int64_t r : order) {
    const int64_t len = static_cast<int64_t>(rows[r].tokens.size());
    const int64_t new_longest = std::max(longest, len);
    const bool full = static_cast<int64_t>(cur.size()) >= max_rows ||
                      (max_tokens > 0 && !cur.empty() &&
                       new_longest * static_cast<int64_t>(cur.size() + 1) > max_tokens);
    if (full) {
      out.push_back(std::move(cur));
      cur.clear();
      longest = 0;
    }
    cur.push_back(r);
    longest = std::max(longest, len);
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<std::vector<int64_t>> make_micro_batches(const std::vector<PackedRow>& rows, int64_t max_rows,
                                                     int64_t max_tokens, bool by_prefix) {
  std::vector<int64_t> all(rows.size());
  std::iota(all.begin(), all.end(), 0);
  return make_micro_batches(rows, all, max_rows, max_tokens, by_prefix);
}

int64_t shared_prefix_length(const std::vector<PackedRow>& rows, const std::vector<int64_t>& idx) {
  if (idx.empty()) return 0;
  const TokenIds& first = rows[idx[0]].tokens;
  int64_t p = static_cast<int64_t>(first.size());
  for (int64_t r : idx) {
    const PackedRow& row = rows[r];
    const int64_t len = static_cast<int64_t>(row.tokens.size());
    // Keep the first action token's predecessor out of the prefix: its logit is needed.
    int64_t first_action = len;
    for (int64_t t = 0; t < len; ++t)
      if (row.action[t]) {
        first_action = t;
        break;
      }
    p = std::min({p, first_action - 1, len - 1});
    int64_t k = 0;
    while (k < p && row.tokens[k] == first[k]) ++k;
    p = k;
  }
  return std::max<int64_t>(p, 0);
}

TrainBatch collate(const std::vector<PackedRow>& rows, const std::vector<int64_t>& idx,
                   int64_t min_shared_prefix, at::Device device, bool tree) {
  AGENTR1_CHECK(!idx.empty(), "collate: empty micro-batch");
  for (int64_t r : idx)
    AGENTR1_CHECK(rows[r].tokens.empty() || !rows[r].action[0],
                  "row " << r << " starts with a response token (no prompt to condition on)");
  int64_t p = 0;
  if (!tree && min_shared_prefix > 0 && idx.size() >= 2) {
    p = shared_prefix_length(rows, idx);
    if (p < min_shared_prefix) p = 0;
  }
  // Row tokens [p, len) go into the [B,T] tensors; tokens [0, p) into prefix_ids.
  int64_t t_max = 2;
  for (int64_t r : idx) t_max = std::max<int64_t>(t_max, static_cast<int64_t>(rows[r].tokens.size()) - p);
  const int64_t b = static_cast<int64_t>(idx.size());
  TrainBatch out;
  out.prefix_len = p;
  if (p > 0) {
    out.prefix_ids = at::empty({p}, at::kLong);
    auto pre = out.prefix_ids.accessor<int64_t, 1>();
    for (int64_t t = 0; t < p; ++t) pre[t] = rows[idx[0]].tokens[t];
  }
  out.input_ids = at::zeros({b, t_max}, at::kLong);
  out.positions = at::zeros({b, t_max}, at::kLong);
  out.segment_ids = at::full({b, t_max}, -1, at::kLong);
  out.action_mask = at::zeros({b, t_max - 1}, at::kFloat);
  out.advantages = at::zeros({b, t_max - 1}, at::kFloat);
  out.rollout_logprobs = at::zeros({b, t_max - 1}, at::kFloat);
  out.step_ids = at::full({b, t_max - 1}, -1, at::kLong);
  auto ids = out.input_ids.accessor<int64_t, 2>();
  auto pos = out.positions.accessor<int64_t, 2>();
  auto seg = out.segment_ids.accessor<int64_t, 2>();
  auto am = out.action_mask.accessor<float, 2>();
  auto adv = out.advantages.accessor<float, 2>();
  auto lp = out.rollout_logprobs.accessor<float, 2>();
  auto sid = out.step_ids.accessor<int64_t, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const PackedRow& row = rows[idx[i]];
    const int64_t len = static_cast<int64_t>(row.tokens.size());
    for (int64_t t = p; t < len; ++t) {
      const int64_t c = t - p;  // column in the [B,T] tensors
      ids[i][c] = row.tokens[t];
      pos[i][c] = t;
      seg[i][c] = 0;
      if (c >= 1 && row.action[t]) {
        am[i][c - 1] = 1.0f;
        adv[i][c - 1] = row.advantage[t];
        lp[i][c - 1] = row.rollout_logprob[t];
        sid[i][c - 1] = row.step_of[t];
        out.num_action_tokens++;
      }
    }
  }
  auto gather = [&](std::vector<float> PackedRow::*field) -> at::Tensor {
    for (int64_t r : idx)
      if ((rows[r].*field).empty()) return at::Tensor();
    at::Tensor x = at::zeros({b, t_max - 1}, at::kFloat);
    auto acc = x.accessor<float, 2>();
    for (int64_t i = 0; i < b; ++i) {
      const auto& v = rows[idx[i]].*field;
      for (size_t t = static_cast<size_t>(p) + 1; t < v.size(); ++t) acc[i][static_cast<int64_t>(t) - p - 1] = v[t];
    }
    return x;
  };
  out.old_logprobs = gather(&PackedRow::old_logprob);
  out.ref_logprobs = gather(&PackedRow::ref_logprob);
  out.teacher_logprobs = gather(&PackedRow::teacher_logprob);
  // The teacher's top-k columns: K entries per token, laid out like the columns above.
  bool topk = true;
  for (int64_t r : idx) topk = topk && !rows[r].teacher_topk_ids.empty();
  if (topk) {
    const PackedRow& r0 = rows[idx[0]];
    const int64_t k = static_cast<int64_t>(r0.teacher_topk_ids.size() / std::max<size_t>(1, r0.tokens.size()));
    out.teacher_topk_ids = at::zeros({b, t_max - 1, k}, at::kLong);
    out.teacher_topk_logprobs = at::zeros({b, t_max - 1, k}, at::kFloat);
    auto tid = out.teacher_topk_ids.accessor<int64_t, 3>();
    auto tlp = out.teacher_topk_logprobs.accessor<float, 3>();
    for (int64_t i = 0; i < b; ++i) {
      const PackedRow& row = rows[idx[i]];
      AGENTR1_CHECK(row.teacher_topk_ids.size() == row.tokens.size() * static_cast<size_t>(k) &&
                        row.teacher_topk_logprob.size() == row.teacher_topk_ids.size(),
                    "collate: row " << idx[i] << " has " << row.teacher_topk_ids.size() << " teacher top-k ids and "
                                    << row.teacher_topk_logprob.size() << " log-probs for " << row.tokens.size()
                                    << " tokens x k " << k);
      for (size_t t = static_cast<size_t>(p) + 1; t < row.tokens.size(); ++t)
        for (int64_t j = 0; j < k; ++j) {
          tid[i][static_cast<int64_t>(t) - p - 1][j] = row.teacher_topk_ids[t * static_cast<size_t>(k) + static_cast<size_t>(j)];
          tlp[i][static_cast<int64_t>(t) - p - 1][j] = row.teacher_topk_logprob[t * static_cast<size_t>(k) + static_cast<size_t>(j)];
        }
    }
  }
  out.values = gather(&PackedRow::value);
  out.returns = gather(&PackedRow::returns);
  out.value_mask = gather(&PackedRow::value_mask);
  out.targets = out.input_ids.slice(/*dim=*/1, /*start=*/1).contiguous();
  out.rows = idx;
  if (tree) {
    // A trie over the rows: node = (parent node, token); a node belongs to the row that
    // created it (the suffix of that row's path after what earlier rows share).
    std::map<std::pair<int32_t, TokenId>, int32_t> child;
    std::vector<int64_t> node_tok, node_pos;
    std::vector<std::vector<int64_t>> owned(static_cast<size_t>(b));
    out.tree_index = at::zeros({b, t_max}, at::kLong);
    auto ti = out.tree_index.accessor<int64_t, 2>();
    for (int64_t i = 0; i < b; ++i) {
      const PackedRow& row = rows[idx[i]];
      int32_t at_node = -1;
      for (size_t t = 0; t < row.tokens.size(); ++t) {
        auto [it, fresh] = child.try_emplace({at_node, row.tokens[t]}, static_cast<int32_t>(node_tok.size()));
        if (fresh) {
          node_tok.push_back(row.tokens[t]);
          node_pos.push_back(static_cast<int64_t>(t));
          owned[static_cast<size_t>(i)].push_back(it->second);
        }
        at_node = it->second;
        ti[i][static_cast<int64_t>(t)] = at_node;
      }
    }
    const int64_t n = static_cast<int64_t>(node_tok.size());
    int64_t q = 1;
    for (const auto& o : owned) q = std::max<int64_t>(q, static_cast<int64_t>(o.size()));
    out.tree_nodes = n;
    out.tree_ids = at::from_blob(node_tok.data(), {n}, at::kLong).clone();
    out.tree_positions = at::from_blob(node_pos.data(), {n}, at::kLong).clone();
    out.tree_own = at::full({b, q}, n, at::kLong);
    out.tree_own_mask = at::zeros({b, q, t_max}, at::kBool);
    auto own = out.tree_own.accessor<int64_t, 2>();
    auto om = out.tree_own_mask.accessor<bool, 3>();
    for (int64_t i = 0; i < b; ++i) {
      const auto& o = owned[static_cast<size_t>(i)];
      for (int64_t k = 0; k < q; ++k) {
        if (k < static_cast<int64_t>(o.size())) {
          own[i][k] = o[static_cast<size_t>(k)];
          for (int64_t j = 0; j <= node_pos[static_cast<size_t>(o[static_cast<size_t>(k)])]; ++j) om[i][k][j] = true;
        } else {
          om[i][k][0] = true;  // padding queries see one key (no NaN; their outputs are dropped)
        }
      }
    }
  }
  if (!device.is_cpu()) out.to(device);
  return out;
}

void TrainBatch::to(at::Device device) {
  for (at::Tensor* t : {&tree_ids, &tree_positions, &tree_index, &tree_own, &tree_own_mask, &prefix_ids, &input_ids, &positions,
                        &segment_ids, &targets, &action_mask, &advantages, &step_ids,
                        &rollout_logprobs, &old_logprobs, &ref_logprobs, &teacher_logprobs, &teacher_topk_ids,
                        &teacher_topk_logprobs, &values, &returns, &value_mask})
    if (t->defined()) *t = t->to(device, /*non_blocking=*/false);
}

}  // namespace agentr1::train
