// Unit tests for the byte-level BPE tokenizer on a tiny hand-made tokenizer.json whose
// expected ids are worked out by hand in the comments.
#include "agentr1/text/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/text/tokenizer/bpe_model.h"
#include "agentr1/text/tokenizer/byte_level.h"
#include "agentr1/text/tokenizer/pretokenizer.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::text {
namespace {

namespace fs = std::filesystem;

// GPT-2 byte-level spellings, worked out from the published mapping: printable Latin-1
// bytes stand for themselves; the others, in byte order, become U+0100, U+0101, ...:
// 0x00..0x20 -> U+0100..U+0120 (so ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ'),
// 0x7F..0xA0 -> U+0121..U+0142 (0x80 -> U+0122 'Ģ', 0x98 -> U+013A 'ĺ', 0x9F -> U+0141 'Ł'),
// 0xAD -> U+0143. So "😀" (F0 9F 98 80) is spelled "ðŁĺĢ" and "é" (C3 A9) is "Ã©".
json tiny_tokenizer_json() {
  return json::parse(R"JSON({
    "version": "1.0",
    "truncation": null,
    "padding": null,
    "added_tokens": [
      {"id": 100, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true},
      {"id": 101, "content": "<tool>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": false},
      {"id": 102, "content": "<pad>", "single_word": false, "lstrip": true, "rstrip": true,
       "normalized": false, "special": true},
      {"id": 103, "content": "cd", "single_word": true, "lstrip": false, "rstrip": false,
       "normalized": false, "special": false}
    ],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                      "use_regex": true},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false,
                       "use_regex": true},
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                "use_regex": true},
    "model": {
      "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
      "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
      "ignore_merges": false,
      "vocab": {"a": 0, "b": 1, "c": 2, "d": 3, "Ġ": 4, "ab": 5, "abc": 6, "Ġa": 7, "Ġab": 8,
                "ð": 9, "Ł": 10, "ĺ": 11, "Ģ": 12, "ðŁ": 13, "Ċ": 14, "e": 15, "Ã": 16,
                "©": 17, "Ã©": 18, "aa": 21},
      "merges": ["a b", "ab c", "Ġ a", "Ġa b", "ð Ł", "Ã ©", ["a", "a"]]
    }
  })JSON");
}

json tiny_config() {
  return json::parse(R"JSON({"eos_token": "<|end|>", "bos_token": null,
                             "pad_token": {"content": "<pad>"}, "add_bos_token": false,
                             "chat_template": "{{ messages }}"})JSON");
}

Tokenizer tiny() { return Tokenizer::from_json(tiny_tokenizer_json(), tiny_config()); }

TEST(ByteLevel, MatchesPublishedGpt2Mapping) {
  EXPECT_EQ(bytes_to_byte_level(" "), "\xC4\xA0");                  // U+0120 Ġ
  EXPECT_EQ(bytes_to_byte_level("\n"), "\xC4\x8A");                 // U+010A Ċ
  EXPECT_EQ(bytes_to_byte_level("\xF0\x9F\x98\x80"), "ðŁĺĢ");
  EXPECT_EQ(bytes_to_byte_level("\xAD"), "\xC5\x83");               // U+0143
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(byte_level_to_bytes(bytes_to_byte_level(all), back));
  EXPECT_EQ(back, all);
  // 'é' (U+00E9) is printable Latin-1, so it spells byte 0xE9; '€' is outside the alphabet.
  std::string untouched = "x";
  EXPECT_FALSE(byte_level_to_bytes("\xE2\x82\xAC", untouched));  // '€' U+20AC
  EXPECT_EQ(untouched, "x");
}

TEST(Unicode, SanitizeUsesMaximalSubparts) {
  // Example from the Unicode standard (chapter 3, "U+FFFD Substitution of Maximal
  // Subparts"): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(sanitize_utf8(in), "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_FALSE(is_valid_utf8(in));
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));  // a surrogate
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));      // overlong
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xE0\x80"), 0u);  // invalid already, nothing to wait for
}

TEST(Unicode, NormalizeNfc) {
  EXPECT_EQ(normalize("e\xCC\x81", NormalForm::kNFC), "\xC3\xA9");     // e + U+0301 -> é
  EXPECT_EQ(normalize("\xC3\xA9", NormalForm::kNFD), "e\xCC\x81");
  EXPECT_EQ(normalize("\xEF\xAC\x81", NormalForm::kNFKC), "fi");      // U+FB01 ligature
  EXPECT_EQ(normalize("plain ascii", NormalForm::kNFC), "plain ascii");
}

