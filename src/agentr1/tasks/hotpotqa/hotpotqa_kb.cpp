#include "agentr1/tasks/hotpotqa/hotpotqa_kb.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "agentr1/core/error.h"
#include "agentr1/core/hash.h"
#include "agentr1/core/rng.h"
#include "agentr1/tasks/bm25.h"

namespace agentr1::tasks {
namespace {

constexpr uint64_t kKbSeedTag = 0x484f54505141ull;  // "HOTPQA"
constexpr int kMaxLevel = 3;
constexpr int kMaxDraws = 1000;  // name redraws before giving up (never reached in practice)

const std::vector<std::string> kFirstNames = {
    "Anna",  "Boris", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo",  "Ines",  "Jonas", "Karin", "Lukas",
    "Mara",  "Nils",  "Olga",  "Pavel",  "Rosa",  "Stefan", "Tessa", "Ulrich", "Vera", "Walter", "Yara", "Zoran",
    "Alma",  "Bruno", "Celia", "Dario",  "Edith", "Frida", "Gustav", "Hanna", "Ivo",  "Julia", "Kasper", "Lena",
    "Milo",  "Nora",  "Oskar", "Petra",  "Rafael", "Sonja", "Tomas", "Una",   "Viktor", "Wanda"};
const std::vector<std::string> kOnsets = {"b", "d", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
                                          "br", "dr", "gr", "st", "kr", "fl", "h", "j"};
const std::vector<std::string> kVowels = {"a", "e", "i", "o", "u", "ai", "ei", "ou", "ar", "el"};
const std::vector<std::string> kCodas = {"n", "r", "l", "s", "th", "rd", "nd", "sk", "v", "m", "k", "t"};
const std::vector<std::string> kCitySuffixes = {"ford", "holm", "burg", "ton", "vik", "grad", "mouth", "dale",
                                                "field", "haven"};
const std::vector<std::string> kCountrySuffixes = {"ia", "land", "ar", "enia", "ovia", "ara"};
const std::vector<std::string> kAdjectives = {"Silent", "Golden", "Broken", "Hidden", "Last",   "Crimson", "Frozen",
                                              "Distant", "Burning", "Quiet", "Wild",  "Iron",   "Pale",    "Secret",
                                              "Endless", "Lonely",  "Bright", "Dark", "Hollow", "Little"};
const std::vector<std::string> kNouns = {"Harbor", "River", "Garden", "Mountain", "Letter", "Crown",  "Station",
                                         "Mirror", "Forest", "Bridge", "Island",   "Winter", "Summer", "Lantern",
                                         "Road",   "Tower",  "Shore",  "Valley",   "Storm",  "Promise"};
const std::vector<std::string> kStudioSuffixes = {"Pictures", "Studios", "Films", "Media", "Productions"};
const std::vector<std::string> kGenres = {"drama", "comedy", "thriller", "western", "musical", "horror", "war"};
const std::vector<std::string> kOtherJobs = {"painter", "novelist", "composer", "politician", "footballer",
                                             "architect", "poet", "chemist"};
const std::vector<std::string> kRivers = {"Vel", "Oder", "Kama", "Lisa", "Tarn", "Mora", "Sava", "Ness"};

const std::string& pick(Rng& rng, const std::vector<std::string>& v) { return v[rng.choice(v.size())]; }

std::string capitalize(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

std::string stem(Rng& rng) { return pick(rng, kOnsets) + pick(rng, kVowels) + pick(rng, kOnsets) + pick(rng, kVowels); }

struct Person {
  std::string first, last, job, city;
  int year = 0;
  std::string full() const { return first + " " + last; }
};
struct Film {
  std::string adj, noun, genre, director, studio;
  int year = 0;
  std::string title() const { return "The " + adj + " " + noun; }
};
struct Studio {
  std::string stem, suffix, founder, city;
  int year = 0;
  std::string name() const { return stem + " " + suffix; }
};
struct City {
  std::string stem, suffix, country, river;
  std::string name() const { return stem + suffix; }
};

// One problem's world: entities with unique names and the passages about them.
class World {
 public:
  explicit World(Rng& rng) : rng_(rng) {}

  std::string fresh(const std::function<std::string()>& draw) {
    for (int i = 0; i < kMaxDraws; ++i) {
      std::string s = draw();
      if (claim(s)) return s;
    }
    throw Error("hotpotqa generator: could not draw a fresh name (internal)");
  }
  bool claim(const std::string& name) { return used_.insert(name).second; }

  Person person(const std::string& job, const std::string& city, int lo, int hi) {
    Person p;
    p.job = job;
    p.city = city;
    p.year = static_cast<int>(rng_.uniform_int(lo, hi));
    for (int i = 0; i < kMaxDraws; ++i) {
      p.last = capitalize(stem(rng_) + pick(rng_, kCodas));
      p.first = pick(rng_, kFirstNames);
      if (claim(p.full()) && claim(p.last)) return p;
    }
    throw Error("hotpotqa generator: could not draw a fresh person name (internal)");
  }
  std::string city_name() {
    return fresh([&] { return capitalize(stem(rng_)) + pick(rng_, kCitySuffixes); });
  }
  City city() {
    City c;
    for (int i = 0;; ++i) {
      AGENTR1_CHECK(i < kMaxDraws, "hotpotqa generator: could not draw a fresh city name (internal)");
      c.stem = capitalize(stem(rng_));
      c.suffix = pick(rng_, kCitySuffixes);
      if (claim(c.name())) break;
    }
    c.country = fresh([&] { return capitalize(pick(rng_, kOnsets) + pick(rng_, kVowels) + pick(rng_, kOnsets)) +
                                   pick(rng_, kCountrySuffixes); });
    c.river = pick(rng_, kRivers);
    return c;
  }
  Film film(const std::string& director, const std::string& studio) {
    Film f;
    for (int i = 0;; ++i) {
      AGENTR1_CHECK(i < kMaxDraws, "hotpotqa generator: could not draw a fresh film title (internal)");
      f.adj = pick(rng_, kAdjectives);
      f.noun = pick(rng_, kNouns);
      if (claim(f.title())) break;
    }
    f.genre = pick(rng_, kGenres);
    f.director = director;
    f.studio = studio;
    f.year = static_cast<int>(rng_.uniform_int(1950, 2020));
    return f;
  }
  Studio studio(const std::string& founder, const std::string& city) {
    Studio s;
    for (int i = 0;; ++i) {
      AGENTR1_CHECK(i < kMaxDraws, "hotpotqa generator: could not draw a fresh studio name (internal)");
      s.stem = capitalize(stem(rng_) + pick(rng_, kCodas));
      s.suffix = pick(rng_, kStudioSuffixes);
      if (claim(s.stem) && claim(s.name())) break;
    }
    s.founder = founder;
    s.city = city;
    s.year = static_cast<int>(rng_.uniform_int(1900, 1990));
    return s;
  }

  // --- passages ---
  void add(const std::string& title, const std::string& text) { docs.push_back({title, text}); }
  void person_doc(const Person& p) {
    const std::string a = (p.job[0] == 'a' || p.job[0] == 'e') ? "an " : "a ";
    if (rng_.bernoulli(0.5)) {
      add(p.full(), p.full() + " is " + a + p.job + " born in " + p.city + " in " + std::to_string(p.year) + ".");
    } else {
      add(p.full(), p.full() + " (born " + std::to_string(p.year) + ") is " + a + p.job + ". " + p.last +
                        " was born in " + p.city + ".");
    }
  }
  void film_doc(const Film& f) {
    if (rng_.bernoulli(0.5)) {
      add(f.title(), f.title() + " is a " + std::to_string(f.year) + " " + f.genre + " film directed by " + f.director +
                         ". It was produced by " + f.studio + ".");
    } else {
      add(f.title(), f.title() + " is a " + f.genre + " film released in " + std::to_string(f.year) +
                         ". It was directed by " + f.director + " and produced by " + f.studio + ".");
    }
  }
  void studio_doc(const Studio& s) {
    if (rng_.bernoulli(0.5)) {
      add(s.name(), s.name() + " is a film studio founded in " + std::to_string(s.year) + " by " + s.founder +
                        ". It is based in " + s.city + ".");
    } else {
      add(s.name(), s.name() + " is a film production company. It was founded by " + s.founder + " in " +
                        std::to_string(s.year) + " and is based in " + s.city + ".");
    }
  }
  void city_doc(const City& c) {
    if (rng_.bernoulli(0.5)) {
      add(c.name(), c.name() + " is a city in " + c.country + ". It lies on the " + c.river + " river.");
    } else {
      add(c.name(), c.name() + " is a town on the " + c.river + " river. It is the largest town in its region of " +
                        c.country + ".");
    }
  }

  // --- namesake distractors ---
  void person_namesake(const Person& p) {
    Person q;
    for (int i = 0; i < 100; ++i) {
      q.first = pick(rng_, kFirstNames);
      q.last = p.last;
      if (q.first != p.first && claim(q.full())) break;
      q.first.clear();
    }
    if (q.first.empty()) return;
    q.job = pick(rng_, kOtherJobs);
    q.city = city_name();
    q.year = static_cast<int>(rng_.uniform_int(1900, 1995));
    person_doc(q);
  }
  void film_namesake(const Film& f) {
    Film g = f;
    for (int i = 0; i < 100; ++i) {
      if (rng_.bernoulli(0.5)) {
        g.adj = pick(rng_, kAdjectives);
      } else {
        g.noun = pick(rng_, kNouns);
      }
      if (claim(g.title())) break;
      g = f;
    }
    if (g.title() == f.title()) return;
    Person d = person("film director", city_name(), 1900, 1995);
    g.director = d.full();
    g.studio = studio(d.full(), city_name()).name();
    g.year = static_cast<int>(rng_.uniform_int(1950, 2020));
    g.genre = pick(rng_, kGenres);
    film_doc(g);
  }
  void studio_namesake(const Studio& s) {
    static const std::vector<std::string> kOther = {"Records", "Music", "Press", "Books"};
    Studio t = s;
    t.suffix = pick(rng_, kOther);
    if (!claim(t.name())) return;
    t.founder = person("entrepreneur", city_name(), 1880, 1960).full();
    t.city = city_name();
    t.year = static_cast<int>(rng_.uniform_int(1900, 1990));
    const bool label = t.suffix == "Records" || t.suffix == "Music";
    add(t.name(), t.name() + " is " + (label ? "a record label" : "a publishing house") + " founded in " +
                      std::to_string(t.year) + " by " + t.founder + ". It is based in " + t.city + ".");
  }
  void city_namesake(const City& c) {
    City d = c;
    for (int i = 0; i < 20 && d.name() == c.name(); ++i) d.suffix = pick(rng_, kCitySuffixes);
    if (d.name() == c.name() || !claim(d.name())) return;
    d.country = fresh([&] { return capitalize(pick(rng_, kOnsets) + pick(rng_, kVowels) + pick(rng_, kOnsets)) +
                                   pick(rng_, kCountrySuffixes); });
    d.river = pick(rng_, kRivers);
    city_doc(d);
  }

  std::vector<Passage> docs;
  std::vector<std::function<void()>> namesakes;  // one per gold entity

 private:
  Rng& rng_;
  std::unordered_set<std::string> used_;
};

// The entities of one question: a film with its director and studio, the studio's
// founder, the cities they were born in / are based in, and a second of each kind for
// comparisons.
struct Cast {
  City dir_city, founder_city, studio_city;
  Person director, founder;
  Studio studio;
  Film film;
};

Cast draw_cast(World& w) {
  Cast c;
  c.dir_city = w.city();
  c.founder_city = w.city();
  c.studio_city = w.city();
  c.director = w.person("film director", c.dir_city.name(), 1900, 1990);
  c.founder = w.person("entrepreneur", c.founder_city.name(), 1860, 1960);
  c.studio = w.studio(c.founder.full(), c.studio_city.name());
  c.film = w.film(c.director.full(), c.studio.name());
  return c;
}

std::string year(int y) { return std::to_string(y); }

// Fills q (question, answer, type, template, hops) and the gold passages of w; registers
// the namesake distractor makers of the question's entities.
void compose(Rng& rng, int level, World& w, KbQuestion& q) {
  Cast c = draw_cast(w);
  const Film& f = c.film;
  const Person& d = c.director;
  const Studio& s = c.studio;
  const Person& fo = c.founder;
  auto hop = [&](const std::string& query, const std::string& found) { q.hops.push_back({query, query, found}); };
  auto film_gold = [&] { w.film_doc(f); w.namesakes.push_back([&w, f] { w.film_namesake(f); }); };
  auto person_gold = [&](const Person& p) { w.person_doc(p); w.namesakes.push_back([&w, p] { w.person_namesake(p); }); };
  auto studio_gold = [&](const Studio& st) { w.studio_doc(st); w.namesakes.push_back([&w, st] { w.studio_namesake(st); }); };
  auto city_gold = [&](const City& ci) { w.city_doc(ci); w.namesakes.push_back([&w, ci] { w.city_namesake(ci); }); };
  q.level = level;
  if (level == 1) {
    q.type = "lookup";
    switch (rng.choice(4)) {
      case 0:
        q.template_name = "film_director";
        q.question = "Who directed " + f.title() + "?";
        q.answer = d.full();
        hop(f.title(), d.full());
        film_gold();
        break;
      case 1:
        q.template_name = "person_birthplace";
        q.question = "Where was " + d.full() + " born?";
        q.answer = d.city;
        hop(d.full(), d.city);
        person_gold(d);
        break;
      case 2:
        q.template_name = "studio_founded";
        q.question = "When was " + s.name() + " founded?";
        q.answer = year(s.year);
        hop(s.name(), year(s.year));
        studio_gold(s);
        break;
      default:
        q.template_name = "city_country";
        q.question = "In which country is " + c.dir_city.name() + "?";
        q.answer = c.dir_city.country;
        hop(c.dir_city.name(), c.dir_city.country);
        city_gold(c.dir_city);
        break;
    }
    return;
  }
  if (level == 2 && rng.bernoulli(0.5)) {
    q.type = "comparison";
    switch (rng.choice(4)) {
      case 0: {
        Studio s2 = w.studio(w.person("entrepreneur", w.city_name(), 1860, 1960).full(), w.city_name());
        if (s2.year == s.year) s2.year += 1 + static_cast<int>(rng.choice(20));
        q.template_name = "studio_founded_first";
        q.question = "Which was founded first, " + s.name() + " or " + s2.name() + "?";
        q.answer = s.year < s2.year ? s.name() : s2.name();
        hop(s.name(), year(s.year));
        hop(s2.name(), year(s2.year));
        studio_gold(s);
        studio_gold(s2);
        break;
      }
      case 1: {
        Person p2 = w.person("film director", w.city_name(), 1900, 1990);
        if (p2.year == d.year) p2.year += 1 + static_cast<int>(rng.choice(20));
        q.template_name = "person_born_first";
        q.question = "Who was born first, " + d.full() + " or " + p2.full() + "?";
        q.answer = d.year < p2.year ? d.full() : p2.full();
        hop(d.full(), year(d.year));
        hop(p2.full(), year(p2.year));
        person_gold(d);
        person_gold(p2);
        break;
      }
      case 2: {
        Film f2 = w.film(w.person("film director", w.city_name(), 1900, 1990).full(), s.name());
        if (f2.year == f.year) f2.year += 1 + static_cast<int>(rng.choice(20));
        q.template_name = "film_released_first";
        q.question = "Which film came out first, " + f.title() + " or " + f2.title() + "?";
        q.answer = f.year < f2.year ? f.title() : f2.title();
        hop(f.title(), year(f.year));
        hop(f2.title(), year(f2.year));
        film_gold();
        w.film_doc(f2);
        w.namesakes.push_back([&w, f2] { w.film_namesake(f2); });
        break;
      }
      default: {
        const bool same = rng.bernoulli(0.5);
        Person p2 = w.person(pick(rng, kOtherJobs), same ? d.city : w.city_name(), 1900, 1990);
        q.template_name = "same_birthplace";
        q.question = "Were " + d.full() + " and " + p2.full() + " born in the same city?";
        q.answer = same ? "yes" : "no";
        hop(d.full(), d.city);
        hop(p2.full(), p2.city);
        person_gold(d);
        person_gold(p2);
        break;
      }
    }
    return;
  }
  if (level == 2) {
    q.type = "bridge";
    switch (rng.choice(4)) {
      case 0:
        q.template_name = "director_birthplace";
        q.question = "Where was the director of " + f.title() + " born?";
        q.answer = d.city;
        hop(f.title(), d.full());
        hop(d.full(), d.city);
        film_gold();
        person_gold(d);
        break;
      case 1:
        q.template_name = "studio_founder";
        q.question = "Who founded the studio that produced " + f.title() + "?";
        q.answer = fo.full();
        hop(f.title(), s.name());
        hop(s.name(), fo.full());
        film_gold();
        studio_gold(s);
        break;
      case 2:
        q.template_name = "person_birth_country";
        q.question = "In which country was " + d.full() + " born?";
        q.answer = c.dir_city.country;
        hop(d.full(), d.city);
        hop(d.city, c.dir_city.country);
        person_gold(d);
        city_gold(c.dir_city);
        break;
      default:
        q.template_name = "film_studio_founded";
        q.question = "When was the studio that produced " + f.title() + " founded?";
        q.answer = year(s.year);
        hop(f.title(), s.name());
        hop(s.name(), year(s.year));
        film_gold();
        studio_gold(s);
        break;
    }
    return;
  }
  q.type = "three_hop";
  switch (rng.choice(3)) {
    case 0:
      q.template_name = "director_birth_country";
      q.question = "In which country was the director of " + f.title() + " born?";
      q.answer = c.dir_city.country;
      hop(f.title(), d.full());
      hop(d.full(), d.city);
      hop(d.city, c.dir_city.country);
      film_gold();
      person_gold(d);
      city_gold(c.dir_city);
      break;
    case 1:
      q.template_name = "studio_founder_birthplace";
      q.question = "Where was the founder of the studio that produced " + f.title() + " born?";
      q.answer = fo.city;
      hop(f.title(), s.name());
      hop(s.name(), fo.full());
      hop(fo.full(), fo.city);
      film_gold();
      studio_gold(s);
      person_gold(fo);
      break;
    default:
      q.template_name = "studio_country";
      q.question = "In which country is the studio that produced " + f.title() + " based?";
      q.answer = c.studio_city.country;
      hop(f.title(), s.name());
      hop(s.name(), s.city);
      hop(s.city, c.studio_city.country);
      film_gold();
      studio_gold(s);
      city_gold(c.studio_city);
      break;
  }
}

// The generation guarantees (see the header); false -> redraw.
bool solvable(const KbQuestion& q) {
  if (q.answer.empty()) return false;
  std::unordered_set<std::string> titles;
  for (const Passage& p : q.docs) {
    if (!titles.insert(p.title).second) return false;
  }
  std::vector<std::string> texts;
  for (const Passage& p : q.docs) texts.push_back(p.title + " " + p.text);
  const Bm25Index index(texts);
  for (const KbHop& h : q.hops) {
    const std::vector<Bm25Hit> hits = index.search(h.query, 2);
    if (hits.empty() || q.docs[hits[0].doc].title != h.title) return false;
    if (hits.size() > 1 && hits[1].score >= hits[0].score) return false;  // a tie could flip
    if (h.found.empty() || q.docs[hits[0].doc].text.find(h.found) == std::string::npos) return false;
  }
  return true;
}

KbQuestion draw(uint64_t seed, int64_t index, int attempt, const KbOptions& opts) {
  Rng rng(derive_seed(seed, {kKbSeedTag, static_cast<uint64_t>(index), static_cast<uint64_t>(attempt)}));
  KbQuestion q;
  q.seed = seed;
  q.index = index;
  World w(rng);
  const int level = static_cast<int>(rng.uniform_int(opts.min_level, opts.max_level));
  compose(rng, level, w, q);
  const std::vector<std::function<void()>> makers = w.namesakes;
  for (int i = 0; i < opts.distractors && !makers.empty(); ++i) makers[rng.choice(makers.size())]();
  q.docs = std::move(w.docs);
  rng.shuffle(q.docs.begin(), q.docs.end());
  return q;
}

std::vector<std::string> split_sentences(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '.' && text[i + 1] == ' ') {
      out.push_back(text.substr(start, i + 1 - start));
      start = i + 2;
    }
  }
  out.push_back(text.substr(start));
  return out;
}

}  // namespace

