// agentr1 tokenize — text <-> token ids with a HuggingFace tokenizer directory.
//
//   echo '"Hello world"' | agentr1 tokenize --tokenizer models/qwen3      # [9707,1879]
//   echo '[9707,1879]'   | agentr1 tokenize --tokenizer models/qwen3 --decode
//
// Reads one JSON value per line on stdin (a string to encode, or with --decode an array
// of ids) and prints one JSON line per input line; a blank input line gives a blank
// output line, so output line N always answers input line N. A bad line stops with a
// one-line error naming the line number (exit code 1).
#include <iostream>
#include <memory>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "command.h"

namespace {

struct TokenizeOpts {
  std::string dir;            // directory with tokenizer.json (+ tokenizer_config.json)
  bool decode = false;        // ids -> text instead of text -> ids
  bool no_special = false;    // encode: do not match special tokens in the text
  bool skip_special = false;  // decode: drop special tokens
};

int run_tokenize(const TokenizeOpts& o) {
  using agentr1::Error;
  using agentr1::json;
  agentr1::text::Tokenizer tok = agentr1::text::Tokenizer::load(o.dir);
  std::ios::sync_with_stdio(false);
  std::string line;
  size_t lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {  // blank: keep the lines aligned
      std::cout << '\n';
      continue;
    }
    json v;
    try {
      v = json::parse(line);
    } catch (const json::exception& e) {
      throw Error("stdin line " + std::to_string(lineno) + ": not valid JSON (" + e.what() +
                  "); expected " + (o.decode ? "an array of ids" : "a JSON string"));
    }
    if (!o.decode) {
      if (!v.is_string()) {
        throw Error("stdin line " + std::to_string(lineno) + ": expected a JSON string, got " +
                    v.type_name());
      }
      json ids = tok.encode(v.get<std::string>(), !o.no_special);
      std::cout << ids.dump() << '\n';
    } else {
      bool ok = v.is_array();
      agentr1::TokenIds ids;
      if (ok) {
        for (const auto& x : v) {
          if (!x.is_number_integer()) {
            ok = false;
            break;
          }
          ids.push_back(x.get<agentr1::TokenId>());
        }
      }
      if (!ok) {
        throw Error("stdin line " + std::to_string(lineno) +
                    ": expected a JSON array of integer ids, got " + line.substr(0, 80));
      }
      std::string text = agentr1::with_context("stdin line " + std::to_string(lineno),
                                               [&] { return tok.decode(ids, o.skip_special); });
      std::cout << json(text).dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    }
  }
  std::cout.flush();
  return 0;
}

agentr1::cli::Registrar reg("tokenize", "Text <-> token ids (JSON lines on stdin/stdout)",
                            [](CLI::App& app) {
  auto opts = std::make_shared<TokenizeOpts>();
  app.add_option("--tokenizer", opts->dir,
                 "directory with tokenizer.json and tokenizer_config.json")
      ->required();
  app.add_flag("--decode", opts->decode,
               "read JSON arrays of ids, print JSON strings (default: strings -> ids)");
  app.add_flag("--no-special", opts->no_special,
               "encode: treat special tokens such as <|im_end|> in the text as plain text");
  app.add_flag("--skip-special", opts->skip_special, "decode: drop special tokens");
  return [opts]() -> int { return run_tokenize(*opts); };
});

}  // namespace
