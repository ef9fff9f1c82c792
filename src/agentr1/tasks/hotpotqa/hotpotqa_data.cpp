#include "agentr1/tasks/hotpotqa/hotpotqa_data.h"

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "agentr1/core/error.h"

namespace agentr1::tasks {
namespace {

std::string req_string(const json& row, const char* key, const std::string& where) {
  AGENTR1_CHECK(row.contains(key), where << ": missing required field '" << key
                                         << "' (HotpotQA rows have _id, question, answer, context)");
  const json& v = row[key];
  AGENTR1_CHECK(v.is_string(), where << ": field '" << key << "' must be a string, got " << v.dump());
  return v.get<std::string>();
}

std::string opt_string(const json& row, const char* key, const std::string& where) {
  if (!row.contains(key) || row[key].is_null()) return "";
  AGENTR1_CHECK(row[key].is_string(), where << ": field '" << key << "' must be a string, got " << row[key].dump());
  return row[key].get<std::string>();
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

HotpotExample parse_hotpot_row(const json& row, const std::string& where) {
  AGENTR1_CHECK(row.is_object(), where << ": a HotpotQA row must be an object, got " << row.type_name());
  HotpotExample ex;
  ex.id = req_string(row, "_id", where);
  ex.question = req_string(row, "question", where);
  ex.answer = req_string(row, "answer", where);
  ex.type = opt_string(row, "type", where);
  ex.level = opt_string(row, "level", where);
  if (row.contains("supporting_facts") && !row["supporting_facts"].is_null()) {
    const json& sf = row["supporting_facts"];
    AGENTR1_CHECK(sf.is_array(), where << ": 'supporting_facts' must be an array of [title, sentence index], got "
                                       << sf.dump());
    for (const json& f : sf) {
      AGENTR1_CHECK(f.is_array() && f.size() == 2 && f[0].is_string() && f[1].is_number_integer(),
                    where << ": each supporting fact must be [title, sentence index], got " << f.dump());
      ex.supporting_facts.emplace_back(f[0].get<std::string>(), f[1].get<int>());
    }
  }
  AGENTR1_CHECK(row.contains("context"), where << ": missing required field 'context' ([title, [sentences]] pairs)");
  const json& ctx = row["context"];
  AGENTR1_CHECK(ctx.is_array(), where << ": 'context' must be an array of [title, [sentences]], got " << ctx.type_name());
  for (const json& c : ctx) {
    AGENTR1_CHECK(c.is_array() && c.size() == 2 && c[0].is_string() && c[1].is_array(),
                  where << ": each context entry must be [title, [sentences]], got " << c.dump());
    std::vector<std::string> sents;
    for (const json& s : c[1]) {
      AGENTR1_CHECK(s.is_string(), where << ": context '" << c[0].get<std::string>()
                                         << "': sentences must be strings, got " << s.dump());
      sents.push_back(s.get<std::string>());
    }
    ex.context.emplace_back(c[0].get<std::string>(), std::move(sents));
  }
  return ex;
}

std::vector<HotpotExample> parse_hotpot_rows(const json& rows, const std::string& where) {
  AGENTR1_CHECK(rows.is_array(), where << ": a HotpotQA file must be one JSON array of rows, got " << rows.type_name());
  std::vector<HotpotExample> out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out.push_back(parse_hotpot_row(rows[i], where + " row " + std::to_string(i)));
  return out;
}

std::vector<HotpotExample> load_hotpot_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AGENTR1_CHECK(in.good(), "cannot read HotpotQA file '" << path << "'. HINT: check the path (train_file / test_file)");
  std::stringstream ss;
  ss << in.rdbuf();
  json rows;
  try {
    rows = json::parse(ss.str());
  } catch (const std::exception& e) {
    throw Error("HotpotQA file '" + path + "' is not valid JSON: " + e.what());
  }
  return parse_hotpot_rows(rows, path);
}

std::string join_sentences(const std::vector<std::string>& sentences) {
  std::string out;
  for (const std::string& s : sentences) {
    if (!out.empty() && !s.empty() && !is_space(out.back()) && !is_space(s.front())) out.push_back(' ');
    out += s;
  }
  size_t b = 0, e = out.size();
  while (b < e && is_space(out[b])) ++b;
  while (e > b && is_space(out[e - 1])) --e;
  return out.substr(b, e - b);
}

std::vector<Passage> context_passages(const HotpotExample& ex) {
  std::vector<Passage> out;
  for (const auto& [title, sents] : ex.context) out.push_back({title, join_sentences(sents)});
  return out;
}

std::vector<Passage> global_passages(const std::vector<HotpotExample>& rows) {
  std::vector<Passage> out;
  std::unordered_set<std::string> seen;
  for (const HotpotExample& ex : rows) {
    for (const auto& [title, sents] : ex.context) {
      if (seen.insert(title).second) out.push_back({title, join_sentences(sents)});
    }
  }
  return out;
}

std::vector<std::string> supporting_titles(const HotpotExample& ex) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& f : ex.supporting_facts) {
    if (seen.insert(f.first).second) out.push_back(f.first);
  }
  return out;
}

}  // namespace agentr1::tasks
