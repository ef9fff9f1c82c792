// agentr1/tasks/hotpotqa/hotpotqa_kb.h — seeded synthetic multi-hop QA over a small knowledge
// base of people, films, studios (companies), cities and countries, rendered as short
// encyclopedic passages, HotpotQA-style (the generated data of the "hotpotqa" family).
//
//   KbOptions o;                                  // levels 1..3, 4 distractors
//   o.split = DataSplit::kTest;
//   KbQuestion q = generate_kb_question(/*seed=*/7, /*index=*/0, o);
//   // q.question "Where was the director of The Silent Harbor born?"
//   // q.answer   "Korvadale", q.type "bridge", q.level 2
//   // q.hops     [{query "The Silent Harbor", title "The Silent Harbor", found "Mara Velden"},
//   //             {query "Mara Velden", title "Mara Velden", found "Korvadale"}]
//   // q.docs     the gold passages (one per hop) and the distractors, shuffled
//
// Levels (= the number of searches the expert needs):
//   1  lookup: one fact of one entity ("Who directed X?", "Where was X born?",
//      "When was X founded?", "In which country is X?")
//   2  bridge: two chained facts ("Where was the director of X born?", "Who founded the
//      studio that produced X?", "In which country was X born?", "When was the studio
//      that produced X founded?"), or comparison of two entities ("Which was founded
//      first, X or Y?", "Who was born first, X or Y?", "Which film came out first, X or
//      Y?", "Were X and Y born in the same city?" -> yes / no)
//   3  three chained facts ("In which country was the director of X born?", "Where was
//      the founder of the studio that produced X born?", "In which country is the
//      studio that produced X based?")
// Distractors are passages about namesakes of the question's entities: a person with
// the same surname, a film sharing a title word, a record label or publisher with the
// studio's stem ("Tomol Records" next to "Tomol Studios"), a city with the same stem;
// each has its own, different facts. Names are made up from syllables, so answers cannot
// be memorised across problems; every title in a corpus is unique.
// Guarantees, checked at generation (the problem is redrawn otherwise): for every hop,
// BM25 over the problem's passages ranks the hop's gold passage first for the hop's
// query (so the expert succeeds for any top_k >= 1), and the hop's `found` text occurs
// in that passage. Comparisons never tie.
// Determinism and split: a problem depends only on (seed, index, options); one Rng per
// attempt, seeded derive_seed(seed, {kKbSeedTag, index, attempt}). The split is decided
// by a hash of the question text (even: train, odd: test) and the generator redraws
// until the problem lands in the requested split, so train and test never share a
// question.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/tasks/data_split.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_data.h"

namespace agentr1::tasks {

struct KbOptions {
  int min_level = 1;                    // fewest hops (1..3)
  int max_level = 3;                    // most hops (min_level..3)
  int distractors = 4;                  // namesake passages per problem (0..32)
  DataSplit split = DataSplit::kTrain;  // which side of the partition
  int max_attempts = 1000;              // redraws before Error; never reached in practice

  // Throws Error naming the field, the rule and the value.
  void validate() const;
};

struct KbHop {
  std::string query;  // what the expert searches
  std::string title;  // the gold passage the search must return
  std::string found;  // what the passage tells (the next query, or a fact for the answer)
};

struct KbQuestion {
  std::string question;
  std::string answer;
  std::string type;              // "lookup" | "bridge" | "comparison" | "three_hop"
  int level = 0;                 // hops (1..3)
  std::string template_name;     // e.g. "director_birthplace"
  std::vector<KbHop> hops;       // in order
  std::vector<Passage> docs;     // the problem's corpus (gold + distractors), shuffled
  uint64_t seed = 0;
  int64_t index = 0;
};

// Which split a question text belongs to (the hash rule above).
DataSplit kb_question_split(const std::string& question);

// Deterministic in (seed, index, opts). Throws Error for invalid options or when no
// valid problem is found within opts.max_attempts draws.
KbQuestion generate_kb_question(uint64_t seed, int64_t index, const KbOptions& opts = {});

// {"type", "level", "template", "hops": [{query, title, found}], "supporting_facts":
// [[title, sentence], ...]} where sentence is the index of the first sentence of the
// hop's passage that contains hop.found (passages split after ". ").
json kb_question_info(const KbQuestion& q);

}  // namespace agentr1::tasks