TEST(PreTokenizer, SplitBehaviors) {
  // "the-final--countdown" split on "-" (HF's documented examples).
  auto run = [](const char* behavior) {
    json j = json::parse(std::string(R"({"type": "Split", "pattern": {"String": "-"},
                                          "behavior": ")") + behavior + R"(", "invert": false})");
    PreTokenizer pre = PreTokenizer::from_json(j);
    std::string buf;
    std::vector<Span> pieces;
    pre.split("the-final--countdown", buf, pieces);
    std::vector<std::string> out;
    for (auto p : pieces) out.push_back(buf.substr(p.begin, p.end - p.begin));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(run("Removed"), (V{"the", "final", "countdown"}));
  EXPECT_EQ(run("Isolated"), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run("MergedWithPrevious"), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run("MergedWithNext"), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run("Contiguous"), (V{"the", "-", "final", "--", "countdown"}));
}

TEST(PreTokenizer, QwenRegexPieces) {
  json j = json::parse(R"JSON({"type": "Split", "pattern": {"Regex":
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    "behavior": "Isolated", "invert": false})JSON");
  PreTokenizer pre = PreTokenizer::from_json(j);
  std::string buf;
  std::vector<Span> pieces;
  pre.split("It's 42 ok!!\n\n  x\xC2\x85\xC2\x85y", buf, pieces);
  std::vector<std::string> out;
  for (auto p : pieces) out.push_back(buf.substr(p.begin, p.end - p.begin));
  // U+0085 is White_Space (as in Oniguruma and tokenizers.js, which give the same
  // pieces), so "\x85\x85" is not a " ?[^\s\p{L}\p{N}]+" run.
  EXPECT_EQ(out, (std::vector<std::string>{"It", "'s", " ", "4", "2", " ok", "!!\n\n", " ",
                                           " x", "\xC2\x85", "\xC2\x85y"}));
}

TEST(Tokenizer, HandWorkedIds) {
  Tokenizer tok = tiny();
  // "ab": a b -> merge rank 0 -> ab.
  EXPECT_EQ(tok.encode("ab"), (TokenIds{5}));
  // " ab": Ġ a b; (a,b) has rank 0 < (Ġ,a) rank 2, so Ġ ab, and (Ġ,ab) has no merge.
  EXPECT_EQ(tok.encode(" ab"), (TokenIds{4, 5}));
  // " a": Ġ a -> Ġa.
  EXPECT_EQ(tok.encode(" a"), (TokenIds{7}));
  // "abc abd": "abc" -> ab c -> abc; " abd" -> Ġ ab d.
  EXPECT_EQ(tok.encode("abc abd"), (TokenIds{6, 4, 5, 3}));
  // "aaa": (a,a) twice with the same rank: the leftmost merges first -> aa a.
  EXPECT_EQ(tok.encode("aaa"), (TokenIds{21, 0}));
  // "é" = C3 A9 = Ã © -> Ã©; the decomposed e + U+0301 is NFC-normalized to the same.
  EXPECT_EQ(tok.encode("\xC3\xA9"), (TokenIds{18}));
  EXPECT_EQ(tok.encode("e\xCC\x81"), (TokenIds{18}));
  // "😀" = ð Ł ĺ Ģ -> ðŁ ĺ Ģ.
  EXPECT_EQ(tok.encode("\xF0\x9F\x98\x80"), (TokenIds{13, 11, 12}));
  // "\n" -> Ċ; characters missing from the vocab (no unk_token) are dropped, as in HF.
  EXPECT_EQ(tok.encode("a\nz"), (TokenIds{0, 14}));
  EXPECT_EQ(tok.encode(""), TokenIds{});
}

