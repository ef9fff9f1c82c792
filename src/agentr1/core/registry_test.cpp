#include "agentr1/core/registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"

namespace agentr1 {
namespace {

// Test-local base types, so these registries are not shared with real ones.
struct Shape {
  virtual ~Shape() = default;
  virtual std::string describe() const = 0;
};

struct Square : Shape {
  Square(int side_in, std::string colour_in) : side(side_in), colour(std::move(colour_in)) {}
  std::string describe() const override { return colour + " square " + std::to_string(side); }
  int side;
  std::string colour;
};

struct Circle : Shape {
  explicit Circle(int radius) : r(radius) {}
  std::string describe() const override { return "circle " + std::to_string(r); }
  int r;
};

using ShapeRegistry = Registry<Shape, int, const std::string&>;

// The agentr1::Error message of fn(); a test failure when it throws none.
std::string error_of(const std::function<void()>& fn) {
  const std::string e = agentr1::testing::error_of(fn);
  if (e.empty()) ADD_FAILURE() << "expected agentr1::Error";
  return e;
}

TEST(Registry, CreatePassesArgumentsToTheFactory) {
  auto& reg = ShapeRegistry::instance();
  reg.add("square", [](int side, const std::string& colour) {
    return std::make_unique<Square>(side, colour);
  }, "shape");
  reg.add("circle", [](int r, const std::string&) { return std::make_unique<Circle>(r); },
          "shape");
  EXPECT_TRUE(reg.contains("square"));
  EXPECT_FALSE(reg.contains("triangle"));
  std::unique_ptr<Shape> s = reg.create("square", 3, "red", "shape");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->describe(), "red square 3");
  EXPECT_EQ(reg.create("circle", 5, "", "shape")->describe(), "circle 5");
  // names() is sorted (std::map), whatever the registration order.
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"circle", "square"}));
  // The same instance is returned every time.
  EXPECT_EQ(&ShapeRegistry::instance(), &reg);
}

TEST(Registry, UnknownNameListsKnownOnes) {
  auto& reg = ShapeRegistry::instance();
  if (!reg.contains("square")) {
    reg.add("square", [](int s, const std::string& c) { return std::make_unique<Square>(s, c); });
  }
  if (!reg.contains("circle")) {
    reg.add("circle", [](int r, const std::string&) { return std::make_unique<Circle>(r); });
  }
  const std::string m = error_of([&] { reg.create("triangle", 1, "", "shape"); });
  EXPECT_EQ(m, "unknown shape 'triangle'; known: circle, square");
}

TEST(Registry, EmptyRegistrySaysNoneRegistered) {
  struct Nothing {
    virtual ~Nothing() = default;
  };
  const std::string m = error_of([] { Registry<Nothing>::instance().create("x"); });
  EXPECT_EQ(m, "unknown entry 'x'; known: (none registered)");
}

TEST(Registry, DoubleRegistrationFails) {
  struct Tool {
    virtual ~Tool() = default;
  };
  struct Calc : Tool {};
  auto& reg = Registry<Tool>::instance();
  reg.add("calc", [] { return std::make_unique<Calc>(); }, "tool");
  const std::string m =
      error_of([&] { reg.add("calc", [] { return std::make_unique<Calc>(); }, "tool"); });
  EXPECT_EQ(m, "tool 'calc' is registered twice");
  // The first registration is still the one in place.
  EXPECT_NE(reg.create("calc"), nullptr);
  EXPECT_EQ(reg.names(), std::vector<std::string>{"calc"});
  // Empty names are rejected.
  EXPECT_NE(error_of([&] { reg.add("", [] { return std::make_unique<Calc>(); }, "tool"); })
                .find("empty name"),
            std::string::npos);
}

}  // namespace
}  // namespace agentr1
