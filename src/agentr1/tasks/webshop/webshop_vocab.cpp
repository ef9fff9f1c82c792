#include "agentr1/tasks/webshop/webshop_vocab.h"

#include <map>

namespace agentr1::tasks {

const std::vector<WebshopTypeSpec>& webshop_product_types() {
  static const std::vector<WebshopTypeSpec> types = {
      // beauty
      {"beauty", "Beauty & Personal Care › Fragrance › Women's › Eau de Toilette", "eau de toilette", false,
       "Eau de Toilette Spray",
       {"long lasting", "alcohol free", "travel size", "floral scent", "cruelty free", "refillable bottle",
        "gift set", "citrus notes"},
       {{"size", {"1.7 fl oz", "3.4 fl oz", "6.76 fl oz", "0.33 fl oz"}}, {"style", {"classic", "intense", "sport edition"}}},
       20, 120},
      {"beauty", "Beauty & Personal Care › Skin Care › Body › Body Washes", "body wash", false, "Body Wash",
       {"sulfate free", "paraben free", "tea tree", "coconut oil", "sensitive skin", "dermatologist tested",
        "shea butter", "gentle formula"},
       {{"scent", {"lavender", "eucalyptus mint", "vanilla", "unscented"}}, {"size", {"12 fl oz", "16.9 fl oz", "33.8 fl oz"}}},
       6, 30},
      {"beauty", "Beauty & Personal Care › Makeup › Lips › Lipstick", "lipstick", false, "Matte Lipstick",
       {"long lasting", "waterproof", "hydrating", "transfer proof", "highly pigmented", "vitamin e", "paraben free"},
       {{"color", {"ruby red", "nude pink", "berry", "coral", "mauve"}}},
       5, 25},
      {"beauty", "Beauty & Personal Care › Hair Care › Styling Tools › Hair Dryers", "hair dryer", false,
       "Ionic Hair Dryer",
       {"fast drying", "low noise", "diffuser included", "cool shot button", "foldable handle", "ceramic coating"},
       {{"color", {"black", "rose gold", "white", "teal"}}},
       20, 90},
      {"beauty", "Beauty & Personal Care › Oral Care › Toothbrushes › Electric Toothbrushes", "electric toothbrush",
       false, "Electric Toothbrush",
       {"rechargeable battery", "two minute timer", "travel case", "soft bristles", "pressure sensor", "whitening mode"},
       {{"color", {"white", "black", "pink", "mint"}}, {"pack", {"single handle", "twin pack"}}},
       15, 80},
      // grocery
      {"grocery", "Grocery & Gourmet Food › Beverages › Tea › Green Tea", "green tea", false, "Green Tea Bags",
       {"usda organic", "gluten free", "non gmo", "individually wrapped", "decaffeinated", "kosher certified",
        "sugar free"},
       {{"flavor name", {"jasmine", "lemon ginger", "honey", "peach"}}, {"size", {"16 bags", "100 bags", "bulk 500 bags"}}},
       4, 25},
      {"grocery", "Grocery & Gourmet Food › Snack Foods › Bars › Protein Bars", "protein bars", true, "Protein Bars",
       {"low carb", "high protein", "keto friendly", "no added sugar", "plant based", "dairy free", "gluten free"},
       {{"flavor name", {"chocolate peanut butter", "cookie dough", "salted caramel", "birthday cake"}},
        {"size", {"box of 12", "case of 24"}}},
       10, 45},
      {"grocery", "Grocery & Gourmet Food › Beverages › Coffee › Whole Coffee Beans", "whole bean coffee", false,
       "Whole Bean Coffee",
       {"dark roast", "fair trade", "single origin", "low acid", "usda organic", "small batch roasted"},
       {{"size", {"12 ounce bag", "2 pound bag", "5 lb bulk"}}},
       9, 60},
      {"grocery", "Grocery & Gourmet Food › Snack Foods › Dried Fruit & Raisins › Dried Mango", "dried mango", false,
       "Dried Mango Slices",
       {"unsweetened", "non gmo", "vegan", "resealable bag", "no preservatives", "naturally sweet"},
       {{"size", {"4 ounce", "1 pound", "family size"}}, {"pack", {"single bag", "3 pack", "6 pack"}}},
       5, 30},
      {"grocery", "Grocery & Gourmet Food › Pantry Staples › Cooking Oils › Olive Oil", "olive oil", false,
       "Extra Virgin Olive Oil",
       {"cold pressed", "first harvest", "glass bottle", "non gmo", "kosher certified", "imported from italy"},
       {{"size", {"500 ml", "1 liter", "3 liter tin"}}},
       8, 45},
      // fashion
      {"fashion", "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts", "men's t-shirt", false,
       "Crew Neck T-Shirt",
       {"machine wash", "short sleeve", "moisture wicking", "relaxed fit", "tagless collar", "pre shrunk",
        "cotton jersey"},
       {{"color", {"navy", "black", "heather grey", "white", "olive green"}}, {"size", {"small", "medium", "large"}}},
       8, 30},
      {"fashion", "Clothing, Shoes & Jewelry › Women › Clothing › Jeans", "women's jeans", true,
       "High Waist Skinny Jeans",
       {"stretch fabric", "button closure", "butt lifting", "slim fit", "zipper fly", "ankle length"},
       {{"color", {"light wash", "dark blue", "black", "indigo"}}, {"size", {"26", "28", "30", "32"}}},
       20, 60},
      {"fashion", "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running", "men's running shoes", true,
       "Running Shoes",
       {"non slip", "breathable mesh", "rubber sole", "lace up", "arch support", "memory foam insole"},
       {{"color", {"black white", "grey", "royal blue", "red"}}, {"size", {"8", "9", "10", "11", "12"}}},
       25, 90},
      {"fashion", "Clothing, Shoes & Jewelry › Luggage & Travel Gear › Backpacks › Laptop Backpacks",
       "laptop backpack", false, "Laptop Backpack",
       {"water resistant", "usb charging port", "anti theft pocket", "padded shoulder straps", "large capacity",
        "luggage strap"},
       {{"color", {"black", "grey", "navy", "burgundy"}}},
       20, 70},
      {"fashion", "Clothing, Shoes & Jewelry › Women › Accessories › Scarves & Wraps", "women's scarf", false,
       "Winter Scarf",
       {"soft knit", "oversized", "fringe trim", "cashmere feel", "hand wash"},
       {{"color", {"camel", "charcoal", "ivory", "plum", "rust"}}},
       8, 35},
      // home
      {"home", "Home & Kitchen › Furniture › Home Office Furniture › Office Chairs", "office chair", false,
       "Ergonomic Office Chair",
       {"lumbar support", "adjustable height", "mesh back", "easy assembly", "padded armrests", "heavy duty base",
        "rolling casters"},
       {{"color", {"black", "grey", "white"}}},
       60, 300},
      {"home", "Home & Kitchen › Furniture › Living Room Furniture › Bookcases", "bookshelf", false,
       "Wooden Bookshelf",
       {"easy assembly", "solid wood", "space saving", "wall anchor included", "adjustable shelves"},
       {{"color", {"espresso", "walnut", "white", "black"}}, {"size", {"3 tier", "4 tier", "5 tier"}}},
       40, 200},
      {"home", "Home & Kitchen › Bedding › Decorative Pillows › Throw Pillow Covers", "throw pillow covers", true,
       "Throw Pillow Covers",
       {"hidden zipper", "velvet fabric", "double sided", "machine washable", "set of two"},
       {{"color", {"mustard", "teal", "blush", "grey"}}, {"size", {"18 x 18 inch", "20 x 20 inch", "lumbar 12 x 24"}}},
       8, 35},
      {"home", "Home & Kitchen › Bath › Towels › Bath Towels", "bath towels", true, "Bath Towel Set",
       {"quick dry", "highly absorbent", "turkish cotton", "hotel quality", "oeko tex certified"},
       {{"color", {"white", "sand", "sage", "navy"}}, {"size", {"two towels", "4 piece set", "family bundle"}}},
       15, 80},
      {"home", "Home & Kitchen › Kitchen & Dining › Cookware › Frying Pans", "frying pan", false,
       "Nonstick Frying Pan",
       {"dishwasher safe", "induction compatible", "oven safe", "pfoa free", "stay cool handle", "glass lid included"},
       {{"size", {"8 inch", "10 inch", "12.5 inch"}}},
       15, 90},
      // electronics
      {"electronics", "Electronics › Headphones › Over-Ear Headphones", "wireless headphones", true,
       "Over-Ear Headphones",
       {"noise cancelling", "long battery life", "built in microphone", "foldable design", "hands free calling",
        "fast charging"},
       {{"color", {"black", "silver", "rose gold", "midnight blue"}}},
       30, 200},
      {"electronics", "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases", "phone case", false,
       "Shockproof Phone Case",
       {"wireless charging compatible", "drop protection", "raised edges", "clear back", "built in kickstand"},
       {{"color", {"clear", "black", "purple", "green"}}, {"size", {"iphone 15", "galaxy s23", "pixel 8"}}},
       8, 30},
      {"electronics", "Electronics › Computers & Accessories › Cables & Accessories › Chargers", "usb c charger",
       false, "USB C Wall Charger",
       {"fast charging", "dual port", "foldable plug", "compact design", "overheat protection", "gan technology"},
       {{"color", {"white", "black"}}, {"pack", {"single charger", "twin pack"}}},
       10, 45},
      {"electronics", "Electronics › Home Audio › Speakers › Portable Bluetooth Speakers", "bluetooth speaker", false,
       "Portable Bluetooth Speaker",
       {"waterproof ip67", "deep bass", "20 hour playtime", "stereo pairing", "built in microphone", "outdoor use"},
       {{"color", {"black", "blue", "red", "camo"}}},
       20, 120},
  };
  return types;
}

const std::vector<std::string>& webshop_category_attributes(const std::string& category) {
  static const std::map<std::string, std::vector<std::string>> pools = {
      {"beauty", {"gift box", "made in usa", "limited edition", "recyclable packaging", "salon grade",
                  "hypoallergenic", "unisex", "spa quality"}},
      {"grocery", {"gift box", "made in usa", "limited edition", "recyclable packaging", "family owned farm",
                   "halal certified", "bulk value", "heirloom recipe"}},
      {"fashion", {"gift box", "made in usa", "limited edition", "recyclable packaging", "unisex", "reflective details",
                   "eco friendly dye", "wrinkle resistant"}},
      {"home", {"gift box", "made in usa", "limited edition", "recyclable packaging", "pet friendly",
                "scratch resistant", "lifetime warranty", "eco friendly finish"}},
      {"electronics", {"gift box", "made in usa", "limited edition", "recyclable packaging", "energy efficient",
                       "two year warranty", "led indicator", "travel pouch"}}};
  static const std::vector<std::string> none;
  auto it = pools.find(category);
  return it == pools.end() ? none : it->second;
}

const std::vector<std::string>& webshop_brands() {
  static const std::vector<std::string> brands = {
      "Lumora", "Velaro",  "Brisa",   "Nordal",  "Kestrel", "Ambrey", "Solvane", "Tidewell", "Orrin",  "Caldera",
      "Fenwick", "Marlowe", "Quillon", "Rivana", "Sablon",  "Thorne", "Ulvane",  "Vesper",   "Wrenly", "Zephra",
      "Alderon", "Bexley",  "Corvo",   "Daven",  "Elara",   "Fablet", "Halcyon", "Islay",    "Juniva", "Kairo",
      "Lindell", "Mirabel", "Nimbo",   "Oakhurst", "Pellam", "Ravel", "Sorrel",  "Tamsin",   "Verity", "Wexford"};
  return brands;
}

std::string webshop_join_and(const std::vector<std::string>& xs) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0) out += i + 1 == xs.size() ? " and " : ", ";
    out += xs[i];
  }
  return out;
}

}  // namespace agentr1::tasks
