#include "agentr1/tasks/paper_search/paper_generator.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_set>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"

namespace agentr1::tasks {

namespace {

struct TaskDef {
  const char* name;
  const char* datasets[3];
};

// Topical clusters: a task and its benchmarks. Words here never appear in method names.
const TaskDef kTasks[] = {
    {"molecular property prediction", {"QM9", "ZINC", "MoleculeNet"}},
    {"machine translation", {"WMT14", "IWSLT", "FLORES"}},
    {"image segmentation", {"ADE20K", "Cityscapes", "PASCAL"}},
    {"question answering", {"SQuAD", "NaturalQuestions", "TriviaQA"}},
    {"speech recognition", {"LibriSpeech", "Switchboard", "CommonVoice"}},
    {"code generation", {"HumanEval", "MBPP", "APPS"}},
    {"protein structure prediction", {"CASP14", "CAMEO", "PDB"}},
    {"traffic forecasting", {"METR-LA", "PEMS-BAY", "PEMS08"}},
    {"session recommendation", {"Diginetica", "Yoochoose", "Tmall"}},
    {"object detection", {"COCO", "VOC2007", "Objects365"}},
    {"text summarization", {"CNNDM", "XSum", "arXivSum"}},
    {"anomaly detection", {"MVTec", "KDDCup", "UNSW"}},
};
constexpr int kNumTasks = static_cast<int>(sizeof(kTasks) / sizeof(kTasks[0]));

const char* const kPrefix[] = {"hierarchical", "sparse",  "contrastive", "adaptive", "recurrent", "variational",
                               "spectral",     "latent",  "residual",    "federated", "causal",   "diffusion",
                               "equivariant",  "modular", "stochastic",  "implicit"};
const char* const kMiddle[] = {"kernel", "memory", "mixture", "prototype", "token", "flow", "routing", "lattice",
                               "wavelet", "capsule"};
const char* const kHead[] = {"encoder", "transformer", "network", "distiller", "retriever", "planner", "sampler",
                             "aggregator"};
const char* const kSurnames[] = {"Chen",   "Wang",   "Garcia", "Mueller", "Kim",    "Singh",  "Rossi",  "Novak",
                                 "Tanaka", "Silva",  "Dubois", "Larsen",  "Okafor", "Ivanova", "Haddad", "Costa",
                                 "Nguyen", "Cohen",  "Park",   "Schmidt"};
const char* const kInitials = "ABCDEGHJKLMNRSTWY";
const char* const kVenues[] = {"NeurIPS", "ICML", "ICLR", "ACL", "EMNLP", "CVPR", "KDD", "AAAI"};
const char* const kFiller[] = {
    "The approach is simple to implement and scales to large inputs.",
    "We analyse its behaviour with ablations and error studies.",
    "Code and trained models are released.",
    "Training cost is comparable to strong baselines.",
    "We further discuss limitations and directions for future work.",
    "A theoretical analysis explains the observed gains.",
};
const char* const kQuestion[] = {
    "Could you provide me some studies that propose the {m} for {t} evaluated on {d}?",
    "Which papers apply the {m} to {t} and report results on {d}?",
    "Find papers that use the {m} for {t}, evaluated on {d}.",
    "Give me research that proposes the {m} for {t} with experiments on {d}.",
};

template <class T, size_t N>
constexpr size_t count_of(const T (&)[N]) {
  return N;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    if (start && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    start = c == ' ' || c == '-';
  }
  return out;
}

enum class Kind { kOrigin, kNamed, kAlias, kSurvey };

struct Meta {
  Kind kind;
  int method = -1, task = -1, dataset = -1;
};

struct Method {
  std::string full;   // "adaptive kernel router"
  std::string alias;  // "AKR"
};

}  // namespace

void PaperWorldOptions::validate() const {
  AGENTR1_CHECK(methods >= 4 && methods <= 48, "paper_search option 'methods' must be in 4..48, got " << methods);
  AGENTR1_CHECK(tasks_per_method >= 1 && tasks_per_method <= kNumTasks,
                "paper_search option 'tasks_per_method' must be in 1.." << kNumTasks << ", got " << tasks_per_method);
  AGENTR1_CHECK(search_top_k >= 1 && search_top_k <= 50,
                "paper_search option 'search_top_k' must be in 1..50, got " << search_top_k);
  AGENTR1_CHECK(expand_limit >= 1 && expand_limit <= 100,
                "paper_search option 'expand_limit' must be in 1..100, got " << expand_limit);
  AGENTR1_CHECK(max_calls_per_step >= 1 && max_calls_per_step <= 16,
                "paper_search option 'max_calls_per_step' must be in 1..16, got " << max_calls_per_step);
}

json PaperWorldOptions::to_json() const { return config_to_json(*this); }

std::vector<ScholarQuery> PaperWorld::queries(DataSplit split) const {
  std::vector<ScholarQuery> out;
  for (const ScholarQuery& q : all_queries)
    if (split == DataSplit::kAny || q.split == split) out.push_back(q);
  return out;
}

std::vector<std::string> run_plan(const PaperCorpus& corpus, const json& plan, int search_top_k, int expand_limit) {
  std::vector<std::string> seen;
  std::unordered_set<std::string> have;
  auto add = [&](size_t i) {
    const std::string& id = corpus.paper(i).id;
    if (have.insert(id).second) seen.push_back(id);
  };
  for (const json& step : plan) {
    for (const json& call : step) {
      const std::string name = call.at("name").get<std::string>();
      const json& args = call.at("arguments");
      if (name == "search") {
        for (size_t i : corpus.search(args.at("query").get<std::string>(), static_cast<size_t>(search_top_k))) add(i);
      } else if (name == "expand") {
        auto i = corpus.find(args.at("paper_id").get<std::string>());
        if (!i) continue;
        for (size_t j : corpus.expand(*i, static_cast<size_t>(expand_limit))) add(j);
      }
    }
  }
  return seen;
}

PaperWorld generate_paper_world(const PaperWorldOptions& o) {
  o.validate();
  Rng rng(derive_seed(o.seed, {0x7061706572ULL}));  // "paper"

  // Methods: distinct three-word names, distinct aliases.
  std::vector<Method> methods;
  std::set<std::string> names, aliases;
  while (static_cast<int>(methods.size()) < o.methods) {
    Method m;
    const char* a = kPrefix[rng.choice(count_of(kPrefix))];
    const char* b = kMiddle[rng.choice(count_of(kMiddle))];
    const char* c = kHead[rng.choice(count_of(kHead))];
    m.full = std::string(a) + " " + b + " " + c;
    if (!names.insert(m.full).second) continue;
    std::string al = {static_cast<char>(a[0] - 32), static_cast<char>(b[0] - 32), static_cast<char>(c[0] - 32)};
    std::string base = al;
    for (int k = 2; !aliases.insert(al).second; ++k) al = base + std::to_string(k);
    m.alias = al;
    methods.push_back(m);
  }

  std::vector<Paper> papers;
  std::vector<Meta> meta;
  auto authors = [&]() {
    std::vector<std::string> out;
    const int n = 2 + static_cast<int>(rng.choice(3));
    for (int k = 0; k < n; ++k) {
      std::string name = std::string(1, kInitials[rng.choice(17)]) + ". " + kSurnames[rng.choice(count_of(kSurnames))];
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
    return out;
  };
  auto filler = [&]() { return std::string(" ") + kFiller[rng.choice(count_of(kFiller))]; };
  auto add_paper = [&](Paper p, Meta m) {
    p.authors = authors();
    p.venue = kVenues[rng.choice(count_of(kVenues))];
    papers.push_back(std::move(p));
    meta.push_back(m);
    return papers.size() - 1;
  };

  std::vector<size_t> origin(methods.size());
  for (size_t mi = 0; mi < methods.size(); ++mi) {
    const Method& m = methods[mi];
    Paper p;
    p.title = "The " + title_case(m.full) + ": A General Building Block";
    p.abstract = "We introduce the " + m.full + " (" + m.alias + "), a general model component. The " + m.full +
                 " combines " + m.full.substr(0, m.full.find(' ')) + " structure with efficient inference." + filler();
    p.year = 2015 + static_cast<int>(rng.choice(3));
    origin[mi] = add_paper(std::move(p), {Kind::kOrigin, static_cast<int>(mi), -1, -1});
  }

  // (method, task, dataset) -> its named and alias papers.
  std::map<std::tuple<int, int, int>, std::pair<std::vector<size_t>, std::vector<size_t>>> cell;
  std::vector<std::vector<size_t>> cluster(kNumTasks);  // application papers per task
  for (size_t mi = 0; mi < methods.size(); ++mi) {
    const Method& m = methods[mi];
    std::vector<int> tasks(kNumTasks);
    for (int t = 0; t < kNumTasks; ++t) tasks[t] = t;
    rng.shuffle(tasks.begin(), tasks.end());
    tasks.resize(static_cast<size_t>(o.tasks_per_method));
    for (int t : tasks) {
      for (int d = 0; d < 3; ++d) {
        if (rng.uniform() >= 0.8) continue;
        const std::string task = kTasks[t].name, ds = kTasks[t].datasets[d];
        auto& [named, alias] = cell[{static_cast<int>(mi), t, d}];
        const int n_named = 1 + (rng.bernoulli(0.3) ? 1 : 0);
        const int n_alias = rng.bernoulli(0.5) ? 1 + (rng.bernoulli(0.3) ? 1 : 0) : 0;
        for (int k = 0; k < n_named; ++k) {
          Paper p;
          const std::string mt = title_case(m.full), tt = title_case(task);
          switch (rng.choice(3)) {
            case 0: p.title = mt + " for " + tt + " on " + ds; break;
            case 1: p.title = "Improving " + tt + " with the " + mt; break;
            default: p.title = mt + ": Towards Better " + tt; break;
          }
          if (k > 0) p.title += " Revisited";
          p.abstract = "We apply the " + m.full + " (" + m.alias + ") to " + task + ". Experiments on " + ds +
                       " show consistent gains over prior " + task + " systems." + filler();
          p.year = papers[origin[mi]].year + 1 + static_cast<int>(rng.choice(3));
          const size_t i = add_paper(std::move(p), {Kind::kNamed, static_cast<int>(mi), t, d});
          named.push_back(i);
          cluster[t].push_back(i);
        }
        for (int k = 0; k < n_alias; ++k) {
          Paper p;
          p.title = (rng.bernoulli(0.5) ? "Scaling " + m.alias + " to " : m.alias + " for ") + title_case(task);
          if (k > 0) p.title += " with Fewer Labels";
          p.abstract = "Building on " + m.alias + ", we study " + task + ". On " + ds + " our " + m.alias +
                       " variant sets a new state of the art." + filler();
          p.year = papers[named.front()].year + 1 + static_cast<int>(rng.choice(3));
          const size_t i = add_paper(std::move(p), {Kind::kAlias, static_cast<int>(mi), t, d});
          alias.push_back(i);
          cluster[t].push_back(i);
        }
      }
    }
  }
  for (int t = 0; t < kNumTasks; ++t) {
    Paper p;
    p.title = "A Survey of " + title_case(kTasks[t].name);
    p.abstract = "This survey reviews methods for " + std::string(kTasks[t].name) + " and their results on " +
                 kTasks[t].datasets[0] + ", " + kTasks[t].datasets[1] + " and " + kTasks[t].datasets[2] + ".";
    p.year = 2024;
    add_paper(std::move(p), {Kind::kSurvey, -1, t, -1});
  }

  // Ids: distinct random numbers, so an id says nothing about its paper and the ids of
  // papers not yet seen cannot be guessed from those seen.
  std::set<std::string> used;
  for (Paper& p : papers) {
    char buf[16];
    do {
      std::snprintf(buf, sizeof buf, "P%05d", static_cast<int>(10000 + rng.choice(90000)));
    } while (!used.insert(buf).second);
    p.id = buf;
  }
  // Citations (by index now that ids exist): applications cite their origin, alias papers
  // the first named paper of their cell, each application up to 2 earlier papers of its
  // cluster, surveys their whole cluster.
  std::vector<std::vector<size_t>> refs(papers.size());
  for (auto& [key, np] : cell) {
    const auto& [named, alias] = np;
    const size_t org = origin[static_cast<size_t>(std::get<0>(key))];
    for (size_t i : named) refs[i].push_back(org);
    for (size_t i : alias) {
      refs[i].push_back(org);
      refs[i].push_back(named.front());
    }
  }
  for (int t = 0; t < kNumTasks; ++t) {
    for (size_t i : cluster[t]) {
      const int extra = static_cast<int>(rng.choice(3));
      for (int k = 0; k < extra; ++k) {
        const size_t j = cluster[t][rng.choice(cluster[t].size())];
        if (j != i && papers[j].year < papers[i].year &&
            std::find(refs[i].begin(), refs[i].end(), j) == refs[i].end())
          refs[i].push_back(j);
      }
    }
  }
  for (size_t i = 0; i < papers.size(); ++i) {
    if (meta[i].kind == Kind::kSurvey) {
      const auto& c = cluster[static_cast<size_t>(meta[i].task)];
      for (size_t k = 0; k < c.size() && k < 40; ++k) refs[i].push_back(c[k]);
    }
    papers[i].references.clear();
    for (size_t j : refs[i]) papers[i].references.push_back(papers[j].id);
  }
  // Corpus order: shuffled too.
  std::vector<size_t> order(papers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  rng.shuffle(order.begin(), order.end());
  std::vector<Paper> shuffled;
  shuffled.reserve(papers.size());
  for (size_t i : order) shuffled.push_back(papers[i]);

  PaperWorld w{o, PaperCorpus(std::move(shuffled)), {}};

  // Queries: every cell (levels 1-2) and every pair of datasets of a (method, task) (level 3).
  std::map<std::pair<int, int>, std::vector<int>> by_mt;
  for (auto& [key, np] : cell) by_mt[{std::get<0>(key), std::get<1>(key)}].push_back(std::get<2>(key));
  auto make_query = [&](int mi, int t, const std::vector<int>& ds) {
    const Method& m = methods[static_cast<size_t>(mi)];
    ScholarQuery q;
    q.id = "q" + std::to_string(mi) + "_" + std::to_string(t);
    std::vector<size_t> to_expand;  // the first named paper of each cell with alias papers (they cite it)
    bool any_alias = false;
    json searches = json::array();
    std::string dnames;
    for (int d : ds) {
      const auto& [named, alias] = cell.at({mi, t, d});
      q.id += "_" + std::to_string(d);
      for (size_t i : named) q.gold.push_back(papers[i].id);
      for (size_t i : alias) q.gold.push_back(papers[i].id);
      any_alias = any_alias || !alias.empty();
      if (!alias.empty()) to_expand.push_back(named.front());
      searches.push_back({{"name", "search"},
                          {"arguments", {{"query", m.full + " " + kTasks[t].name + " " + kTasks[t].datasets[d]}}}});
      dnames += (dnames.empty() ? "" : " or ") + std::string(kTasks[t].datasets[d]);
    }
    q.level = ds.size() > 1 ? 3 : (any_alias ? 2 : 1);
    // The split: by (method, task) alone, so every query about a pair (each dataset, both
    // datasets) is on one side and no held-out gold paper is a training query's gold.
    const uint64_t pair = mix64(o.seed ^ (static_cast<uint64_t>(mi) << 32 | static_cast<uint64_t>(t) << 8));
    q.split = pair % 5 == 0 ? DataSplit::kTest : DataSplit::kTrain;
    const uint64_t h = mix64(pair + (ds.size() > 1 ? 97 * static_cast<uint64_t>(ds[0] + 1) + static_cast<uint64_t>(ds[1])
                                                   : static_cast<uint64_t>(ds[0])));
    q.question = replace_all(replace_all(replace_all(kQuestion[(h >> 8) % count_of(kQuestion)], "{m}", m.full), "{t}",
                                         kTasks[t].name),
                             "{d}", dnames);
    // The plan: the searches, then the expansions, at most max_calls_per_step calls a step.
    const size_t per_step = static_cast<size_t>(o.max_calls_per_step);
    if (searches.size() > per_step) return;
    q.plan = json::array({searches});
    json step = json::array();
    for (size_t i : to_expand) {
      if (step.size() == per_step) {
        q.plan.push_back(step);
        step = json::array();
      }
      step.push_back({{"name", "expand"}, {"arguments", {{"paper_id", papers[i].id}}}});
    }
    if (!step.empty()) q.plan.push_back(step);
    // Kept only when every expanded paper was returned by an earlier step (the model can
    // see it) and the plan finds every gold paper.
    std::unordered_set<std::string> before;
    for (size_t k = 0; k < q.plan.size(); ++k) {
      for (const json& c : q.plan[k])
        if (c["name"] == "expand" && !before.count(c["arguments"]["paper_id"].get<std::string>())) return;
      for (const std::string& id : run_plan(w.corpus, json::array({q.plan[k]}), o.search_top_k, o.expand_limit))
        before.insert(id);
    }
    for (const std::string& g : q.gold)
      if (!before.count(g)) return;
    w.all_queries.push_back(std::move(q));
  };
  for (auto& [mt, ds] : by_mt) {
    for (int d : ds) make_query(mt.first, mt.second, {d});
    for (size_t a = 0; a < ds.size(); ++a)
      for (size_t b = a + 1; b < ds.size(); ++b) make_query(mt.first, mt.second, {ds[a], ds[b]});
  }
  return w;
}

std::shared_ptr<const PaperWorld> generated_paper_world(const PaperWorldOptions& options) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const PaperWorld>> cache;
  const std::string key = options.to_json().dump();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto w = std::make_shared<const PaperWorld>(generate_paper_world(options));
  cache.emplace(key, w);
  return w;
}

}  // namespace agentr1::tasks