TEST(Tokenizer, AddedTokens) {
  Tokenizer tok = tiny();
  EXPECT_EQ(tok.encode("ab<|end|>a"), (TokenIds{5, 100, 0}));
  // Not allowed: "<|end|>" is plain text: pieces "ab" "<|" "end" "|>" "a"; only e, d and a
  // are in the vocab.
  EXPECT_EQ(tok.encode("ab<|end|>a", /*allow_special=*/false), (TokenIds{5, 15, 3, 0}));
  // Non-special added tokens match either way.
  EXPECT_EQ(tok.encode("a<tool>b"), (TokenIds{0, 101, 1}));
  EXPECT_EQ(tok.encode("a<tool>b", false), (TokenIds{0, 101, 1}));
  // lstrip + rstrip swallow the surrounding whitespace.
  EXPECT_EQ(tok.encode("a  <pad>\n b"), (TokenIds{0, 102, 1}));
  // single_word "cd": only matches as a whole word.
  EXPECT_EQ(tok.encode("cd"), (TokenIds{103}));
  EXPECT_EQ(tok.encode("a cd"), (TokenIds{0, 4, 103}));
  EXPECT_EQ(tok.encode("acd"), (TokenIds{0, 2, 3}));
  // Invalid UTF-8 is replaced by U+FFFD (EF BF BD, whose chars are not in this vocab).
  EXPECT_EQ(tok.encode("a\xFF" "b"), tok.encode("a\xEF\xBF\xBD" "b"));
}

TEST(Tokenizer, VocabAndConfig) {
  Tokenizer tok = tiny();
  EXPECT_EQ(tok.vocab_size(), 104);
  EXPECT_EQ(tok.token_to_id("Ġab"), 8);
  EXPECT_EQ(tok.token_to_id("<tool>"), 101);
  EXPECT_FALSE(tok.token_to_id("zz").has_value());
  EXPECT_EQ(tok.id_to_token(8), "Ġab");
  EXPECT_EQ(tok.id_to_token(100), "<|end|>");
  EXPECT_FALSE(tok.id_to_token(50).has_value());
  EXPECT_EQ(tok.eos_token(), "<|end|>");
  EXPECT_EQ(tok.eos_token_id(), 100);
  EXPECT_EQ(tok.pad_token(), "<pad>");
  EXPECT_FALSE(tok.bos_token().has_value());
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");
  EXPECT_TRUE(tok.is_special(100));
  EXPECT_FALSE(tok.is_special(101));
}

TEST(Tokenizer, Decode) {
  Tokenizer tok = tiny();
  EXPECT_EQ(tok.decode({6, 4, 5, 3}), "abc abd");
  EXPECT_EQ(tok.decode({5, 100, 0}), "ab<|end|>a");
  EXPECT_EQ(tok.decode({5, 100, 0}, /*skip_special=*/true), "aba");
  EXPECT_EQ(tok.decode({13, 11, 12}), "\xF0\x9F\x98\x80");
  // An unfinished character decodes to U+FFFD.
  EXPECT_EQ(tok.decode({13}), "\xEF\xBF\xBD");
  EXPECT_THROW(tok.decode({50}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
}

TEST(Tokenizer, StreamDecoderHoldsPartialCharacters) {
  Tokenizer tok = tiny();
  // 😀 as four single-byte tokens ð Ł ĺ Ģ, then "a", then é as Ã ©, an added token, and
  // a dangling lead byte.
  TokenIds ids = {9, 10, 11, 12, 0, 16, 17, 101, 13, 16, 17, 9};
  StreamDecoder sd(tok);
  std::string all;
  std::vector<std::string> pieces;
  for (TokenId id : ids) {
    std::string piece = sd.push(id);
    EXPECT_TRUE(is_valid_utf8(piece)) << "after id " << id;
    pieces.push_back(piece);
    all += piece;
  }
  std::string last = sd.flush();
  all += last;
  EXPECT_EQ(pieces[0], "");
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[2], "");
  EXPECT_EQ(pieces[3], "\xF0\x9F\x98\x80");
  EXPECT_EQ(pieces[5], "");
  EXPECT_EQ(pieces[6], "\xC3\xA9");
  EXPECT_EQ(all, tok.decode(ids));
  EXPECT_EQ(sd.pending(), 0u);
}

TEST(Tokenizer, StreamDecoderRandomAgreesWithDecode) {
  Tokenizer tok = tiny();
  std::mt19937 rng(7);
  std::vector<TokenId> valid = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                17, 18, 21, 100, 101, 102, 103};
  for (int trial = 0; trial < 300; ++trial) {
    TokenIds ids;
    int n = static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) ids.push_back(valid[rng() % valid.size()]);
    for (bool skip : {false, true}) {
      StreamDecoder sd(tok, skip);
      std::string all;
      for (TokenId id : ids) {
        std::string piece = sd.push(id);
        ASSERT_TRUE(is_valid_utf8(piece));
        all += piece;
      }
      all += sd.flush();
      ASSERT_EQ(all, tok.decode(ids, skip)) << "trial " << trial;
    }
  }
}

