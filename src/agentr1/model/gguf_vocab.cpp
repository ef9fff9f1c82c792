// The tokenizer half of GGUF export: HF tokenizer files -> tokenizer.ggml.* (see
// gguf_vocab.h), the way llama.cpp's convert_hf_to_gguf.py (get_vocab_base,
// _set_vocab_gpt2) and gguf-py's SpecialVocab write them.
#include "agentr1/model/gguf_vocab.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::model {

namespace fs = std::filesystem;

namespace {

// nlohmann's std::map-backed json, not agentr1::json: the ordered variant looks every key
// up linearly while parsing, and a 151k-token vocabulary then takes ~14 s instead of ~0.5 s.
using Json = nlohmann::json;

// llama.cpp's token types (enum llama_token_type).
enum TokenType : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

Json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  AGENTR1_CHECK(in.good(), "cannot open " << p.string());
  try {
    return Json::parse(in);
  } catch (const std::exception& e) {
    throw Error(p.string() + ": invalid JSON: " + e.what());
  }
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Added tokens that are control tokens whatever their "special" flag says (the
// converter's does_token_look_special: <|...|>, DeepSeek's fullwidth bars, a few literals).
bool looks_special(const std::string& t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (starts_with(t, "<|") && ends_with(t, "|>")) return true;
  if (starts_with(t, "<\xef\xbd\x9c") && ends_with(t, "\xef\xbd\x9c>")) return true;  // <｜ ... ｜>
  return starts_with(t, "<unused") && ends_with(t, ">");
}

// Every pre-tokenizer node of tokenizer.json (a Sequence's children, or the one node).
std::vector<Json> pre_tokenizer_nodes(const Json& tok) {
  std::vector<Json> out;
  if (!tok.contains("pre_tokenizer") || tok["pre_tokenizer"].is_null()) return out;
  const Json& p = tok["pre_tokenizer"];
  if (p.value("type", std::string()) == "Sequence" && p.contains("pretokenizers")) {
    for (const auto& n : p["pretokenizers"]) out.push_back(n);
  } else {
    out.push_back(p);
  }
  return out;
}

// tokenizer_config's "<typ>_token": a string or an AddedToken dict; "" when absent.
std::string config_token(const Json& tc, const std::string& typ) {
  const std::string key = typ + "_token";
  if (!tc.is_object() || !tc.contains(key)) return "";
  const Json& v = tc[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// "\xe2\x96\x81" (U+2581, SentencePiece's space) -> " ", as the converter pre-normalises
// user-defined tokens.
std::string replace_sp_space(std::string s) {
  const std::string sp = "\xe2\x96\x81";
  for (size_t i = s.find(sp); i != std::string::npos; i = s.find(sp, i + 1)) s.replace(i, sp.size(), " ");
  return s;
}

}  // namespace

std::string gguf_tokenizer_pre(const Json& tok) {
  // The Split regexes of HF's tokenizer.json for the two families; llama.cpp's
  // LLAMA_VOCAB_PRE_TYPE_QWEN2 and _LLAMA3 implement exactly these.
  static const std::string kQwen2 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static const std::string kLlama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  std::string pattern;
  for (const auto& n : pre_tokenizer_nodes(tok)) {
    if (n.value("type", std::string()) != "Split" || !n.contains("pattern")) continue;
    const Json& p = n["pattern"];
    if (p.contains("Regex") && p["Regex"].is_string()) pattern = p["Regex"].get<std::string>();
  }
  AGENTR1_CHECK(!pattern.empty(),
                "tokenizer.json: no Split pre-tokenizer with a regex; llama.cpp picks its pre-tokenizer by name "
                "(tokenizer.ggml.pre) and GGUF export knows Qwen2's (qwen2) and Llama 3's (llama-bpe) only");
  if (pattern == kQwen2) return "qwen2";
  if (pattern == kLlama3) return "llama-bpe";
  throw Error("tokenizer.json: pre-tokenizer pattern \"" + pattern +
              "\" is neither Qwen2's nor Llama 3's; llama.cpp picks its pre-tokenizer by name (tokenizer.ggml.pre) "
              "and GGUF export knows those two (qwen2, llama-bpe) only");
}

GgufVocab read_gguf_vocab(const std::string& model_dir, int64_t vocab_size, Arch arch) {
  const fs::path dir(model_dir);
  const fs::path tok_path = dir / "tokenizer.json";
  AGENTR1_CHECK(fs::exists(tok_path),
                dir.string() << " has no tokenizer.json; a GGUF file carries its tokenizer. HINT: copy the model's "
                                "tokenizer.json and tokenizer_config.json into it (agentr1 init-model --tokenizer DIR "
                                "and merge-lora copy them)");
  const Json tok = read_json_file(tok_path);
  const std::string where = tok_path.string();
  AGENTR1_CHECK(tok.is_object() && tok.contains("model") && tok["model"].is_object(),
                where << ": no \"model\" object; not a HuggingFace tokenizer.json");
  const Json& model = tok["model"];
  const std::string type = model.value("type", std::string("BPE"));
  bool byte_level = false;
  for (const auto& n : pre_tokenizer_nodes(tok)) byte_level = byte_level || n.value("type", std::string()) == "ByteLevel";
  AGENTR1_CHECK(type == "BPE" && byte_level,
                where << ": a " << type << " tokenizer" << (byte_level ? "" : " without a ByteLevel pre-tokenizer")
                      << "; GGUF export writes byte-level BPE (gpt2-style) tokenizers only, as Qwen2/Qwen3 "
                         "and Llama 3 have");
  GgufVocab v;
  v.pre = with_context(where, [&] { return gguf_tokenizer_pre(tok); });

  // id -> text: the BPE vocabulary, then the added tokens (which win, as in HF).
  std::map<int64_t, std::string> by_id;
  AGENTR1_CHECK(model.contains("vocab") && model["vocab"].is_object(), where << ": model.vocab must be an object");
  for (const auto& kv : model["vocab"].items()) {
    AGENTR1_CHECK(kv.value().is_number_integer(), where << ": model.vocab[\"" << kv.key() << "\"] is not an id");
    by_id[kv.value().get<int64_t>()] = kv.key();
  }
  struct Added {
    std::string content;
    bool special = false;
  };
  std::map<int64_t, Added> added;
  std::vector<std::pair<std::string, int64_t>> added_in_order;  // content, id (first match wins)
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const auto& t : tok["added_tokens"]) {
      AGENTR1_CHECK(t.contains("id") && t["id"].is_number_integer() && t.contains("content") && t["content"].is_string(),
                    where << ": an added_tokens entry lacks an integer id or a string content: " << t.dump());
      const int64_t id = t["id"].get<int64_t>();
      const std::string content = t["content"].get<std::string>();
      added[id] = {content, t.value("special", false)};
      added_in_order.emplace_back(content, id);
      by_id[id] = content;
    }
  }
  AGENTR1_CHECK(!by_id.empty() && by_id.begin()->first >= 0, where << ": no token ids, or a negative one");
  const int64_t max_id = by_id.rbegin()->first;
  AGENTR1_CHECK(max_id < vocab_size, where << ": token id " << max_id << " ('" << by_id.rbegin()->second
                                           << "') is not below config.json's vocab_size " << vocab_size
                                           << "; the tokenizer does not belong to this model");

  v.tokens.reserve(vocab_size);
  v.types.reserve(vocab_size);
  for (int64_t i = 0; i < vocab_size; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      v.tokens.push_back("[PAD" + std::to_string(i) + "]");
      v.types.push_back(kUnused);
      continue;
    }
    auto a = added.find(i);
    if (a == added.end()) {
      v.tokens.push_back(it->second);
      v.types.push_back(kNormal);
    } else if (a->second.special || looks_special(a->second.content)) {
      v.tokens.push_back(a->second.content);
      v.types.push_back(kControl);
    } else {
      v.tokens.push_back(replace_sp_space(a->second.content));
      v.types.push_back(kUserDefined);
    }
  }

