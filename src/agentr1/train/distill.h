// agentr1/train/distill.h — online policy distillation's teachers: the config section,
// the routing of rows to teachers, and the teacher scoring phase.
//
//   algorithm:
//     distill:
//       teacher: runs/teacher/checkpoints/step_000150   # one teacher for every row, or:
//       teachers:                                       # several, routed by data_source
//         math: {path: /models/math, data_sources: [arith, gsm8k]}
//         rest: {path: /models/general}                 # no list: the rows no one else claims
//         big:                                          # a remote teacher: an OpenAI-compatible
//           url: http://10.0.0.7:8000                   # server with vLLM's prompt_logprobs
//           path: /models/big                           # (agentr1 serve, vLLM); path: where its
//           data_sources: [hotpotqa]                    # tokenizer lives (required, checked)
//           model: big                                  # optional: the served model's name
//       loss: k1_pg          # or topk_fkl (topk: 32)
//       coef: 1.0
//       use_task_rewards: false
//
// On the command line a teacher of the map is a new key, so it takes a leading +:
//   agentr1 train +algorithm.distill.teachers.math.path=/m '+algorithm.distill.teachers.math.data_sources=[arith]'
//
//   TeacherSet teachers(cfg.algorithm.distill, student_tokenizer, policy, dtype, device, block);
//   teachers.score(rows, scoring_options);   // rows' teacher_logprob (+ top-k columns)
//   add_distill_advantages(rows, opts);      // k1_pg: the reward into the advantages (after the estimator)
//
// Scoring is a phase of the learner like the reference's: batched, once per RL step, no
// grad, at the rollout temperature (the distribution the student sampled from, so a
// teacher equal to the student judges every token at exactly its log-prob and the reward
// is 0). A teacher is a separate frozen model (never a second copy of the student), or
// with LoRA the policy's own base (path "base": adapters off while it scores), or a
// remote one (url: an OpenAI-compatible server scores its rows, rollout/remote_scorer.h,
// at the same temperature; the memory estimate leaves it out). Every teacher must read
// ids as the student's tokenizer does: one that maps an id to another token, or marks
// other ids special, is refused at start, the first difference named (a remote teacher's tokenizer is read
// from its path). A remote teacher's log-probs equal a local one's only where the server
// applies the temperature as agentr1 serve does (vLLM reports temperature-1 log-probs),
// and topk_fkl needs the server to return topk ids (agentr1 serve and vLLM: topk <= 20
// by default).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/algo/distill.h"
#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/batch.h"
#include "agentr1/train/learner/metrics.h"
#include "agentr1/train/learner/scoring.h"

namespace agentr1::text {
class Tokenizer;
}
namespace agentr1::rollout {
class RemoteScorer;
}

