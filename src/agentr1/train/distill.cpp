#include "agentr1/train/distill.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/timing.h"
#include "agentr1/model/lora.h"
#include "agentr1/rollout/remote_scorer.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::train {

namespace fs = std::filesystem;

std::map<std::string, TeacherSpec> DistillSection::resolved_teachers() const {
  std::map<std::string, TeacherSpec> out = teachers;
  if (!teacher.empty()) {
    AGENTR1_CHECK(!out.count("default"),
                  "algorithm.distill.teacher and algorithm.distill.teachers.default are both set; HINT: keep one");
    TeacherSpec one;
    one.path = teacher;
    out["default"] = one;
  }
  std::set<std::string> claimed;
  std::string catch_all;
  for (const auto& [name, t] : out) {
    const std::string key = "algorithm.distill.teachers." + name;
    if (t.remote()) {
      AGENTR1_CHECK(!t.path.empty(),
                    key << ".url is set but " << key << ".path is empty: a remote teacher still needs path, the "
                        << "directory of its tokenizer (tokenizer.json, tokenizer_config.json), to check that it "
                           "reads token ids as the student does; HINT: the teacher model's directory, or a copy of "
                           "its tokenizer files");
      AGENTR1_CHECK(t.path != kBaseTeacher, key << ".path is 'base' (the policy's LoRA base) but " << key
                                                << ".url is set; a remote teacher's path is its tokenizer directory");
      rollout::RemoteScorerOptions ro;
      ro.url = t.url;
      ro.timeout_s = t.timeout_s;
      ro.retries = t.retries;
      ro.validate(key + ".");
    }
    AGENTR1_CHECK(!t.path.empty(), key << ".path is empty; HINT: a model directory, or 'base' (the LoRA base), "
                                          "or url: a remote teacher's server (with path: its tokenizer)");
    if (t.data_sources.empty()) {
      AGENTR1_CHECK(catch_all.empty(), "teachers '" << catch_all << "' and '" << name
                                                    << "' both take every unlisted data_source (no data_sources); "
                                                       "HINT: give one of them algorithm.distill.teachers."
                                                    << name << ".data_sources");
      catch_all = name;
    }
    for (const auto& ds : t.data_sources)
      AGENTR1_CHECK(claimed.insert(ds).second,
                    "data_source '" << ds << "' is listed by two teachers (" << key
                                    << ".data_sources and another); each data_source routes to one teacher");
  }
  return out;
}

void DistillSection::resolve() {
  options.resolve("algorithm.distill.");
  if (enabled()) resolved_teachers();
}

TeacherRouting::TeacherRouting(const std::map<std::string, TeacherSpec>& teachers) {
  for (const auto& [name, t] : teachers) {
    const size_t i = names_.size();
    names_.push_back(name);
    if (t.data_sources.empty()) catch_all_ = i;
    std::string list;
    for (const auto& ds : t.data_sources) {
      by_source_[ds] = i;
      list += (list.empty() ? "" : ", ") + ds;
    }
    lists_ += (lists_.empty() ? "" : "; ") + name + ": " + (list.empty() ? "every other data_source" : list);
  }
}

size_t TeacherRouting::teacher_of(const std::string& data_source) const {
  const auto it = by_source_.find(data_source);
  if (it != by_source_.end()) return it->second;
  if (catch_all_) return *catch_all_;
  throw Error("no distillation teacher takes data_source '" + data_source + "' (" + lists_ +
              "); HINT: list it in a teacher's data_sources, or leave one teacher's data_sources empty to take "
              "the rest");
}

