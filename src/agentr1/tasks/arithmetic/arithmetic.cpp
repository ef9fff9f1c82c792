#include "agentr1/tasks/arithmetic/arithmetic.h"

#include <algorithm>
#include <optional>

#include "agentr1/core/error.h"
#include "agentr1/core/hash.h"
#include "agentr1/core/rng.h"

namespace agentr1::tasks {

const char* const kDefaultArithSystemPrompt =
    "You are a careful math assistant. Use the calculator tool for every calculation. "
    "End your reply with the final answer on its own line as #### <number>.";

const char* const kPythonArithSystemPrompt =
    "You are a careful math assistant. Compute every result with the python tool: write the "
    "calculation as Python code that prints the result, e.g. print((120 + 35) * 4). "
    "End your reply with the final answer on its own line as #### <number>.";

ArithTool parse_arith_tool(const std::string& name) {
  if (name == "calculator") return ArithTool::kCalculator;
  if (name == "python") return ArithTool::kPython;
  throw Error("arithmetic tool must be one of calculator, python (the tool the problems are solved with), got '" +
              name + "'");
}

const char* arith_tool_name(ArithTool tool) { return tool == ArithTool::kPython ? "python" : "calculator"; }

std::string python_expression(const std::string& expression) {
  std::string out;
  out.reserve(expression.size() + 4);
  for (char c : expression) {
    out += c;
    if (c == '/') out += '/';
  }
  return out;
}

namespace {

// Seed-path constants: separate the arithmetic task's streams from everything else.
constexpr uint64_t kSeedArith = 0x6172697468ULL;  // "arith"

// --- templates -------------------------------------------------------------------
// Placeholders: {name} {Pron} {pron} {obj} {poss} {Poss} {a} {b} {c} {city1} {city2}.
// Product clauses mention {b} (a count) then {c} (a per-item size); the expression
// is "b * c" in that order.
struct Scenario {
  const char* id;
  std::vector<const char*> start;          // {a}: the starting quantity
  std::vector<const char*> start_product;  // {b} groups of {c}
  std::vector<const char*> add;            // + {b}
  std::vector<const char*> sub;            // - {b}
  std::vector<const char*> add_product;    // + {b} * {c}
  std::vector<const char*> sub_product;    // - {b} * {c}
  std::vector<const char*> question;       // about the running total
  std::vector<const char*> mul_final;      // * {b} (changes the unit), last operation
  std::vector<const char*> mul_question;
  std::vector<const char*> div_final;      // / {b}, exact, last operation
  std::vector<const char*> div_question;
};

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> kScenarios = {
      {"savings",
       {"{name} has ${a} in {poss} savings account.", "{name} starts the month with ${a}.",
        "{name} has saved ${a} so far."},
       {"{name} saved ${c} every month for {b} months.",
        "{name} worked {b} shifts and earned ${c} per shift."},
       {"{Pron} earns ${b} from a weekend job.", "Then {poss} aunt gives {obj} ${b}.",
        "{Pron} sells an old bicycle for ${b}.", "{Pron} wins ${b} in a quiz contest."},
       {"{Pron} spends ${b} on a new phone.", "Then {pron} pays a repair bill of ${b}.",
        "{Pron} pays ${b} for a train pass.", "{Pron} gives ${b} to a friend for a gift."},
       {"{Pron} sells {b} handmade lamps for ${c} each.",
        "{Pron} also works {b} hours of overtime at ${c} per hour."},
       {"{Pron} buys {b} chairs that cost ${c} each.",
        "{Pron} pays for {b} concert tickets at ${c} per ticket."},
       {"How many dollars does {name} have now?", "How much money, in dollars, does {name} have at the end?"},
       {"{Pron} saves this same amount every year for {b} years."},
       {"How many dollars does {pron} save in total?"},
       {"{Pron} then splits all of the money equally among {b} charities.",
        "{Pron} shares all of it equally with {b} cousins, leaving nothing for {obj}self."},
       {"How many dollars does each one receive?", "How many dollars does each get?"}},
      {"warehouse",
       {"A warehouse stores {a} boxes.", "There are {a} boxes in a storage hall.",
        "A shipping depot holds {a} boxes on Monday morning."},
       {"A warehouse has {b} shelves with {c} boxes on each shelf.",
        "A storage hall has {b} rows of {c} boxes each."},
       {"A truck delivers {b} more boxes.", "Later, {b} boxes arrive from the factory.",
        "A supplier drops off another {b} boxes.", "The night crew brings in {b} boxes."},
       {"Workers ship {b} boxes to customers.", "Then {b} boxes are sent to a shop downtown.",
        "{b} boxes are found damaged and thrown away.", "A customer collects {b} boxes."},
       {"Then {b} trucks arrive, each carrying {c} boxes.",
        "Workers unload {b} pallets with {c} boxes on each pallet."},
       {"Workers load {b} vans with {c} boxes each and send them away.",
        "{b} stores each pick up {c} boxes."},
       {"How many boxes are in the warehouse now?", "How many boxes are left at the end of the day?"},
       {"Every box holds {b} cans of soup.", "Each box contains {b} bottles of juice."},
       {"How many of them are there in all the boxes together?"},
       {"The boxes are then divided equally among {b} stores.",
        "All the boxes are shared equally between {b} delivery routes."},
       {"How many boxes does each one get?"}},
      {"road_trip",
       {"A road trip from {city1} to {city2} is {a} km long.",
        "The drive from {city1} to {city2} covers {a} km."},
       {"A delivery route has {b} legs of {c} km each.",
        "A rally course consists of {b} stages of {c} km each."},
       {"A detour adds {b} km to the trip.", "Road works add another {b} km.",
        "A wrong turn adds {b} km.", "A closed bridge adds {b} km."},
       {"On the first day, the family drives {b} km.", "The driver covers {b} km before lunch.",
        "After a rest stop they drive {b} km more.", "That evening they cover {b} km."},
       {"A change of plans adds {b} side trips of {c} km each.",
        "They decide to visit {b} lakes, each {c} km out of the way."},
       {"They then drive {c} km per day for {b} days.",
        "The bus covers {c} km on each of the next {b} days."},
       {"How many kilometers are left to drive?", "How many kilometers remain?"},
       {},
       {},
       {"The rest is split into {b} equal stages.",
        "They want to drive the remaining distance in {b} days, the same distance each day."},
       {"How many kilometers is each part?", "How many kilometers is that per part?"}},
      {"factory",
       {"A toy factory has {a} toys in stock.", "A factory has built {a} toy trains this week."},
       {"{b} workers each assemble {c} toys.",
        "A factory runs {b} machines that each make {c} toys."},
       {"The night shift makes {b} more toys.", "Another {b} toys come off the line.",
        "On Saturday, {b} extra toys are made.", "A second team builds {b} toys."},
       {"{b} toys fail the quality check and are recycled.", "Then {b} toys are sent to a shop.",
        "A school buys {b} toys.", "{b} toys are given to a hospital."},
       {"Then {b} more workers join and each makes {c} toys.",
        "{b} new machines are switched on and each produces {c} toys."},
       {"{b} stores each order {c} toys, which are shipped right away.",
        "The factory fills {b} crates with {c} toys each and ships them."},
       {"How many toys does the factory have now?", "How many toys are in stock at the end?"},
       {"Each of these toys needs {b} screws.", "Every one of these toys uses {b} small beads."},
       {"How many of them are needed in total?"},
       {"The toys are packed into {b} boxes with the same number of toys in each box.",
        "The toys are split equally among {b} shops."},
       {"How many toys are in each one?", "How many toys does each one get?"}},
      {"library",
       {"A library owns {a} books.", "A school library has {a} books on its shelves."},
       {"A library has {b} shelves holding {c} books each.",
        "A library has {b} bookcases with {c} books in each."},
       {"It buys {b} new books.", "A donor gives the library {b} books.",
        "Readers return {b} books that were lent out last month.", "A bookshop donates {b} books."},
       {"{b} books are lent out.", "Then {b} damaged books are recycled.",
        "It sells {b} old books at a fair.", "{b} books go to a school nearby."},
       {"It receives {b} boxes with {c} books in each box.",
        "The city sends {b} crates of {c} books each."},
       {"{b} schools borrow {c} books each.", "It gives away {b} sets of {c} books each."},
       {"How many books are in the library now?", "How many books does the library have at the end?"},
       {"Each book has {b} pages.", "Every one of these books gets {b} new stickers."},
       {"How many of them are there in total?"},
       {"The books are spread evenly across {b} rooms.",
        "The books are placed equally on {b} new shelves."},
       {"How many books go in each one?"}},
      {"orchard",
       {"A farm has {a} apples in storage.", "A fruit stand has {a} apples."},
       {"An orchard has {b} trees, and each tree gives {c} apples.",
        "A farmer picks {c} apples from each of {b} trees."},
       {"The farmer picks {b} more apples.", "Neighbours bring {b} more apples.",
        "A delivery adds {b} apples.", "The farmer's son picks {b} apples."},
       {"{b} apples are sold at the market.", "Then {b} apples go bad and are thrown out.",
        "The cook uses {b} apples for pies.", "{b} apples are given to a school."},
       {"Helpers bring {b} baskets with {c} apples each.",
        "The farmer harvests {b} more rows with {c} apples per row."},
       {"The farmer fills {b} crates with {c} apples each and sells them.",
        "{b} restaurants each buy {c} apples."},
       {"How many apples are there now?", "How many apples does the farm have at the end?"},
       {"Each apple sells for {b} cents."},
       {"How many cents does the farmer earn by selling all of them?"},
       {"The apples are packed equally into {b} bags.", "The apples are shared equally among {b} families."},
       {"How many apples does each one get?"}},
      {"stadium",
       {"A stadium has {a} fans inside.", "There are {a} fans at a football match."},
       {"{b} buses bring {c} fans each to a stadium.",
        "A stadium has {b} sections with {c} fans in each section."},
       {"{b} more fans come through the gates.", "Then {b} late fans arrive.",
        "Another {b} fans walk in after the break.", "A tour group of {b} fans arrives."},
       {"{b} fans leave at half-time.", "Then {b} people go home early.",
        "Security sends {b} fans without tickets out.", "{b} fans leave to catch a train."},
       {"{b} more buses arrive with {c} fans on each.", "{b} trains bring {c} fans each."},
       {"{b} groups of {c} fans leave early.", "{b} buses with {c} fans each depart before the end."},
       {"How many fans are in the stadium now?", "How many fans are there at the end?"},
       {"Each of them paid ${b} for a ticket."},
       {"How many dollars were paid for tickets in total?"},
       {"Afterwards they all go home on {b} trains, with the same number of people on each train.",
        "For a photo, everyone is split into {b} groups of equal size."},
       {"How many people are in each one?"}},
      {"bakery",
       {"A bakery has ${a} in its cash register.", "{name}'s bakery has made ${a} today."},
       {"A bakery sells {b} cakes at ${c} each.", "{name}'s bakery sells {b} wedding cakes for ${c} each."},
       {"It also gets a catering order worth ${b}.", "Then a customer pays ${b} for a large order.",
        "A cafe pays ${b} for bread.", "Customers leave ${b} in the tip jar."},
       {"It pays ${b} for flour.", "The owner pays a ${b} electricity bill.",
        "It spends ${b} on a new oven part.", "It pays ${b} in rent."},
       {"It also sells {b} pies for ${c} each.", "Later it sells {b} trays of cookies at ${c} per tray."},
       {"It pays {b} workers ${c} each for the day.", "It buys {b} bags of sugar at ${c} per bag."},
       {"How many dollars does the bakery have now?",
        "How much money does the bakery have at the end, in dollars?"},
       {"The bakery earns the same amount every day for {b} days."},
       {"How many dollars does it earn over those days?"},
       {"The money is split equally among {b} partners.",
        "All of it is divided equally among {b} employees as a bonus."},
       {"How many dollars does each one get?"}},
  };
  return kScenarios;
}

struct Person {
  const char* name;
  bool female;
};

const std::vector<Person>& people() {
  static const std::vector<Person> kPeople = {
      {"Maria", true},  {"James", false}, {"Aisha", true},  {"Kenji", false}, {"Lena", true},
      {"Omar", false},  {"Sofia", true},  {"Lucas", false}, {"Priya", true},  {"Diego", false},
      {"Mei", true},    {"Tom", false},   {"Fatima", true}, {"Noah", false},  {"Elena", true},
      {"Samuel", false}};
  return kPeople;
}

const std::vector<const char*>& cities() {
  static const std::vector<const char*> kCities = {"Lyon",   "Denver", "Osaka",  "Porto",
                                                    "Dublin", "Austin", "Krakow", "Perth"};
  return kCities;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

struct Fill {
  const Person* person;
  std::string city1, city2;
};

std::string fill(const char* tmpl, const Fill& f, int64_t a, int64_t b = 0, int64_t c = 0) {
  std::string s = tmpl;
  bool fem = f.person->female;
  replace_all(s, "{name}", f.person->name);
  replace_all(s, "{Pron}", fem ? "She" : "He");
  replace_all(s, "{pron}", fem ? "she" : "he");
  replace_all(s, "{obj}", fem ? "her" : "him");
  replace_all(s, "{Poss}", fem ? "Her" : "His");
  replace_all(s, "{poss}", fem ? "her" : "his");
  replace_all(s, "{city1}", f.city1);
  replace_all(s, "{city2}", f.city2);
  replace_all(s, "{a}", std::to_string(a));
  replace_all(s, "{b}", std::to_string(b));
  replace_all(s, "{c}", std::to_string(c));
  // A sentence may start with a number placeholder; numbers need no capitalising.
  return s;
}

template <class T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[rng.choice(v.size())];
}

// A template not used yet in this problem, when there is one (so a problem never says
// "38 are sold at the market. 75 are sold at the market.").
const char* pick_fresh(Rng& rng, const std::vector<const char*>& v, std::vector<const char*>* used) {
  std::vector<const char*> fresh;
  for (const char* t : v) {
    if (std::find(used->begin(), used->end(), t) == used->end()) fresh.push_back(t);
  }
  const char* t = fresh.empty() ? pick(rng, v) : pick(rng, fresh);
  used->push_back(t);
  return t;
}

int64_t pow10(int d) {
  int64_t p = 1;
  for (int i = 0; i < d; ++i) p *= 10;
  return p;
}

// Digit count uniform in [lo_d, hi_d], then the value uniform among numbers with that
// many digits (so 2-digit and 3-digit amounts are equally common).
int64_t draw_digits(Rng& rng, int lo_d, int hi_d) {
  int d = static_cast<int>(rng.uniform_int(lo_d, hi_d));
  return rng.uniform_int(d == 1 ? 1 : pow10(d - 1), pow10(d) - 1);
}

enum class Clause { kAdd, kSub, kAddProduct, kSubProduct };
enum class Terminal { kNone, kMul, kDiv };

std::string join_sentences(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += " ";
    out += p;
  }
  return out;
}

