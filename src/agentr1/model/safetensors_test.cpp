#include "agentr1/model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/model/model_test_util.h"

namespace agentr1::model {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::temp_dir("safetensors"); }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a raw file: 8-byte length, the given header text, then `data_bytes` bytes.
  std::string raw_file(const std::string& header, size_t data_bytes, int64_t claimed_len = -1) {
    const std::string p = dir_ + "/raw.safetensors";
    std::ofstream out(p, std::ios::binary);
    uint64_t n = claimed_len >= 0 ? static_cast<uint64_t>(claimed_len) : header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data_bytes, '\0');
    return p;
  }

  std::string error_reading(const std::string& path) {
    try {
      read_safetensors(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }

  std::string dir_;
};

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  at::Tensor base = at::linspace(-3, 3, 24).reshape({2, 3, 4});
  TensorList in = {{"f32", base},
                   {"bf16", base.to(at::kBFloat16)},
                   {"f16", base.to(at::kHalf)},
                   {"f64", base.to(at::kDouble)},
                   {"i64", at::arange(-5, 5, at::kLong)},
                   {"i32", at::arange(7, at::kInt).reshape({7, 1})},
                   {"u8", at::arange(200, 210, at::kByte)},
                   {"bool", at::tensor(std::vector<int64_t>{1, 0, 1}).to(at::kBool)},
                   {"scalar", at::tensor(2.5f).reshape({})},
                   {"empty", at::zeros({0, 4})},
                   {"strided", base.transpose(0, 2)}};
  const std::string p = dir_ + "/a.safetensors";
  write_safetensors(p, in, {{"format", "pt"}, {"note", "x"}});
  std::map<std::string, std::string> meta;
  TensorList out = read_safetensors(p, &meta);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);  // file order = given order
    EXPECT_EQ(out[i].second.scalar_type(), in[i].second.scalar_type()) << in[i].first;
    EXPECT_TRUE(out[i].second.equal(in[i].second)) << in[i].first;
  }
  EXPECT_EQ(meta["note"], "x");
  // Layout as HF writes it: header length is a multiple of 8, JSON padded with spaces.
  std::ifstream f(p, std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header(n, '\0');
  f.read(header.data(), static_cast<std::streamsize>(n));
  json h = json::parse(header);
  EXPECT_EQ(h["bf16"]["dtype"], "BF16");
  EXPECT_EQ(h["f32"]["data_offsets"], json::parse("[0, 96]"));
  EXPECT_EQ(h["bf16"]["data_offsets"], json::parse("[96, 144]"));
  EXPECT_EQ(fs::file_size(p), 8 + n + h["strided"]["data_offsets"][1].get<uint64_t>());
}

TEST_F(SafetensorsTest, MalformedFilesNameTheProblem) {
  auto expect = [&](const std::string& path, std::vector<std::string> needles) {
    const std::string e = error_reading(path);
    for (const auto& n : needles) EXPECT_NE(e.find(n), std::string::npos) << "'" << n << "' not in: " << e;
  };
  {  // truncated before the header length
    const std::string p = dir_ + "/short.safetensors";
    std::ofstream(p) << "abc";
    expect(p, {p, "truncated"});
  }
  expect(raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8, 4000),
         {"header length 4000 goes beyond the end of the file"});
  expect(raw_file(R"({"w":{"dtype":"F32","shape":[2],)", 8), {"not valid JSON"});
  expect(raw_file(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8),
         {"tensor 'w'", "unknown dtype 'Q4'"});
  expect(raw_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
         {"tensor 'w'", "out of bounds"});
  expect(raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
         {"tensor 'w'", "needs 12"});
  expect(raw_file(R"({"w":{"dtype":"F32","shape":[2]}})", 8), {"tensor 'w'", "data_offsets"});
  expect(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12),
         {"'b' overlaps tensor 'a'"});
  expect(raw_file(R"([1,2])", 0), {"must be a JSON object"});
  // Sizes that overflow 64 bits (with a zero dimension too, as libtorch refuses those),
  // a dimension or an offset past 2^63.
  for (const char* shape : {"[4294967296,4294967296,16]", "[4294967296,4294967296,16,0]"})
    expect(raw_file(std::string(R"({"x":{"dtype":"F64","shape":)") + shape + R"(,"data_offsets":[0,0]}})", 0),
           {"tensor 'x'", "is too large: its byte size overflows 64 bits"});
  expect(raw_file(R"({"x":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})", 0),
         {"tensor 'x'", "non-negative integers below 2^63"});
  expect(raw_file(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})", 0),
         {"tensor 'x'", "data_offsets must be [begin, end]"});
  {  // a real file cut short
    const std::string p = dir_ + "/cut.safetensors";
    write_safetensors(p, {{"big", at::ones({100})}});
    fs::resize_file(p, fs::file_size(p) - 10);
    expect(p, {"tensor 'big'", "out of bounds"});
  }
  EXPECT_THROW(write_safetensors(dir_ + "/dup.safetensors", {{"a", at::ones({1})}, {"a", at::ones({1})}}), Error);
  EXPECT_THROW(write_safetensors(dir_ + "/c.safetensors", {{"c", at::ones({1}, at::kComplexFloat)}}), Error);
}

TEST_F(SafetensorsTest, ShardedDirectoryRoundTrip) {
  TensorList in;
  for (int i = 0; i < 5; ++i) in.emplace_back("t" + std::to_string(i), at::full({256}, static_cast<float>(i)));
  auto files = write_safetensors_dir(dir_, in, /*max_shard_bytes=*/2048);  // 2 tensors per shard
  EXPECT_EQ(files.size(), 4u);  // 3 shards + index
  EXPECT_TRUE(fs::exists(dir_ + "/model-00003-of-00003.safetensors"));
  TensorList out = read_safetensors_dir(dir_);
  ASSERT_EQ(out.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_TRUE(out[i].second.equal(in[i].second));
  }
  // An index naming a shard that lacks the tensor is an error naming both.
  std::ifstream idx_in(dir_ + "/model.safetensors.index.json");
  json idx = json::parse(idx_in);
  idx["weight_map"]["t4"] = "model-00001-of-00003.safetensors";
  std::ofstream(dir_ + "/model.safetensors.index.json") << idx.dump();
  try {
    read_safetensors_dir(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'t4'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_safetensors_dir(dir_ + "/nothing"), Error);
}

}  // namespace
}  // namespace agentr1::model
