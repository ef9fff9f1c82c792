// agentr1/tasks/bm25.h — Okapi BM25 ranking over an in-memory corpus, the search
// engine of the hotpotqa (passage retrieval) and webshop (product search) families.
//
//   Bm25Index index({"Paris is the capital of France.", "Berlin is in Germany."});
//   std::vector<Bm25Hit> hits = index.search("capital of france", /*k=*/3);
//   // hits[0].doc == 0, hits[0].score > 0; documents sharing no term are not returned
//
// Scoring, as Lucene's BM25Similarity (the engine behind Pyserini, which Search-R1 and
// WebShop use), with Pyserini's defaults k1 = 0.9, b = 0.4:
//   score(q, d) = sum over query terms t (repeats count again) of
//                 idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
//   idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
// where |d| and avgdl count analysed terms. Lucene 8+ leaves out the constant (k1 + 1),
// which does not change the ranking; we keep it (the textbook form).
// Analysis (bm25_terms): lower-case ASCII, split on anything not [a-z0-9], drop Lucene's
// English stop words (a an and are as at be but by for if in into is it no not of on or
// such that the their then there these they this to was will with). Deviation from
// Pyserini: no Porter stemming ("films" and "film" are different terms), and Lucene
// stores document lengths lossily (one byte); here they are exact.
// Ties in score are broken by document id (lower first), so results are deterministic.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace agentr1::tasks {

struct Bm25Options {
  double k1 = 0.9;   // term-frequency saturation; >= 0
  double b = 0.4;    // length normalisation in [0, 1]
  // Throws Error naming the field, the rule and the value.
  void validate() const;
};

// Analysed terms of `text` (see the top of this file), in order, stop words removed.
std::vector<std::string> bm25_terms(const std::string& text);

struct Bm25Hit {
  size_t doc = 0;     // index into the corpus the index was built from
  double score = 0;   // > 0
};

// Immutable after construction; search() is thread-safe.
class Bm25Index {
 public:
  // Indexes docs[i] as document i. Throws Error for invalid options.
  explicit Bm25Index(const std::vector<std::string>& docs, Bm25Options opts = {});

  // The k best documents with score > 0, best first (ties: lower doc id first). k = 0
  // or a query without indexable terms gives no hits.
  std::vector<Bm25Hit> search(const std::string& query, size_t k) const;
  // The BM25 score of one document (0 when it shares no term with the query). Throws
  // Error if doc >= size().
  double score(const std::string& query, size_t doc) const;

  size_t size() const { return doc_len_.size(); }
  double avgdl() const { return avgdl_; }
  // Documents containing `term` (an analysed term).
  size_t df(const std::string& term) const;

 private:
  struct Posting {
    size_t doc;
    int tf;
  };
  double idf(size_t df) const;
  double term_score(double idf, int tf, size_t doc) const;

  Bm25Options opts_;
  std::unordered_map<std::string, std::vector<Posting>> postings_;  // doc ids ascending
  std::vector<size_t> doc_len_;
  double avgdl_ = 0;
};

}  // namespace agentr1::tasks
