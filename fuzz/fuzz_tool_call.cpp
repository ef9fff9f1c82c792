// The hermes tool-call parser on arbitrary model output. parse() must never throw.
#include <string>

#include "agentr1/text/tool_format.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto fmt = agentr1::text::make_tool_format("hermes");
  const std::string text(reinterpret_cast<const char*>(data), size);
  agentr1::text::ParsedResponse r;
  try {
    r = fmt->parse(text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse threw: %s\n", e.what());
    std::abort();
  }
  for (const auto& c : r.calls) {
    FUZZ_REQUIRE(c.arguments.is_object());
    FUZZ_REQUIRE(text.find(c.raw) != std::string::npos);
  }
  for (const auto& e : r.errors) {
    FUZZ_REQUIRE(!e.message.empty());
    FUZZ_REQUIRE(text.find(e.raw) != std::string::npos);
  }
  // The feedback turn built from the parsed pieces (what the env sends back).
  std::vector<agentr1::text::ToolResponse> back;
  for (const auto& c : r.calls) back.push_back({c.name, c.arguments.dump(-1, ' ', false, agentr1::json::error_handler_t::replace)});
  for (const auto& e : r.errors) back.push_back({"error", e.message});
  fuzz::guarded([&] { (void)fmt->format_tool_responses(back); });
  return 0;
}
