#include "agentr1/tasks/data_convert.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <streambuf>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/tasks/dataset.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_data.h"
#include "agentr1/tasks/hotpotqa/hotpotqa_family.h"
#include "agentr1/tasks/webshop/webshop_catalog.h"
#include "agentr1/tasks/webshop/webshop_family.h"
#include "agentr1/tasks/webshop/webshop_goal.h"

namespace agentr1::tasks {
namespace {

constexpr const char* kFormats = "gsm8k, hotpotqa, webshop";

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// Thrown inside a conversion once `limit` samples are written; caught at the top.
struct LimitReached {};

// A stream buffer over another stream that knows the line of the next unread byte.
// Newlines are counted lazily over what was consumed, so asking once per row costs
// O(bytes) in all.
class LineCountingBuf : public std::streambuf {
 public:
  explicit LineCountingBuf(std::istream& src) : src_(src), buf_(1 << 20) {}

  int64_t line() {
    count_to(gptr());
    return newlines_ + 1;
  }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    count_to(egptr());
    src_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    const std::streamsize n = src_.gcount();
    if (n <= 0) return traits_type::eof();
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    scanned_ = buf_.data();
    return traits_type::to_int_type(*gptr());
  }

 private:
  void count_to(const char* end) {
    if (scanned_ == nullptr || end == nullptr) return;
    newlines_ += std::count(scanned_, end, '\n');
    scanned_ = end;
  }

  std::istream& src_;
  std::vector<char> buf_;
  const char* scanned_ = nullptr;
  int64_t newlines_ = 0;
};

// Runs one source row's conversion: counts it, applies the limit and the bad-row
// policy, emits the sample. A throw from `convert` rejects the row; a throw from the
// sink (a write error) is not a bad row and propagates.
class RowRunner {
 public:
  RowRunner(std::string source, const ConvertOptions& opts, const SampleSink& emit, ConvertReport& report)
      : source_(std::move(source)), opts_(opts), emit_(emit), report_(report) {}

  template <typename Fn>
  void row(int64_t line, Fn&& convert) {
    const int64_t index = report_.rows++;
    Sample s;
    try {
      s = convert(index);
      if (opts_.system_prompt) {
        AGENTR1_CHECK(s.prompt.is_array() && !s.prompt.empty() && s.prompt[0].value("role", "") == "system",
                      "a system prompt was given but this format's prompt has no system message");
        s.prompt[0]["content"] = *opts_.system_prompt;
      }
    } catch (const std::exception& e) {
      RowError err{line, e.what()};
      if (!opts_.skip_bad_rows) {
        throw Error(err.describe(source_) + " (HINT: fix the row, or skip bad rows: skip_bad_rows / --skip-bad-rows)");
      }
      report_.errors.push_back(std::move(err));
      return;
    }
    emit_(s);
    ++report_.written;
    if (opts_.limit > 0 && report_.written >= opts_.limit) throw LimitReached{};
  }

