#include "agentr1/tasks/paper_search/paper_corpus.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_set>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/tasks/dataset.h"

namespace agentr1::tasks {

json Paper::to_json() const {
  return {{"id", id},       {"title", title}, {"abstract", abstract},    {"authors", authors},
          {"venue", venue}, {"year", year},   {"references", references}};
}

namespace {

std::string string_field(const json& j, const char* key, const std::string& what, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    AGENTR1_CHECK(!required, what << ": paper needs a string '" << key << "'; got keys "
                                  << j.dump().substr(0, 120));
    return "";
  }
  AGENTR1_CHECK(it->is_string(), what << ": paper key '" << key << "' must be a string, got "
                                      << it->dump().substr(0, 80));
  const std::string s = it->get<std::string>();
  AGENTR1_CHECK(!required || !s.empty(), what << ": paper key '" << key << "' must not be empty");
  return s;
}

std::vector<std::string> string_list(const json& j, const char* key, const std::string& what) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  AGENTR1_CHECK(it->is_array(), what << ": paper key '" << key << "' must be a list of strings, got "
                                     << it->dump().substr(0, 80));
  for (const json& x : *it) {
    AGENTR1_CHECK(x.is_string(), what << ": paper key '" << key << "' must hold strings, got " << x.dump().substr(0, 80));
    out.push_back(x.get<std::string>());
  }
  return out;
}

}  // namespace

Paper Paper::from_json(const json& j, const std::string& what) {
  AGENTR1_CHECK(j.is_object(), what << ": a paper must be a JSON object, got " << j.dump().substr(0, 80));
  Paper p;
  p.id = string_field(j, "id", what, true);
  p.title = string_field(j, "title", what, true);
  p.abstract = string_field(j, "abstract", what, false);
  p.venue = string_field(j, "venue", what, false);
  p.authors = string_list(j, "authors", what);
  p.references = string_list(j, "references", what);
  auto y = j.find("year");
  if (y != j.end() && !y->is_null()) {
    AGENTR1_CHECK(y->is_number_integer(), what << ": paper key 'year' must be an integer, got " << y->dump());
    p.year = y->get<int>();
  }
  return p;
}

PaperCorpus::PaperCorpus(std::vector<Paper> papers) : papers_(std::move(papers)) {
  AGENTR1_CHECK(!papers_.empty(), "paper corpus: no papers. HINT: a corpus file needs one JSON paper per line");
  std::vector<std::string> docs;
  docs.reserve(papers_.size());
  for (size_t i = 0; i < papers_.size(); ++i) {
    const Paper& p = papers_[i];
    AGENTR1_CHECK(!p.id.empty() && !p.title.empty(), "paper corpus: paper " << i << " needs a non-empty id and title");
    AGENTR1_CHECK(by_id_.emplace(p.id, i).second, "paper corpus: the id '" << p.id << "' appears twice (papers "
                                                                           << by_id_[p.id] << " and " << i
                                                                           << "); ids must be unique");
    docs.push_back(p.title + " " + p.abstract);
  }
  refs_.resize(papers_.size());
  cited_by_.resize(papers_.size());
  for (size_t i = 0; i < papers_.size(); ++i) {
    std::unordered_set<size_t> seen;
    for (const std::string& r : papers_[i].references) {
      auto it = by_id_.find(r);
      if (it == by_id_.end() || it->second == i) {
        ++dropped_refs_;
        continue;
      }
      if (!seen.insert(it->second).second) continue;
      refs_[i].push_back(it->second);
      cited_by_[it->second].push_back(i);
    }
  }
  for (auto& c : cited_by_) {
    std::stable_sort(c.begin(), c.end(), [&](size_t a, size_t b) { return papers_[a].year > papers_[b].year; });
  }
  index_ = std::make_unique<Bm25Index>(docs);
}

std::optional<size_t> PaperCorpus::find(const std::string& id) const {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

std::vector<size_t> PaperCorpus::search(const std::string& query, size_t k) const {
  std::vector<size_t> out;
  for (const Bm25Hit& h : index_->search(query, k)) out.push_back(h.doc);
  return out;
}

std::vector<size_t> PaperCorpus::expand(size_t i, size_t limit) const {
  AGENTR1_CHECK(i < papers_.size(), "PaperCorpus::expand: paper " << i << " out of range (" << papers_.size() << ")");
  std::vector<size_t> out;
  std::unordered_set<size_t> seen;
  for (const auto* list : {&cited_by_[i], &refs_[i]}) {
    for (size_t j : *list) {
      if (out.size() >= limit) return out;
      if (seen.insert(j).second) out.push_back(j);
    }
  }
  return out;
}

std::vector<Paper> read_paper_corpus_jsonl(const std::string& path) {
  AGENTR1_CHECK(std::filesystem::is_regular_file(path),
                "cannot read paper corpus file '" << path
                                                  << "'. HINT: check corpus_file in data.task_kwargs (a JSONL file, "
                                                     "one paper per line)");
  const std::vector<json> rows = read_jsonl_rows(path);  // "<path>:<line>: ..." for bad JSON
  std::vector<Paper> out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out.push_back(Paper::from_json(rows[i], path + ": paper " + std::to_string(i + 1)));
  return out;
}

void write_paper_corpus_jsonl(const std::string& path, const std::vector<Paper>& papers) {
  std::vector<json> rows;
  rows.reserve(papers.size());
  for (const Paper& p : papers) rows.push_back(p.to_json());
  write_jsonl_rows(path, rows);
}

std::shared_ptr<const PaperCorpus> load_paper_corpus_file(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const PaperCorpus>> cache;
  const std::string key = std::filesystem::absolute(path).lexically_normal().string();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto corpus = std::make_shared<const PaperCorpus>(read_paper_corpus_jsonl(path));
  if (corpus->dropped_references() > 0) {
    AGENTR1_LOG(WARN) << "paper corpus '" << path << "': dropped " << corpus->dropped_references()
                      << " references to papers not in the corpus (or to themselves)";
  }
  cache.emplace(key, corpus);
  return corpus;
}

std::string paper_display_title(const Paper& p) {
  std::string where = p.venue;
  if (p.year > 0) where += (where.empty() ? "" : " ") + std::to_string(p.year);
  return where.empty() ? p.title : p.title + " (" + where + ")";
}

std::string cut_words(const std::string& text, int max_words) {
  if (max_words <= 0) return text;
  std::istringstream in(text);
  std::string w, out;
  int n = 0;
  while (in >> w) {
    if (n == max_words) return out + " ...";
    if (n > 0) out += " ";
    out += w;
    ++n;
  }
  return out;
}

}  // namespace agentr1::tasks