  // Merges: "a b" strings as they are, or (tokenizers >= 0.20) [a, b] pairs joined with a
  // space, a space inside a part written as U+0120 as llama.cpp expects.
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const auto& m : model["merges"]) {
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else {
        AGENTR1_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                      where << ": a merge is neither \"a b\" nor [\"a\", \"b\"]: " << m.dump());
        std::string joined;
        for (int k = 0; k < 2; ++k) {
          if (k) joined += ' ';
          for (char c : m[k].get<std::string>()) joined += c == ' ' ? std::string("\xc4\xa0") : std::string(1, c);
        }
        v.merges.push_back(std::move(joined));
      }
    }
  }
  AGENTR1_CHECK(!v.merges.empty(), where << ": model.merges is empty; llama.cpp's BPE tokenizer needs the merges");

  const Json config_json = fs::exists(dir / "config.json") ? read_json_file(dir / "config.json") : Json::object();
  const fs::path tc_path = dir / "tokenizer_config.json";
  const Json tc = fs::exists(tc_path) ? read_json_file(tc_path) : Json::object();
  if (!fs::exists(tc_path)) {
    AGENTR1_LOG(WARN) << dir.string() << " has no tokenizer_config.json: the GGUF file gets no chat template, and "
                                         "special token ids only from config.json";
  }

  // The bos / eos texts: tokenizer_config's "<typ>_token". A TemplateProcessing
  // post-processor (Llama 3: <|begin_of_text|> $A) says whether encode adds them: its
  // first special token, when no bos is configured, becomes the bos (the converter's
  // rule), and add_bos is whether it is the bos; likewise its last one for eos. (The
  // converter also turns a last token that differs from the eos into the eos and the old
  // eos into an eot token; no supported family has one, so that case only says no.)
  std::map<std::string, std::string> token_of;
  for (const char* typ : {"bos", "eos", "unk", "sep", "pad", "mask"}) token_of[typ] = config_token(tc, typ);
  std::map<std::string, bool> add;
  if (tok.contains("post_processor") && tok["post_processor"].is_object()) {
    const Json& pp = tok["post_processor"];
    std::vector<Json> procs;
    if (pp.contains("processors") && pp["processors"].is_array()) {
      for (const auto& p : pp["processors"]) procs.push_back(p);
    } else {
      procs.push_back(pp);
    }
    auto special_of = [](const Json& item) -> std::string {
      if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].contains("id") &&
          item["SpecialToken"]["id"].is_string())
        return item["SpecialToken"]["id"].get<std::string>();
      return "";
    };
    for (const auto& p : procs) {
      if (p.value("type", std::string()) != "TemplateProcessing" || !p.contains("single")) continue;
      const Json& single = p["single"];
      if (!single.is_array() || single.size() < 2) continue;
      for (const auto& [typ, edge] : {std::pair<std::string, std::string>{"bos", special_of(single.front())},
                                      {"eos", special_of(single.back())}}) {
        if (edge.empty()) continue;
        if (token_of[typ].empty()) token_of[typ] = edge;
        add[typ] = edge == token_of[typ];
      }
    }
  }
  for (const char* typ : {"bos", "eos", "unk", "sep", "pad", "mask"}) {
    const std::string k = std::string("add_") + typ + "_token";
    if (tc.contains(k) && tc[k].is_boolean()) add[typ] = tc[k].get<bool>();  // tokenizer_config decides
  }
  for (const char* typ : {"bos", "eos", "sep"})  // the flags llama.cpp reads
    if (add.count(typ)) v.add_flags.emplace_back(std::string("tokenizer.ggml.add_") + typ + "_token", add[typ]);

  // Special token ids: the text above looked up among the added tokens (the first
  // match), else config.json's "<typ>_token_id" when it is one integer.
  static const std::vector<std::pair<std::string, std::string>> kSpecial = {
      {"bos", "bos_token_id"}, {"eos", "eos_token_id"},       {"unk", "unknown_token_id"},
      {"sep", "seperator_token_id"},  // sic: llama.cpp's key name
      {"pad", "padding_token_id"},    {"mask", "mask_token_id"}};
  for (const auto& [typ, key] : kSpecial) {
    std::optional<int64_t> id;
    const std::string& content = token_of[typ];
    if (!content.empty()) {
      for (const auto& [c, i] : added_in_order)
        if (c == content) {
          id = i;
          break;
        }
    }
    const std::string cfg_key = typ + "_token_id";
    if (!id && config_json.contains(cfg_key) && config_json[cfg_key].is_number_integer())
      id = config_json[cfg_key].get<int64_t>();
    if (!id) continue;
    AGENTR1_CHECK(*id >= 0 && *id < vocab_size, "special token " << typ << " has id " << *id << ", outside vocab_size "
                                                                 << vocab_size << "; fix tokenizer_config.json / config.json");
    v.special_ids.emplace_back("tokenizer.ggml." + key, *id);
  }

  if (arch == Arch::kLlama && tc.contains("add_prefix_space") && tc["add_prefix_space"].is_boolean())
    v.add_space_prefix = tc["add_prefix_space"].get<bool>();

  // Chat template: tokenizer_config's (a string, or a list of {name, template}), else
  // chat_template.jinja, else chat_template.json's.
  Json tmpl = tc.contains("chat_template") ? tc["chat_template"] : Json();
  if (tmpl.is_null() && fs::exists(dir / "chat_template.jinja")) {
    std::ifstream in(dir / "chat_template.jinja", std::ios::binary);
    tmpl = std::string(std::istreambuf_iterator<char>(in), {});
  } else if (tmpl.is_null() && fs::exists(dir / "chat_template.json")) {
    const Json j = read_json_file(dir / "chat_template.json");
    if (j.contains("chat_template")) tmpl = j["chat_template"];
  }
  if (tmpl.is_string()) {
    v.chat_template = tmpl.get<std::string>();
  } else if (tmpl.is_array()) {
    for (const auto& t : tmpl) {
      if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["template"].is_string()) continue;
      std::string name = t["name"].get<std::string>();
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      if (name == "default")
        v.chat_template = t["template"].get<std::string>();
      else if (!name.empty())
        v.named_templates.emplace_back(name, t["template"].get<std::string>());
    }
  } else if (!tmpl.is_null()) {
    AGENTR1_LOG(WARN) << tc_path.string() << ": chat_template is neither a string nor a list; not exported";
  }
  return v;
}


}  // namespace agentr1::model
