// The TensorBoard writer's pieces: CRC-32C on published check values, the mask, the
// TFRecord framing, and an event file's first records. (tensorboard_run_test.cpp reads a
// training run's file with an independent Python reader.)
#include "agentr1/train/tensorboard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

// The records of a TFRecord file, each checked against both of its CRCs.
std::vector<std::string> read_records(const std::string& bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_GE(bytes.size() - at, 12u);
    const uint64_t n = le(bytes, at, 8);
    EXPECT_EQ(le(bytes, at + 8, 4), mask_crc32c(crc32c(bytes.data() + at, 8))) << "length CRC at " << at;
    EXPECT_GE(bytes.size() - at, 16 + n);
    const std::string data = bytes.substr(at + 12, n);
    EXPECT_EQ(le(bytes, at + 12 + n, 4), mask_crc32c(crc32c(data.data(), data.size()))) << "data CRC at " << at;
    out.push_back(data);
    at += 16 + n;
  }
  return out;
}

TEST(TensorBoardTest, Crc32cCheckValues) {
  // The CRC catalogue's check value of CRC-32C (iSCSI).
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  // RFC 3720 B.4: 32 bytes of zeros, 32 bytes of 0xff, 32 ascending bytes.
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0');
  for (int i = 0; i < 32; ++i) up[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), up.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(TensorBoardTest, MaskRotatesAndAdds) {
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
  // 1 rotated right by 15 = 1 << 17.
  EXPECT_EQ(mask_crc32c(1), (1u << 17) + 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(0x80000000u), (1u << 16) + 0xa282ead8u);
}

TEST(TensorBoardTest, RecordFraming) {
  const std::string data = "hello, tfrecord";
  const std::string r = tfrecord(data);
  ASSERT_EQ(r.size(), data.size() + 16);
  EXPECT_EQ(le(r, 0, 8), data.size());
  EXPECT_EQ(r.substr(12, data.size()), data);
  const std::vector<std::string> back = read_records(r + tfrecord("") + r);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0], data);
  EXPECT_EQ(back[1], "");
  EXPECT_EQ(back[2], data);
}

TEST(TensorBoardTest, WritesAnEventFileLazily) {
  const fs::path dir = fs::temp_directory_path() / ("agentr1_tb_" + std::to_string(getpid()));
  fs::remove_all(dir);
  {
    TensorBoardWriter unused((dir / "never").string());
  }
  EXPECT_FALSE(fs::exists(dir / "never")) << "a writer never written to leaves no directory";
  std::string path;
  {
    TensorBoardWriter tb((dir / "tb").string());
    tb.scalars(3, {{"critic/score/mean", 0.25}, {"actor/pg_loss", -1.5}});
    tb.text("trajectories/sample", 3, "# step 3\n```\nhi\n```");
    tb.flush();
    path = tb.path();
  }
  EXPECT_EQ(fs::path(path).parent_path(), dir / "tb");
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::vector<std::string> recs = read_records(bytes);
  ASSERT_EQ(recs.size(), 3u);
  // Event: wall_time (field 1, fixed64: key 0x09), step 0 (key 0x10), file_version (0x1a).
  EXPECT_EQ(recs[0][0], '\x09');
  EXPECT_NE(recs[0].find(std::string("\x10\x00\x1a\x0d", 4) + "brain.Event:2"), std::string::npos);
  // The scalars: step 3, then a summary (0x2a) holding both tags.
  EXPECT_NE(recs[1].find(std::string("\x10\x03\x2a", 3)), std::string::npos);
  EXPECT_NE(recs[1].find("critic/score/mean"), std::string::npos);
  EXPECT_NE(recs[1].find("actor/pg_loss"), std::string::npos);
  // simple_value (field 2, fixed32: key 0x15) of 0.25f after its tag.
  float q = 0.25f;
  std::string bits(4, '\0');
  std::memcpy(bits.data(), &q, 4);
  EXPECT_NE(recs[1].find("critic/score/mean\x15" + bits), std::string::npos);
  EXPECT_NE(recs[2].find("text"), std::string::npos);
  EXPECT_NE(recs[2].find("```\nhi\n```"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TensorBoardTest, UnwritableDirectoryNamesThePath) {
  const fs::path file = fs::temp_directory_path() / ("agentr1_tb_file_" + std::to_string(getpid()));
  std::ofstream(file) << "x";
  TensorBoardWriter tb((file / "tb").string());
  try {
    tb.scalar("a", 1, 1.0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((file / "tb").string()), std::string::npos) << e.what();
  }
  fs::remove(file);
}

}  // namespace
}  // namespace agentr1::train