// One draw; nullopt when this draw cannot be completed (no exact divisor).
std::optional<ArithProblem> draw(Rng& rng, int level, const ArithmeticOptions& o) {
  const Scenario& sc = pick(rng, scenarios());
  Fill f;
  f.person = &pick(rng, people());
  size_t c1 = rng.choice(cities().size());
  size_t c2 = (c1 + 1 + rng.choice(cities().size() - 1)) % cities().size();
  f.city1 = cities()[c1];
  f.city2 = cities()[c2];

  int remaining = level;
  Terminal term = Terminal::kNone;
  if (!sc.div_final.empty() && rng.bernoulli(0.3)) {
    term = Terminal::kDiv;
  } else if (!sc.mul_final.empty() && rng.bernoulli(0.2)) {
    term = Terminal::kMul;
  }
  if (term != Terminal::kNone) --remaining;
  bool start_product = remaining >= 1 && rng.bernoulli(0.35);
  if (start_product) --remaining;
  std::vector<Clause> clauses;
  while (remaining > 0) {
    bool product = remaining >= 2 && rng.bernoulli(0.45);
    bool add = rng.bernoulli(0.5);
    if (product) {
      clauses.push_back(add ? Clause::kAddProduct : Clause::kSubProduct);
      remaining -= 2;
    } else {
      clauses.push_back(add ? Clause::kAdd : Clause::kSub);
      remaining -= 1;
    }
  }

  const int64_t amount_lo = o.min_digits == 1 ? 1 : pow10(o.min_digits - 1);
  const int64_t amount_hi = pow10(o.max_digits) - 1;
  const int64_t count_lo = o.count_min_digits == 1 ? 2 : pow10(o.count_min_digits - 1);
  auto amount = [&] { return draw_digits(rng, o.min_digits, o.max_digits); };
  auto count = [&] {
    int64_t v = draw_digits(rng, o.count_min_digits, o.count_max_digits);
    return v < 2 ? int64_t{2} : v;  // "1 trucks" reads badly
  };

  ArithProblem p;
  p.scenario = sc.id;
  p.level = level;
  std::vector<std::string> sentences;
  std::vector<const char*> used;  // clause templates already in this problem
  int64_t cur = 0;
  std::string expr;
  int prec = 3;  // 3: atom, 2: * /, 1: + -
  if (start_product) {
    int64_t b = count(), c = amount();
    cur = b * c;
    expr = std::to_string(b) + " * " + std::to_string(c);
    prec = 2;
    p.steps.push_back({expr, cur});
    sentences.push_back(fill(pick(rng, sc.start_product), f, 0, b, c));
  } else {
    int64_t a = draw_digits(rng, o.start_min_digits, o.start_max_digits);
    cur = a;
    expr = std::to_string(a);
    sentences.push_back(fill(pick(rng, sc.start), f, a));
  }
  for (Clause cl : clauses) {
    if (cl == Clause::kSub && std::min(amount_hi, cur - 1) < amount_lo) cl = Clause::kAdd;
    if (cl == Clause::kSubProduct) {
      // Need b * c < cur with c >= amount_lo.
      if ((cur - 1) / count_lo < amount_lo) cl = Clause::kAddProduct;
    }
    switch (cl) {
      case Clause::kAdd: {
        int64_t b = amount();
        p.steps.push_back({std::to_string(cur) + " + " + std::to_string(b), cur + b});
        cur += b;
        expr += " + " + std::to_string(b);
        sentences.push_back(fill(pick_fresh(rng, sc.add, &used), f, 0, b));
        break;
      }
      case Clause::kSub: {
        int64_t hi = std::min(amount_hi, cur - 1);
        int64_t b = amount();
        if (b > hi) b = rng.uniform_int(amount_lo, hi);
        p.steps.push_back({std::to_string(cur) + " - " + std::to_string(b), cur - b});
        cur -= b;
        expr += " - " + std::to_string(b);
        sentences.push_back(fill(pick_fresh(rng, sc.sub, &used), f, 0, b));
        break;
      }
      case Clause::kAddProduct:
      case Clause::kSubProduct: {
        bool sub = cl == Clause::kSubProduct;
        int64_t b = count();
        int64_t c = amount();
        if (sub && b * c >= cur) {
          if ((cur - 1) / b < amount_lo) b = count_lo;
          int64_t c_hi = std::min(amount_hi, (cur - 1) / b);
          c = rng.uniform_int(amount_lo, c_hi);
        }
        int64_t prod = b * c;
        std::string term_s = std::to_string(b) + " * " + std::to_string(c);
        p.steps.push_back({term_s, prod});
        p.steps.push_back({std::to_string(cur) + (sub ? " - " : " + ") + std::to_string(prod),
                           sub ? cur - prod : cur + prod});
        cur = sub ? cur - prod : cur + prod;
        expr += (sub ? " - " : " + ") + term_s;
        sentences.push_back(fill(pick_fresh(rng, sub ? sc.sub_product : sc.add_product, &used), f, 0, b, c));
        break;
      }
    }
    prec = 1;
  }
  const char* question = nullptr;
  if (term == Terminal::kDiv) {
    std::vector<int64_t> divisors, big;
    for (int64_t d = o.min_divisor; d <= o.max_divisor; ++d) {
      if (cur % d == 0) {
        divisors.push_back(d);
        if (d >= 10) big.push_back(d);
      }
    }
    if (divisors.empty()) return std::nullopt;
    int64_t d = (!big.empty() && rng.bernoulli(0.7)) ? pick(rng, big) : pick(rng, divisors);
    p.steps.push_back({std::to_string(cur) + " / " + std::to_string(d), cur / d});
    cur /= d;
    expr = (prec == 1 ? "(" + expr + ")" : expr) + " / " + std::to_string(d);
    sentences.push_back(fill(pick(rng, sc.div_final), f, 0, d));
    question = pick(rng, sc.div_question);
  } else if (term == Terminal::kMul) {
    int64_t b = count();
    p.steps.push_back({std::to_string(cur) + " * " + std::to_string(b), cur * b});
    cur *= b;
    expr = (prec == 1 ? "(" + expr + ")" : expr) + " * " + std::to_string(b);
    sentences.push_back(fill(pick(rng, sc.mul_final), f, 0, b));
    question = pick(rng, sc.mul_question);
  } else {
    question = pick(rng, sc.question);
  }
  sentences.push_back(fill(question, f, 0));
  p.question = join_sentences(sentences);
  p.expression = expr;
  p.ground_truth = cur;

  std::string ans = "Compute " + expr + " with the calculator.\n";
  for (const auto& st : p.steps) ans += st.expression + " = " + std::to_string(st.result) + "\n";
  ans += "#### " + std::to_string(cur);
  p.answer = ans;
  return p;
}

}  // namespace

