#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"
#include "agentr1/core/testing.h"
#include "agentr1/env/text_game.h"
#include "agentr1/tasks/play.h"
#include "agentr1/tasks/webshop/webshop_family.h"
#include "agentr1/tasks/webshop/webshop_vocab.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::tasks {
namespace {

const std::string kFixtures = std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/webshop/";

json fixture_spec(bool human = true) {
  json j = {{"products_file", kFixtures + "items_shuffle_fixture.json"},
            {"attributes_file", kFixtures + "items_ins_v2_fixture.json"}};
  if (human) j["human_instructions_file"] = kFixtures + "items_human_ins_fixture.json";
  return j;
}

using agentr1::testing::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string lower_copy(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---- string rules ---------------------------------------------------------------------

TEST(WebshopFuzzy, TokenSetRatioByHand) {
  // same tokens in another order: t0 == t1 == t2
  EXPECT_EQ(fuzzy_token_set_ratio("grey heather", "heather grey"), 100);
  // one side's tokens inside the other's: t0 == t1
  EXPECT_EQ(fuzzy_token_set_ratio("powder snow", "cool powder snow"), 100);
  // t1 "essential oil" vs t2 "essential oils": 2 * 13 / 27 = 96.3
  EXPECT_EQ(fuzzy_token_set_ratio("essential oil", "essential oils"), 96);
  // t1 "of pack 1" vs t2 "of pack 2": 2 * 8 / 18 = 88.9
  EXPECT_EQ(fuzzy_token_set_ratio("pack of 1", "pack of 2"), 89);
  // no shared token: "blue" vs "grey" share only "e": 2 * 1 / 8
  EXPECT_EQ(fuzzy_token_set_ratio("blue", "grey"), 25);
  // 2 * 5 / 16 = 62.5, rounded half to even as Python's round()
  EXPECT_EQ(fuzzy_token_set_ratio("abcdefgh", "abcdexyz"), 62);
  // processing: case and punctuation do not count; an empty side scores 0
  EXPECT_EQ(fuzzy_token_set_ratio("Navy!", "navy"), 100);
  EXPECT_EQ(fuzzy_token_set_ratio("", "navy"), 0);
  EXPECT_EQ(fuzzy_token_set_ratio("?!", "navy"), 0);
  // "large" is inside "x-large" ("x large"): WebShop's rule matches them
  EXPECT_EQ(fuzzy_token_set_ratio("large", "x-large"), 100);
}

TEST(WebshopFuzzy, NormalizeColorTakesTheFirstColourOfTheList) {
  EXPECT_EQ(normalize_color("dark navy blue"), "blue");  // "blue" precedes "dark" and "navy" in COLOR_SET
  EXPECT_EQ(normalize_color("heather grey"), "grey");
  EXPECT_EQ(normalize_color("light wash"), "ash");
  EXPECT_EQ(normalize_color("xl"), "xl");
}

TEST(WebshopFuzzy, TitleNounsDropNumbersFunctionWordsAndAdjectives) {
  EXPECT_EQ(title_nouns("Lumora Long Lasting Eau de Toilette Spray, 6.76 Fl Oz"),
            (std::vector<std::string>{"lumora", "lasting", "eau", "de", "toilette", "spray", "fl", "oz"}));
  EXPECT_EQ(title_nouns("The 2 Best 4K Cables for TV"), (std::vector<std::string>{"cables", "tv"}));
  EXPECT_TRUE(title_nouns("").empty());
}

// ---- reward ------------------------------------------------------------------------------

WebshopGoal body_wash_goal() {
  WebshopGoal g;
  g.asin = "B000000001";
  g.attributes = {"sulfate free", "tea tree"};
  g.options = {"vanilla"};
  g.price_upper = 30;
  g.query = "body wash";
  g.category = "beauty";
  g.product_category = "Beauty & Personal Care › Skin Care › Body › Body Washes";
  g.name = "Lumora Sulfate Free Body Wash Gel";  // nouns: lumora sulfate body wash gel
  return g;
}

WebshopProduct body_wash(const std::string& title, std::vector<std::string> attrs) {
  WebshopProduct p;
  p.asin = "B000000001";
  p.title = title;
  p.query = "body wash";
  p.category = "beauty";
  p.product_category = "Beauty & Personal Care › Skin Care › Body › Body Washes";
  p.attributes = std::move(attrs);
  p.description = "A gentle wash.";
  p.options = {{"scent", {"vanilla", "lavender"}}};
  p.price = 19.99;
  return p;
}

TEST(WebshopReward, ExactTargetScoresOne) {
  const WebshopGoal g = body_wash_goal();
  const WebshopProduct t = body_wash("Lumora Sulfate Free Body Wash Gel", {"sulfate free", "tea tree", "shea butter"});
  const WebshopRewardTerms r = webshop_reward(g, t, 19.99, {"vanilla"});
  EXPECT_DOUBLE_EQ(r.total, 1.0);
  EXPECT_DOUBLE_EQ(r.r_type, 1.0);
  EXPECT_DOUBLE_EQ(r.r_att, 1.0);
  EXPECT_DOUBLE_EQ(r.r_option, 1.0);
  EXPECT_DOUBLE_EQ(r.r_price, 1.0);
  EXPECT_TRUE(r.query_match);
  EXPECT_TRUE(r.category_match);
  EXPECT_DOUBLE_EQ(r.title_score, 1.0);
  // weights: A = 2, O = 1, plus the price: 2/4, 1/4, 1/4
  EXPECT_DOUBLE_EQ(r.w_att, 0.5);
  EXPECT_DOUBLE_EQ(r.w_option, 0.25);
  EXPECT_DOUBLE_EQ(r.w_price, 0.25);
  const json j = r.to_json();
  EXPECT_EQ(j["r_option"], 1.0);
  EXPECT_EQ(j["num_attr_matches"], 2);
}

TEST(WebshopReward, NearMissesScoreBelowOne) {
  const WebshopGoal g = body_wash_goal();
  const WebshopProduct t = body_wash("Lumora Sulfate Free Body Wash Gel", {"sulfate free", "tea tree"});
  // right product, wrong option ("lavender" vs "vanilla" share 2 letters: ratio 27): (2 + 0 + 1) / 4
  EXPECT_DOUBLE_EQ(webshop_reward(g, t, 19.99, {"lavender"}).total, 0.75);
  EXPECT_DOUBLE_EQ(webshop_reward(g, t, 19.99, {}).total, 0.75);
  // over the price bound: (2 + 1 + 0) / 4
  const WebshopRewardTerms over = webshop_reward(g, t, 35.0, {"vanilla"});
  EXPECT_DOUBLE_EQ(over.total, 0.75);
  EXPECT_DOUBLE_EQ(over.r_price, 0.0);
  // right type, one attribute missing (not in its attributes, title, bullets or description)
  const WebshopProduct m = body_wash("Velaro Sulfate Free Body Wash", {"sulfate free", "shea butter"});
  const WebshopRewardTerms miss = webshop_reward(g, m, 19.99, {"vanilla"});
  EXPECT_EQ(miss.num_attr_matches, 1);
  EXPECT_DOUBLE_EQ(miss.r_att, 0.5);
  EXPECT_DOUBLE_EQ(miss.title_score, 0.6);  // velaro sulfate body wash vs 5 goal nouns: 3 / 5
  EXPECT_DOUBLE_EQ(miss.total, 0.75);
}

TEST(WebshopReward, AttributesMatchInTextToo) {
  const WebshopGoal g = body_wash_goal();
  WebshopProduct d = body_wash("Lumora Sulfate Free Body Wash Gel", {"shea butter"});
  d.description = "Made with tea tree oil.";
  d.bullets = {"Our best SULFATE FREE formula"};  // bullets are lower-cased before the test
  EXPECT_EQ(webshop_attribute_matches(g.attributes, d), 2);
  d.bullets.clear();
  d.description.clear();
  EXPECT_EQ(webshop_attribute_matches(g.attributes, d), 1);  // "sulfate free" is in the lower-cased title
  d.title = "Lumora Body Wash Gel";
  EXPECT_EQ(webshop_attribute_matches(g.attributes, d), 0);
}

TEST(WebshopReward, TypeFactorSteps) {
  const WebshopGoal g = body_wash_goal();
  // another type, no shared noun: title_score 0 -> r_type 0 -> total 0
  WebshopProduct x = body_wash("Kestrel Ionic Hair Dryer", {"sulfate free", "tea tree"});
  x.query = "hair dryer";
  x.product_category = "Beauty & Personal Care › Hair Care › Styling Tools › Hair Dryers";
  const WebshopRewardTerms rx = webshop_reward(g, x, 10, {"vanilla"});
  EXPECT_FALSE(rx.category_match);  // only "Beauty & Personal Care" is shared
  EXPECT_DOUBLE_EQ(rx.title_score, 0.0);
  EXPECT_DOUBLE_EQ(rx.r_type, 0.0);
  EXPECT_DOUBLE_EQ(rx.total, 0.0);
  // one of 5 goal nouns (0.2, not > 0.2), other query and category: r_type 0.5
  WebshopProduct y = body_wash("Lumora Hand Soap Bar", {"sulfate free", "tea tree"});
  y.query = "hand soap";
  y.product_category = "Beauty & Personal Care › Bath › Hand Soap";
  const WebshopRewardTerms ry = webshop_reward(g, y, 10, {"vanilla"});
  EXPECT_DOUBLE_EQ(ry.title_score, 0.2);
  EXPECT_DOUBLE_EQ(ry.r_type, 0.5);
  EXPECT_DOUBLE_EQ(ry.total, 0.5);  // (2 + 1 + 1) / 4 * 0.5
  // the same product under the goal's query: r_type back to 1
  y.query = "body wash";
  EXPECT_DOUBLE_EQ(webshop_reward(g, y, 10, {"vanilla"}).r_type, 1.0);
  // one of 11 goal nouns (< 0.1): r_type 0.1; no goal options: r_option absent
  WebshopGoal g2;
  g2.attributes = {"waterproof"};
  g2.price_upper = 100;
  g2.name = "Alpha Beta Gamma Delta Epsilon Zeta Theta Iota Kappa Lambda Omega";
  WebshopProduct w;
  w.title = "Omega Watch";
  w.attributes = {"waterproof"};
  const WebshopRewardTerms rw = webshop_reward(g2, w, 50, {});
  EXPECT_NEAR(rw.title_score, 1.0 / 11, 1e-12);
  EXPECT_DOUBLE_EQ(rw.r_type, 0.1);
  EXPECT_NEAR(rw.total, 0.1, 1e-12);  // (1 + 0 + 1) / 2 * 0.1
  EXPECT_FALSE(rw.has_option);
  EXPECT_FALSE(rw.to_json().contains("r_option"));
}

// WebShop's own tests (tests/web-agent-site/engine/test_goal.py) as a reference.
TEST(WebshopReward, WebshopsTypeTestCases) {
  WebshopGoal g;
  g.query = "Query 1";
  g.product_category = "a › b › c";
  g.name = "Name 1";
  WebshopProduct p;
  p.query = "Query 1";
  p.product_category = "a › b › c";
  p.title = "Name 1";
  auto type = [&] { return webshop_type_reward(g, p, title_nouns(p.title), title_nouns(g.name)); };
  EXPECT_DOUBLE_EQ(type().r_type, 1.0);
  EXPECT_TRUE(type().query_match);
  EXPECT_TRUE(type().category_match);
  EXPECT_DOUBLE_EQ(type().title_score, 1.0);
  p.query = "Query 2";
  EXPECT_FALSE(type().query_match);
  for (const auto& [path, match] : std::vector<std::pair<std::string, bool>>{
           {"b › c › a", true}, {"d › e › f", false}, {"a › d › b", true}, {"a › a › b", true}, {"a › a › d", false}}) {
    p.product_category = path;
    EXPECT_EQ(type().category_match, match) << path;
  }
  // spaCy's title scores there: 0.3 and 0.15 (abs_tol 0.01); ours are 5/16 and 2/12
  g.name = "Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar Home Theater "
           "System Subwoofer";
  p.title = "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR Combo Home Theater System";
  EXPECT_NEAR(type().title_score, 0.3, 0.02);
  g.name = "Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar";
  EXPECT_NEAR(type().title_score, 0.15, 0.02);
  g.name = "Rusticware 921ORB Kitchen and Bath Cabinet Knob";
  p.title = "Minkissy 2pcs Stainless Steel Eyebrow Tweezers Blackhead Acne Remover Portable Makeup Tweezers (Silver)";
  EXPECT_LT(type().title_score, 0.05);
  // spaCy gives 0.333 here, we 4/6 ("casual", "off", "white" are not nouns to us): the same r_type
  g.name = "Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White";
  p.title = "PEAK High Top Mens Basketball Shoes Lou Williams Streetball Master Breathable Non Slip Outdoor Sneakers";
  EXPECT_GT(type().title_score, 0.2);
  EXPECT_DOUBLE_EQ(type().r_type, 1.0);
}

TEST(WebshopReward, WebshopsAttributeAndOptionTestCases) {
  const std::vector<std::string> goal = {"tea tree", "essential oils", "natural ingredients"};
  WebshopProduct p;
  p.attributes = {"tea tree", "essential oil", "natural ingredients"};
  EXPECT_EQ(webshop_attribute_matches(goal, p), 3);
  p.attributes = {"essential oil", "natural ingredients"};
  EXPECT_EQ(webshop_attribute_matches(goal, p), 2);
  p.attributes = {};
  p.bullets = {"This shampoo has essential oils and smells like lemons"};
  p.description = "Best shampoo on the market, made with natural ingredients";
  EXPECT_EQ(webshop_attribute_matches(goal, p), 2);
  p.attributes = {"tea bag", "earl gray", "lipton"};
  p.title = "English tea for breakfast";
  p.bullets = {"Soothing aroma", "Calming, great feeling"};
  p.description = "Best tea made by Lipton, great to pair with breakfast";
  EXPECT_EQ(webshop_attribute_matches(goal, p), 0);

  EXPECT_EQ(webshop_option_matches({"grey", "XL", "pack of 12"}, {"pack of 12", "grey", "XL"}), 3);
  EXPECT_EQ(webshop_option_matches({"grey", "XL", "pack of 12"}, {"pack of 12", "blue", "XL"}), 2);
  EXPECT_EQ(webshop_option_matches({"cool powder snow", "XL", "pack of 12"}, {"pack of 12", "powder snow", "XL"}), 3);
  EXPECT_EQ(webshop_option_matches({}, {"goal 1", "goal 2"}), 0);
}

// ---- vocabulary and catalogue ------------------------------------------------------------

std::set<std::string> path_parts(const std::string& path) {
  std::set<std::string> out;
  size_t start = 0;
  const std::string sep = " › ";
  while (true) {
    const size_t p = path.find(sep, start);
    out.insert(path.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + sep.size();
  }
}

TEST(WebshopVocab, KeepsItsRules) {
  const auto& types = webshop_product_types();
  ASSERT_EQ(types.size(), 24u);
  for (size_t ti = 0; ti < types.size(); ++ti) {
    const WebshopTypeSpec& t = types[ti];
    std::vector<std::string> attrs = t.attributes;
    const auto& extra = webshop_category_attributes(t.category);
    ASSERT_FALSE(extra.empty()) << t.category;
    attrs.insert(attrs.end(), extra.begin(), extra.end());
    for (size_t i = 0; i < attrs.size(); ++i) {
      for (size_t j = 0; j < attrs.size(); ++j) {
        if (i == j) continue;
        EXPECT_LE(fuzzy_token_set_ratio(attrs[i], attrs[j]), 85) << t.query << ": " << attrs[i] << " ~ " << attrs[j];
        EXPECT_EQ(attrs[i].find(attrs[j]), std::string::npos) << t.query << ": " << attrs[j] << " in " << attrs[i];
      }
    }
    ASSERT_FALSE(t.options.empty()) << t.query;
    for (const WebshopOptionSpec& g : t.options) {
      for (size_t i = 0; i < g.values.size(); ++i) {
        for (size_t j = 0; j < g.values.size(); ++j) {
          if (i == j) continue;
          EXPECT_LE(fuzzy_token_set_ratio(normalize_color(g.values[i]), normalize_color(g.values[j])), 85)
              << t.query << ": " << g.values[i] << " ~ " << g.values[j];
        }
      }
    }
    for (size_t tj = 0; tj < ti; ++tj) {
      const std::set<std::string> a = path_parts(t.product_category), b = path_parts(types[tj].product_category);
      size_t shared = 0;
      for (const std::string& s : a) shared += b.count(s);
      EXPECT_NE(t.product_category, types[tj].product_category);
      if (t.category != types[tj].category) {
        EXPECT_LE(shared, 1u) << t.product_category << " / " << types[tj].product_category;
      }
    }
  }
}

TEST(WebshopCatalogue, GeneratedIsDeterministicAndWellFormed) {
  WebshopCatalogueSpec spec;
  spec.seed = 5;
  spec.size = 120;
  const WebshopCatalogue a = generate_webshop_catalogue(spec);
  const WebshopCatalogue b = generate_webshop_catalogue(spec);
  ASSERT_EQ(a.products.size(), 120u);
  spec.seed = 6;
  const WebshopCatalogue c = generate_webshop_catalogue(spec);
  bool differs = false;
  std::set<std::string> queries;
  for (size_t i = 0; i < a.products.size(); ++i) {
    const WebshopProduct& p = a.products[i];
    EXPECT_EQ(p.to_json().dump(), b.products[i].to_json().dump());
    differs = differs || p.to_json().dump() != c.products[i].to_json().dump();
    EXPECT_EQ(a.find(p.asin), static_cast<int64_t>(i));
    EXPECT_EQ(a.find(lower_copy(p.asin)), static_cast<int64_t>(i));
    EXPECT_LE(p.asin.size(), 10u);
    EXPECT_GE(p.attributes.size(), 3u);
    EXPECT_FALSE(p.options.empty());
    EXPECT_EQ(p.price_tag, "$" + std::to_string(static_cast<int>(p.price)) + ".99");
    std::set<std::string> values;
    for (const auto& g : p.options) {
      for (const auto& v : g.values) EXPECT_TRUE(values.insert(v).second) << p.asin << " repeats " << v;
    }
    for (const std::string& att : p.attributes) {
      EXPECT_TRUE(contains(lower_copy(p.description), att)) << p.asin << " " << att;
    }
    queries.insert(p.query);
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(queries.size(), 24u);  // every type at least once
  EXPECT_EQ(a.find("B0NOPE"), -1);
}

TEST(WebshopCatalogue, SpecRejectsBadOptions) {
  EXPECT_TRUE(contains(error_of([] { WebshopCatalogueSpec::from_json({{"catalogue_size", 3}}); }), "catalogue_size"));
  EXPECT_TRUE(contains(error_of([] { WebshopCatalogueSpec::from_json({{"near_miss_rate", 1.5}}); }), "near_miss_rate"));
  const std::string unknown = error_of([] { WebshopCatalogueSpec::from_json({{"catalog_size", 3}}); });
  EXPECT_TRUE(contains(unknown, "unknown config key 'env_kwargs.game.catalog_size'")) << unknown;
  EXPECT_TRUE(contains(unknown, "did you mean 'env_kwargs.game.catalogue_size'?")) << unknown;
  EXPECT_TRUE(contains(unknown, "Valid keys under 'env_kwargs.game': catalogue_seed, catalogue_size")) << unknown;
  EXPECT_TRUE(contains(
      error_of([] { WebshopCatalogueSpec::from_json({{"catalogue_size", 30}, {"products_file", "x.json"}}); }),
      "not both"));
  EXPECT_TRUE(contains(error_of([] { WebshopCatalogueSpec::from_json({{"attributes_file", "x.json"}}); }),
                       "'products_file' is required"));
}

TEST(WebshopCatalogue, PriceBoundFollowsWebshop) {
  std::set<double> seen;
  for (uint64_t s = 0; s < 200; ++s) {
    const auto [bound, clause] = webshop_price_bound(12.99, s);  // above: 20 30 40 50
    seen.insert(bound);
    char buf[64];
    std::snprintf(buf, sizeof(buf), ", and price lower than %.2f dollars", bound);
    EXPECT_EQ(clause, buf);
  }
  EXPECT_EQ(seen, (std::set<double>{30, 40, 50}));  // the larger of two distinct draws
  EXPECT_EQ(webshop_price_bound(975, 1).first, 990);   // above: 980 990
  EXPECT_EQ(webshop_price_bound(985, 1).first, 1000000);  // above: 990 only
  EXPECT_EQ(webshop_price_bound(985, 1).second, "");
  EXPECT_GE(webshop_price_bound(20, 3).first, 40);  // strictly above: 30 40 50 60
}

// ---- WebShop's files -----------------------------------------------------------------------

TEST(WebshopLoader, ReadsTheRealSchema) {
  const WebshopCatalogue cat = load_webshop_catalogue(WebshopCatalogueSpec::from_json(fixture_spec()));
  ASSERT_EQ(cat.products.size(), 3u);  // "nan", the repeated asin and the 13-character one skipped
  const WebshopProduct& perfume = cat.products[0];
  EXPECT_EQ(perfume.asin, "B09QKP7XQL");
  EXPECT_EQ(perfume.title, "Glow Theory Long Lasting Eau de Parfum for Women");
  EXPECT_EQ(perfume.price_tag, "$45.99");
  EXPECT_DOUBLE_EQ(perfume.price, 45.99);
  ASSERT_EQ(perfume.options.size(), 1u);
  EXPECT_EQ(perfume.options[0].name, "size");
  EXPECT_EQ(perfume.options[0].values, (std::vector<std::string>{"3.4 fl oz", "1.7 fl oz"}));
  EXPECT_EQ(perfume.attributes, (std::vector<std::string>{"long lasting", "floral scent"}));
  EXPECT_EQ(perfume.bullets, (std::vector<std::string>{"Long lasting floral scent", "Made in France"}));
  EXPECT_EQ(perfume.rating, "N.A.");
  const WebshopProduct& tee = cat.products[1];
  EXPECT_EQ(tee.query, "men's t-shirts");  // lower-cased and trimmed
  EXPECT_EQ(tee.price_tag, "$12.5 to $19.0");
  EXPECT_GE(tee.price, 12.5);
  EXPECT_LE(tee.price, 19.0);
  ASSERT_EQ(tee.options.size(), 2u);
  EXPECT_EQ(tee.options[0].name, "color");
  EXPECT_EQ(tee.options[0].values, (std::vector<std::string>{"navy | white", "black"}));  // "/" -> " | "
  EXPECT_EQ(tee.bullets, (std::vector<std::string>{"Machine wash cold"}));               // one string -> a list
  EXPECT_EQ(webshop_search_document(tee),
            "harbor mens cotton crew neck t-shirt soft cotton tee for every day. machine wash cold color: navy | "
            "white, black, and size: large, small");
  const WebshopProduct& mug = cat.products[2];
  EXPECT_EQ(mug.attributes, (std::vector<std::string>{"DUMMY_ATTR"}));  // not in items_ins_v2
  EXPECT_EQ(mug.price_tag, "$100.0");
  EXPECT_DOUBLE_EQ(mug.price, 100.0);
  EXPECT_TRUE(mug.options.empty());
  EXPECT_TRUE(mug.bullets.empty());

  // human goals: the one without attributes and the one of a missing product are skipped
  ASSERT_EQ(cat.goals.size(), 2u);
  const WebshopGoal& g = cat.goals[0];
  EXPECT_EQ(g.asin, "B09QKP7XQL");
  EXPECT_EQ(g.attributes, (std::vector<std::string>{"long lasting"}));
  EXPECT_EQ(g.options, (std::vector<std::string>{"3.4 fl oz"}));
  EXPECT_TRUE(g.price_upper == 60 || g.price_upper == 70 || g.price_upper == 80) << g.price_upper;
  char tail[64];
  std::snprintf(tail, sizeof(tail), ", and price lower than %.2f dollars", g.price_upper);
  EXPECT_EQ(g.instruction_text, std::string("i need a long lasting eau de parfum in 3.4 fl oz") + tail);
  EXPECT_EQ(g.name, perfume.title);
  EXPECT_EQ(g.query, "eau de parfum");
  EXPECT_EQ(cat.goals[1].options, (std::vector<std::string>{"navy | white", "large"}));
  EXPECT_EQ(WebshopGoal::from_json(g.to_json()).to_json(), g.to_json());
}

TEST(WebshopLoader, SyntheticGoalsEnumerateOptionCombinations) {
  WebshopCatalogueSpec spec = WebshopCatalogueSpec::from_json(fixture_spec(/*human=*/false));
  const WebshopCatalogue cat = load_webshop_catalogue(spec);
  ASSERT_EQ(cat.goals.size(), 6u);  // perfume: 2 sizes; tee: 2 colours x 2 sizes; mug: no instruction
  EXPECT_TRUE(cat.goals[0].instruction_text.rfind("i need a long lasting eau de parfum with size: 3.4 fl oz, and price "
                                                  "lower than ",
                                                  0) == 0)
      << cat.goals[0].instruction_text;
  EXPECT_TRUE(cat.goals[2].instruction_text.rfind(
                  "i want a machine wash cotton t-shirt with color: navy | white, and size: large, and price", 0) == 0)
      << cat.goals[2].instruction_text;
  EXPECT_EQ(cat.goals[3].options, (std::vector<std::string>{"navy | white", "small"}));
  EXPECT_EQ(cat.goals[4].options, (std::vector<std::string>{"black", "large"}));
  EXPECT_EQ(cat.goals[5].option_names, (std::vector<std::string>{"color", "size"}));
  spec.num_products = 2;
  EXPECT_EQ(load_webshop_catalogue(spec).products.size(), 2u);
}

TEST(WebshopLoader, BadFilesSayWhich) {
  const std::string dir = ::testing::TempDir();
  EXPECT_TRUE(contains(error_of([&] {
                         load_webshop_catalogue(WebshopCatalogueSpec::from_json({{"products_file", dir + "/none.json"}}));
                       }),
                       "cannot open"));
  {
    std::ofstream(dir + "/ws_bad.json") << "[{\"asin\": ";
  }
  EXPECT_TRUE(contains(error_of([&] {
                         load_webshop_catalogue(WebshopCatalogueSpec::from_json({{"products_file", dir + "/ws_bad.json"}}));
                       }),
                       "not valid JSON"));
  {
    std::ofstream(dir + "/ws_noname.json") << R"([{"asin": "B0X", "category": "c", "query": "q", "product_category": "p"}])";
  }
  const std::string e = error_of([&] {
    load_webshop_catalogue(WebshopCatalogueSpec::from_json({{"products_file", dir + "/ws_noname.json"}}));
  });
  EXPECT_TRUE(contains(e, "'name'")) << e;
  EXPECT_TRUE(contains(e, "product 0")) << e;
}

// ---- the game -------------------------------------------------------------------------------

WebshopGameOptions fixture_game(int step_limit = 0) {
  json j = fixture_spec();
  j["step_limit"] = step_limit;
  return WebshopGameOptions::from_json(j);
}

TEST(WebshopGame, PagesActionsAndTheRewardByHand) {
  WebshopGame game(fixture_game());
  const WebshopGoal goal = game.catalogue().goals[0];  // long lasting, 3.4 fl oz, bound 60..80
  const std::string search = "WebShop [SEP] Instruction: [SEP] " + goal.instruction_text + " [SEP] Search";
  EXPECT_EQ(game.reset_goal(goal), search);
  EXPECT_EQ(game.admissible_commands(), (std::vector<std::string>{"search[<query>]"}));
  // invalid actions: the same page, reward 0, not done
  for (const std::string bad : {"click[Search]", "search[]", "search[   ]", "hello", "", "jump[eau]", "click[Buy Now]",
                                 "search[eau", "click]x["}) {
    const env::GameStep s = game.step(bad);
    EXPECT_EQ(s.observation, search) << bad;
    EXPECT_EQ(s.reward, 0.0f);
    EXPECT_FALSE(s.done);
    EXPECT_EQ(s.info["valid"], false) << bad;
    EXPECT_TRUE(s.info.contains("reason"));
  }
  const std::string results =
      "Back to Search [SEP] Page 1 (Total results: 1) [SEP] Next > [SEP] B09QKP7XQL [SEP] Glow Theory Long Lasting Eau "
      "de Parfum for Women [SEP] $45.99";
  env::GameStep s = game.step("SEARCH[Eau de Parfum]");  // case-insensitive
  EXPECT_EQ(s.observation, results);
  EXPECT_EQ(s.info["valid"], true);
  EXPECT_EQ(s.info["page"], "results");
  EXPECT_EQ(game.admissible_commands(),
            (std::vector<std::string>{"click[Back to Search]", "click[Next >]", "click[B09QKP7XQL]"}));
  EXPECT_EQ(game.step("search[perfume]").info["valid"], false);  // no search bar here
  EXPECT_EQ(game.step("click[next >]").observation,
            "Back to Search [SEP] Page 2 (Total results: 1) [SEP] < Prev [SEP] Next >");
  EXPECT_EQ(game.step("click[< prev]").observation, results);
  const std::string item =
      "Back to Search [SEP] < Prev [SEP] size [SEP] 3.4 fl oz [SEP] 1.7 fl oz [SEP] Glow Theory Long Lasting Eau de "
      "Parfum for Women [SEP] Price: $45.99 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy "
      "Now";
  EXPECT_EQ(game.step("click[b09qkp7xql]").observation, item);
  EXPECT_EQ(game.admissible_commands().size(), 8u);
  EXPECT_EQ(game.step("click[Features]").observation,
            "Back to Search [SEP] < Prev [SEP] Long lasting floral scent [SEP] Made in France");
  EXPECT_EQ(game.step("click[< Prev]").observation, item);
  EXPECT_EQ(game.step("click[Description]").observation,
            "Back to Search [SEP] < Prev [SEP] A floral fragrance that lasts all day.");
  EXPECT_EQ(game.step("click[< Prev]").observation, item);
  EXPECT_EQ(game.step("click[Reviews]").observation, "Back to Search [SEP] < Prev");
  EXPECT_EQ(game.step("click[< Prev]").observation, item);
  EXPECT_EQ(game.step("click[3.4 fl oz]").observation, item);
  EXPECT_EQ(game.step("click[1.7 FL OZ]").observation, item);  // the group's value is replaced
  s = game.step("click[Buy Now]");
  // long lasting matches, "1.7 fl oz" vs "3.4 fl oz" scores 78, the price is under the bound: (1 + 0 + 1) / 3
  EXPECT_TRUE(s.done);
  EXPECT_NEAR(s.reward, 2.0 / 3.0, 1e-6);
  EXPECT_EQ(s.observation, "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 0.6667");
  EXPECT_EQ(s.info["reward_terms"]["num_option_matches"], 0);
  const json sum = game.summary();
  EXPECT_EQ(sum["bought"]["asin"], "B09QKP7XQL");
  EXPECT_EQ(sum["bought"]["chosen_options"], json({{"size", "1.7 fl oz"}}));
  EXPECT_EQ(sum["goal"]["goal_options"], json({"3.4 fl oz"}));
  EXPECT_NEAR(sum["reward"]["total"].get<double>(), 2.0 / 3.0, 1e-12);
  EXPECT_TRUE(game.admissible_commands().empty());
  EXPECT_FALSE(game.expert_action().has_value());
  s = game.step("click[Buy Now]");
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.info["valid"], false);
}

TEST(WebshopGame, ResultsPagesAndBackToSearchClearTheOptions) {
  WebshopGame game(fixture_game());
  const WebshopGoal goal = game.catalogue().goals[0];
  game.reset_goal(goal);
  game.step("search[eau de parfum]");
  game.step("click[B09QKP7XQL]");
  game.step("click[3.4 fl oz]");
  game.step("click[< Prev]");  // the results page: WebShop resets the options
  game.step("click[B09QKP7XQL]");
  EXPECT_NEAR(game.step("click[Buy Now]").reward, 2.0 / 3.0, 1e-6);  // no option chosen
  game.reset_goal(goal);
  game.step("search[eau de parfum]");
  game.step("click[B09QKP7XQL]");
  game.step("click[3.4 fl oz]");
  EXPECT_EQ(game.step("click[Buy Now]").reward, 1.0f);
}

TEST(WebshopGame, StepLimitEndsTheEpisodeUnbought) {
  WebshopGame game(fixture_game(/*step_limit=*/2));
  game.reset_goal(game.catalogue().goals[0]);
  EXPECT_FALSE(game.step("search[eau de parfum]").done);
  const env::GameStep s = game.step("click[nothing]");
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.reward, 0.0f);
  EXPECT_EQ(s.info["step_limit"], true);
  EXPECT_TRUE(contains(s.observation, "[SEP] Step limit reached."));
  EXPECT_TRUE(game.summary()["bought"].is_null());
}

TEST(WebshopGame, ExpertSolvesTheFileGoals) {
  WebshopGame game(fixture_game(15));
  for (const WebshopGoal& g : game.catalogue().goals) {
    game.reset_goal(g);
    float total = 0;
    while (auto a = game.expert_action()) total += game.step(*a).reward;
    EXPECT_EQ(total, 1.0f) << g.instruction_text << " " << game.summary().dump();
  }
}

TEST(WebshopGame, RejectsBadSamplesAndOptions) {
  WebshopGame game(fixture_game());
  Sample s;
  EXPECT_TRUE(contains(error_of([&] { game.reset(s); }), "extra_info.goal"));
  WebshopGoal g = game.catalogue().goals[0];
  g.asin = "B0MISSING0";
  s.extra_info = {{"goal", g.to_json()}};
  EXPECT_TRUE(contains(error_of([&] { game.reset(s); }), "not in the catalogue"));
  s.extra_info = {{"goal", {{"asin", "B09QKP7XQL"}}}};
  EXPECT_TRUE(contains(error_of([&] { game.reset(s); }), "instruction_text"));
  json bad = g.to_json();
  bad["price_upper"] = -1;
  s.extra_info = {{"goal", bad}};
  EXPECT_TRUE(contains(error_of([&] { game.reset(s); }), "price_upper"));
  EXPECT_TRUE(contains(error_of([] { WebshopGameOptions::from_json({{"step_limit", -1}}); }), "step_limit"));
  EXPECT_TRUE(contains(error_of([] { WebshopGameOptions::from_json({{"bogus", 1}}); }),
                       "Valid keys under 'env_kwargs.game': catalogue_seed, catalogue_size, near_miss_rate, "
                       "products_file, attributes_file, human_instructions_file, num_products, step_limit, "
                       "repeat_instruction."));
  // before reset: an observation, not a crash
  WebshopGame fresh(fixture_game());
  EXPECT_EQ(fresh.step("click[Buy Now]").info["valid"], false);
  EXPECT_FALSE(fresh.expert_action().has_value());
}

TEST(WebshopGame, RandomInputNeverThrows) {
  WebshopGameOptions opts;
  opts.catalogue.size = 60;
  opts.step_limit = 25;
  WebshopGame game(opts);
  WebshopGoalOptions go;
  const std::vector<WebshopGoal> goals = webshop_dataset_goals(game.catalogue(), DataSplit::kAny, 20, 1, go);
  Rng rng(99);
  const std::vector<std::string> pieces = {"click[", "search[", "]", "[", "Buy Now", "< prev", "next >", "  ", "\n",
                                           "\xff\xfe", "back to search", "description", "CLICK", "search", "0"};
  int episodes_done = 0;
  for (const WebshopGoal& g : goals) {
    game.reset_goal(g);
    for (int k = 0; k < 40; ++k) {
      std::string cmd;
      // half the time a real command of the page (so every page gets visited)
      const std::vector<std::string> adm = game.admissible_commands();
      if (!adm.empty() && rng.bernoulli(0.5)) {
        cmd = adm[rng.choice(adm.size())];
        if (cmd == "search[<query>]") cmd = "search[" + g.query + "]";
      } else {
        for (int p = 0; p < 3; ++p) cmd += pieces[rng.choice(pieces.size())];
      }
      env::GameStep s;
      ASSERT_NO_THROW(s = game.step(cmd)) << cmd;
      EXPECT_GE(s.reward, 0.0f);
      EXPECT_LE(s.reward, 1.0f);
      if (s.done) {
        ++episodes_done;
        EXPECT_TRUE(game.admissible_commands().empty());
        break;
      }
      EXPECT_FALSE(s.observation.empty());
    }
  }
  EXPECT_EQ(episodes_done, 20);  // Buy Now or the step limit ends each
}

TEST(WebshopGame, RepeatInstructionShowsItOnEveryPage) {
  json j = fixture_spec();
  j["repeat_instruction"] = true;
  WebshopGame game(WebshopGameOptions::from_json(j));
  const WebshopGoal goal = game.catalogue().goals[0];
  game.reset_goal(goal);
  EXPECT_EQ(game.step("search[eau de parfum]").observation.rfind("Instruction: [SEP] " + goal.instruction_text +
                                                                 " [SEP] Back to Search [SEP] Page 1",
                                                             0),
            0u);
}

// ---- generated goals: split, uniqueness, expert -------------------------------------------------

// Brute force: every product with every choice of one value per group (or none); only
// the target with the goal's values may reach 1.
void expect_unique_by_brute_force(const WebshopCatalogue& cat, const WebshopGoal& goal) {
  for (const WebshopProduct& p : cat.products) {
    std::vector<std::vector<std::string>> choices = {{}};
    for (const WebshopOptionGroup& g : p.options) {
      std::vector<std::vector<std::string>> next;
      for (const auto& c : choices) {
        for (const std::string& v : g.values) {
          next.push_back(c);
          next.back().push_back(v);
        }
      }
      choices = std::move(next);
    }
    for (const auto& c : choices) {
      const double r = webshop_reward(goal, p, p.price, c).total;
      bool exact = p.asin == goal.asin;
      for (const std::string& v : goal.options) exact = exact && std::find(c.begin(), c.end(), v) != c.end();
      if (exact) {
        EXPECT_DOUBLE_EQ(r, 1.0);
      } else {
        ASSERT_LT(r, 1.0) << goal.to_json().dump() << " also rewards " << p.asin;
      }
    }
  }
}

TEST(WebshopGoals, DeterministicSplitDisjointAndUnique) {
  WebshopCatalogueSpec spec;
  const auto cat = get_webshop_catalogue(spec);
  WebshopGoalOptions o;
  const auto train = webshop_dataset_goals(*cat, DataSplit::kTrain, 200, 3, o);
  const auto again = webshop_dataset_goals(*cat, DataSplit::kTrain, 200, 3, o);
  const auto test = webshop_dataset_goals(*cat, DataSplit::kTest, 200, 3, o);
  const auto other = webshop_dataset_goals(*cat, DataSplit::kTrain, 200, 4, o);
  std::set<std::string> train_asins, test_asins;
  int same_as_other = 0;
  for (size_t i = 0; i < train.size(); ++i) {
    EXPECT_EQ(train[i].to_json(), again[i].to_json());
    same_as_other += train[i].to_json() == other[i].to_json() ? 1 : 0;
    EXPECT_EQ(webshop_split_of(train[i].asin), DataSplit::kTrain);
    EXPECT_EQ(webshop_split_of(test[i].asin), DataSplit::kTest);
    train_asins.insert(train[i].asin);
    test_asins.insert(test[i].asin);
  }
  EXPECT_LT(same_as_other, 10);
  for (const std::string& a : test_asins) EXPECT_EQ(train_asins.count(a), 0u) << a;
  EXPECT_GT(train_asins.size(), 50u);
  for (size_t i = 0; i < 40; ++i) {
    expect_unique_by_brute_force(*cat, train[i]);
    expect_unique_by_brute_force(*cat, test[i]);
  }
}

TEST(WebshopGoals, LevelsSetTheFewestConditionsAndThePhrasing) {
  const auto cat = get_webshop_catalogue(WebshopCatalogueSpec{});
  for (int level = 1; level <= kWebshopMaxLevel; ++level) {
    WebshopGoalOptions o;
    o.min_level = o.max_level = level;
    const auto [na, no] = webshop_level_shape(level);
    for (const WebshopGoal& g : webshop_dataset_goals(*cat, DataSplit::kTrain, 60, 11, o)) {
      EXPECT_EQ(g.level, level);
      EXPECT_GE(static_cast<int>(g.attributes.size()), na);
      EXPECT_LE(g.attributes.size(), 4u);
      EXPECT_GE(static_cast<int>(g.options.size()), no);
      EXPECT_EQ(g.options.size(), g.option_names.size());
      EXPECT_TRUE(std::is_sorted(g.option_names.begin(), g.option_names.end()));
      for (size_t k = 0; k < g.options.size(); ++k) {
        EXPECT_TRUE(contains(g.instruction_text, g.option_names[k] + ": " + g.options[k])) << g.instruction_text;
      }
      for (const std::string& a : g.attributes) EXPECT_TRUE(contains(g.instruction_text, a));
      EXPECT_TRUE(contains(g.instruction_text, g.query));
      char tail[64];
      std::snprintf(tail, sizeof(tail), ", and price lower than %.2f dollars", g.price_upper);
      EXPECT_TRUE(g.instruction_text.size() > strlen(tail) &&
                  g.instruction_text.compare(g.instruction_text.size() - strlen(tail), strlen(tail), tail) == 0)
          << g.instruction_text;
    }
  }
  EXPECT_TRUE(contains(error_of([] {
                         WebshopGoalOptions o;
                         o.min_level = 3;
                         o.max_level = 2;
                         o.validate();
                       }),
                       "min_level must be <= max_level"));
}

TEST(WebshopGoals, ExpertSolvesEveryGeneratedGoal) {
  struct Case {
    uint64_t seed;
    int64_t size;
    double near_miss;
  };
  const std::vector<Case> cases = {{1, 300, 0.35}, {2, 300, 0.35}, {3, 500, 0.35}, {4, 48, 0.9}, {5, 100, 0.0}};
  std::vector<std::unique_ptr<WebshopGame>> games;
  for (const Case& c : cases) {
    WebshopGameOptions opts;
    opts.catalogue.seed = c.seed;
    opts.catalogue.size = c.size;
    opts.catalogue.near_miss_rate = c.near_miss;
    games.push_back(std::make_unique<WebshopGame>(opts));
  }
  int episodes = 0;
  // 400 seeds: every catalogue, level and split, 6 goals each
  for (uint64_t seed = 0; seed < 400; ++seed) {
    WebshopGame& game = *games[seed % cases.size()];
    WebshopGoalOptions o;
    o.min_level = o.max_level = static_cast<int>(seed % 4) + 1;
    const DataSplit split = (seed / 20) % 2 == 0 ? DataSplit::kTrain : DataSplit::kTest;
    for (const WebshopGoal& g : webshop_dataset_goals(game.catalogue(), split, 6, seed, o)) {
      game.reset_goal(g);
      float total = 0;
      int steps = 0;
      while (auto a = game.expert_action()) {
        total += game.step(*a).reward;
        ++steps;
      }
      ASSERT_EQ(total, 1.0f) << g.to_json().dump() << "\n" << game.summary().dump();
      ASSERT_LE(steps, 10);
      ++episodes;
    }
  }
  EXPECT_EQ(episodes, 400 * 6);
}

TEST(WebshopCatalogue, HasEveryKindOfNearMiss) {
  WebshopCatalogueSpec spec;
  spec.near_miss_rate = 0.5;
  const auto cat = get_webshop_catalogue(spec);
  bool dearer = false, other_options = false, one_attribute = false;
  for (size_t i = 0; i < cat->products.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const WebshopProduct& a = cat->products[i];
      const WebshopProduct& b = cat->products[j];
      if (a.query != b.query) continue;
      const bool same_options = a.to_json()["options"] == b.to_json()["options"];
      if (a.title == b.title && a.attributes == b.attributes && same_options && std::abs(a.price - b.price) >= 40) {
        dearer = true;
      }
      if (a.title == b.title && a.attributes == b.attributes && !same_options && a.price == b.price) {
        other_options = true;
      }
      if (a.attributes.size() == b.attributes.size()) {
        size_t diff = 0;
        for (size_t k = 0; k < a.attributes.size(); ++k) diff += a.attributes[k] != b.attributes[k] ? 1 : 0;
        one_attribute = one_attribute || (diff == 1 && same_options && a.price == b.price);
      }
    }
  }
  EXPECT_TRUE(dearer);
  EXPECT_TRUE(other_options);
  EXPECT_TRUE(one_attribute);
}

// ---- the family ----------------------------------------------------------------------------

TEST(WebshopFamily, OptionsParseAndReject) {
  const WebshopFamilyOptions o = WebshopFamilyOptions::from_json(
      {{"min_level", 2}, {"max_level", 4}, {"catalogue_size", 100}, {"step_limit", 12}, {"show_admissible", true}});
  EXPECT_EQ(o.min_level, 2);
  EXPECT_EQ(o.game.catalogue.size, 100);
  EXPECT_EQ(o.game.step_limit, 12);
  EXPECT_EQ(WebshopFamilyOptions::from_json(o.to_json()).to_json(), o.to_json());
  const std::string unknown = error_of([] { WebshopFamilyOptions::from_json({{"levels", 2}}); });
  EXPECT_TRUE(contains(unknown, "unknown config key 'data.task_kwargs.levels'")) << unknown;
  EXPECT_TRUE(contains(unknown, "Valid keys under 'data.task_kwargs': min_level, max_level, catalogue_seed"))
      << unknown;
  EXPECT_TRUE(contains(error_of([] { WebshopFamilyOptions::from_json({{"max_level", 5}}); }), "1..4"));
  EXPECT_TRUE(contains(error_of([] { WebshopFamilyOptions::from_json({{"use_system_prompt", 1}}); }), "true or false"));
  EXPECT_TRUE(contains(error_of([] { WebshopFamilyOptions::from_json({{"min_level", 3}, {"max_level", 1}}); }),
                       "min_level must be <= max_level"));
  EXPECT_TRUE(contains(error_of([] { WebshopFamilyOptions::from_json(json::array()); }),
                       "data.task_kwargs: expected a map"));
}

TEST(WebshopFamily, SamplesFollowTheConventionsAndReplayFromJsonl) {
  register_webshop_family();
  auto fam = make_task_family("webshop", {{"catalogue_size", 200}, {"max_level", 4}});
  const std::vector<Sample> ds = fam->make_dataset(DataSplit::kTest, 20, 5);
  ASSERT_EQ(ds.size(), 20u);
  for (size_t i = 0; i < ds.size(); ++i) {
    const Sample& s = ds[i];
    EXPECT_EQ(s.agent_name, "webshop");
    EXPECT_EQ(s.reward_style, "env");
    EXPECT_EQ(s.data_source, "webshop");
    ASSERT_EQ(s.prompt.size(), 1u);
    EXPECT_EQ(s.prompt[0]["role"], "system");
    EXPECT_FALSE(s.env_kwargs.contains("context"));
    EXPECT_EQ(s.env_kwargs["game"]["catalogue_size"], 200);
    EXPECT_EQ(s.ground_truth["asin"], s.extra_info["goal"]["asin"]);
    EXPECT_EQ(s.extra_info["split"], "test");
    EXPECT_EQ(s.extra_info["index"], static_cast<int64_t>(i));
    // JSONL round trip plays identically
    const Sample back = Sample::from_json(json::parse(s.to_json().dump()));
    auto a = fam->play_episode(s);
    auto b = fam->play_episode(back);
    EXPECT_EQ(a->reset()["observation"], b->reset()["observation"]);
    json last;
    while (!a->done()) {
      const std::string act = *a->expert_action();
      EXPECT_EQ(act, *b->expert_action());
      last = a->step(act);
      EXPECT_EQ(last, b->step(act));
    }
    EXPECT_EQ(last["reward"], 1.0);
    EXPECT_TRUE(last["info"].contains("summary"));
  }
  const std::vector<std::string> rd = fam->recipe_defaults();
  ASSERT_EQ(rd.size(), 5u);
  EXPECT_EQ(rd[0], "rollout.max_steps=15");
  EXPECT_EQ(rd[2], "rollout.max_response_tokens=960");
  EXPECT_EQ(make_task_family("webshop", {{"step_limit", 10}})->recipe_defaults()[0], "rollout.max_steps=10");
  const auto again = fam->make_dataset(DataSplit::kTest, 20, 5);
  for (size_t i = 0; i < ds.size(); ++i) EXPECT_EQ(ds[i].to_json(), again[i].to_json());
  EXPECT_TRUE(env::has_game("webshop"));
  const std::string unknown = error_of([] { env::make_game("webshop", {{"catalog", 1}}); });
  EXPECT_TRUE(contains(unknown, "unknown config key 'env_kwargs.game.catalog'")) << unknown;
  EXPECT_TRUE(contains(unknown, "Valid keys under 'env_kwargs.game': catalogue_seed")) << unknown;
  auto bare = make_task_family("webshop", {{"use_system_prompt", false}, {"show_admissible", true}});
  const Sample s = bare->make_dataset(DataSplit::kTrain, 1, 1)[0];
  ASSERT_EQ(s.prompt.size(), 1u);
  EXPECT_EQ(s.prompt[0]["role"], "user");
  EXPECT_EQ(s.prompt[0]["content"], kWebshopShortInstruction);
  EXPECT_NO_THROW(Sample::from_json(s.to_json()));
  EXPECT_EQ(s.env_kwargs["show_admissible"], true);
}

TEST(WebshopFamily, DemonstrationsAreTheExpertsEpisodes) {
  WebshopFamily fam(WebshopFamilyOptions::from_json({{"catalogue_size", 150}}));
  const text::ChatTemplate tmpl = text::ChatTemplate::for_family(text::ChatFamily::kQwen3);
  std::vector<std::string> rendered;
  const std::vector<json> demos = fam.demonstrations(6, 9, tmpl, "<|im_end|>", &rendered);
  ASSERT_EQ(demos.size(), 6u);
  ASSERT_EQ(rendered.size(), 6u);
  const std::vector<Sample> train = fam.make_dataset(DataSplit::kTrain, 6, 9);
  for (size_t i = 0; i < demos.size(); ++i) {
    EXPECT_EQ(demos[i]["sample"], train[i].to_json());
    const json& acts = demos[i]["actions"];
    ASSERT_GE(acts.size(), 3u);
    EXPECT_EQ(acts[0].get<std::string>().rfind("<action>search[", 0), 0u);
    EXPECT_EQ(acts.back(), "<action>click[Buy Now]</action><|im_end|>");
    EXPECT_TRUE(contains(rendered[i], "[SEP]"));
    EXPECT_TRUE(contains(rendered[i], train[i].extra_info["goal"]["instruction_text"].get<std::string>()));
  }
}

TEST(WebshopFamily, UsesWebshopsFiles) {
  json kw = fixture_spec();
  WebshopFamily fam(WebshopFamilyOptions::from_json(kw));
  const auto any = fam.make_dataset(DataSplit::kAny, 4, 1);
  std::set<std::string> asins;
  for (const Sample& s : any) asins.insert(s.ground_truth["asin"].get<std::string>());
  EXPECT_EQ(asins, (std::set<std::string>{"B09QKP7XQL", "B08CXT4GJD"}));  // two goals, repeated
  for (DataSplit split : {DataSplit::kTrain, DataSplit::kTest}) {
    size_t expected = 0;
    for (const std::string& a : asins) expected += webshop_split_of(a) == split ? 1 : 0;
    if (expected == 0) {
      EXPECT_TRUE(contains(error_of([&] { fam.make_dataset(split, 1, 1); }), "split"));
      continue;
    }
    for (const Sample& s : fam.make_dataset(split, 3, 2)) {
      EXPECT_EQ(webshop_split_of(s.ground_truth["asin"].get<std::string>()), split);
      auto ep = fam.play_episode(s);
      ep->reset();
      json last;
      while (!ep->done()) last = ep->step(*ep->expert_action());
      EXPECT_EQ(last["reward"], 1.0);
    }
  }
}

TEST(WebshopGoals, PythonShuffleMatchesCPython) {
  // from CPython 3.11: random.seed(233); x = list(range(n)); random.shuffle(x)
  EXPECT_EQ(webshop_python_shuffle(10, 233), (std::vector<size_t>{5, 9, 0, 1, 4, 7, 6, 3, 8, 2}));
  EXPECT_EQ(webshop_python_shuffle(7, 233), (std::vector<size_t>{2, 0, 3, 4, 1, 6, 5}));
  const std::vector<size_t> big = webshop_python_shuffle(3000, 233);
  EXPECT_EQ(std::vector<size_t>(big.begin(), big.begin() + 5), (std::vector<size_t>{1427, 1834, 1693, 2041, 702}));
  EXPECT_EQ(std::vector<size_t>(big.begin() + 500, big.begin() + 503), (std::vector<size_t>{1748, 2375, 1608}));
  EXPECT_EQ(std::vector<size_t>(big.begin() + 1500, big.begin() + 1503), (std::vector<size_t>{118, 761, 661}));
  EXPECT_TRUE(webshop_python_shuffle(0, 233).empty());
}

TEST(WebshopFamily, WebshopIndexSplit) {
  json kw = fixture_spec();
  kw["split_by"] = "webshop_index";
  WebshopFamily fam(WebshopFamilyOptions::from_json(kw));
  // two goals: both among WebShop's first 500 (test), in its shuffled order [1, 0]
  const auto test = fam.make_dataset(DataSplit::kTest, 3, 1);
  EXPECT_EQ(test[0].ground_truth["asin"], "B08CXT4GJD");
  EXPECT_EQ(test[1].ground_truth["asin"], "B09QKP7XQL");
  EXPECT_EQ(test[2].ground_truth["asin"], "B08CXT4GJD");
  EXPECT_TRUE(contains(error_of([&] { fam.make_dataset(DataSplit::kTrain, 1, 1); }), "goal index"));
  EXPECT_TRUE(contains(error_of([] { WebshopFamilyOptions::from_json({{"split_by", "webshop_index"}}); }),
                       "needs WebShop's files"));
  EXPECT_TRUE(contains(error_of([] { WebshopFamilyOptions::from_json({{"split_by", "index"}}); }), "\"asin\""));
}

TEST(WebshopFamily, PlaysThroughGameEnv) {
  register_webshop_family();
  const text::Tokenizer tok = text::Tokenizer::load(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3");
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tok.chat_template());
  env::EnvContext ctx;
  ctx.tokenizer = &tok;
  ctx.chat_template = &tmpl;
  WebshopFamily fam(WebshopFamilyOptions::from_json({{"catalogue_size", 150}, {"min_level", 3}, {"max_level", 3}}));
  const Sample s = fam.make_dataset(DataSplit::kTest, 1, 3)[0];
  auto env = env::make_env("webshop", ctx, s.env_kwargs);
  const std::string first = tok.decode(env->reset(s).tokens());
  EXPECT_TRUE(contains(first, "Instruction: [SEP] " + s.extra_info["goal"]["instruction_text"].get<std::string>()));
  WebshopGame shadow(fam.options().game);
  shadow.reset(s);
  env::StepResult r;
  while (std::optional<std::string> cmd = shadow.expert_action()) {
    shadow.step(*cmd);
    const std::string text = "<action>" + *cmd + "</action>";
    TokenIds ids = tok.encode(text, true);
    ids.push_back(*tok.token_to_id("<|im_end|>"));
    r = env->step({ids, text});  // Action::text: without the trailing <|im_end|>
  }
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.game_reward, 1.0f);
}

}  // namespace
}  // namespace agentr1::tasks
