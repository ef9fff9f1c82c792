// The plot module writes gnuplot data and script; gnuplot draws the PNG when present,
// and a failing gnuplot is a warning, not an error.
#include "plot.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "agentr1/core/error.h"

namespace agentr1::cli {
namespace {

namespace fs = std::filesystem;

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_dir(const std::string& name) {
  const std::string dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  return dir;
}

LinePlot two_series() {
  LinePlot p;
  p.context = "compare";
  p.title = "Held-out greedy accuracy, arithmetic tool task";
  p.xlabel = "RL step";
  p.ylabel = "greedy success rate";
  p.yrange = std::make_pair(0.0, 1.0);
  p.series.push_back({"grpo", {{0, 0.5}, {25, 0.625}}});
  p.series.push_back({"it's ppo", {{0, 0.5}, {25, 0.55}}});
  p.reference = 0.5;
  p.reference_title = "training-free baseline";
  return p;
}

TEST(PlotTest, WritesDataAndScriptWithoutRunningGnuplot) {
  const std::string dir = temp_dir("agentr1_plot_test_a");
  const PlotFiles f = write_line_plot(two_series(), dir + "/out", "val_accuracy", /*run_gnuplot=*/false);
  EXPECT_EQ(f.dat, dir + "/out/val_accuracy.dat");
  EXPECT_EQ(f.gp, dir + "/out/val_accuracy.gp");
  EXPECT_FALSE(f.png_written);
  EXPECT_FALSE(fs::exists(f.png));
  // One block per series, blocks split by two blank lines (gnuplot's `index`).
  EXPECT_EQ(read(f.dat), "# grpo\n0 0.5\n25 0.625\n\n\n# it's ppo\n0 0.5\n25 0.55\n\n\n");
  const std::string gp = read(f.gp);
  EXPECT_NE(gp.find("set terminal png size 900,560 noenhanced\n"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set output '" + f.png + "'\n"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set yrange [0:1]\n"), std::string::npos) << gp;
  EXPECT_NE(gp.find("'" + f.dat + "' index 0 with linespoints lw 2 title 'grpo', '" + f.dat +
                    "' index 1 with linespoints lw 2 title 'it''s ppo', 0.5 with lines dt 2 lc rgb 'black' "
                    "title 'training-free baseline'\n"),
            std::string::npos)
      << gp;
  fs::remove_all(dir);
}

TEST(PlotTest, GnuplotDrawsThePngWhenInstalled) {
  if (std::system("gnuplot --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  const std::string dir = temp_dir("agentr1_plot_test_b");
  const PlotFiles f = write_line_plot(two_series(), dir, "val_accuracy", /*run_gnuplot=*/true);
  EXPECT_TRUE(f.png_written);
  ASSERT_TRUE(fs::exists(f.png));
  EXPECT_GT(fs::file_size(f.png), 1000u);
  fs::remove_all(dir);
}

TEST(PlotTest, MissingGnuplotIsAWarningAndKeepsTheFiles) {
  const std::string dir = temp_dir("agentr1_plot_test_c");
  const char* old = std::getenv("PATH");
  const std::string old_path = old != nullptr ? old : "";
  setenv("PATH", "/nonexistent", 1);  // the shell finds no gnuplot
  PlotFiles f;
  EXPECT_NO_THROW(f = write_line_plot(two_series(), dir, "val_accuracy", /*run_gnuplot=*/true));
  setenv("PATH", old_path.c_str(), 1);
  EXPECT_FALSE(f.png_written);
  EXPECT_TRUE(fs::exists(f.dat));
  EXPECT_TRUE(fs::exists(f.gp));
  fs::remove_all(dir);
}

TEST(PlotTest, NothingToDrawIsAnError) {
  LinePlot p;
  p.context = "compare";
  EXPECT_THROW(write_line_plot(p, temp_dir("agentr1_plot_test_d"), "empty", false), Error);
}

}  // namespace
}  // namespace agentr1::cli
