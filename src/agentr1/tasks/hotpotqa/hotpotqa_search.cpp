#include "agentr1/tasks/hotpotqa/hotpotqa_search.h"

#include <cctype>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "agentr1/core/error.h"

namespace agentr1::tasks {
namespace {

std::string fold(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string out = s.substr(b, e - b);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::vector<std::string> index_texts(const std::vector<Passage>& ps) {
  std::vector<std::string> out;
  out.reserve(ps.size());
  for (const Passage& p : ps) out.push_back(p.title + " " + p.text);
  return out;
}

Passage passage_from_line(const json& row, const std::string& where) {
  AGENTR1_CHECK(row.is_object(), where << ": a corpus line must be an object, got " << row.type_name());
  if (row.contains("contents")) {
    AGENTR1_CHECK(row["contents"].is_string(), where << ": 'contents' must be a string, got " << row["contents"].dump());
    const std::string c = row["contents"].get<std::string>();
    const size_t nl = c.find('\n');
    if (nl == std::string::npos) return {c, ""};
    return {c.substr(0, nl), c.substr(nl + 1)};
  }
  AGENTR1_CHECK(row.contains("title") && row["title"].is_string() && row.contains("text") && row["text"].is_string(),
                where << ": a corpus line needs string fields title and text (or contents), got " << row.dump());
  return {row["title"].get<std::string>(), row["text"].get<std::string>()};
}

std::string required_string_arg(const json& args, const char* key, const std::string& tool) {
  AGENTR1_CHECK(args.is_object(), tool << ": arguments must be an object like {\"" << key << "\": \"...\"}, got "
                                       << args.dump());
  AGENTR1_CHECK(args.contains(key) && args[key].is_string(),
                tool << ": argument '" << key << "' must be a string, got "
                     << (args.contains(key) ? args[key].dump() : std::string("nothing")));
  const std::string v = args[key].get<std::string>();
  AGENTR1_CHECK(!fold(v).empty(), tool << ": argument '" << key << "' must not be empty");
  return v;
}

}  // namespace

PassageCorpus::PassageCorpus(std::vector<Passage> passages)
    : passages_(std::move(passages)), index_(index_texts(passages_)) {
  for (size_t i = 0; i < passages_.size(); ++i) {
    exact_.emplace(passages_[i].title, i);
    folded_.emplace(fold(passages_[i].title), i);
  }
}

std::vector<size_t> PassageCorpus::search(const std::string& query, size_t k) const {
  std::vector<size_t> ids;
  for (const Bm25Hit& h : index_.search(query, k)) ids.push_back(h.doc);
  return ids;
}

std::optional<size_t> PassageCorpus::find_title(const std::string& title) const {
  if (auto it = exact_.find(title); it != exact_.end()) return it->second;
  if (auto it = folded_.find(fold(title)); it != folded_.end()) return it->second;
  return std::nullopt;
}

std::vector<Passage> passages_from_json(const json& docs) {
  AGENTR1_CHECK(docs.is_array(), "corpus 'docs' must be an array of [title, text], got " << docs.type_name());
  std::vector<Passage> out;
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& d = docs[i];
    AGENTR1_CHECK(d.is_array() && d.size() == 2 && d[0].is_string() && d[1].is_string(),
                  "corpus 'docs' entry " << i << " must be [title, text] (two strings), got " << d.dump());
    out.push_back({d[0].get<std::string>(), d[1].get<std::string>()});
  }
  return out;
}

json passages_to_json(const std::vector<Passage>& passages) {
  json out = json::array();
  for (const Passage& p : passages) out.push_back(json::array({p.title, p.text}));
  return out;
}

std::vector<Passage> read_corpus_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AGENTR1_CHECK(in.good(), "cannot read corpus file '" << path << "'. HINT: check corpus_file in the tool kwargs");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  const size_t first = data.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && data[first] == '[') {
    json rows;
    try {
      rows = json::parse(data);
    } catch (const std::exception& e) {
      throw Error("corpus file '" + path + "' is not valid JSON: " + e.what());
    }
    return global_passages(parse_hotpot_rows(rows, path));
  }
  std::vector<Passage> out;
  std::istringstream lines(data);
  std::string line;
  for (size_t n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    json row;
    try {
      row = json::parse(line);
    } catch (const std::exception& e) {
      throw Error(where + ": not a JSON line: " + e.what());
    }
    out.push_back(passage_from_line(row, where));
  }
  return out;
}

