#include "agentr1/view/run_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sys/stat.h>
#include <sstream>
#include <unordered_map>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace agentr1::view {

namespace {

bool is_run(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "metrics.jsonl", ec) || fs::is_regular_file(p / "summary.json", ec) ||
         fs::is_regular_file(p / "config.yaml", ec) || fs::is_directory(p / "trajectories", ec);
}

void find_runs(const fs::path& dir, const std::string& base, const std::string& rel, int depth,
               std::vector<RunEntry>& out) {
  if (depth == 0) return;
  std::vector<fs::path> subdirs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) subdirs.push_back(it->path());
  std::sort(subdirs.begin(), subdirs.end());
  for (const fs::path& d : subdirs) {
    const std::string name = d.filename().string();
    if (name == "checkpoints" || name == "trajectories" || name == "tensorboard") continue;
    const std::string r = rel.empty() ? name : rel + "/" + name;
    if (is_run(d))
      out.push_back({base + "/" + r, d.string()});
    else
      find_runs(d, base, r, depth - 1, out);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string dump_path(const std::string& run_dir, int64_t step, DumpKind kind) {
  char name[64];
  std::snprintf(name, sizeof name, "%sstep_%06lld.jsonl", kind == DumpKind::Val ? "val_" : "",
                static_cast<long long>(step));
  return run_dir + "/trajectories/" + name;
}

// The records of a JSONL dump; lines that are not JSON objects are counted in *skipped.
std::vector<json> read_jsonl(const std::string& path, size_t* skipped) {
  std::ifstream f(path, std::ios::binary);
  AGENTR1_CHECK(f, "view: cannot read " << path << " (" << std::strerror(errno) << ")");
  std::vector<json> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object())
      out.push_back(std::move(j));
    else if (skipped)
      ++*skipped;
  }
  return out;
}

bool id_array(const json& j) {
  if (!j.is_array()) return false;
  for (const json& x : j)
    if (!x.is_number_integer()) return false;
  return true;
}

// Each id decoded alone, memoised per tokenizer (a page shows the same ids many times).
class PieceCache {
 public:
  explicit PieceCache(const text::Tokenizer& tok) : tok_(tok) {}
  json pieces(const TokenIds& ids) {
    json out = json::array();
    for (TokenId id : ids) {
      auto it = cache_.find(id);
      if (it == cache_.end()) it = cache_.emplace(id, decode_one(id)).first;
      out.push_back(it->second);
    }
    return out;
  }

 private:
  std::string decode_one(TokenId id) const {
    try {
      return tok_.decode({id});
    } catch (const std::exception&) {
      return "<id " + std::to_string(id) + "?>";  // out of the vocabulary
    }
  }
  const text::Tokenizer& tok_;
  std::unordered_map<TokenId, std::string> cache_;
};

// The text each id completes (StreamDecoder), what flush() holds back added to the last
// piece, so the pieces join to decode(ids). A decoder that cannot decode incrementally
// returns its text only at flush(): most pieces come back empty, and each id decoded
// alone is shown instead. Ids out of the vocabulary are shown as "<id N?>".
json stream_pieces(const text::Tokenizer& tok, const TokenIds& ids, PieceCache& alone) {
  json out = json::array();
  if (ids.empty()) return out;
  text::StreamDecoder dec(tok);
  size_t empty = 0;
  try {
    for (TokenId id : ids) {
      std::string p = dec.push(id);
      empty += p.empty();
      out.push_back(std::move(p));
    }
    std::string rest = dec.flush();
    if (!rest.empty()) out.back() = out.back().get<std::string>() + rest;
  } catch (const std::exception&) {
    return alone.pieces(ids);
  }
  if (ids.size() >= 4 && 2 * empty > ids.size()) return alone.pieces(ids);
  return out;
}

}  // namespace