TeacherSet::TeacherSet(const DistillSection& cfg, const text::Tokenizer& student, model::Transformer policy,
                       at::ScalarType dtype, at::Device device, int64_t attention_block)
    : options_(cfg.options), specs_(cfg.resolved_teachers()), routing_(specs_), policy_(std::move(policy)) {
  options_.resolve("algorithm.distill.");
  // The teacher's tokenizer (in dir) must read ids as the student's does.
  auto check_tokenizer = [&student](const std::string& what, const std::string& dir) {
    const text::Tokenizer tok = with_context(what + ": loading its tokenizer", [&] { return text::Tokenizer::load(dir); });
    if (const std::optional<std::string> diff = text::vocabulary_difference(student, tok))
      throw Error(what + " does not share the student's tokenizer: " + *diff +
                  " (student vs teacher); the teacher must score the student's token ids as the same tokens. "
                  "HINT: a teacher of the same model family and tokenizer");
    // Which token a config calls eos (a base and an instruct checkpoint differ) changes no
    // id's meaning: worth a line, not a refusal.
    if (student.eos_token() != tok.eos_token())
      AGENTR1_LOG(WARN) << what << ": its eos_token (" << tok.eos_token().value_or("none") << ") is not the student's ("
                        << student.eos_token().value_or("none") << "); the ids mean the same tokens, so it is used";
  };
  for (const std::string& name : routing_.names()) {
    const TeacherSpec& t = specs_.at(name);
    remotes_.emplace_back();
    if (t.remote()) {
      const std::string what = "distillation teacher '" + name + "' (" + t.url + ", tokenizer " + t.path + ")";
      AGENTR1_CHECK(fs::is_directory(t.path), what << ": no such tokenizer directory; HINT: path of a remote teacher is "
                                                      "the directory of its tokenizer.json and tokenizer_config.json");
      check_tokenizer(what, t.path);
      rollout::RemoteScorerOptions ro;
      ro.url = t.url;
      ro.model = t.model;
      ro.timeout_s = t.timeout_s;
      ro.retries = t.retries;
      remotes_.back() = with_context(what, [&] {
        return std::make_unique<rollout::RemoteScorer>(ro, "algorithm.distill.teachers." + name + ".");
      });
      models_.emplace_back(nullptr);
      AGENTR1_LOG(INFO) << what << ": remote, model '" << remotes_.back()->model_name()
                        << "', tokenizer matches the student's";
      continue;
    }
    const std::string what = "distillation teacher '" + name + "' (" + t.path + ")";
    if (t.path == kBaseTeacher) {
      AGENTR1_CHECK(policy_ && policy_->lora() != nullptr,
                    what << ": 'base' is the policy's LoRA base, but the policy has no adapters (actor.lora.rank is 0); "
                            "HINT: set actor.lora.rank, or give the teacher a model directory");
      models_.push_back(policy_);
      AGENTR1_LOG(INFO) << what << ": the policy's base, adapters off while it scores";
      continue;
    }
    AGENTR1_CHECK(fs::is_directory(t.path), what << ": no such directory; HINT: a model directory in HF layout "
                                                    "(config.json, model.safetensors, tokenizer.json)");
    check_tokenizer(what, t.path);
    model::Transformer m =
        with_context(what + ": loading the model", [&] { return model::load_pretrained(t.path, dtype, device); });
    AGENTR1_CHECK(m->config().vocab_size >= student.vocab_size(),
                  what << ": vocab_size " << m->config().vocab_size << " < the tokenizer's " << student.vocab_size()
                       << "; HINT: the teacher's config.json and weights must cover its tokenizer");
    for (auto& p : m->parameters()) p.requires_grad_(false);
    m->eval();
    m->set_attention_block(attention_block);
    AGENTR1_LOG(INFO) << what << ": " << m->config().num_parameters() << " parameters, tokenizer matches the student's";
    models_.push_back(std::move(m));
  }
}

TeacherSet::~TeacherSet() = default;

Metrics TeacherSet::score(std::vector<PackedRow>& rows, const ScoringOptions& so) {
  const auto t0 = std::chrono::steady_clock::now();
  Metrics m;
  const int64_t topk = options_.kind == algo::DistillLoss::kTopkFkl ? options_.topk : 0;
  std::vector<std::vector<size_t>> of(models_.size());
  for (size_t i = 0; i < rows.size(); ++i) of[routing_.teacher_of(rows[i].data_source)].push_back(i);
  for (size_t t = 0; t < models_.size(); ++t) {
    m["distill/rows/" + routing_.names()[t]] = static_cast<double>(of[t].size());
    if (of[t].empty()) continue;
    if (remotes_[t]) {
      score_remote(t, of[t], rows, so.temperature, topk);
      continue;
    }
    double tokens = 0;
    for (size_t i : of[t]) tokens += static_cast<double>(rows[i].tokens.size());
    m["perf/teacher_gflop"] += 2.0 * static_cast<double>(models_[t]->config().num_parameters()) * tokens / 1e9;
    // This teacher's rows, scored together (their shared prefixes and micro-batches).
    std::vector<PackedRow> mine;
    mine.reserve(of[t].size());
    for (size_t i : of[t]) mine.push_back(rows[i]);
    {
      std::optional<model::BaseOnly> base;
      if (models_[t].get() == policy_.get()) base.emplace();  // "base": adapters off on this thread
      // Top-k among the ids the student's head has (a teacher's head may have more
      // padding rows: their mass falls into topk_fkl's tail bucket).
      score_teacher(models_[t], mine, so, topk, policy_ ? policy_->config().vocab_size : 0);
    }
    for (size_t k = 0; k < of[t].size(); ++k) {
      PackedRow& r = rows[of[t][k]];
      r.teacher_logprob = std::move(mine[k].teacher_logprob);
      r.teacher_topk_ids = std::move(mine[k].teacher_topk_ids);
      r.teacher_topk_logprob = std::move(mine[k].teacher_topk_logprob);
    }
  }
  m["timing/teacher"] = seconds_since(t0);
  return m;
}

