#include "agentr1/train/step_logger.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "agentr1/core/log.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::train {

Metrics rollout_metrics(const std::vector<Trajectory>& trajs, const AdvantageResult& est) {
  Metrics m;
  if (trajs.empty()) return m;
  double sum = 0, mx = -1e30, mn = 1e30;
  for (const auto& t : trajs) {
    const double x = t.total_reward();
    sum += x;
    mx = std::max(mx, x);
    mn = std::min(mn, x);
  }
  m["critic/score/mean"] = sum / static_cast<double>(trajs.size());
  m["critic/score/max"] = mx;
  m["critic/score/min"] = mn;
  double rsum = 0;
  for (double r : est.rewards) rsum += r;
  m["critic/rewards/mean"] = rsum / static_cast<double>(std::max<size_t>(est.rewards.size(), 1));
  auto tm = mean_trajectory_metrics(trajs);
  for (const auto& kv : tm) m["env/" + kv.first + "/mean"] = kv.second;
  m["response_length/mean"] = tm["response_length"];
  m["env/success/mean"] = tm["success"];
  return m;
}

namespace {

// A fence of backticks longer than any run of them in `text` (at least 3), so the text
// shows verbatim in a markdown code block.
std::string fence_for(const std::string& text) {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

void code_block(std::ostringstream& os, const std::string& text) {
  const std::string f = fence_for(text);
  os << f << "\n" << text << (text.empty() || text.back() != '\n' ? "\n" : "") << f << "\n\n";
}

// One dumped trajectory (dump_step's JSON) as markdown for TensorBoard's text plugin: the
// first step's decoded prompt, each step's response with its reward and mean advantage,
// the score and the trajectory's mean advantage.
std::string trajectory_markdown(const json& j, size_t index) {
  std::ostringstream os;
  os << std::setprecision(4);
  os << "### trajectory " << index << ": score " << j.value("score", 0.0) << ", advantage "
     << j.value("advantage", 0.0);
  if (j.contains("reward")) os << ", reward (with KL) " << j["reward"].get<double>();
  os << "\n\ngroup `" << j.value("group", std::string()) << "`, " << j["steps"].size() << " step(s)\n\n";
  if (j["steps"].empty()) return os.str();
  os << "**prompt** (step 0)\n\n";
  code_block(os, j["steps"][0].value("prompt_text", std::string()));
  for (size_t k = 0; k < j["steps"].size(); ++k) {
    const json& st = j["steps"][k];
    double adv = 0;  // the step's mean advantage over its response tokens
    const json& a = st.contains("advantage") ? st["advantage"] : json::array();
    for (const json& x : a) adv += x.get<double>();
    if (!a.empty()) adv /= static_cast<double>(a.size());
    os << "**response " << k << "** (reward " << st.value("reward", 0.0) << ", advantage " << adv << ")\n\n";
    code_block(os, st.value("response_text", std::string()));
  }
  return os.str();
}

}  // namespace

StepLogger::StepLogger(const RunDir& run, const text::Tokenizer& tokenizer, int dump_trajectories, bool progress,
                       bool tensorboard)
    : run_(run), tokenizer_(tokenizer), dump_(dump_trajectories), progress_(progress) {
  // Opened at its first write: only the rank that writes the run's files writes one.
  if (tensorboard) tb_ = std::make_unique<TensorBoardWriter>(run.file("tensorboard"));
}

StepLogger::~StepLogger() = default;

void StepLogger::metrics(int64_t step, const Metrics& m) const {
  run_.append_jsonl("metrics.jsonl", metrics_json(step, m));
  if (tb_) {
    tb_->scalars(step, m);
    tb_->flush();
  }
}

void StepLogger::resumed(int64_t step) const {
  if (!tb_) return;
  tb_->session_start(step + 1);
  tb_->flush();
}

void StepLogger::dump_step(int64_t step, const std::vector<Trajectory>& trajs, const std::vector<PackedRow>& rows,
                           const AdvantagePhase::Output& adv, const DumpColumns& cols) const {
  const StepSpans spans = step_spans(rows, trajs);
  // A step's entries of one per-token column of its row (empty for a step without
  // response tokens, which has no row).
  auto cut = [](const std::vector<float>& v, const TokenSpan& sp) {
    return std::vector<float>(v.begin() + sp.begin, v.begin() + sp.begin + sp.n);
  };
  auto slice = [&](std::vector<float> PackedRow::*column, const TokenSpan& sp) {
    return sp.n == 0 ? std::vector<float>() : cut(rows[static_cast<size_t>(sp.row)].*column, sp);
  };
  std::string sample_md;  // TensorBoard: the first two trajectories as markdown
  for (size_t i = 0; i < trajs.size() && (dump_ < 0 || static_cast<int>(i) < dump_); ++i) {
    json j = trajs[i].to_json();
    std::vector<std::vector<float>> token_adv;
    for (const TokenSpan& sp : spans[i]) token_adv.push_back(slice(&PackedRow::advantage, sp));
    double sum = 0;
    size_t n = 0;
    for (const auto& st : token_adv)
      for (float a : st) sum += a, ++n;
    j["advantage"] = n > 0 ? sum / static_cast<double>(n) : 0.0;
    j["score"] = trajs[i].total_reward();
    if (cols.token_kl) j["reward"] = adv.result.rewards[i];  // score - kl_coef * sum(token_kl)
    for (size_t k = 0; k < j["steps"].size(); ++k) {
      json& st = j["steps"][k];
      const TokenSpan& sp = spans[i][k];
      const std::vector<float> returns = slice(&PackedRow::returns, sp);
      const std::vector<float> values = cols.values ? slice(&PackedRow::value, sp) : std::vector<float>();
      st["response_text"] = tokenizer_.decode(st["response_ids"].get<TokenIds>());
      st["advantage"] = token_adv[k];
      const bool per_step = cols.step_level && !token_adv[k].empty();
      if (per_step) {
        st["advantages"] = token_adv[k].front();
        st["returns"] = returns.front();
        st["values"] = values.front();
      } else {
        st["advantages"] = token_adv[k];
        st["returns"] = returns;
        if (cols.values) st["values"] = values;
      }
      if (cols.token_kl)
        st["token_kl"] = sp.n == 0 ? std::vector<float>() : cut(adv.token_kl[static_cast<size_t>(sp.row)], sp);
      if (cols.learner_logprobs && (sp.n == 0 || !rows[static_cast<size_t>(sp.row)].old_logprob.empty()))
        st["learner_logprobs"] = slice(&PackedRow::old_logprob, sp);
    }
    if (!j["steps"].empty())
      j["steps"][0]["prompt_text"] = tokenizer_.decode(j["steps"][0]["prompt_ids"].get<TokenIds>());
    run_.append_jsonl("trajectories/" + step_name(step) + ".jsonl", j);
    if (tb_ && i < 2) sample_md += trajectory_markdown(j, i);
  }
  if (tb_ && !sample_md.empty()) tb_->text("trajectories/sample", step, sample_md);
}

void StepLogger::dump_excluded(int64_t step, const std::vector<Trajectory>& trajs, const std::string& why) const {
  for (const Trajectory& t : trajs) {
    json j = t.to_json();
    if (!why.empty()) j["excluded"] = why;
    j["score"] = t.total_reward();
    for (json& st : j["steps"]) st["response_text"] = tokenizer_.decode(st["response_ids"].get<TokenIds>());
    run_.append_jsonl("trajectories/" + step_name(step) + ".jsonl", j);
  }
}

void StepLogger::validation(int64_t step, const EvalResult& r, const std::vector<Sample>& samples) const {
  const Metrics vm = r.metrics();
  run_.append_jsonl("metrics.jsonl", metrics_json(step, vm));
  if (tb_) {
    tb_->scalars(step, vm);
    tb_->flush();
  }
  for (size_t i = 0; i < r.greedy_trajectories.size() && i < 16 && i < samples.size(); ++i) {
    json j = r.greedy_trajectories[i].to_json();
    j["sample"] = samples[i].to_json();
    run_.append_jsonl("trajectories/val_" + step_name(step) + ".jsonl", j);
  }
  AGENTR1_LOG(INFO) << "validation @ step " << step << ": greedy success " << r.greedy_success << ", mean@" << r.k
                    << " " << r.mean_at_k << ", tool use " << r.greedy_tool_use << " (" << r.num_prompts
                    << " prompts, " << std::fixed << std::setprecision(1) << r.wall_s << " s)";
}

void StepLogger::progress(int64_t step, int64_t total, const Metrics& m, double dt) {
  step_time_ema_ = step_time_ema_ == 0 ? dt : 0.7 * step_time_ema_ + 0.3 * dt;
  if (!progress_) return;
  auto get = [&](const char* k) {
    auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  };
  const double eta = step_time_ema_ * static_cast<double>(total - step);
  AGENTR1_LOG(INFO) << "step " << step << "/" << total << "  reward " << std::fixed << std::setprecision(3)
                    << get("critic/score/mean") << "  success " << get("env/success/mean") << "  tool calls "
                    << get("env/tool_calls/mean") << "  len " << std::setprecision(1) << get("response_length/mean")
                    << "  pg_loss " << std::setprecision(4) << get("actor/pg_loss") << "  " << std::setprecision(1)
                    << dt << " s/step  ETA " << eta << " s";
}

}  // namespace agentr1::train