std::vector<RunEntry> discover_runs(const std::vector<std::string>& paths) {
  std::vector<RunEntry> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    std::string clean = p;
    while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
    const std::string name = fs::path(clean).filename().string();
    const bool missing = !fs::exists(clean, ec);
    AGENTR1_CHECK(missing || fs::is_directory(clean, ec), "view: '" << p << "' is not a directory; give a run directory");
    if (missing || fs::is_empty(clean, ec)) {
      AGENTR1_LOG(WARN) << "view: " << clean << (missing ? " does not exist yet" : " is empty")
                        << ": shown as a run that has not written its files yet (they appear when it does; "
                           "check the path if no run is starting there)";
      out.push_back({name.empty() ? clean : name, clean});
      continue;
    }
    if (is_run(clean)) {
      out.push_back({name.empty() ? clean : name, clean});
      continue;
    }
    const size_t before = out.size();
    find_runs(clean, name.empty() ? clean : name, "", 3, out);
    AGENTR1_CHECK(out.size() > before, "view: '" << p
                                                 << "' holds no run (no metrics.jsonl, summary.json, config.yaml or "
                                                    "trajectories/ in it or 3 levels below); give a run directory "
                                                    "such as runs/default");
  }
  return out;
}

json read_metrics(const std::string& run_dir, uint64_t offset, const std::string& file) {
  json out = {{"records", json::array()}, {"next", offset}, {"file", file}, {"skipped", 0}};
  const std::string path = run_dir + "/metrics.jsonl";
  std::ifstream f(path, std::ios::binary);
  if (!f) return out;
  // The identity of the file just opened (a rename over the path afterwards does not change
  // what this read sees).
  struct stat st {};
  std::string id;
  if (::stat(path.c_str(), &st) == 0)
    id = std::to_string(static_cast<uint64_t>(st.st_dev)) + ":" + std::to_string(static_cast<uint64_t>(st.st_ino));
  out["file"] = id;
  f.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(f.tellg());
  if (offset > size || (!file.empty() && !id.empty() && file != id)) {
    offset = 0;
    out["reset"] = true;
  }
  f.seekg(static_cast<std::streamoff>(offset));
  std::string buf(size - offset, '\0');
  f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.resize(static_cast<size_t>(f.gcount()));
  size_t pos = 0, skipped = 0;
  for (size_t nl; (nl = buf.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    const std::string line = buf.substr(pos, nl - pos);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_object())
      out["records"].push_back(std::move(j));
    else
      ++skipped;
  }
  out["next"] = offset + pos;
  out["skipped"] = skipped;
  return out;
}

json list_steps(const std::string& run_dir) {
  std::vector<int64_t> train, val;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir + "/trajectories", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    const bool is_val = n.rfind("val_step_", 0) == 0;
    const std::string prefix = is_val ? "val_step_" : "step_";
    if (n.rfind(prefix, 0) != 0 || n.size() <= prefix.size() + 6 || n.substr(n.size() - 6) != ".jsonl") continue;
    const std::string digits = n.substr(prefix.size(), n.size() - prefix.size() - 6);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    (is_val ? val : train).push_back(std::stoll(digits));
  }
  std::sort(train.begin(), train.end());
  std::sort(val.begin(), val.end());
  return {{"train", train}, {"val", val}};
}

void annotate_trajectory(json& record, const text::Tokenizer* tokenizer) {
  if (!record.is_object() || !record.contains("steps") || !record["steps"].is_array()) return;
  std::optional<PieceCache> cache;
  if (tokenizer) cache.emplace(*tokenizer);
  TokenIds prev;  // the previous step's prompt + response
  bool have_prev = false;
  for (json& st : record["steps"]) {
    if (!st.is_object() || !id_array(st.value("prompt_ids", json())) || !id_array(st.value("response_ids", json()))) {
      have_prev = false;
      continue;
    }
    const TokenIds prompt = st["prompt_ids"].get<TokenIds>();
    const TokenIds response = st["response_ids"].get<TokenIds>();
    size_t carried = 0;
    if (have_prev)
      while (carried < prompt.size() && carried < prev.size() && prompt[carried] == prev[carried]) ++carried;
    st["prompt_carried"] = carried;
    st["prompt_rewritten"] = have_prev && carried < prev.size();
    if (cache) {
      try {
        if (!st.contains("prompt_text")) st["prompt_text"] = tokenizer->decode(prompt);
        if (!st.contains("response_text")) st["response_text"] = tokenizer->decode(response);
      } catch (const std::exception& e) {
        st["decode_error"] = e.what();  // ids out of this tokenizer's vocabulary
      }
      st["prompt_pieces"] = stream_pieces(*tokenizer, prompt, *cache);
      st["response_pieces"] = stream_pieces(*tokenizer, response, *cache);
    }
    prev = prompt;
    prev.insert(prev.end(), response.begin(), response.end());
    have_prev = true;
  }
}