 private:
  std::string source_;
  const ConvertOptions& opts_;
  const SampleSink& emit_;
  ConvertReport& report_;
};

json parse_line(const std::string& line) {
  try {
    return json::parse(line);
  } catch (const json::parse_error& e) {
    throw Error(std::string("not valid JSON (") + e.what() + ")");
  }
}

// Every non-blank line of `in` as fn(line_no, text); first_line is the number of the
// next line to read (for streams whose start was consumed already).
template <typename Fn>
void for_each_line(std::istream& in, int64_t first_line, Fn&& fn) {
  std::string line;
  for (int64_t n = first_line; std::getline(in, line); ++n) {
    if (!is_blank(line)) fn(n, line);
  }
}

void check_options(const ConvertOptions& opts) {
  AGENTR1_CHECK(opts.limit >= 0, "data convert: limit must be >= 0 (0 = every row), got " << opts.limit);
  AGENTR1_CHECK(opts.kwargs.is_object(), "data convert: the format options must be a map, got " << opts.kwargs.dump());
  AGENTR1_CHECK(!(opts.system_prompt && opts.use_system_prompt == false),
                "data convert: a system prompt text was given with the system prompt off; drop one of them");
}

// kwargs with use_system_prompt from opts (when set) and the keys that the input file
// itself stands for refused.
json format_kwargs(const ConvertOptions& opts, const std::vector<std::string>& input_keys) {
  json kw = opts.kwargs;
  for (const std::string& k : input_keys) {
    AGENTR1_CHECK(!kw.contains(k), "data convert: option '" << k << "' is the input file itself; give the file as "
                                                            "the input instead");
  }
  if (opts.use_system_prompt) kw["use_system_prompt"] = *opts.use_system_prompt;
  return kw;
}

Gsm8kConvertOptions gsm8k_options(const ConvertOptions& opts) {
  return bind_config<Gsm8kConvertOptions>(json{{"gsm8k", format_kwargs(opts, {})}}, "gsm8k");
}

HotpotFamilyOptions hotpot_options(const ConvertOptions& opts) {
  return HotpotFamilyOptions::from_json(format_kwargs(opts, {"train_file", "test_file"}));
}

// The number of WebShop goals in `split` (webshop_goal.h: by target asin, or by WebShop's
// goal index: test = the first 500 after its shuffle, dev the next 1000, train the rest).
int64_t webshop_goal_count(const WebshopCatalogue& cat, DataSplit split, bool index_split) {
  const int64_t n = static_cast<int64_t>(cat.goals.size());
  if (split == DataSplit::kAny) return n;
  if (index_split) return split == DataSplit::kTest ? std::min<int64_t>(n, 500) : std::max<int64_t>(0, n - 1500);
  return std::count_if(cat.goals.begin(), cat.goals.end(),
                       [&](const WebshopGoal& g) { return webshop_split_of(g.asin) == split; });
}

std::string absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

ConvertReport convert_webshop(const std::string& path, const ConvertOptions& opts, const SampleSink& emit) {
  ConvertReport report;
  json kw = format_kwargs(opts, {"products_file"});
  kw["products_file"] = absolute(path);
  for (const char* k : {"attributes_file", "human_instructions_file"}) {
    if (kw.contains(k) && kw[k].is_string()) kw[k] = absolute(kw[k].get<std::string>());
  }
  const WebshopFamily family(WebshopFamilyOptions::from_json(kw));
  const auto cat = get_webshop_catalogue(family.options().game.catalogue);
  AGENTR1_CHECK(!cat->goals.empty(), "WebShop files: the catalogue of '" << path << "' has no goals; give "
                                     "attributes_file (items_ins_v2*.json) or human_instructions_file "
                                     "(items_human_ins.json)");
  int64_t n = webshop_goal_count(*cat, opts.split, family.options().webshop_index_split);
  AGENTR1_CHECK(n > 0, "WebShop files: none of the " << cat->goals.size() << " goals is in the "
                                                     << data_split_name(opts.split) << " split");
  if (opts.limit > 0) n = std::min(n, opts.limit);
  const std::vector<Sample> samples = family.make_dataset(opts.split, n, opts.seed);
  RowRunner runner(path, opts, emit, report);
  try {
    for (const Sample& s : samples) runner.row(0, [&](int64_t) { return s; });
  } catch (const LimitReached&) {
  }
  return report;
}

}  // namespace

DataFormat parse_data_format(const std::string& name) {
  if (name == "gsm8k") return DataFormat::kGsm8k;
  if (name == "hotpotqa") return DataFormat::kHotpotqa;
  if (name == "webshop") return DataFormat::kWebshop;
  throw Error("unknown data format '" + name + "'; known: " + kFormats +
              " (arithmetic and alfworld have no file format: their data is generated)");
}

std::string data_format_name(DataFormat format) {
  switch (format) {
    case DataFormat::kGsm8k: return "gsm8k";
    case DataFormat::kHotpotqa: return "hotpotqa";
    case DataFormat::kWebshop: return "webshop";
  }
  return "?";
}

std::string RowError::describe(const std::string& source) const {
  return source + ":" + std::to_string(line) + ": " + rule;
}

ConvertReport convert_gsm8k(std::istream& in, const std::string& source, const ConvertOptions& opts,
                            const SampleSink& emit) {
  check_options(opts);
  Gsm8kConvertOptions g = gsm8k_options(opts);
  if (opts.system_prompt) g.system_prompt = *opts.system_prompt;
  ConvertOptions row_opts = opts;
  row_opts.system_prompt.reset();  // set through g above
  ConvertReport report;
  RowRunner runner(source, row_opts, emit, report);
  const std::string split = data_split_name(opts.split);
  try {
    for_each_line(in, 1, [&](int64_t line, const std::string& text) {
      runner.row(line, [&](int64_t index) { return gsm8k_row_to_sample(parse_line(text), index, split, g); });
    });
  } catch (const LimitReached&) {
  }
  return report;
}