void ArithmeticOptions::validate() const {
  AGENTR1_CHECK(min_level >= 1 && max_level <= 4 && min_level <= max_level,
                "arithmetic levels must satisfy 1 <= min_level <= max_level <= 4, got min_level="
                    << min_level << ", max_level=" << max_level);
  AGENTR1_CHECK(min_digits >= 1 && min_digits <= max_digits && max_digits <= 6,
                "arithmetic digits must satisfy 1 <= min_digits <= max_digits <= 6, got "
                    << min_digits << ".." << max_digits);
  AGENTR1_CHECK(start_min_digits >= 1 && start_min_digits <= start_max_digits && start_max_digits <= 7,
                "arithmetic start digits must satisfy 1 <= start_min_digits <= start_max_digits <= 7, got "
                    << start_min_digits << ".." << start_max_digits);
  AGENTR1_CHECK(count_min_digits >= 1 && count_min_digits <= count_max_digits && count_max_digits <= 4,
                "arithmetic count digits must satisfy 1 <= count_min_digits <= count_max_digits <= 4, got "
                    << count_min_digits << ".." << count_max_digits);
  AGENTR1_CHECK(min_divisor >= 2 && min_divisor <= max_divisor && max_divisor <= 100000,
                "arithmetic divisors must satisfy 2 <= min_divisor <= max_divisor <= 100000, got "
                    << min_divisor << ".." << max_divisor);
  AGENTR1_CHECK(max_attempts >= 1, "arithmetic max_attempts must be >= 1, got " << max_attempts);
}

