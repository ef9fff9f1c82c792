#include "agentr1/tasks/webshop/webshop_catalog.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <unordered_set>

#include "agentr1/core/error.h"
#include "agentr1/core/hash.h"
#include "agentr1/core/rng.h"
#include "agentr1/core/strings.h"
#include "agentr1/tasks/webshop/webshop_reward.h"
#include "agentr1/tasks/webshop/webshop_vocab.h"

namespace agentr1::tasks {
namespace {

constexpr uint64_t kSeedCatalogue = 0x5753;   // "WS": generated catalogues
constexpr uint64_t kSeedFilePrice = 0x5750;   // ranged prices of loaded products
constexpr double kNoBound = 1000000.0;        // goal.py: price_upper without a clause

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    if (start && std::isalpha(static_cast<unsigned char>(c))) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    start = c == ' ';
  }
  return out;
}

std::string capitalize(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

// Python's str(float) for the prices WebShop's loader prints ("$12.99", "$100.0").
std::string python_float(double v) {
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (std::string(buf).find('e') == std::string::npos && std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string money(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

json string_list(const std::vector<std::string>& xs) { return json(xs); }

std::vector<std::string> read_strings(const json& j, const std::string& what) {
  AGENTR1_CHECK(j.is_array(), what << " must be a list of strings, got " << j.dump());
  std::vector<std::string> out;
  for (const json& x : j) {
    AGENTR1_CHECK(x.is_string(), what << " must be a list of strings, got the element " << x.dump());
    out.push_back(x.get<std::string>());
  }
  return out;
}

std::string read_string(const json& j, const std::string& key, const std::string& what) {
  AGENTR1_CHECK(j.contains(key) && j[key].is_string(),
                what << ": '" << key << "' must be a string, got " << (j.contains(key) ? j[key].dump() : "nothing"));
  return j[key].get<std::string>();
}

json read_json_file(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  AGENTR1_CHECK(in.good(), "webshop option '" << key << "': cannot open '" << path
                                               << "'. HINT: download WebShop's data (setup.sh) and pass its path");
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    throw Error("webshop option '" + key + "': '" + path + "' is not valid JSON: " + e.what());
  }
}

// ---- generated catalogues ---------------------------------------------------------

struct Draft {
  WebshopProduct p;
  size_t type = 0;
  std::string brand;
};

std::string draw_asin(Rng& rng, std::unordered_set<std::string>& used) {
  static const char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  while (true) {
    std::string a = "B0";
    for (int i = 0; i < 8; ++i) a.push_back(kChars[rng.choice(36)]);
    if (used.insert(a).second) return a;
  }
}

// k of xs (distinct), in xs' order.
std::vector<std::string> draw_subset(Rng& rng, const std::vector<std::string>& xs, size_t k) {
  std::vector<size_t> order = rng.permutation(xs.size());
  order.resize(std::min(k, xs.size()));
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  for (size_t i : order) out.push_back(xs[i]);
  return out;
}

std::vector<std::string> draw_values(Rng& rng, const WebshopOptionSpec& g) {
  const int64_t hi = static_cast<int64_t>(std::min<size_t>(5, g.values.size()));
  return draw_subset(rng, g.values, static_cast<size_t>(rng.uniform_int(std::min<int64_t>(2, hi), hi)));
}

// Title, description and bullets from the brand, type and attributes (attribute order:
// the first one goes into the title).
void compose_text(Draft& d, Rng& rng) {
  const WebshopTypeSpec& t = webshop_product_types()[d.type];
  static const std::map<std::string, std::string> kFiller = {
      {"beauty", "A daily favourite for your routine."},
      {"grocery", "Packed with care and shipped to your door."},
      {"fashion", "Designed for comfort from morning to night."},
      {"home", "Built to fit any room in your home."},
      {"electronics", "Backed by a one year warranty."}};
  static const char* const kBullets[] = {"%s for everyday confidence", "%s you can count on",
                                         "Thoughtfully made: %s"};
  WebshopProduct& p = d.p;
  p.title = d.brand + " " + title_case(p.attributes.front()) + " " + t.noun;
  p.description = d.brand + " " + lower(t.noun) + " that is " + webshop_join_and(p.attributes) + ". " + kFiller.at(t.category);
  p.bullets.clear();
  for (const std::string& a : p.attributes) {
    const char* tmpl = kBullets[rng.choice(3)];
    char buf[256];
    std::snprintf(buf, sizeof(buf), tmpl, (tmpl[0] == '%' ? capitalize(a) : a).c_str());
    p.bullets.push_back(buf);
  }
}

void set_price(WebshopProduct& p, double price) {
  p.price = price;
  p.price_tag = "$" + money(price);
}

Draft fresh_product(size_t type, Rng& rng, std::unordered_set<std::string>& asins) {
  const WebshopTypeSpec& t = webshop_product_types()[type];
  Draft d;
  d.type = type;
  d.brand = webshop_brands()[rng.choice(webshop_brands().size())];
  WebshopProduct& p = d.p;
  p.asin = draw_asin(rng, asins);
  p.category = t.category;
  p.query = t.query;
  p.product_category = t.product_category;
  const int64_t max_attr = static_cast<int64_t>(std::min<size_t>(4, t.attributes.size()));
  const size_t n_attr = static_cast<size_t>(rng.uniform_int(2, max_attr));
  std::vector<size_t> order = rng.permutation(t.attributes.size());
  for (size_t i = 0; i < n_attr; ++i) p.attributes.push_back(t.attributes[order[i]]);
  const std::vector<std::string>& extras = webshop_category_attributes(t.category);
  const size_t n_extra = static_cast<size_t>(rng.uniform_int(1, 2));
  std::vector<size_t> eorder = rng.permutation(extras.size());
  for (size_t i = 0; i < std::min(n_extra, extras.size()); ++i) p.attributes.push_back(extras[eorder[i]]);
  for (const WebshopOptionSpec& g : t.options) {
    if (rng.bernoulli(0.85)) p.options.push_back({g.name, draw_values(rng, g)});
  }
  if (p.options.empty() && !t.options.empty()) {
    const WebshopOptionSpec& g = t.options[rng.choice(t.options.size())];
    p.options.push_back({g.name, draw_values(rng, g)});
  }
  set_price(p, std::floor(rng.uniform(t.min_price, t.max_price)) + 0.99);
  compose_text(d, rng);
  return d;
}

// A near miss of `base`: kind 0 swaps one attribute, 1 redraws the option values, 2 is
// the same listing 40-80 dollars dearer.
Draft near_miss(const Draft& base, Rng& rng, std::unordered_set<std::string>& asins) {
  const WebshopTypeSpec& t = webshop_product_types()[base.type];
  Draft d = base;
  d.p.asin = draw_asin(rng, asins);
  int kind = static_cast<int>(rng.choice(3));
  std::vector<std::string> spare;
  std::vector<std::string> pool = t.attributes;
  const std::vector<std::string>& extras = webshop_category_attributes(t.category);
  pool.insert(pool.end(), extras.begin(), extras.end());
  for (const std::string& a : pool) {
    if (std::find(base.p.attributes.begin(), base.p.attributes.end(), a) == base.p.attributes.end()) spare.push_back(a);
  }
  if (kind == 0 && spare.empty()) kind = 2;
  if (kind == 1 && base.p.options.empty()) kind = 2;
  if (kind == 0) {
    d.p.attributes[rng.choice(d.p.attributes.size())] = spare[rng.choice(spare.size())];
    compose_text(d, rng);
  } else if (kind == 1) {
    // One group loses one of its values and, where the pool has another, gains one.
    WebshopOptionGroup& g = d.p.options[rng.choice(d.p.options.size())];
    std::vector<std::string> extra;
    for (const WebshopOptionSpec& s : t.options) {
      if (s.name != g.name) continue;
      for (const std::string& v : s.values) {
        if (std::find(g.values.begin(), g.values.end(), v) == g.values.end()) extra.push_back(v);
      }
    }
    if (g.values.size() >= 2) g.values.erase(g.values.begin() + static_cast<std::ptrdiff_t>(rng.choice(g.values.size())));
    if (!extra.empty()) g.values.push_back(extra[rng.choice(extra.size())]);
  } else {
    set_price(d.p, base.p.price + 40 + std::floor(rng.uniform(0, 40)));
  }
  return d;
}

// ---- WebShop's files ----------------------------------------------------------------

// pricing "$12.99" / "$10.99 - $15.99" (or a list of numbers) -> up to two prices.
std::vector<double> parse_pricing(const json& j, const std::string& what) {
  std::vector<double> out;
  if (j.is_null()) return out;
  if (j.is_array()) {
    for (const json& x : j) {
      AGENTR1_CHECK(x.is_number(), what << ": 'pricing' list entries must be numbers, got " << x.dump());
      out.push_back(x.get<double>());
    }
  } else {
    AGENTR1_CHECK(j.is_string(), what << ": 'pricing' must be a string like \"$12.99\", got " << j.dump());
    const std::string s = j.get<std::string>();
    size_t pos = s.find('$');
    while (pos != std::string::npos) {
      const size_t next = s.find('$', pos + 1);
      std::string num;
      for (size_t i = pos + 1; i < (next == std::string::npos ? s.size() : next); ++i) {
        if (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.') num.push_back(s[i]);
      }
      if (!num.empty()) out.push_back(std::strtod(num.c_str(), nullptr));
      pos = next;
    }
  }
  if (out.size() > 2) out.resize(2);
  return out;
}

WebshopProduct product_from_file(const json& item, const json& attributes, const std::string& what) {
  AGENTR1_CHECK(item.is_object(), what << " must be an object, got " << item.type_name());
  WebshopProduct p;
  p.asin = read_string(item, "asin", what);
  p.title = read_string(item, "name", what);
  p.description = item.contains("full_description") && item["full_description"].is_string()
                      ? item["full_description"].get<std::string>()
                      : "";
  const json sd = item.value("small_description", json());
  if (sd.is_array()) {
    p.bullets = read_strings(sd, what + " 'small_description'");
  } else {
    p.bullets = {sd.is_string() ? sd.get<std::string>() : ""};
  }
  p.category = read_string(item, "category", what);
  p.query = lower(trim(read_string(item, "query", what)));
  p.product_category = read_string(item, "product_category", what);
  const std::vector<double> pricing = parse_pricing(item.value("pricing", json()), what);
  if (pricing.empty()) {
    p.price_tag = "$100.0";
    p.price = 100.0;
  } else if (pricing.size() == 1) {
    p.price_tag = "$" + python_float(pricing[0]);
    p.price = pricing[0];
  } else {
    p.price_tag = "$" + python_float(pricing[0]) + " to $" + python_float(pricing[1]);
    Rng rng(derive_seed(fnv1a64(p.asin), {kSeedFilePrice}));
    p.price = rng.uniform(std::min(pricing[0], pricing[1]), std::max(pricing[0], pricing[1]));
  }
  const json co = item.value("customization_options", json());
  if (co.is_object()) {
    for (auto it = co.begin(); it != co.end(); ++it) {
      if (it.value().is_null()) continue;
      AGENTR1_CHECK(it.value().is_array(), what << ": customization_options['" << it.key() << "'] must be a list");
      WebshopOptionGroup g;
      g.name = lower(it.key());
      for (const json& c : it.value()) {
        AGENTR1_CHECK(c.is_object() && c.contains("value") && c["value"].is_string(),
                      what << ": customization_options['" << it.key() << "'] entries need a string 'value'");
        std::string v = trim(c["value"].get<std::string>());
        std::string out;
        for (char ch : v) out += ch == '/' ? std::string(" | ") : std::string(1, ch);
        g.values.push_back(lower(out));
      }
      p.options.push_back(std::move(g));
    }
  }
  if (attributes.is_object() && attributes.contains(p.asin) && attributes[p.asin].is_object() &&
      attributes[p.asin].contains("attributes")) {
    p.attributes = read_strings(attributes[p.asin]["attributes"], what + " attributes");
  } else {
    p.attributes = {"DUMMY_ATTR"};
  }
  p.asin = upper(p.asin);
  return p;
}

WebshopGoal goal_base(const WebshopProduct& p) {
  WebshopGoal g;
  g.asin = p.asin;
  g.category = p.category;
  g.query = p.query;
  g.product_category = p.product_category;
  g.name = p.title;
  return g;
}

std::string strip_dots(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && s[b] == '.') ++b;
  while (e > b && s[e - 1] == '.') --e;
  return s.substr(b, e - b);
}

void add_human_goals(const WebshopProduct& p, const json& entries, const std::string& what,
                     std::vector<WebshopGoal>& goals) {
  AGENTR1_CHECK(entries.is_array(), what << " must be a list of instructions");
  for (size_t k = 0; k < entries.size(); ++k) {
    const json& e = entries[k];
    const std::string w = what + "[" + std::to_string(k) + "]";
    AGENTR1_CHECK(e.is_object(), w << " must be an object");
    WebshopGoal g = goal_base(p);
    g.attributes = read_strings(e.value("instruction_attributes", json::array()), w + " 'instruction_attributes'");
    if (g.attributes.empty()) continue;  // goal.py skips these
    g.options = read_strings(e.value("instruction_options", json::array()), w + " 'instruction_options'");
    const auto [bound, clause] = webshop_price_bound(p.price, derive_seed(fnv1a64(p.asin), {k}));
    g.price_upper = bound;
    g.instruction_text = strip_dots(read_string(e, "instruction", w)) + clause;
    goals.push_back(std::move(g));
  }
}

void add_synthetic_goals(const WebshopProduct& p, const json& attr, std::vector<WebshopGoal>& goals) {
  if (!attr.is_object() || !attr.contains("instruction") || !attr["instruction"].is_string()) return;
  const std::vector<std::string> attrs =
      read_strings(attr.value("instruction_attributes", json::array()), p.asin + " 'instruction_attributes'");
  if (attrs.empty()) return;
  const auto [bound, clause] = webshop_price_bound(p.price, derive_seed(fnv1a64(p.asin), {0}));
  std::vector<const WebshopOptionGroup*> groups;
  for (const WebshopOptionGroup& g : p.options) groups.push_back(&g);
  std::sort(groups.begin(), groups.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  for (const auto* g : groups) {
    if (g->values.empty()) return;  // itertools.product of an empty list: no goals
  }
  std::vector<size_t> pick(groups.size(), 0);
  while (true) {
    WebshopGoal g = goal_base(p);
    g.attributes = attrs;
    std::string text;
    for (size_t i = 0; i < groups.size(); ++i) {
      g.options.push_back(groups[i]->values[pick[i]]);
      g.option_names.push_back(groups[i]->name);
      text += (i == 0 ? " with " : ", and ") + groups[i]->name + ": " + groups[i]->values[pick[i]];
    }
    g.price_upper = bound;
    g.instruction_text = attr["instruction"].get<std::string>() + text + clause;
    goals.push_back(std::move(g));
    size_t i = groups.size();
    while (i > 0 && ++pick[i - 1] == groups[i - 1]->values.size()) pick[--i] = 0;
    if (i == 0) break;
  }
}

}  // namespace

json WebshopProduct::to_json() const {
  json opts = json::object();
  for (const WebshopOptionGroup& g : options) opts[g.name] = g.values;
  return {{"asin", asin},         {"Title", title},      {"category", category}, {"query", query},
          {"product_category", product_category},         {"Description", description},
          {"BulletPoints", string_list(bullets)},          {"Attributes", string_list(attributes)},
          {"options", opts},      {"Price", price_tag},  {"price", price},       {"Rating", rating}};
}

json WebshopGoal::to_json() const {
  json j = {{"asin", asin},
            {"instruction_text", instruction_text},
            {"attributes", string_list(attributes)},
            {"goal_options", string_list(options)}};
  if (!option_names.empty()) j["option_names"] = string_list(option_names);
  j["price_upper"] = price_upper;
  j["query"] = query;
  j["category"] = category;
  j["product_category"] = product_category;
  j["name"] = name;
  j["level"] = level;
  return j;
}

WebshopGoal WebshopGoal::from_json(const json& j) {
  const std::string what = "webshop goal";
  AGENTR1_CHECK(j.is_object(), what << " must be an object (extra_info.goal), got " << j.type_name());
  WebshopGoal g;
  g.asin = read_string(j, "asin", what);
  g.instruction_text = read_string(j, "instruction_text", what);
  AGENTR1_CHECK(j.contains("attributes"), what << ": 'attributes' is missing");
  g.attributes = read_strings(j["attributes"], what + " 'attributes'");
  g.options = read_strings(j.value("goal_options", json::array()), what + " 'goal_options'");
  if (j.contains("option_names")) g.option_names = read_strings(j["option_names"], what + " 'option_names'");
  AGENTR1_CHECK(g.option_names.empty() || g.option_names.size() == g.options.size(),
                what << ": 'option_names' must be empty or as long as 'goal_options'");
  AGENTR1_CHECK(j.contains("price_upper") && j["price_upper"].is_number() && j["price_upper"].get<double>() > 0,
                what << ": 'price_upper' must be a number > 0, got "
                     << (j.contains("price_upper") ? j["price_upper"].dump() : "nothing"));
  g.price_upper = j["price_upper"].get<double>();
  g.query = read_string(j, "query", what);
  g.category = read_string(j, "category", what);
  g.product_category = read_string(j, "product_category", what);
  g.name = read_string(j, "name", what);
  if (j.contains("level")) {
    AGENTR1_CHECK(j["level"].is_number_integer(), what << ": 'level' must be an integer, got " << j["level"].dump());
    g.level = j["level"].get<int>();
  }
  return g;
}

void WebshopCatalogueSpec::validate() const {
  if (generated()) {
    AGENTR1_CHECK(size >= static_cast<int64_t>(webshop_product_types().size()) && size <= 100000,
                  "webshop option 'catalogue_size' must be in " << webshop_product_types().size()
                                                                << "..100000 (one product per type at least), got " << size);
    AGENTR1_CHECK(near_miss_rate >= 0 && near_miss_rate <= 0.9,
                  "webshop option 'near_miss_rate' must be in [0, 0.9], got " << near_miss_rate);
    const char* file_key = !attributes_file.empty()           ? "attributes_file"
                           : !human_instructions_file.empty() ? "human_instructions_file"
                           : num_products != 0                ? "num_products"
                                                              : nullptr;
    AGENTR1_CHECK(file_key == nullptr, "webshop option '" << file_key
                                                          << "' is for WebShop's files: 'products_file' is required "
                                                             "with it. HINT: products_file=items_shuffle_1000.json");
  } else {
    AGENTR1_CHECK(num_products >= 0, "webshop option 'num_products' must be >= 0 (0 = all), got " << num_products);
    const WebshopCatalogueSpec d;
    const char* gen_key = seed != d.seed                       ? "catalogue_seed"
                          : size != d.size                     ? "catalogue_size"
                          : near_miss_rate != d.near_miss_rate ? "near_miss_rate"
                                                               : nullptr;
    AGENTR1_CHECK(gen_key == nullptr, "webshop options: '" << gen_key << "' is for the generated catalogue and "
                                      "'products_file' ('" << products_file << "') for WebShop's files; give one, "
                                      "not both");
  }
}

WebshopCatalogueSpec WebshopCatalogueSpec::from_json(const json& j) {
  return bind_config<WebshopCatalogueSpec>(json{{"env_kwargs", {{"game", j}}}}, "env_kwargs.game");
}

json WebshopCatalogueSpec::to_json() const {
  if (generated()) return {{"catalogue_seed", seed}, {"catalogue_size", size}, {"near_miss_rate", near_miss_rate}};
  json j = {{"products_file", products_file}};
  if (!attributes_file.empty()) j["attributes_file"] = attributes_file;
  if (!human_instructions_file.empty()) j["human_instructions_file"] = human_instructions_file;
  if (num_products > 0) j["num_products"] = num_products;
  return j;
}

std::string webshop_search_document(const WebshopProduct& p) {
  std::string opts;
  for (const WebshopOptionGroup& g : p.options) {
    std::string vals;
    for (const std::string& v : g.values) vals += (vals.empty() ? "" : ", ") + v;
    opts += (opts.empty() ? "" : ", and ") + g.name + ": " + vals;
  }
  const std::string first_bullet = p.bullets.empty() ? "" : p.bullets[0];
  return lower(p.title + " " + p.description + " " + first_bullet + " " + opts);
}

WebshopCatalogue::WebshopCatalogue(std::vector<WebshopProduct> ps, std::vector<WebshopGoal> gs)
    : products(std::move(ps)), goals(std::move(gs)) {
  std::vector<std::string> docs;
  docs.reserve(products.size());
  for (size_t i = 0; i < products.size(); ++i) {
    const WebshopProduct& p = products[i];
    AGENTR1_CHECK(by_asin_.emplace(p.asin, i).second, "webshop catalogue: asin " << p.asin << " appears twice");
    nouns_.push_back(title_nouns(p.title));
    std::set<std::string> uniq(nouns_.back().begin(), nouns_.back().end());
    for (const std::string& n : uniq) noun_postings_[n].push_back(i);
    docs.push_back(webshop_search_document(p));
  }
  index_ = std::make_unique<Bm25Index>(docs);
}

int64_t WebshopCatalogue::find(const std::string& asin) const {
  auto it = by_asin_.find(upper(asin));
  return it == by_asin_.end() ? -1 : static_cast<int64_t>(it->second);
}

std::vector<size_t> WebshopCatalogue::search(const std::string& keywords) const {
  std::vector<size_t> out;
  for (const Bm25Hit& h : index_->search(keywords, kWebshopSearchReturnN)) out.push_back(h.doc);
  return out;
}

std::vector<size_t> WebshopCatalogue::sharing_nouns(const std::vector<std::string>& nouns) const {
  std::set<size_t> out;
  for (const std::string& n : nouns) {
    auto it = noun_postings_.find(n);
    if (it != noun_postings_.end()) out.insert(it->second.begin(), it->second.end());
  }
  return {out.begin(), out.end()};
}

WebshopCatalogue generate_webshop_catalogue(const WebshopCatalogueSpec& spec) {
  AGENTR1_CHECK(spec.generated(), "generate_webshop_catalogue: the spec names files; use load_webshop_catalogue");
  spec.validate();
  Rng rng(derive_seed(spec.seed, {kSeedCatalogue}));
  const size_t n_types = webshop_product_types().size();
  std::unordered_set<std::string> asins;
  std::vector<Draft> drafts;
  drafts.reserve(static_cast<size_t>(spec.size));
  for (int64_t i = 0; i < spec.size; ++i) {
    const size_t ui = static_cast<size_t>(i);
    if (ui >= n_types && rng.bernoulli(spec.near_miss_rate)) {
      drafts.push_back(near_miss(drafts[rng.choice(drafts.size())], rng, asins));
    } else {
      drafts.push_back(fresh_product(ui < n_types ? ui : rng.choice(n_types), rng, asins));
    }
  }
  std::vector<WebshopProduct> products;
  products.reserve(drafts.size());
  for (Draft& d : drafts) products.push_back(std::move(d.p));
  return WebshopCatalogue(std::move(products), {});
}

WebshopCatalogue load_webshop_catalogue(const WebshopCatalogueSpec& spec) {
  AGENTR1_CHECK(!spec.generated(), "load_webshop_catalogue: 'products_file' is empty");
  spec.validate();
  const json items = read_json_file(spec.products_file, "products_file");
  AGENTR1_CHECK(items.is_array(), "webshop option 'products_file': '" << spec.products_file
                                                                      << "' must hold a JSON list of products");
  const json attributes =
      spec.attributes_file.empty() ? json::object() : read_json_file(spec.attributes_file, "attributes_file");
  AGENTR1_CHECK(attributes.is_object(), "webshop option 'attributes_file': '" << spec.attributes_file
                                                                              << "' must hold a JSON map asin -> {...}");
  const bool human = !spec.human_instructions_file.empty();
  const json human_ins = human ? read_json_file(spec.human_instructions_file, "human_instructions_file") : json::object();
  AGENTR1_CHECK(human_ins.is_object(), "webshop option 'human_instructions_file': '"
                                           << spec.human_instructions_file << "' must hold a JSON map asin -> [...]");
  size_t limit = items.size();
  if (spec.num_products > 0) limit = std::min(limit, static_cast<size_t>(spec.num_products));
  std::vector<WebshopProduct> products;
  std::vector<WebshopGoal> goals;
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < limit; ++i) {
    const std::string what = spec.products_file + " product " + std::to_string(i);
    const json& item = items[i];
    AGENTR1_CHECK(item.is_object() && item.contains("asin") && item["asin"].is_string(),
                  what << ": needs a string 'asin'");
    const std::string raw_asin = item["asin"].get<std::string>();
    if (raw_asin == "nan" || raw_asin.size() > 10 || !seen.insert(raw_asin).second) continue;
    WebshopProduct p = product_from_file(item, attributes, what);
    if (human) {
      if (human_ins.contains(raw_asin)) {
        add_human_goals(p, human_ins[raw_asin], spec.human_instructions_file + " '" + raw_asin + "'", goals);
      }
    } else if (attributes.contains(raw_asin)) {
      add_synthetic_goals(p, attributes[raw_asin], goals);
    }
    products.push_back(std::move(p));
  }
  AGENTR1_CHECK(!products.empty(), "webshop option 'products_file': '" << spec.products_file << "' has no products");
  return WebshopCatalogue(std::move(products), std::move(goals));
}

std::shared_ptr<const WebshopCatalogue> get_webshop_catalogue(const WebshopCatalogueSpec& spec) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const WebshopCatalogue>> cache;
  const std::string key = spec.to_json().dump();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto cat = std::make_shared<const WebshopCatalogue>(spec.generated() ? generate_webshop_catalogue(spec)
                                                                       : load_webshop_catalogue(spec));
  cache.emplace(key, cat);
  return cat;
}

std::pair<double, std::string> webshop_price_bound(double price, uint64_t rng_seed) {
  std::vector<double> above;
  for (int i = 1; i < 100 && above.size() < 4; ++i) {
    if (10.0 * i > price) above.push_back(10.0 * i);
  }
  if (above.size() < 2) return {kNoBound, ""};
  Rng rng(rng_seed);
  const size_t a = rng.choice(above.size());
  size_t b = rng.choice(above.size() - 1);
  if (b >= a) ++b;
  const double bound = above[std::max(a, b)];
  return {bound, ", and price lower than " + money(bound) + " dollars"};
}

}  // namespace agentr1::tasks
