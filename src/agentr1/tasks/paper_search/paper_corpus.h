// agentr1/tasks/paper_search/paper_corpus.h — a scholarly corpus: papers with titles,
// abstracts, authors, venues, years and a citation graph, searchable with BM25 and
// expandable along citations (the "search" and "expand" tools of the paper_search family).
//
//   PaperCorpus corpus(read_paper_corpus_jsonl("papers.jsonl"));
//   std::vector<size_t> hits = corpus.search("graph neural networks molecule", /*k=*/10);
//   std::optional<size_t> i = corpus.find("P0042");
//   std::vector<size_t> around = corpus.expand(*i, /*limit=*/30);  // citing papers, then references
//   std::shared_ptr<const PaperCorpus> c = load_paper_corpus_file("papers.jsonl");  // cached per path
//
// JSONL corpus format, one paper per line (PaSa's paper database reduced to what the tools
// show; extra keys are ignored):
//   {"id": "2106.01345", "title": "...", "abstract": "...", "authors": ["A. B", ...],
//    "venue": "NeurIPS", "year": 2021, "references": ["1706.03762", ...]}
// id, title required (non-empty strings); abstract, venue default ""; authors []; year 0;
// references: ids of papers this one cites; references to ids not in the corpus (and
// self-citations) are dropped (counted, one warning per file), as a real crawl cites
// papers outside it.
//
// Search indexes "<title> <abstract>" (tasks/bm25.h: Lucene BM25, no stemming); ties by
// corpus order. expand(i) lists the papers citing i (newest first, then corpus order),
// then those i cites (in its reference order), without duplicates, at most `limit`.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/tasks/bm25.h"

namespace agentr1::tasks {

struct Paper {
  std::string id;                       // unique in its corpus (arXiv id, "P0042", ...)
  std::string title;
  std::string abstract;
  std::vector<std::string> authors;
  std::string venue;
  int year = 0;                         // 0 = unknown
  std::vector<std::string> references;  // ids of the papers it cites

  json to_json() const;
  // Throws Error naming the key and the rule (what = where the object came from).
  static Paper from_json(const json& j, const std::string& what);
};

// Immutable after construction; every method is thread-safe.
class PaperCorpus {
 public:
  // Throws Error for an empty corpus, an empty id or title, or a duplicate id (naming it).
  // References to unknown ids are dropped (dropped_references() counts them).
  explicit PaperCorpus(std::vector<Paper> papers);

  size_t size() const { return papers_.size(); }
  const Paper& paper(size_t i) const { return papers_.at(i); }
  const std::vector<Paper>& papers() const { return papers_; }
  std::optional<size_t> find(const std::string& id) const;
  // The k best BM25 matches of query over title + abstract, best first.
  std::vector<size_t> search(const std::string& query, size_t k) const;
  // Citing papers (newest first, then corpus order), then references, at most limit.
  std::vector<size_t> expand(size_t i, size_t limit) const;
  const std::vector<size_t>& citations(size_t i) const { return cited_by_.at(i); }
  const std::vector<size_t>& references(size_t i) const { return refs_.at(i); }
  size_t dropped_references() const { return dropped_refs_; }

 private:
  std::vector<Paper> papers_;
  std::unordered_map<std::string, size_t> by_id_;
  std::vector<std::vector<size_t>> refs_;      // resolved references, in the paper's order
  std::vector<std::vector<size_t>> cited_by_;  // citing papers, newest first
  size_t dropped_refs_ = 0;
  std::unique_ptr<Bm25Index> index_;
};

// The papers of a JSONL corpus file (format above). Throws Error naming the path (and
// the line for bad JSON, the paper's number for a malformed paper); blank lines are
// skipped.
std::vector<Paper> read_paper_corpus_jsonl(const std::string& path);
// Writes papers as JSONL (the format above). Throws Error when the file cannot be written.
void write_paper_corpus_jsonl(const std::string& path, const std::vector<Paper>& papers);
// read_paper_corpus_jsonl + index, once per absolute path per process (thread-safe cache).
std::shared_ptr<const PaperCorpus> load_paper_corpus_file(const std::string& path);

// "<title> (<venue> <year>)" as the pool shows a paper (venue and year left out when unknown).
std::string paper_display_title(const Paper& p);
// The first max_words words of text (whitespace-separated), with " ..." when cut; 0 = all.
std::string cut_words(const std::string& text, int max_words);

}  // namespace agentr1::tasks