ArithProblem generate_problem(uint64_t seed, int64_t index, const ArithmeticOptions& opts) {
  opts.validate();
  AGENTR1_CHECK(index >= 0, "arithmetic problem index must be >= 0, got " << index);
  // The split gets its own stream, so train and test draws are unrelated even before
  // the hash partition makes them disjoint.
  const uint64_t split_id = static_cast<uint64_t>(opts.split) + 1;
  for (int attempt = 0; attempt < opts.max_attempts; ++attempt) {
    Rng rng(derive_seed(seed, {kSeedArith, split_id, static_cast<uint64_t>(index),
                               static_cast<uint64_t>(attempt)}));
    int level = static_cast<int>(rng.uniform_int(opts.min_level, opts.max_level));
    std::optional<ArithProblem> p = draw(rng, level, opts);
    if (!p) continue;
    if (opts.split != DataSplit::kAny) {
      bool test_side = (fnv1a64(p->expression) & 1) != 0;
      if (test_side != (opts.split == DataSplit::kTest)) continue;
    }
    p->seed = seed;
    p->index = index;
    return *p;
  }
  throw Error("no valid arithmetic problem for seed " + std::to_string(seed) + ", index " +
              std::to_string(index) + " within max_attempts=" + std::to_string(opts.max_attempts) +
              "; widen min_divisor..max_divisor or raise max_attempts");
}