json read_trajectories(const std::string& run_dir, int64_t step, DumpKind kind, const text::Tokenizer* tokenizer) {
  const std::string path = dump_path(run_dir, step, kind);
  std::error_code ec;
  AGENTR1_CHECK(fs::is_regular_file(path, ec), "view: no " << (kind == DumpKind::Val ? "validation " : "")
                                                           << "trajectory dump for step " << step << " (" << path
                                                           << " does not exist); /api/steps lists the steps with dumps");
  size_t skipped = 0;
  std::vector<json> recs = read_jsonl(path, &skipped);
  for (json& r : recs) annotate_trajectory(r, tokenizer);
  return {{"trajectories", std::move(recs)}, {"skipped", skipped}};
}

json val_compare(const std::string& run_dir, int64_t index, const text::Tokenizer* tokenizer) {
  const json steps = list_steps(run_dir)["val"];
  AGENTR1_CHECK(!steps.empty(), "view: " << run_dir << " has no validation dumps (trajectories/val_step_N.jsonl)");
  std::vector<std::pair<int64_t, std::vector<json>>> dumps;
  for (const json& s : steps) dumps.emplace_back(s.get<int64_t>(), read_jsonl(dump_path(run_dir, s, DumpKind::Val), nullptr));
  const std::vector<json>& first = dumps.front().second;
  AGENTR1_CHECK(index >= 0 && index < static_cast<int64_t>(first.size()),
                "view: validation index " << index << " is out of range: the first validation dump (step "
                                          << dumps.front().first << ") has " << first.size() << " trajectories");
  const json sample = first[static_cast<size_t>(index)].value("sample", json());
  json out = {{"sample", sample}, {"steps", json::array()}};
  for (auto& [step, recs] : dumps) {
    const json* hit = nullptr;
    if (!sample.is_null()) {
      for (const json& r : recs)
        if (r.contains("sample") && r["sample"] == sample) {
          hit = &r;
          break;
        }
    } else if (index < static_cast<int64_t>(recs.size())) {
      hit = &recs[static_cast<size_t>(index)];
    }
    if (!hit) continue;
    json t = *hit;
    annotate_trajectory(t, tokenizer);
    out["steps"].push_back({{"step", step}, {"trajectory", std::move(t)}});
  }
  return out;
}

json read_config(const std::string& run_dir) { return {{"text", slurp(run_dir + "/config.yaml")}}; }

json read_summary(const std::string& run_dir) {
  json j = json::parse(slurp(run_dir + "/summary.json"), nullptr, false);
  return j.is_object() ? j : json::object();
}

std::string find_tokenizer_dir(const std::string& run_dir) {
  std::error_code ec;
  std::vector<std::string> ckpts;
  for (fs::directory_iterator it(run_dir + "/checkpoints", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("step_", 0) == 0 && fs::is_regular_file(it->path() / "tokenizer.json", ec))
      ckpts.push_back(it->path().string());
  }
  if (!ckpts.empty()) return *std::max_element(ckpts.begin(), ckpts.end());  // step_NNNNNN sorts by step
  try {
    const json cfg = yaml_to_json(slurp(run_dir + "/config.yaml"));
    if (cfg.contains("model") && cfg["model"].is_object() && cfg["model"].contains("path") &&
        cfg["model"]["path"].is_string()) {
      const std::string p = cfg["model"]["path"].get<std::string>();
      if (!p.empty() && fs::is_regular_file(fs::path(p) / "tokenizer.json", ec)) return p;
    }
  } catch (const std::exception&) {
    // a config that does not parse names no tokenizer
  }
  return "";
}

}  // namespace agentr1::view
