// The data dir: $AGENTR1_DATA_DIR wins, else share/agentr1 next to the binary; a missing
// file is an error naming the path looked at, with a hint.
#include "data_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agentr1/core/error.h"

namespace agentr1::cli {
namespace {

namespace fs = std::filesystem;

class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("AGENTR1_DATA_DIR");
    had_ = old != nullptr;
    if (had_) old_ = old;
  }
  void TearDown() override {
    if (had_) {
      setenv("AGENTR1_DATA_DIR", old_.c_str(), 1);
    } else {
      unsetenv("AGENTR1_DATA_DIR");
    }
  }
  bool had_ = false;
  std::string old_;
};

TEST_F(DataDirTest, EnvironmentVariableWins) {
  const std::string dir = fs::temp_directory_path() / "agentr1_data_dir_test";
  fs::create_directories(dir + "/configs");
  std::ofstream(dir + "/configs/x.yaml") << "a: 1\n";
  setenv("AGENTR1_DATA_DIR", dir.c_str(), 1);
  EXPECT_EQ(data_dir(), dir);
  EXPECT_EQ(data_path("configs/nope.yaml"), dir + "/configs/nope.yaml");  // no existence check
  EXPECT_EQ(data_file("configs/x.yaml"), dir + "/configs/x.yaml");
  fs::remove_all(dir);
}

TEST_F(DataDirTest, DefaultIsShareNextToTheBinary) {
  unsetenv("AGENTR1_DATA_DIR");
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_EQ(data_dir(), (exe.parent_path() / "share" / "agentr1").string());
  setenv("AGENTR1_DATA_DIR", "", 1);  // empty counts as unset
  EXPECT_EQ(data_dir(), (exe.parent_path() / "share" / "agentr1").string());
}

TEST_F(DataDirTest, MissingFileNamesThePathAndHowToFixIt) {
  setenv("AGENTR1_DATA_DIR", "/nonexistent", 1);
  try {
    data_file("configs/builtin.yaml");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'/nonexistent/configs/builtin.yaml' not found"), std::string::npos) << msg;
    EXPECT_NE(msg.find("from AGENTR1_DATA_DIR"), std::string::npos) << msg;
    EXPECT_NE(msg.find("HINT: re-run scripts/setup.sh"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

}  // namespace
}  // namespace agentr1::cli
