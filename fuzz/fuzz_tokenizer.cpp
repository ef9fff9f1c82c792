// Loading a tokenizer.json (the input), then encode/decode with whatever loaded.
#include <optional>
#include <string>

#include "agentr1/core/json.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "fuzz_util.h"

using agentr1::json;
using agentr1::text::Tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json j = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  json config = json::object();
  if (j.is_object() && j.contains("__config__")) config = j["__config__"];  // seeds carry one
  std::optional<Tokenizer> loaded;
  if (!fuzz::guarded([&] { loaded.emplace(Tokenizer::from_json(j, config)); })) return 0;
  const Tokenizer& tok = *loaded;
  const std::string texts[] = {
      "Hello world 12345 <|im_start|>user\nhi<|im_end|>", " \n\t  x\xc3\xa9\xe4\xb8\xad",
      std::string(reinterpret_cast<const char*>(data), size < 64 ? size : 64)};
  for (const auto& s : texts) {
    for (bool special : {true, false}) {
      agentr1::TokenIds ids;
      if (!fuzz::guarded([&] { ids = tok.encode(s, special); })) continue;
      for (auto id : ids) FUZZ_REQUIRE(id >= 0 && id < tok.vocab_size());
      std::string text;
      if (!fuzz::guarded([&] { text = tok.decode(ids); })) continue;
      // The streaming decoder gives the same text, piece by piece.
      agentr1::text::StreamDecoder sd(tok);
      std::string streamed;
      FUZZ_REQUIRE(fuzz::guarded([&] {
        for (auto id : ids) streamed += sd.push(id);
        streamed += sd.flush();
      }));
      FUZZ_REQUIRE(streamed == text);
    }
  }
  return 0;
}
