// agentr1 generate — sample a completion from a HuggingFace-layout model directory.
//
//   agentr1 generate --model models/qwen3 --prompt "2+2=" --max-new-tokens 16 --temperature 0
//   agentr1 generate --model models/qwen3 --chat --prompt "What is 2+2?" --stop "\n\n"
//   agentr1 generate --model m --prompt "a" --prompt "b" --temperature 0 --json   # one line each
//
// Prints the completion only (stdout); --prompt may be repeated: the prompts are
// generated one after another (same options), one completion per line. Generation stops
// at the tokenizer's eos token, <|im_end|> and the model config's eos id (the stop token
// itself is not printed), at a --stop string, or after --max-new-tokens. The finish
// reason and speed go to the log (stderr). With --json: one line {"prompt_ids", "token_ids", "logprobs", "finish",
// "text"} instead -- the exact ids (the stop token included when it fired) and their
// log-probs log_softmax(logits / T) (T = 1 when greedy), for comparisons with other
// runtimes (tests/gguf_llama_cpp_test.sh).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/core/log.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/engine.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"
#include "command.h"

namespace {

struct GenerateOpts {
  std::string model_dir;       // HF layout: config.json + model.safetensors
  std::string tokenizer_dir;   // tokenizer.json (+ tokenizer_config.json); empty = model_dir
  std::string lora;            // PEFT adapter directory applied on the model; "" = none
  std::vector<std::string> prompts;  // prompt texts (raw, or the user message with --chat), in turn
  bool chat = false;           // wrap the prompt as one user message with the chat template
  bool no_thinking = false;    // --chat: render with enable_thinking=false (Qwen3: empty think block)
  int max_new_tokens = 256;    // cap on generated tokens
  float temperature = 1.0f;    // 0 = greedy
  float top_p = 1.0f;          // nucleus mass in (0, 1]
  int top_k = 0;               // 0 disables
  uint64_t seed = 0;           // sampling seed
  std::vector<std::string> stop;  // extra stop strings
  int threads = 0;             // torch threads, 0 = all cores
  std::string dtype = "fp32";  // weights / KV-cache dtype
  bool json_out = false;       // print ids, log-probs and finish reason as one JSON line
  bool huge_pages = true;      // the weights in transparent huge pages (rollout::EngineOptions::huge_pages)
  bool packed_decode = false;  // one-sequence steps read the decode layout (rollout::EngineOptions::packed_decode)
};

int run_generate(const GenerateOpts& o) {
  using namespace agentr1;
  cli::set_threads(o.threads);
  const std::string tok_dir = o.tokenizer_dir.empty() ? o.model_dir : o.tokenizer_dir;
  text::Tokenizer tok = with_context("loading tokenizer from " + tok_dir,
                                     [&] { return text::Tokenizer::load(tok_dir); });
  std::vector<TokenIds> prompts;
  for (const std::string& prompt : o.prompts) {
    std::string prompt_text = prompt;
    if (o.chat) {
      AGENTR1_CHECK(!tok.chat_template().empty(),
                    "--chat: the tokenizer in " << tok_dir
                                                << " has no chat_template (tokenizer_config.json); "
                                                   "drop --chat or point --tokenizer at an instruct model");
      json messages = json::array({json{{"role", "user"}, {"content", prompt}}});
      text::RenderOptions ro;
      ro.enable_thinking = !o.no_thinking;
      prompt_text = text::ChatTemplate::from_tokenizer(tok)
                        .render(messages, json(), /*add_generation_prompt=*/true, ro);
    }
    prompts.push_back(tok.encode(prompt_text));
    AGENTR1_CHECK(!prompts.back().empty(), "--prompt encodes to zero tokens; give a non-empty prompt");
  }

  const at::ScalarType dtype = model::parse_dtype(o.dtype);
  model::Transformer m = model::load_pretrained(o.model_dir, dtype, at::Device(at::kCPU));
  if (!o.lora.empty()) model::load_lora_adapter(m, o.lora);  // applied beside the base, not merged
  const model::ModelConfig& cfg = m->config();
  AGENTR1_CHECK(tok.vocab_size() <= cfg.vocab_size,
                "tokenizer in " << tok_dir << " has " << tok.vocab_size()
                                << " ids but the model's vocab_size is " << cfg.vocab_size
                                << "; use the tokenizer that belongs to the model");

  SamplingParams sp;
  sp.temperature = o.temperature;
  sp.top_p = o.top_p;
  sp.top_k = o.top_k;
  sp.max_new_tokens = o.max_new_tokens;
  sp.seed = o.seed;
  sp.stop_strings = o.stop;
  auto add_stop = [&](std::optional<TokenId> id) {
    if (id && *id >= 0 && *id < cfg.vocab_size) sp.stop_token_ids.push_back(*id);
  };
  add_stop(tok.eos_token_id());
  add_stop(tok.token_to_id("<|im_end|>"));
  if (cfg.eos_token_id >= 0) add_stop(static_cast<TokenId>(cfg.eos_token_id));

  rollout::EngineOptions eo;
  eo.max_batch = 1;
  eo.prefix_cache = false;
  eo.huge_pages = o.huge_pages;
  eo.packed_decode = o.packed_decode;
  size_t longest = 0;
  for (const TokenIds& p : prompts) longest = std::max(longest, p.size());
  const int64_t want = static_cast<int64_t>(longest) + o.max_new_tokens;
  eo.max_context = static_cast<int>(std::min<int64_t>(want, cfg.max_position_embeddings));
  AGENTR1_CHECK(static_cast<int64_t>(longest) < eo.max_context,
                "a prompt has " << longest << " tokens, at least the model's context of "
                                << cfg.max_position_embeddings << " tokens; shorten it");
  eo.detokenize = [tok](const TokenIds& ids) { return tok.decode(ids); };
  rollout::Engine engine(m, eo);

  for (const TokenIds& prompt_ids : prompts) {
    GenRequest req;
    req.prompt_ids = prompt_ids;
    req.sampling = sp;
    const auto t0 = std::chrono::steady_clock::now();
    GenResult r = engine.submit(std::move(req)).get();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    TokenIds shown = r.token_ids;
    if (r.finish == FinishReason::kStopToken && !shown.empty()) shown.pop_back();
    const std::string out = tok.decode(shown);
    if (o.json_out) {
      json j;
      j["prompt_ids"] = prompt_ids;
      j["token_ids"] = r.token_ids;
      j["logprobs"] = r.logprobs;
      j["finish"] = finish_reason_name(r.finish);
      j["text"] = out;
      const std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace);
      std::fwrite(line.data(), 1, line.size(), stdout);
    } else {
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    AGENTR1_LOG(INFO) << "generate: prompt " << prompt_ids.size() << " tokens, generated "
                      << r.token_ids.size() << " in " << secs << " s ("
                      << (secs > 0 ? r.token_ids.size() / secs : 0.0) << " tok/s), finish "
                      << finish_reason_name(r.finish);
  }
  return 0;
}

agentr1::cli::Registrar reg("generate", "Sample a completion from a model directory",
                            [](CLI::App& app) {
  auto o = std::make_shared<GenerateOpts>();
  app.add_option("--model", o->model_dir, "Model directory (config.json + model.safetensors)")
      ->required();
  app.add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (default: the model directory)");
  app.add_option("--lora", o->lora, "LoRA adapter directory (PEFT format) applied on top of --model");
  app.add_option("--prompt", o->prompts, "Prompt text (repeatable: generated in turn, one output line each)")
      ->required()
      ->allow_extra_args(false);  // one text per --prompt: an unquoted "--prompt a b" is an error
  app.add_flag("--chat", o->chat, "Render the prompt as one user message with the chat template");
  app.add_flag("--no-thinking", o->no_thinking,
               "--chat: render with enable_thinking=false (Qwen3 appends an empty think block; the built-in "
               "model was trained that way)");
  app.add_option("--max-new-tokens", o->max_new_tokens, "Max generated tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--temperature", o->temperature, "Sampling temperature, 0 = greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--top-p", o->top_p, "Nucleus mass in (0, 1]")->capture_default_str();
  app.add_option("--top-k", o->top_k, "Keep the k most likely tokens, 0 = off")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--seed", o->seed, "Sampling seed")->capture_default_str()->check(agentr1::cli::uint64_text());
  app.add_option("--stop", o->stop, "Stop string (repeatable)");
  app.add_option("--threads", o->threads, "Torch threads, 0 = all cores")->capture_default_str();
  app.add_option("--dtype", o->dtype, "Weights dtype: fp32 | bf16 | fp16")->capture_default_str();
  app.add_flag("--huge-pages,!--no-huge-pages", o->huge_pages,
               "Move the weights into transparent huge pages before decoding (the same bits; faster where THP "
               "is 'madvise'; the default). --no-huge-pages: leave them as loaded")
      ->capture_default_str();
  app.add_flag("--packed-decode,!--no-packed-decode", o->packed_decode,
               "Steps that decode one sequence alone read a copy of the weights in the decode layout (one "
               "sequential stream per product: the same tokens, 1.2-1.3x faster per token at batch 1 on a 0.6B "
               "model). It costs a second copy of the weights in memory and building it takes 0.3-7 s (for long "
               "generations). The default, --no-packed-decode: read the weights themselves")
      ->capture_default_str();
  app.add_flag("--json", o->json_out,
               "Print one JSON line {prompt_ids, token_ids, logprobs, finish, text} instead of the text");
  return [o]() -> int { return run_generate(*o); };
});

}  // namespace
