#include "agentr1/tasks/bm25.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "agentr1/core/error.h"

namespace agentr1::tasks {

namespace {

bool is_stop_word(const std::string& t) {
  static const std::unordered_set<std::string> kStop = {
      "a",    "an",   "and",  "are",   "as",   "at",    "be",    "but",  "by",
      "for",  "if",   "in",   "into",  "is",   "it",    "no",    "not",  "of",
      "on",   "or",   "such", "that",  "the",  "their", "then",  "there", "these",
      "they", "this", "to",   "was",   "will", "with"};
  return kStop.count(t) != 0;
}

}  // namespace

void Bm25Options::validate() const {
  AGENTR1_CHECK(std::isfinite(k1) && k1 >= 0, "bm25 k1 must be a finite number >= 0, got " << k1);
  AGENTR1_CHECK(std::isfinite(b) && b >= 0 && b <= 1, "bm25 b must be in [0, 1], got " << b);
}

std::vector<std::string> bm25_terms(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty() && !is_stop_word(cur)) out.push_back(cur);
    cur.clear();
  };
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 'A' && c <= 'Z') {
      cur += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      cur += static_cast<char>(c);
    } else {
      flush();
    }
  }
  flush();
  return out;
}

Bm25Index::Bm25Index(const std::vector<std::string>& docs, Bm25Options opts) : opts_(opts) {
  opts_.validate();
  doc_len_.reserve(docs.size());
  double total = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    const std::vector<std::string> terms = bm25_terms(docs[d]);
    doc_len_.push_back(terms.size());
    total += static_cast<double>(terms.size());
    std::unordered_map<std::string, int> tf;
    for (const auto& t : terms) ++tf[t];
    for (auto& [term, n] : tf) postings_[term].push_back({d, n});
  }
  avgdl_ = docs.empty() ? 0.0 : total / static_cast<double>(docs.size());
}

double Bm25Index::idf(size_t df) const {
  const double n = static_cast<double>(size());
  const double f = static_cast<double>(df);
  return std::log(1.0 + (n - f + 0.5) / (f + 0.5));
}

double Bm25Index::term_score(double w, int tf, size_t doc) const {
  const double len_norm = avgdl_ > 0 ? static_cast<double>(doc_len_[doc]) / avgdl_ : 0.0;
  const double f = static_cast<double>(tf);
  return w * f * (opts_.k1 + 1.0) / (f + opts_.k1 * (1.0 - opts_.b + opts_.b * len_norm));
}

size_t Bm25Index::df(const std::string& term) const {
  auto it = postings_.find(term);
  return it == postings_.end() ? 0 : it->second.size();
}

std::vector<Bm25Hit> Bm25Index::search(const std::string& query, size_t k) const {
  if (k == 0 || size() == 0) return {};
  std::unordered_map<size_t, double> acc;
  for (const auto& term : bm25_terms(query)) {
    auto it = postings_.find(term);
    if (it == postings_.end()) continue;
    const double w = idf(it->second.size());
    for (const Posting& p : it->second) acc[p.doc] += term_score(w, p.tf, p.doc);
  }
  std::vector<Bm25Hit> hits;
  hits.reserve(acc.size());
  for (const auto& [doc, s] : acc)
    if (s > 0) hits.push_back({doc, s});
  auto better = [](const Bm25Hit& a, const Bm25Hit& b) {
    return a.score != b.score ? a.score > b.score : a.doc < b.doc;
  };
  if (hits.size() > k) {
    std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k), hits.end(), better);
    hits.resize(k);
  } else {
    std::sort(hits.begin(), hits.end(), better);
  }
  return hits;
}

double Bm25Index::score(const std::string& query, size_t doc) const {
  AGENTR1_CHECK(doc < size(), "bm25 score: document " << doc << " out of range (index has " << size()
                                                      << " documents)");
  double s = 0;
  for (const auto& term : bm25_terms(query)) {
    auto it = postings_.find(term);
    if (it == postings_.end()) continue;
    const auto& plist = it->second;
    auto p = std::lower_bound(plist.begin(), plist.end(), doc,
                              [](const Posting& x, size_t d) { return x.doc < d; });
    if (p != plist.end() && p->doc == doc) s += term_score(idf(plist.size()), p->tf, doc);
  }
  return s;
}

}  // namespace agentr1::tasks