json arith_prompt_messages(const ArithProblem& p, const ArithPromptOptions& opts) {
  json msgs = json::array();
  if (opts.use_system_prompt) msgs.push_back({{"role", "system"}, {"content", opts.system_prompt}});
  std::string user = p.question;
  if (!opts.user_suffix.empty()) user += " " + opts.user_suffix;
  msgs.push_back({{"role", "user"}, {"content", user}});
  return msgs;
}

Sample arith_problem_to_sample(const ArithProblem& p, const ArithDatasetOptions& opts) {
  Sample s;
  s.prompt = arith_prompt_messages(p, opts.prompt);
  s.agent_name = opts.agent_name;
  s.reward_style = "rule";
  s.ground_truth = std::to_string(p.ground_truth);
  s.env_kwargs = {{"tools", json::array({arith_tool_name(opts.tool)})}};
  s.data_source = opts.data_source;
  s.extra_info = {{"index", p.index},
                  {"split", data_split_name(opts.problem.split)},
                  {"level", p.level},
                  {"expression", p.expression},
                  {"answer", p.answer},
                  {"question", p.question},
                  {"scenario", p.scenario},
                  {"seed", p.seed}};
  return s;
}

std::vector<Sample> make_arith_dataset(int64_t n, uint64_t seed, const ArithDatasetOptions& opts,
                                       int64_t first_index) {
  AGENTR1_CHECK(n >= 0, "arithmetic dataset size must be >= 0, got " << n);
  AGENTR1_CHECK(first_index >= 0, "arithmetic dataset first_index must be >= 0, got " << first_index);
  opts.problem.validate();
  std::vector<Sample> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(arith_problem_to_sample(generate_problem(seed, first_index + i, opts.problem), opts));
  }
  return out;
}

}  // namespace agentr1::tasks