TEST(BpeModel, HeapAndShortMergeLoopsAgree) {
  json model = tiny_tokenizer_json()["model"];
  // Add more merges over a small alphabet so long words exercise many ranks.
  model["vocab"]["bc"] = 30;
  model["vocab"]["ca"] = 31;
  model["vocab"]["aab"] = 32;
  model["vocab"]["bcca"] = 33;
  model["vocab"]["cc"] = 34;
  model["vocab"]["ccab"] = 35;
  model["merges"].push_back("b c");
  model["merges"].push_back("c a");
  model["merges"].push_back("aa b");
  model["merges"].push_back("c c");
  model["merges"].push_back("bc ca");
  model["merges"].push_back("cc ab");
  BpeModel bpe = BpeModel::from_json(model, /*byte_level=*/true);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 500; ++trial) {
    TokenIds sym;
    int n = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) sym.push_back(static_cast<TokenId>(rng() % 3));  // a b c
    TokenIds a = sym, b = sym;
    bpe.merge(a, /*force_heap=*/false);
    bpe.merge(b, /*force_heap=*/true);
    ASSERT_EQ(a, b) << "trial " << trial << " length " << n;
  }
}

TEST(Tokenizer, SaveLoadRoundTrip) {
  Tokenizer tok = tiny();
  fs::path dir = fs::temp_directory_path() / ("agentr1_tok_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  tok.save(dir.string());
  Tokenizer back = Tokenizer::load(dir.string());
  for (const char* s : {"abc abd", "ab<|end|>a", "a  <pad>\n b", "a cd", "\xF0\x9F\x98\x80",
                        "e\xCC\x81", "aaa a<tool>b"}) {
    EXPECT_EQ(back.encode(s), tok.encode(s)) << s;
    EXPECT_EQ(back.encode(s, false), tok.encode(s, false)) << s;
  }
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  EXPECT_EQ(back.chat_template(), tok.chat_template());
  EXPECT_EQ(back.eos_token(), tok.eos_token());
  ASSERT_EQ(back.added_tokens().size(), tok.added_tokens().size());
  for (size_t i = 0; i < tok.added_tokens().size(); ++i) {
    const AddedToken& x = tok.added_tokens()[i];
    const AddedToken& y = back.added_tokens()[i];
    EXPECT_EQ(std::tie(x.id, x.content, x.single_word, x.lstrip, x.rstrip, x.normalized,
                       x.special),
              std::tie(y.id, y.content, y.single_word, y.lstrip, y.rstrip, y.normalized,
                       y.special));
  }
  // Saving the loaded copy writes the same bytes.
  fs::path dir2 = dir.string() + "_2";
  back.save(dir2.string());
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(slurp(dir / "tokenizer.json"), slurp(dir2 / "tokenizer.json"));
  EXPECT_EQ(slurp(dir / "tokenizer_config.json"), slurp(dir2 / "tokenizer_config.json"));
  fs::remove_all(dir);
  fs::remove_all(dir2);
}

std::string error_of(const json& tj) {
  return agentr1::testing::error_of([&] { Tokenizer::from_json(tj); });
}

TEST(Tokenizer, MalformedJsonGivesClearErrors) {
  json j = tiny_tokenizer_json();
  j.erase("model");
  std::string e = error_of(j);
  EXPECT_NE(e.find("no \"model\""), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = json::parse(R"({"type": "Whitespace"})");
  e = error_of(j);
  EXPECT_NE(e.find("\"Whitespace\""), std::string::npos) << e;
  EXPECT_NE(e.find("supported: Sequence, Split, Metaspace, ByteLevel"), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["model"]["merges"].push_back("a zz");
  e = error_of(j);
  EXPECT_NE(e.find("\"zz\""), std::string::npos) << e;
  EXPECT_NE(e.find("not in the vocab"), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["model"]["merges"].push_back("c d");  // both parts exist, "cd" does not
  e = error_of(j);
  EXPECT_NE(e.find("\"cd\""), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["normalizer"] = json::parse(R"({"type": "Lowercase"})");
  e = error_of(j);
  EXPECT_NE(e.find("\"Lowercase\""), std::string::npos) << e;
  EXPECT_NE(e.find("NFC"), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  e = error_of(j);
  EXPECT_NE(e.find("WordPiece"), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["model"]["vocab"] = json::object();
  j["model"]["merges"] = json::array();
  e = error_of(j);
  EXPECT_NE(e.find("model.vocab is empty"), std::string::npos) << e;

  // Options of the wrong type are Errors naming the component, not json type errors
  // (found by fuzz_tokenizer).
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = json::parse(R"({"type": "ByteLevel", "add_prefix_space": "<|endoftext|>"})");
  e = error_of(j);
  EXPECT_NE(e.find("pre_tokenizer: \"add_prefix_space\" must be true or false, got \"<|endoftext|>\""),
            std::string::npos) << e;
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": 3})");
  e = error_of(j);
  EXPECT_NE(e.find("\"behavior\" must be a string, got 3"), std::string::npos) << e;

  // An absurd id (found by fuzz_tokenizer: 10 GB of id tables) is refused.
  j = tiny_tokenizer_json();
  j["model"]["vocab"]["huge"] = 333333387;
  e = error_of(j);
  EXPECT_NE(e.find("has id 333333387; ids must be in [0, 16777216)"), std::string::npos) << e;
  j = tiny_tokenizer_json();
  j["added_tokens"] = json::parse(R"([{"id": 16777216, "content": "<x>", "special": true}])");
  e = error_of(j);
  EXPECT_NE(e.find("added_tokens[0] has id 16777216; ids must be in [0, 16777216)"), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["model"]["vocab"]["dup"] = 3;
  e = error_of(j);
  EXPECT_NE(e.find("id 3 is used twice"), std::string::npos) << e;

  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "(a"},
                                       "behavior": "Isolated", "invert": false})");
  e = error_of(j);
  EXPECT_NE(e.find("does not compile"), std::string::npos) << e;

  EXPECT_THROW(Tokenizer::load("/nonexistent/dir"), Error);
}

// ---- SentencePiece-converted tokenizers (Llama 2 / Gemma style) -------------------------
//
// A tiny byte_fallback vocabulary: <unk> <s> </s> = 0 1 2; the byte tokens "<0xNN>" = 3 + NN,
// except <0xF0>..<0xF4> (so 4-byte characters such as emoji fall back to <unk>);
// "▁" 259, "a" 260, "b" 261, "c" 262, "▁a" 263, "ab" 264, "▁ab" 265, "é" 266, "b▁" 267.
// Merges by rank: ("▁","a"), ("a","b"), ("▁a","b"). Llama 2's normalizer (Prepend "▁",
// Replace " " -> "▁") and decoder (Replace "▁" -> " ", ByteFallback, Fuse, Strip one
// leading space).
const char* const kMeta = "\xE2\x96\x81";  // "▁" U+2581
constexpr TokenId kByte0 = 3, kMetaId = 259, kA = 260, kB = 261, kC = 262, kMetaA = 263,
                  kAB = 264, kMetaAB = 265, kEAcute = 266, kBMeta = 267;

json sp_tokenizer_json() {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    if (b >= 0xF0 && b <= 0xF4) continue;
    vocab[std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">"] = kByte0 + b;
  }
  const std::string m = kMeta;
  vocab[m] = kMetaId;
  vocab["a"] = kA;
  vocab["b"] = kB;
  vocab["c"] = kC;
  vocab[m + "a"] = kMetaA;
  vocab["ab"] = kAB;
  vocab[m + "ab"] = kMetaAB;
  vocab["\xC3\xA9"] = kEAcute;
  vocab["b" + m] = kBMeta;
  json j = json::parse(R"JSON({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true},
      {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true},
      {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true}
    ],
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": null,
    "post_processor": null,
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
              "continuing_subword_prefix": null, "end_of_word_suffix": null,
              "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
              "merges": [["\u2581", "a"], ["a", "b"], ["\u2581a", "b"]]}
  })JSON");
  j["model"]["vocab"] = vocab;
  return j;
}

