// BM25: analysis, scores against values computed independently (a few lines of Python
// with the formula of bm25.h, in the comment below), ranking, ties, bad options.
#include "agentr1/tasks/bm25.h"

#include <gtest/gtest.h>

#include "agentr1/core/error.h"

namespace agentr1::tasks {
namespace {

TEST(Bm25, TermsLowercaseSplitAndDropStopWords) {
  EXPECT_EQ(bm25_terms("The Cat sat ON the mat."), (std::vector<std::string>{"cat", "sat", "mat"}));
  EXPECT_EQ(bm25_terms("l'eau d'issey 6.76 fl-oz"),
            (std::vector<std::string>{"l", "eau", "d", "issey", "6", "76", "fl", "oz"}));
  EXPECT_TRUE(bm25_terms("a an the of").empty());
  EXPECT_TRUE(bm25_terms("").empty());
}

const std::vector<std::string> kDocs = {"The cat sat on the mat.", "A cat and a dog; the dog barked.",
                                        "Paris is the capital of France."};

// Reference (python3): docs = [[cat sat mat], [cat dog dog barked], [paris capital france]],
// avgdl = 10/3, idf(t) = ln(1 + (N - n + 0.5) / (n + 0.5)), k1 = 0.9, b = 0.4,
// s = sum idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl)).
TEST(Bm25, ScoresMatchAnIndependentComputation) {
  Bm25Index idx(kDocs);
  EXPECT_EQ(idx.size(), 3u);
  EXPECT_DOUBLE_EQ(idx.avgdl(), 10.0 / 3.0);
  EXPECT_EQ(idx.df("cat"), 2u);
  EXPECT_EQ(idx.df("the"), 0u);
  EXPECT_NEAR(idx.score("dog cat", 0), 0.4790809525573485, 1e-12);
  EXPECT_NEAR(idx.score("dog cat", 1), 1.7069318002495044, 1e-12);
  EXPECT_EQ(idx.score("dog cat", 2), 0.0);
  EXPECT_NEAR(idx.score("cat", 1), 0.4528432533300698, 1e-12);
  EXPECT_NEAR(idx.score("cat cat", 0), 0.958161905114697, 1e-12);  // repeats count again
  EXPECT_THROW(idx.score("cat", 3), Error);
}

TEST(Bm25, SearchRanksCutsAtKAndDropsNonMatches) {
  Bm25Index idx(kDocs);
  std::vector<Bm25Hit> hits = idx.search("dog cat", 10);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].doc, 1u);
  EXPECT_EQ(hits[1].doc, 0u);
  EXPECT_NEAR(hits[0].score, 1.7069318002495044, 1e-12);
  ASSERT_EQ(idx.search("dog cat", 1).size(), 1u);
  EXPECT_TRUE(idx.search("dog cat", 0).empty());
  EXPECT_TRUE(idx.search("the of", 5).empty());
  EXPECT_TRUE(idx.search("zebra", 5).empty());
  EXPECT_TRUE(Bm25Index({}).search("cat", 3).empty());
}

TEST(Bm25, TiesGoToTheLowerDocumentId) {
  Bm25Index idx({"red shoe", "blue sock", "red shoe"});
  std::vector<Bm25Hit> hits = idx.search("red shoe", 3);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].doc, 0u);
  EXPECT_EQ(hits[1].doc, 2u);
  EXPECT_DOUBLE_EQ(hits[0].score, hits[1].score);
}

TEST(Bm25, BadOptionsAreRefused) {
  EXPECT_THROW(Bm25Index({"x"}, Bm25Options{-1.0, 0.4}), Error);
  EXPECT_THROW(Bm25Index({"x"}, Bm25Options{0.9, 1.5}), Error);
}

}  // namespace
}  // namespace agentr1::tasks
