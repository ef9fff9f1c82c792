// Every registered tool-call format's parser on arbitrary model output. parse() must
// never throw; what it returns must be consistent with the text; the feedback turn built
// from it must not fail other than with agentr1::Error; stream_safe_prefix must keep its
// contract.
//
// Input: the first byte picks the format, the rest is the response text. Byte '0' + i
// picks kFormats[i] ('0' hermes, '1' llama3_json, '2' deepseek_v3, '3' mistral,
// '4' gpt_oss; formats registered later follow in name order), other bytes wrap around
// (the index is (byte - '0') mod the number of formats), so seeds stay readable text:
// fuzz/seeds/tool_call/<format>_*.txt start with their format's digit.
#include <string>
#include <vector>

#include "agentr1/core/strings.h"
#include "agentr1/text/tool_format/tool_format.h"
#include "fuzz_util.h"

namespace {

using agentr1::trim;
using agentr1::text::ToolFormat;

// The order the selector digits follow; fixed so that committed seeds keep their format
// when a format is registered.
const char* const kFormats[] = {"hermes", "llama3_json", "deepseek_v3", "mistral", "gpt_oss"};

std::vector<std::unique_ptr<ToolFormat>> make_all_formats() {
  std::vector<std::string> names(std::begin(kFormats), std::end(kFormats));
  for (const std::string& n : agentr1::text::tool_format_names()) {
    bool listed = false;
    for (const std::string& m : names) listed = listed || m == n;
    if (!listed) names.push_back(n);  // a format added since: fuzzed too
  }
  std::vector<std::unique_ptr<ToolFormat>> out;
  for (const std::string& n : names) {
    out.push_back(agentr1::text::make_tool_format(n));  // throws (a crash) if one is gone
    FUZZ_REQUIRE(out.back()->name() == n);
  }
  return out;
}

agentr1::text::ParsedResponse parse_or_abort(const ToolFormat& fmt, const std::string& text) {
  try {
    return fmt.parse(text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s parse threw: %s\n", fmt.name().c_str(), e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<ToolFormat>> formats = make_all_formats();
  if (size == 0) return 0;
  const size_t pick = static_cast<uint8_t>(data[0] - '0') % formats.size();
  const ToolFormat& fmt = *formats[pick];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const agentr1::text::ParsedResponse r = parse_or_abort(fmt, text);
  for (const auto& c : r.calls) {
    FUZZ_REQUIRE(!c.name.empty());
    FUZZ_REQUIRE(c.arguments.is_object());
    FUZZ_REQUIRE(text.find(c.raw) != std::string::npos);
  }
  for (const auto& e : r.errors) {
    FUZZ_REQUIRE(!e.message.empty());
    FUZZ_REQUIRE(text.find(e.raw) != std::string::npos);
  }
  FUZZ_REQUIRE(r.content == trim(r.content));
  FUZZ_REQUIRE(r.reasoning == trim(r.reasoning));

  // The feedback turn built from the parsed pieces (what the env sends back), with call
  // ids as ToolEnv assigns them (mistral requires one on every result).
  std::vector<agentr1::text::ToolResponse> back;
  uint64_t seed = 0;
  for (const auto& c : r.calls)
    back.push_back({c.name,
                    c.arguments.dump(-1, ' ', false, agentr1::json::error_handler_t::replace),
                    agentr1::text::MistralToolFormat::make_call_id(seed++)});
  for (const auto& e : r.errors)
    back.push_back({"error", e.message, agentr1::text::MistralToolFormat::make_call_id(seed++)});
  fuzz::guarded([&] { (void)fmt.format_tool_responses(back); });
  fuzz::guarded([&] { (void)fmt.format_tool_responses({}); });

  // Streaming: the bytes a server may send as content before the response ends lie
  // within the partial text and, when the full response has calls, start its content
  // (up to the whitespace parse trims). A few cut points per input keep this linear.
  for (size_t cut : {text.size(), text.size() / 2, text.size() / 3, text.size() - text.size() / 4}) {
    const std::string partial = text.substr(0, cut);
    const size_t safe = fmt.stream_safe_prefix(partial);
    FUZZ_REQUIRE(safe <= partial.size());
    if (!r.calls.empty()) {
      const std::string sent = trim(partial.substr(0, safe));
      FUZZ_REQUIRE(r.content.compare(0, sent.size(), sent) == 0);
    }
  }
  return 0;
}