TokenId byte_id(unsigned char b) { return kByte0 + b; }

TEST(SentencePiece, PrependReplaceAndMerges) {
  Tokenizer tok = Tokenizer::from_json(sp_tokenizer_json());
  // "ab c" -> "▁ab▁c" -> ▁ a b ▁ c; ("▁","a") then ("▁a","b"); ("b","▁") has no merge.
  EXPECT_EQ(tok.encode("ab c"), (TokenIds{kMetaAB, kMetaId, kC}));
  // Two spaces: "▁ab▁▁c".
  EXPECT_EQ(tok.encode("ab  c"), (TokenIds{kMetaAB, kMetaId, kMetaId, kC}));
  EXPECT_EQ(tok.encode(""), TokenIds{});
  // Each segment around an added token gets its own "▁" (Prepend runs per segment).
  EXPECT_EQ(tok.encode("c<s>ab"), (TokenIds{kMetaId, kC, 1, kMetaAB}));
  EXPECT_EQ(tok.encode("<s>"), (TokenIds{1}));
}

TEST(SentencePiece, ByteFallbackAndFusedUnk) {
  Tokenizer tok = Tokenizer::from_json(sp_tokenizer_json());
  // "€" (E2 82 AC) is not in the vocab: its three byte tokens.
  EXPECT_EQ(tok.encode("a\xC3\xA9\xE2\x82\xAC"),
            (TokenIds{kMetaA, kEAcute, byte_id(0xE2), byte_id(0x82), byte_id(0xAC)}));
  // "😀" (F0 9F 98 80) lacks <0xF0>: <unk>; two in a row fuse into one (fuse_unk).
  EXPECT_EQ(tok.encode("\xF0\x9F\x98\x80\xF0\x9F\x98\x80" "a"), (TokenIds{kMetaId, 0, kA}));
  json no_fuse = sp_tokenizer_json();
  no_fuse["model"]["fuse_unk"] = false;
  EXPECT_EQ(Tokenizer::from_json(no_fuse).encode("\xF0\x9F\x98\x80\xF0\x9F\x98\x80" "a"),
            (TokenIds{kMetaId, 0, 0, kA}));
  // Without byte_fallback, "€" becomes <unk>.
  json no_fallback = sp_tokenizer_json();
  no_fallback["model"]["byte_fallback"] = false;
  EXPECT_EQ(Tokenizer::from_json(no_fallback).encode("a\xE2\x82\xAC"),
            (TokenIds{kMetaA, 0}));
}

