// agentr1/tasks/hotpotqa/hotpotqa_search.h — passage retrieval for the hotpotqa family: a BM25
// corpus and the tools "search" (top-k passages for a query) and "open" (one passage in
// full, by title).
//
//   // tool kwargs, as samples carry them in env_kwargs.tool_kwargs.{search,open}:
//   //   {"docs": [["Paris", "Paris is the capital of France."], ...], "top_k": 3}
//   //   {"corpus_file": "/data/hotpot_train_v1.1.json", "top_k": 3}
//   auto search = env::make_tool("search", kwargs);       // after register_hotpotqa_family()
//   search->execute({{"query", "capital of France"}}).text
//   // "Doc 1(Title: Paris) Paris is the capital of France.\nDoc 2(Title: ...) ..."
//   auto open = env::make_tool("open", kwargs);
//   open->execute({{"title", "Paris"}}).text              // "Title: Paris\nParis is the ..."
//
// Passage format as Search-R1 (search_r1/llm_agent/generation.py _passages2string):
// "Doc <i>(Title: <title>) <text>", i from 1, one passage per line (Search-R1 also ends
// the last line with "\n"; we do not). Passages are indexed as "<title> <text>" (Search-R1's
// corpus "contents" is the title line then the text) with tasks::Bm25Index.
// Tool kwargs (CorpusToolOptions; unknown keys -> Error listing the valid ones):
//   docs (array of [title, text])   the corpus inline (per sample; indexed per tool)
//   corpus_file (string)            or a file, loaded and indexed once per process (cached
//                                   by path, shared): a JSON array of HotpotQA rows (the
//                                   global corpus of their contexts, hotpotqa_data.h), or
//                                   JSONL with {"title", "text"} or Search-R1/FlashRAG
//                                   {"contents": "<title>\n<text>"} per line
//   top_k (int >= 1, default 3)     passages per search
//   max_chars (int >= 0, default 0) search shows at most this many characters of each
//                                   passage, then "..." (0 = whole passage; open always
//                                   shows it whole)
// Exactly one of docs / corpus_file. Tool errors (no or empty query, unknown title) throw
// Error; ToolEnv shows the message to the model. A search without hits returns
// "No results found for '<query>'." (not an error).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/env/tool.h"
#include "agentr1/tasks/bm25.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_data.h"

namespace agentr1::tasks {

// Immutable; search() and find_title() are thread-safe.
class PassageCorpus {
 public:
  explicit PassageCorpus(std::vector<Passage> passages);
  size_t size() const { return passages_.size(); }
  const Passage& passage(size_t i) const { return passages_.at(i); }
  // Passage ids of the k best BM25 matches of query (fewer when fewer share a term).
  std::vector<size_t> search(const std::string& query, size_t k) const;
  // The passage titled `title`: exact match first, else ASCII case-insensitive and
  // trimmed (first such passage).
  std::optional<size_t> find_title(const std::string& title) const;

 private:
  std::vector<Passage> passages_;
  Bm25Index index_;
  std::unordered_map<std::string, size_t> exact_;
  std::unordered_map<std::string, size_t> folded_;
};

// docs: [[title, text], ...]. Throws Error naming the entry when malformed.
std::vector<Passage> passages_from_json(const json& docs);
json passages_to_json(const std::vector<Passage>& passages);

// The passages of a corpus file (format above). Throws Error naming the path and line.
std::vector<Passage> read_corpus_file(const std::string& path);
// read_corpus_file + index, once per path per process (thread-safe cache).
std::shared_ptr<const PassageCorpus> load_corpus_file(const std::string& path);

// The search result text for passages `ids` of corpus (format above).
std::string format_passages(const PassageCorpus& corpus, const std::vector<size_t>& ids, size_t max_chars = 0);

struct CorpusToolOptions {
  json docs;                  // the corpus inline, [[title, text], ...] (null = none)
  std::string corpus_file;    // or a corpus file, format above ("" = none)
  int top_k = 3;              // passages per search (1..1000000)
  int max_chars = 0;          // search's cut per passage (0 = none; 0..1000000)
  std::shared_ptr<const PassageCorpus> corpus;  // what the tools search / open: built from
                                                // docs or corpus_file by from_json (not a key)

  // Names every key once (core/config.h).
  template <class V>
  void visit(V& v) {
    v.field("docs", docs, "the corpus inline: [[title, text], ...]");
    v.field("corpus_file", corpus_file, "or a corpus file (HotpotQA JSON array, or JSONL passages)");
    v.field("top_k", top_k, "passages per search (>= 1)");
    v.field("max_chars", max_chars, "search shows at most this many characters per passage; 0 = all");
  }
  // Exactly one of docs / corpus_file; ranges. Throws Error naming the key and the rule.
  void validate() const;
  // From tool kwargs (see the top of this file), bound with bind_config at
  // "env_kwargs.tool_kwargs.<tool>"; then loads the corpus. Null kwargs are {} (no corpus:
  // an Error). Throws one Error listing unknown keys, wrong types and invalid values.
  static CorpusToolOptions from_json(const json& kwargs, const std::string& tool);
};

class SearchTool : public env::Tool {
 public:
  explicit SearchTool(CorpusToolOptions opts) : opts_(std::move(opts)) {}
  std::string name() const override { return "search"; }
  std::string description() const override;
  json parameters() const override;
  // args {"query": non-empty string}; info {"query", "titles": [...]}.
  env::ToolResult execute(const json& args) override;

 private:
  CorpusToolOptions opts_;
};

class OpenTool : public env::Tool {
 public:
  explicit OpenTool(CorpusToolOptions opts) : opts_(std::move(opts)) {}
  std::string name() const override { return "open"; }
  std::string description() const override;
  json parameters() const override;
  // args {"title": string}; returns "Title: <title>\n<text>".
  env::ToolResult execute(const json& args) override;

 private:
  CorpusToolOptions opts_;
};

}  // namespace agentr1::tasks