std::shared_ptr<const PassageCorpus> load_corpus_file(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const PassageCorpus>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  auto corpus = std::make_shared<const PassageCorpus>(read_corpus_file(path));
  cache.emplace(path, corpus);
  return corpus;
}

std::string format_passages(const PassageCorpus& corpus, const std::vector<size_t>& ids, size_t max_chars) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Passage& p = corpus.passage(ids[i]);
    std::string text = p.text;
    if (max_chars > 0 && text.size() > max_chars) text = text.substr(0, max_chars) + "...";
    if (i > 0) out += "\n";
    out += "Doc " + std::to_string(i + 1) + "(Title: " + p.title + ") " + text;
  }
  return out;
}

void CorpusToolOptions::validate() const {
  const bool has_docs = !docs.is_null(), has_file = !corpus_file.empty();
  AGENTR1_CHECK(has_docs != has_file, "need exactly one of 'docs' (inline [[title, text], ...]) and 'corpus_file' "
                                      "(a path), got "
                                          << (has_docs ? "both" : "neither"));
  AGENTR1_CHECK(top_k >= 1 && top_k <= 1000000, "'top_k' must be in 1..1000000 (passages per search), got " << top_k);
  AGENTR1_CHECK(max_chars >= 0 && max_chars <= 1000000,
                "'max_chars' must be in 0..1000000 (characters per passage, 0 = all), got " << max_chars);
}

CorpusToolOptions CorpusToolOptions::from_json(const json& kw, const std::string& tool) {
  const std::string where = "env_kwargs.tool_kwargs." + tool;
  CorpusToolOptions o = bind_config<CorpusToolOptions>(
      json{{"env_kwargs", {{"tool_kwargs", {{tool, kw.is_null() ? json::object() : kw}}}}}}, where);
  if (!o.docs.is_null()) {
    o.corpus = std::make_shared<const PassageCorpus>(
        with_context(where + ".docs", [&] { return passages_from_json(o.docs); }));
  } else {
    o.corpus = load_corpus_file(o.corpus_file);
  }
  return o;
}

std::string SearchTool::description() const {
  return "Searches the knowledge base and returns the top " + std::to_string(opts_.top_k) +
         " passages for a query, each as Doc i(Title: ...) text.";
}

json SearchTool::parameters() const {
  return {{"type", "object"},
          {"properties", {{"query", {{"type", "string"}, {"description", "search words, e.g. a name or title"}}}}},
          {"required", json::array({"query"})}};
}

env::ToolResult SearchTool::execute(const json& args) {
  const std::string query = required_string_arg(args, "query", "search");
  const std::vector<size_t> ids = opts_.corpus->search(query, static_cast<size_t>(opts_.top_k));
  env::ToolResult r;
  json titles = json::array();
  for (size_t id : ids) titles.push_back(opts_.corpus->passage(id).title);
  r.info = {{"query", query}, {"titles", titles}};
  r.text = ids.empty() ? "No results found for '" + query + "'."
                       : format_passages(*opts_.corpus, ids, static_cast<size_t>(opts_.max_chars));
  return r;
}

std::string OpenTool::description() const {
  return "Shows one passage of the knowledge base in full, given its title from the search results.";
}

json OpenTool::parameters() const {
  return {{"type", "object"},
          {"properties", {{"title", {{"type", "string"}, {"description", "a passage title from the search results"}}}}},
          {"required", json::array({"title"})}};
}

env::ToolResult OpenTool::execute(const json& args) {
  const std::string title = required_string_arg(args, "title", "open");
  const std::optional<size_t> id = opts_.corpus->find_title(title);
  AGENTR1_CHECK(id.has_value(), "open: no passage titled '" << title << "'. HINT: copy a title from the search results");
  const Passage& p = opts_.corpus->passage(*id);
  env::ToolResult r;
  r.text = "Title: " + p.title + "\n" + p.text;
  r.info = {{"title", p.title}};
  return r;
}

}  // namespace agentr1::tasks
