// The native chat-template renderers on arbitrary message lists: the input is JSON,
// either an array of messages or {"messages": [...], "tools": [...]}.
#include "agentr1/core/json.h"
#include "agentr1/text/jinja/chat_template.h"
#include "fuzz_util.h"

using agentr1::json;
using agentr1::text::ChatFamily;
using agentr1::text::ChatTemplate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json in = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return 0;
  json messages = in, tools;
  if (in.is_object()) {
    messages = in.contains("messages") ? in["messages"] : json();
    tools = in.contains("tools") ? in["tools"] : json();
  }
  for (ChatFamily f : {ChatFamily::kQwen25, ChatFamily::kQwen3}) {
    const ChatTemplate t = ChatTemplate::for_family(f);
    for (bool think : {true, false}) {
      agentr1::text::RenderOptions o;
      o.enable_thinking = think;
      std::string full;
      const bool ok = fuzz::guarded([&] { full = t.render(messages, tools, true, o); });
      if (!ok || !messages.is_array() || messages.size() < 2) continue;
      // Split in two: the suffix, when the template allows one, must complete the prefix.
      const size_t k = messages.size() / 2;
      json prefix = json::array(), appended = json::array();
      for (size_t i = 0; i < messages.size(); ++i) (i < k ? prefix : appended).push_back(messages[i]);
      std::string head, suffix;
      if (fuzz::guarded([&] { head = t.render(prefix, tools, false, o); }) &&
          fuzz::guarded([&] { suffix = t.render_suffix(prefix, appended, tools, true, o); })) {
        FUZZ_REQUIRE(head + suffix == full);
      }
    }
  }
  fuzz::guarded([&] { (void)agentr1::text::python_tojson(in); });
  return 0;
}