TEST(SentencePiece, DecodeChain) {
  Tokenizer tok = Tokenizer::from_json(sp_tokenizer_json());
  // " ab" " " "c" -> " ab c" -> Strip drops the one leading space.
  EXPECT_EQ(tok.decode({kMetaAB, kMetaId, kC}), "ab c");
  // Byte tokens join into UTF-8: "€".
  EXPECT_EQ(tok.decode({kMetaA, kEAcute, byte_id(0xE2), byte_id(0x82), byte_id(0xAC)}),
            "a\xC3\xA9\xE2\x82\xAC");
  // An unfinished run becomes U+FFFD (one per maximal subpart).
  EXPECT_EQ(tok.decode({kA, byte_id(0xE2), byte_id(0x82), kB}), "a\xEF\xBF\xBD" "b");
  // Added tokens go through the chain too; only the text's first space is stripped.
  EXPECT_EQ(tok.decode({kMetaId, kC, 1, kMetaAB}), "c<s> ab");
  EXPECT_EQ(tok.decode({kMetaId, kC, 1, kMetaAB}, /*skip_special=*/true), "c ab");
  EXPECT_EQ(tok.decode({1, kMetaAB}), "<s> ab");
  EXPECT_EQ(tok.decode({}), "");
  // The round trip of a string without added tokens is exact.
  for (const char* s : {"ab c", " ab", "ab  ", "\xC3\xA9\xE2\x82\xAC c", "\n\ta"}) {
    EXPECT_EQ(tok.decode(tok.encode(s)), s) << s;
  }
}

TEST(SentencePiece, StripStopAndRegexReplace) {
  json j = sp_tokenizer_json();
  // Collapse space runs first (a Regex Replace), and strip one trailing space on decode.
  j["normalizer"]["normalizers"].insert(
      j["normalizer"]["normalizers"].begin(),
      json::parse(R"({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})"));
  j["decoder"]["decoders"][3]["stop"] = 1;
  Tokenizer tok = Tokenizer::from_json(j);
  EXPECT_EQ(tok.encode("ab   c"), (TokenIds{kMetaAB, kMetaId, kC}));
  // " ab c " -> strip one space at each end.
  EXPECT_EQ(tok.decode({kMetaAB, kMetaId, kC, kMetaId}), "ab c");
}

json metaspace_json(const char* scheme, bool split) {
  json j = sp_tokenizer_json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = json::parse(R"({"type": "Metaspace", "replacement": "\u2581"})");
  j["pre_tokenizer"]["prepend_scheme"] = scheme;
  j["pre_tokenizer"]["split"] = split;
  j["decoder"] = json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Metaspace", "replacement": "\u2581"}, {"type": "ByteFallback"},
      {"type": "Fuse"}]})");
  j["decoder"]["decoders"][0]["prepend_scheme"] = scheme;
  // ("b", "▁") merges first, so "▁ab▁c" merges differently with and without split.
  j["model"]["merges"].insert(j["model"]["merges"].begin(), json::array({"b", kMeta}));
  return j;
}

