// agentr1/tasks/paper_search/paper_generator.h — a generated scholarly corpus and queries in
// AutoScholarQuery's style ("papers that propose X for Y evaluated on Z") with their gold
// sets and an expert search plan that reaches every gold paper.
//
//   PaperWorldOptions o;                                // o.seed = 1, sizes below
//   std::shared_ptr<const PaperWorld> w = generated_paper_world(o);   // cached per options
//   w->corpus.search("contrastive graph encoder molecular property prediction", 10);
//   std::vector<ScholarQuery> qs = w->queries(DataSplit::kTest);       // the held-out side
//
// The corpus (deterministic in the options): `methods` methods, each with a three-word
// name ("sparse kernel encoder") and an alias ("SKE"), introduced by an origin paper; the
// tasks (12, each with 3 benchmark datasets) form topical clusters. Each method is
// applied to `tasks_per_method` tasks; each (method, task, dataset) cell has 1-2
// application papers in 80% of cases. Application papers cite their method's origin and
// up to 2 earlier papers of their cluster. Some name the method in full ("named"), others
// only by its alias ("alias": BM25 cannot find them from the method's name; they cite the
// first named paper of their cell, so expanding it finds them). Distractors:
// near-duplicate titles (a second named paper of a cell is "<title> Revisited"; the same
// method and task on another dataset), surveys citing a whole cluster, the method on
// other tasks, and namesake authors (a small pool of names shared across clusters). Ids
// are distinct random "P" + 5 digits.
//
// Queries: level 1 asks for (method, task, dataset) whose papers are all named (one
// search finds them); level 2 for one whose gold includes alias papers (search, then
// expand the first named paper of the cell, which the alias papers cite); level 3 for two
// datasets at once ("evaluated on Z1 or Z2": parallel searches, then the expansions the
// cells need). Gold = every application paper matching. The plan (ScholarQuery::plan) is
// the expert's tool calls, step by step (at most max_calls_per_step per step); a query is
// kept only when running the plan over the corpus (search top k, expand limit) returns
// every gold paper and every expanded paper was returned by an earlier step, so the
// expert's full recall holds by construction and is tested. Train/test: by a hash of
// (method, task), so every query about a held-out pair (each dataset, both) is held out
// and no held-out gold paper is gold in training.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/data_split.h"
#include "agentr1/tasks/paper_search/paper_corpus.h"

namespace agentr1::tasks {

struct PaperWorldOptions {
  uint64_t seed = 1;         // the corpus and its queries
  int methods = 24;          // methods (each with an origin paper); 4..48
  int tasks_per_method = 4;  // tasks each method is applied to; 1..12
  int search_top_k = 10;     // what the expert's searches see (the search tool's k)
  int expand_limit = 30;     // what the expert's expansions see (the expand tool's limit)
  int max_calls_per_step = 5;  // the expert's calls per step at most (the env's limit)

  template <class V>
  void visit(V& v) {
    v.field("seed", seed, "seed of the generated corpus and its queries");
    v.field("methods", methods, "methods in the generated corpus (4..48)");
    v.field("tasks_per_method", tasks_per_method, "tasks each method is applied to (1..12)");
    v.field("search_top_k", search_top_k, "papers per search (1..50)");
    v.field("expand_limit", expand_limit, "papers per expand (1..100)");
    v.field("max_calls_per_step", max_calls_per_step, "tool calls per step (1..16)");
  }
  // Throws Error naming the key, the rule and the value.
  void validate() const;
  json to_json() const;
};

// One query with its gold set and the expert's plan.
struct ScholarQuery {
  std::string id;                  // "q<method>_<task>_<datasets>"
  std::string question;            // AutoScholarQuery style
  std::vector<std::string> gold;   // ids of the papers that answer it
  int level = 1;                   // 1..3 (see the top)
  json plan = json::array();       // [[{"name": "search"|"expand", "arguments": {...}}, ...], ...]
  DataSplit split = DataSplit::kTrain;
};

struct PaperWorld {
  PaperWorldOptions options;
  PaperCorpus corpus;
  std::vector<ScholarQuery> all_queries;  // every kept query, in generation order

  // The queries of one side of the partition (kAny: all).
  std::vector<ScholarQuery> queries(DataSplit split) const;
};

// Builds the world (corpus + queries). Deterministic in the options.
PaperWorld generate_paper_world(const PaperWorldOptions& options);
// generate_paper_world once per options per process (thread-safe cache).
std::shared_ptr<const PaperWorld> generated_paper_world(const PaperWorldOptions& options);

// Runs a plan over the corpus as the tools do (search top_k, expand limit) and returns
// the ids of every paper the calls returned, in first-seen order. Unknown ids in expand
// calls are skipped.
std::vector<std::string> run_plan(const PaperCorpus& corpus, const json& plan, int search_top_k, int expand_limit);

}  // namespace agentr1::tasks
