// encode/decode on arbitrary text with a fixed byte-level BPE (trained at start-up the
// way the built-in recipe trains one). Properties: every id is in the vocabulary;
// valid NFC text decodes back to itself exactly; without allow_special no special
// token id appears; the streaming decoder agrees with decode.
#include <string>

#include "agentr1/text/bpe_trainer/bpe_trainer.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "agentr1/text/tokenizer/unicode.h"
#include "fuzz_util.h"

using agentr1::text::Tokenizer;

namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer tok = [] {
    std::vector<std::string> docs;
    for (int i = 0; i < 200; ++i)
      docs.push_back("<|im_start|>user\nWhat is " + std::to_string(i * 37) + " + " + std::to_string(i) +
                     "? Caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 emoji \xf0\x9f\x98\x80<|im_end|>\n"
                     "<|im_start|>assistant\n<tool_call>\n{\"name\": \"calc\"}\n</tool_call><|im_end|>");
    agentr1::text::BpeTrainerOptions o;
    o.vocab_size = 600;
    o.digits_per_token = 3;
    return Tokenizer::from_json(agentr1::text::train_bpe(docs, o));
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string clean = agentr1::text::sanitize_utf8(text);
  const bool exact = clean == text && agentr1::text::normalize(text, agentr1::text::NormalForm::kNFC) == text;
  for (bool special : {true, false}) {
    agentr1::TokenIds ids;
    FUZZ_REQUIRE(fuzz::guarded([&] { ids = tok.encode(text, special); }));
    for (auto id : ids) {
      FUZZ_REQUIRE(id >= 0 && id < tok.vocab_size());
      if (!special) FUZZ_REQUIRE(!tok.is_special(id));
    }
    const std::string back = tok.decode(ids);
    if (exact) FUZZ_REQUIRE(back == text);
    agentr1::text::StreamDecoder sd(tok);
    std::string streamed;
    for (auto id : ids) streamed += sd.push(id);
    streamed += sd.flush();
    FUZZ_REQUIRE(streamed == back);
  }
  return 0;
}