void KbOptions::validate() const {
  AGENTR1_CHECK(min_level >= 1 && min_level <= kMaxLevel,
                "hotpotqa option 'min_level' must be in 1.." << kMaxLevel << " (searches per question), got " << min_level);
  AGENTR1_CHECK(max_level >= 1 && max_level <= kMaxLevel,
                "hotpotqa option 'max_level' must be in 1.." << kMaxLevel << " (searches per question), got " << max_level);
  AGENTR1_CHECK(min_level <= max_level, "hotpotqa options: min_level must be <= max_level, got min_level "
                                            << min_level << " > max_level " << max_level);
  AGENTR1_CHECK(distractors >= 0 && distractors <= 32,
                "hotpotqa option 'distractors' must be in 0..32 (passages per question), got " << distractors);
  AGENTR1_CHECK(max_attempts >= 1, "hotpotqa generator max_attempts must be >= 1, got " << max_attempts);
}

DataSplit kb_question_split(const std::string& question) {
  return (mix64(fnv1a64(question)) & 1u) == 0 ? DataSplit::kTrain : DataSplit::kTest;
}

KbQuestion generate_kb_question(uint64_t seed, int64_t index, const KbOptions& opts) {
  opts.validate();
  for (int attempt = 0; attempt < opts.max_attempts; ++attempt) {
    KbQuestion q = draw(seed, index, attempt, opts);
    if (opts.split != DataSplit::kAny && kb_question_split(q.question) != opts.split) continue;
    if (solvable(q)) return q;
  }
  throw Error("hotpotqa generator: no valid question for seed " + std::to_string(seed) + " index " +
              std::to_string(index) + " within " + std::to_string(opts.max_attempts) + " attempts");
}

json kb_question_info(const KbQuestion& q) {
  json hops = json::array();
  json facts = json::array();
  for (const KbHop& h : q.hops) {
    hops.push_back({{"query", h.query}, {"title", h.title}, {"found", h.found}});
    int sentence = 0;
    for (const Passage& p : q.docs) {
      if (p.title != h.title) continue;
      const std::vector<std::string> sents = split_sentences(p.text);
      for (size_t i = 0; i < sents.size(); ++i) {
        if (sents[i].find(h.found) != std::string::npos) {
          sentence = static_cast<int>(i);
          break;
        }
      }
    }
    facts.push_back(json::array({h.title, sentence}));
  }
  return {{"type", q.type}, {"level", q.level}, {"template", q.template_name}, {"hops", hops},
          {"supporting_facts", facts}};
}

}  // namespace agentr1::tasks