void TeacherSet::score_remote(size_t t, const std::vector<size_t>& mine, std::vector<PackedRow>& rows,
                              double temperature, int64_t topk) {
  const rollout::RemoteScorer& scorer = *remotes_[t];
  std::vector<TokenIds> seqs;
  seqs.reserve(mine.size());
  for (size_t i : mine) seqs.emplace_back(rows[i].tokens.begin(), rows[i].tokens.end());
  const std::vector<rollout::PromptScores> got = with_context(
      "distillation teacher '" + routing_.names()[t] + "'",
      [&] { return scorer.score(seqs, temperature, static_cast<int>(topk)); });
  const size_t k = static_cast<size_t>(topk);
  for (size_t j = 0; j < mine.size(); ++j) {
    PackedRow& r = rows[mine[j]];
    const rollout::PromptScores& s = got[j];
    AGENTR1_CHECK(s.logprob.size() == r.tokens.size() && s.topk_ids.size() == r.tokens.size() * k,
                  "distillation teacher '" << routing_.names()[t] << "' (" << scorer.url() << "): "
                                           << s.logprob.size() << " log-probs for a row of " << r.tokens.size()
                                           << " tokens");
    if (policy_)
      for (int32_t id : s.topk_ids)
        AGENTR1_CHECK(id >= 0 && id < policy_->config().vocab_size,
                      "distillation teacher '" << routing_.names()[t] << "' (" << scorer.url() << ") returned id " << id
                          << " among its top " << k << ", beyond the student's vocabulary of "
                          << policy_->config().vocab_size
                          << "; HINT: a teacher whose head matches the student's, or algorithm.distill.loss=k1_pg");
    r.teacher_logprob = s.logprob;
    r.teacher_topk_ids = s.topk_ids;
    r.teacher_topk_logprob = s.topk_logprob;
  }
}

Metrics distill_metrics(const std::vector<PackedRow>& rows, const TeacherRouting& routing,
                        const algo::DistillOptions& o) {
  const size_t nt = routing.names().size();
  std::vector<double> kl_sum(nt, 0), n_tok(nt, 0);
  double t_sum = 0, s_sum = 0, clamped = 0, n = 0;
  const double lo = o.log_prob_min_clamp;
  for (size_t r = 0; r < rows.size(); ++r) {
    const PackedRow& row = rows[r];
    AGENTR1_CHECK(row.teacher_logprob.size() == row.tokens.size() && row.old_logprob.size() == row.tokens.size(),
                  "distillation: row " << r << " of trajectory " << row.trajectory
                                       << " lacks teacher or old log-probs");
    const size_t t = routing.teacher_of(row.data_source);
    for (size_t i = 0; i < row.tokens.size(); ++i) {
      if (!row.action[i]) continue;
      const double s = row.old_logprob[i], tl = row.teacher_logprob[i];
      kl_sum[t] += s - tl;
      n_tok[t] += 1;
      t_sum += tl;
      s_sum += s;
      const double k1 = (lo < 0 ? std::max(s, lo) : s) - (lo < 0 ? std::max(tl, lo) : tl);
      if (o.loss_max_clamp > 0 && std::abs(k1) > o.loss_max_clamp) clamped += 1;
      n += 1;
    }
  }
  Metrics m;
  double kl_all = 0;
  for (size_t t = 0; t < nt; ++t) {
    kl_all += kl_sum[t];
    if (n_tok[t] > 0) m["distill/reverse_kl/" + routing.names()[t]] = kl_sum[t] / n_tok[t];
  }
  const double d = std::max(1.0, n);
  m["distill/reverse_kl"] = kl_all / d;
  m["distill/teacher_logprob"] = t_sum / d;
  m["distill/student_logprob"] = s_sum / d;
  m["distill/clamp_frac"] = clamped / d;
  return m;
}

void add_distill_advantages(std::vector<PackedRow>& rows, const algo::DistillOptions& o) {
  for (size_t r = 0; r < rows.size(); ++r) {
    PackedRow& row = rows[r];
    const int64_t n = static_cast<int64_t>(row.tokens.size());
    AGENTR1_CHECK(static_cast<int64_t>(row.teacher_logprob.size()) == n &&
                      static_cast<int64_t>(row.old_logprob.size()) == n &&
                      static_cast<int64_t>(row.advantage.size()) == n,
                  "distillation: row " << r << " of trajectory " << row.trajectory
                                       << " lacks teacher log-probs, old log-probs or advantages");
    const at::Tensor t = at::from_blob(row.teacher_logprob.data(), {n}, at::kFloat);
    const at::Tensor s = at::from_blob(row.old_logprob.data(), {n}, at::kFloat);
    const at::Tensor reward = algo::k1_distill_reward(t, s, o).reward.contiguous();
    const float* rw = reward.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      float& a = row.advantage[static_cast<size_t>(i)];
      if (!row.action[static_cast<size_t>(i)]) {
        a = 0.0f;
        continue;
      }
      a = (o.use_task_rewards ? a : 0.0f) + static_cast<float>(o.coef) * rw[i];
    }
  }
}

}  // namespace agentr1::train
