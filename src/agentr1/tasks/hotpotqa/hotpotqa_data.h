// agentr1/tasks/hotpotqa/hotpotqa_data.h — the HotpotQA JSON format (hotpot_train_v1.1.json,
// hotpot_dev_distractor_v1.json): rows, their passages, and the global corpus.
//
//   std::vector<HotpotExample> rows = load_hotpot_file("hotpot_dev_distractor_v1.json");
//   std::vector<Passage> own = context_passages(rows[0]);     // distractor setting: 10 passages
//   std::vector<Passage> all = global_passages(rows);          // every title once
//
// A file is one JSON array of rows
//   {"_id": "5a8b57f2...", "question": "...", "answer": "yes", "type": "comparison",
//    "level": "hard", "supporting_facts": [["Title", 0], ...],
//    "context": [["Title", [" sentence 0", " sentence 1", ...]], ...]}
// _id, question, answer and context are required; type, level and supporting_facts are
// optional ("" / none; the unlabelled test file has no answers and cannot be loaded).
// A passage's text is its sentences concatenated (HotpotQA's sentences after the first
// carry their own leading space; a space is inserted only where neither side has one).
// The global corpus keeps the first passage of each title (the same Wikipedia paragraph
// recurs across questions).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agentr1/core/json.h"

namespace agentr1::tasks {

struct Passage {
  std::string title;
  std::string text;
};

struct HotpotExample {
  std::string id;                                           // "_id"
  std::string question;
  std::string answer;
  std::string type;                                         // "bridge" | "comparison" | ""
  std::string level;                                        // "easy" | "medium" | "hard" | ""
  std::vector<std::pair<std::string, int>> supporting_facts;  // [title, sentence index]
  std::vector<std::pair<std::string, std::vector<std::string>>> context;  // [title, sentences]
};

// One row. Throws Error naming the field, the rule and the value (prefixed by `where`,
// e.g. "file.json row 3").
HotpotExample parse_hotpot_row(const json& row, const std::string& where);
// Every row of an array. Throws Error (with the row index) when `rows` is not an array
// or a row is malformed.
std::vector<HotpotExample> parse_hotpot_rows(const json& rows, const std::string& where);
// Reads and parses a file. Throws Error naming the path when it cannot be read, is not
// JSON, or holds a malformed row.
std::vector<HotpotExample> load_hotpot_file(const std::string& path);

// Sentences joined as described above.
std::string join_sentences(const std::vector<std::string>& sentences);
// The row's own context, in order (the distractor setting's corpus).
std::vector<Passage> context_passages(const HotpotExample& ex);
// The passages of every row, first occurrence of each title kept, in order.
std::vector<Passage> global_passages(const std::vector<HotpotExample>& rows);
// The titles of the supporting facts, each once, in order of first mention.
std::vector<std::string> supporting_titles(const HotpotExample& ex);

}  // namespace agentr1::tasks