namespace agentr1::train {

// The path of a teacher that is the policy's own LoRA base.
inline constexpr const char* kBaseTeacher = "base";

struct TeacherSpec {
  std::string path;                       // HF model directory (config.json, safetensors,
                                          // tokenizer.json), or "base": the policy's LoRA base;
                                          // with url: the directory of its tokenizer (required)
  std::vector<std::string> data_sources;  // rows of these data sources go to this teacher;
                                          // empty = every row no other teacher lists
  std::string url;                        // a remote teacher: the server's base URL
                                          // (scheme://host:port); "" = a local model at path
  std::string model;                      // the remote server's model name; "" = the first it lists
  double timeout_s = 300;                 // remote: seconds one request may wait for its answer
  int retries = 3;                        // remote: retries after a connection failure, timeout or 5xx
  bool remote() const { return !url.empty(); }
  template <class V>
  void visit(V& v) {
    v.field("path", path, "teacher model directory (HF layout), or 'base': the policy's LoRA base; "
                          "with url: the teacher's tokenizer directory");
    v.field("data_sources", data_sources, "rows of these data_source values; empty = every row no other teacher lists");
    v.field("url", url, "remote teacher: OpenAI-compatible server (agentr1 serve, vLLM) scoring with prompt_logprobs");
    v.field("model", model, "remote teacher: the server's model name; empty = the first of GET /v1/models");
    v.field("timeout_s", timeout_s, "remote teacher: seconds one HTTP request may wait for its answer");
    v.field("retries", retries, "remote teacher: retries after a connection failure, timeout or 5xx (0..10)");
  }
};

struct DistillSection {
  std::string teacher;                         // one teacher for every row (a path, or "base");
                                               // shorthand for teachers: {default: {path: ...}}
  std::map<std::string, TeacherSpec> teachers; // several teachers by name, routed by data_source
  algo::DistillOptions options;                // loss, topk, coef, use_task_rewards, clamps
  bool enabled() const { return !teacher.empty() || !teachers.empty(); }
  // The teachers by name ("default" for `teacher`), checked: a path or url each (a url
  // needs a path too, for the tokenizer check; not "base"), at most one catch-all, no
  // data_source listed twice. Throws Error naming the key.
  std::map<std::string, TeacherSpec> resolved_teachers() const;
  // Parses options.loss and checks the section (when enabled). Throws Error naming the key.
  void resolve();
  template <class V>
  void visit(V& v) {
    v.field("teacher", teacher, "distill from this teacher (model directory, or 'base' = the LoRA base); empty = off");
    v.field("teachers", teachers,
            "several teachers: name -> {path, data_sources, url?, model?}, rows routed by data_source");
    options.visit(v);
  }
};

// Which teacher judges a row: by its data_source.
class TeacherRouting {
 public:
  TeacherRouting() = default;
  explicit TeacherRouting(const std::map<std::string, TeacherSpec>& teachers);
  // The teacher's index into names(). Throws Error for a data_source no teacher takes,
  // naming it and the teachers' lists (HINT: a teacher without data_sources takes the rest).
  size_t teacher_of(const std::string& data_source) const;
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::map<std::string, size_t> by_source_;
  std::optional<size_t> catch_all_;
  std::string lists_;  // for messages
};

class TeacherSet {
 public:
  // Loads every local teacher in `dtype` on `device` with the policy's attention tiling,
  // and checks it against the student: its tokenizer (vocabulary_difference) and that its
  // vocab_size covers the tokenizer's. `policy` serves a "base" teacher (it must have
  // LoRA adapters). A remote teacher: its tokenizer (at path) is checked the same way and
  // its server asked GET /v1/models. Throws Error naming the teacher, its path or URL
  // and the difference.
  TeacherSet(const DistillSection& cfg, const text::Tokenizer& student, model::Transformer policy,
             at::ScalarType dtype, at::Device device, int64_t attention_block);
  ~TeacherSet();
  // Fills every row's teacher_logprob (and with loss topk_fkl the top-k columns) from the
  // teacher its data_source routes it to; a remote teacher's rows go to its server (every
  // token t >= 1 scored, shared prefixes included). Returns timing/teacher,
  // distill/rows/<name> and perf/teacher_gflop (2 x parameters x tokens per local teacher).
  // Throws Error naming a remote teacher's URL when its server fails.
  Metrics score(std::vector<PackedRow>& rows, const ScoringOptions& so);
  const TeacherRouting& routing() const { return routing_; }
  const algo::DistillOptions& options() const { return options_; }
  // Teachers per name, for the memory estimate: path or "base", url for remote ones.
  const std::map<std::string, TeacherSpec>& specs() const { return specs_; }

 private:
  algo::DistillOptions options_;
  std::map<std::string, TeacherSpec> specs_;
  TeacherRouting routing_;
  std::vector<model::Transformer> models_;  // by routing index; the policy itself for "base";
                                            // null for a remote teacher
  std::vector<std::unique_ptr<rollout::RemoteScorer>> remotes_;  // by routing index; null if local
  // Teacher t is remote: rows[mine] scored by its server.
  void score_remote(size_t t, const std::vector<size_t>& mine, std::vector<PackedRow>& rows, double temperature,
                    int64_t topk);
  model::Transformer policy_{nullptr};
};

// Per-token distillation statistics over the rows' action tokens, k1 = old - teacher
// log-prob (the reverse-KL estimate): distill/reverse_kl, distill/teacher_logprob,
// distill/student_logprob, distill/clamp_frac (tokens whose k1 term hit loss_max_clamp),
// and distill/reverse_kl/<teacher> per teacher. Rows need old_logprob and teacher_logprob.
Metrics distill_metrics(const std::vector<PackedRow>& rows, const TeacherRouting& routing,
                        const algo::DistillOptions& o);

// k1_pg: every action token's advantage becomes (use_task_rewards ? its advantage : 0)
// + coef * r_t, r_t = k1_distill_reward(teacher_logprob, old_logprob). Rows need both
// columns; Error naming the row otherwise.
void add_distill_advantages(std::vector<PackedRow>& rows, const algo::DistillOptions& o);

}  // namespace agentr1::train