ConvertReport convert_hotpotqa(std::istream& in, const std::string& source, const ConvertOptions& opts,
                               const SampleSink& emit, const std::string& source_file) {
  check_options(opts);
  const HotpotFamilyOptions h = hotpot_options(opts);
  const std::string& file = source_file.empty() ? source : source_file;
  ConvertReport report;
  RowRunner runner(source, opts, emit, report);
  LineCountingBuf buf(in);
  std::istream s(&buf);
  s >> std::ws;
  if (s.peek() == 0xEF) {  // a UTF-8 byte-order mark
    char bom[3] = {};
    s.read(bom, 3);
    AGENTR1_CHECK(s.gcount() == 3 && bom[1] == '\xBB' && bom[2] == '\xBF', source << ":1: not UTF-8 JSON");
    s >> std::ws;
  }
  const bool array = s.peek() == '[';
  if (!array) {
    AGENTR1_CHECK(h.corpus != HotpotCorpus::kGlobal,
                  "hotpotqa option corpus=global needs the JSON-array form of the file (the search tool reads "
                  "corpus_file as a HotpotQA JSON array, or as passages {\"id\", \"contents\"} per line); '"
                      << source << "' is JSONL. HINT: convert the JSON array, or use corpus=distractor");
  }
  auto convert_row = [&](const json& row, int64_t index) {
    const HotpotExample ex = parse_hotpot_row(row, "row " + std::to_string(index));
    return hotpot_example_to_sample(ex, index, opts.split, file, h);
  };
  try {
    if (!array) {
      for_each_line(s, buf.line(), [&](int64_t line, const std::string& text) {
        runner.row(line, [&](int64_t index) { return convert_row(parse_line(text), index); });
      });
      return report;
    }
    // One array of rows: each element is converted when its last byte is read and then
    // discarded (the callback returns false), so memory holds one row at a time.
    int64_t row_line = 0;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
      if (depth != 1) return true;  // depth 0 is the array itself; deeper is inside a row
      switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start:
          row_line = buf.line();
          return true;
        case json::parse_event_t::value:
          row_line = buf.line();
          [[fallthrough]];
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
          runner.row(row_line, [&](int64_t index) { return convert_row(parsed, index); });
          return false;
        default:
          return true;
      }
    };
    try {
      const json rest = json::parse(s, cb);  // the array, empty: every row was discarded
      (void)rest;
    } catch (const json::parse_error& e) {
      throw Error(source + ":" + std::to_string(buf.line()) + ": not valid JSON (" + e.what() + ")");
    }
  } catch (const LimitReached&) {
  }
  return report;
}

ConvertReport convert_dataset(DataFormat format, const std::string& path, const ConvertOptions& opts,
                              const SampleSink& emit) {
  check_options(opts);
  if (format == DataFormat::kWebshop) return convert_webshop(path, opts, emit);
  std::ifstream in(path, std::ios::binary);
  AGENTR1_CHECK(in.good(), "cannot open '" << path << "' for reading; check the path");
  if (format == DataFormat::kGsm8k) return convert_gsm8k(in, path, opts, emit);
  return convert_hotpotqa(in, path, opts, emit, absolute(path));
}

json SampleFileReport::to_json() const {
  json errs = json::array();
  for (const RowError& e : errors) errs.push_back({{"line", e.line}, {"rule", e.rule}});
  json sources = json::object();
  for (const auto& [name, n] : data_sources) sources[name] = n;
  return {{"file", path}, {"rows", rows}, {"bad_rows", static_cast<int64_t>(errors.size())}, {"errors", errs},
          {"data_sources", sources}};
}

SampleFileReport check_sample_stream(std::istream& in, const std::string& source,
                                     const std::function<void(const Sample&)>& check) {
  SampleFileReport r;
  r.path = source;
  for_each_line(in, 1, [&](int64_t line, const std::string& text) {
    ++r.rows;
    try {
      const Sample s = Sample::from_json(parse_line(text));
      if (check) check(s);
      ++r.data_sources[s.data_source];
    } catch (const std::exception& e) {
      r.errors.push_back({line, e.what()});
    }
  });
  return r;
}

SampleFileReport check_sample_file(const std::string& path, const std::function<void(const Sample&)>& check) {
  std::ifstream in(path, std::ios::binary);
  AGENTR1_CHECK(in.good(), "cannot open sample file '" << path << "' for reading; check the path");
  return check_sample_stream(in, path, check);
}

}  // namespace agentr1::tasks