TEST(SentencePiece, MetaspacePreTokenizer) {
  // split false: ▁ a b ▁ c -> ("b","▁") -> ▁ a b▁ c -> ("▁","a") -> ▁a b▁ c.
  EXPECT_EQ(Tokenizer::from_json(metaspace_json("always", false)).encode("ab c"),
            (TokenIds{kMetaA, kBMeta, kC}));
  // split true (HF tokenizers): pieces "▁ab" and "▁c" are merged separately.
  EXPECT_EQ(Tokenizer::from_json(metaspace_json("always", true)).encode("ab c"),
            (TokenIds{kMetaAB, kMetaId, kC}));
  // prepend_scheme: "first" only at the start of the text, "always" on every segment,
  // "never" nowhere.
  Tokenizer first = Tokenizer::from_json(metaspace_json("first", true));
  Tokenizer always = Tokenizer::from_json(metaspace_json("always", true));
  Tokenizer never = Tokenizer::from_json(metaspace_json("never", true));
  EXPECT_EQ(first.encode("ab"), (TokenIds{kMetaAB}));
  EXPECT_EQ(first.encode("<s>ab"), (TokenIds{1, kAB}));
  EXPECT_EQ(always.encode("<s>ab"), (TokenIds{1, kMetaAB}));
  EXPECT_EQ(never.encode("ab"), (TokenIds{kAB}));
  // A text starting with a space already starts with "▁": nothing is prepended.
  EXPECT_EQ(always.encode(" ab"), (TokenIds{kMetaAB}));
  // The Metaspace decoder drops the first token's leading space, except for "never".
  EXPECT_EQ(always.decode({kMetaAB, kMetaId, kC}), "ab c");
  EXPECT_EQ(never.decode({kMetaAB, kMetaId, kC}), " ab c");
  EXPECT_EQ(never.decode(never.encode(" ab c")), " ab c");
}

TEST(SentencePiece, StreamDecoderAgreesWithDecode) {
  json strip_stop = sp_tokenizer_json();
  strip_stop["decoder"]["decoders"][3]["stop"] = 1;  // not incremental: decoded at flush
  std::vector<Tokenizer> toks = {Tokenizer::from_json(sp_tokenizer_json()),
                                 Tokenizer::from_json(strip_stop),
                                 Tokenizer::from_json(metaspace_json("always", false)),
                                 Tokenizer::from_json(metaspace_json("never", false))};
  std::vector<TokenId> pool = {0, 1, 2, kMetaId, kA, kB, kC, kMetaA, kAB, kMetaAB, kEAcute,
                               kBMeta, byte_id(0x20), byte_id(0x41), byte_id(0xE2),
                               byte_id(0x82), byte_id(0xAC), byte_id(0xC3), byte_id(0xA9),
                               byte_id(0x9F), byte_id(0x0A)};
  std::mt19937 rng(5);
  for (size_t t = 0; t < toks.size(); ++t) {
    for (int trial = 0; trial < 500; ++trial) {
      TokenIds ids;
      const int n = static_cast<int>(rng() % 16);
      for (int i = 0; i < n; ++i) ids.push_back(pool[rng() % pool.size()]);
      for (bool skip : {false, true}) {
        StreamDecoder sd(toks[t], skip);
        std::string all;
        for (TokenId id : ids) {
          std::string piece = sd.push(id);
          ASSERT_TRUE(is_valid_utf8(piece));
          all += piece;
        }
        all += sd.flush();
        ASSERT_EQ(all, toks[t].decode(ids, skip)) << "tokenizer " << t << " trial " << trial;
      }
    }
  }
  // Text comes out as soon as it is final: "▁ab" -> "ab" at once (the leading space is
  // stripped at the stream start only), the first two bytes of "€" are held back.
  StreamDecoder sd(toks[0]);
  EXPECT_EQ(sd.push(kMetaAB), "ab");
  EXPECT_EQ(sd.push(kMetaId), " ");
  EXPECT_EQ(sd.push(byte_id(0xE2)), "");
  EXPECT_EQ(sd.push(byte_id(0x82)), "");
  EXPECT_EQ(sd.push(byte_id(0xAC)), "\xE2\x82\xAC");
  EXPECT_EQ(sd.push(kMetaA), " a");
  EXPECT_EQ(sd.flush(), "");
}

TEST(SentencePiece, SaveLoadRoundTrip) {
  fs::path dir = fs::temp_directory_path() / ("agentr1_sp_test_" + std::to_string(::getpid()));
  for (const json& j : {sp_tokenizer_json(), metaspace_json("first", true)}) {
    Tokenizer tok = Tokenizer::from_json(j);
    fs::remove_all(dir);
    tok.save(dir.string());
    Tokenizer back = Tokenizer::load(dir.string());
    for (const char* s : {"ab c", "c<s>ab", "a\xC3\xA9\xE2\x82\xAC", "\xF0\x9F\x98\x80 ab",
                          "  ab  c ", ""}) {
      EXPECT_EQ(back.encode(s), tok.encode(s)) << s;
      EXPECT_EQ(back.decode(tok.encode(s)), tok.decode(tok.encode(s))) << s;
    }
  }
  fs::remove_all(dir);
}

TEST(SentencePiece, UnsupportedComponentsNameThemselves) {
  json j = sp_tokenizer_json();
  j["decoder"] = json::parse(R"({"type": "CTC"})");
  std::string e = error_of(j);
  EXPECT_NE(e.find("decoder: unsupported decoder type \"CTC\""), std::string::npos) << e;
  EXPECT_NE(e.find("ByteFallback"), std::string::npos) << e;

  j = sp_tokenizer_json();
  j["decoder"]["decoders"][1] = json::parse(R"({"type": "WordPiece"})");
  e = error_of(j);
  EXPECT_NE(e.find("decoder.decoders[1]: unsupported decoder type \"WordPiece\""), std::string::npos) << e;

  j = sp_tokenizer_json();
  j["normalizer"]["normalizers"][1] = json::parse(R"({"type": "Precompiled", "precompiled_charsmap": ""})");
  e = error_of(j);
  EXPECT_NE(e.find("normalizer.normalizers[1]: unsupported normalizer type \"Precompiled\""),
            std::string::npos) << e;
  EXPECT_NE(e.find("Prepend, Replace"), std::string::npos) << e;

  j = metaspace_json("sometimes", false);
  e = error_of(j);
  EXPECT_NE(e.find("prepend_scheme \"sometimes\""), std::string::npos) << e;

  // load() also names the file.
  fs::path dir = fs::temp_directory_path() / ("agentr1_sp_bad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  j = sp_tokenizer_json();
  j["decoder"] = json::parse(R"({"type": "CTC"})");
  std::ofstream(dir / "tokenizer.json") << j.dump();
  try {
    Tokenizer::load(dir.string());
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& err) {
    e = err.what();
    EXPECT_NE(e.find((dir / "tokenizer.json").string()), std::string::npos) << e;
    EXPECT_NE(e.find("\"CTC\""), std::string::npos) << e;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::text

namespace agentr1::text {
namespace {

// A distillation teacher must read the student's ids as the same tokens: the first
// difference is named with both values.
TEST(Tokenizer, VocabularyDifferenceNamesTheFirstOne) {
  EXPECT_EQ(vocabulary_difference(tiny(), tiny()), std::nullopt);
  json renamed = tiny_tokenizer_json();
  renamed["model"]["vocab"].erase("Ġab");
  renamed["model"]["vocab"]["Ġba"] = 8;
  renamed["model"]["merges"] = json::array({"a b", "ab c", "Ġ a"});
  EXPECT_EQ(vocabulary_difference(tiny(), Tokenizer::from_json(renamed, tiny_config())),
            "token id 8 is 'Ġab' vs 'Ġba'");
  json more = tiny_tokenizer_json();
  more["added_tokens"].push_back({{"id", 104}, {"content", "<x>"}, {"special", true}});
  EXPECT_EQ(vocabulary_difference(tiny(), Tokenizer::from_json(more, tiny_config())), "vocabulary size 104 vs 105");
  json unspecial = tiny_tokenizer_json();
  unspecial["added_tokens"][0]["special"] = false;
  EXPECT_EQ(vocabulary_difference(tiny(), Tokenizer::from_json(unspecial, tiny_config())),
            "token id 100 ('<|end|>') is special in the first tokenizer only");
  json eos = tiny_config();
  eos["eos_token"] = "<pad>";
  // Another eos token (a base and an instruct checkpoint) changes no id's meaning.
  EXPECT_EQ(vocabulary_difference(tiny(), Tokenizer::from_json(tiny_tokenizer_json(), eos)), std::nullopt);
}

}  // namespace
}  // namespace agentr1::text
