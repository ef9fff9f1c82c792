#include "plot.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <sys/wait.h>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::cli {
namespace {

namespace fs = std::filesystem;

// A gnuplot single-quoted string: '' stands for one quote.
std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A POSIX shell single-quoted word.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    AGENTR1_CHECK(f.good(), "cannot write '" << tmp << "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  AGENTR1_CHECK(!ec, "cannot rename '" << tmp << "' to '" << path << "': " << ec.message());
}

}  // namespace

PlotFiles write_line_plot(const LinePlot& p, const std::string& dir, const std::string& stem, bool run_gnuplot) {
  AGENTR1_CHECK(!p.series.empty() || p.reference,
                p.context << ": plot '" << stem << "' has nothing to draw (no series and no reference line)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  AGENTR1_CHECK(!ec, "cannot create directory '" << dir << "': " << ec.message());
  PlotFiles f;
  f.dat = dir + "/" + stem + ".dat";
  f.gp = dir + "/" + stem + ".gp";
  f.png = dir + "/" + stem + ".png";

  std::ostringstream dat;
  dat.precision(10);
  for (const auto& s : p.series) {
    dat << "# " << s.title << "\n";
    for (const auto& [x, y] : s.points) dat << x << " " << y << "\n";
    dat << "\n\n";
  }
  write_file(f.dat, dat.str());

  std::ostringstream gp;
  gp << "# agentr1 " << p.context << ": " << p.title << " (gnuplot " << stem << ".gp)\n"
     << "set terminal png size " << p.width << "," << p.height << " noenhanced\n"
     << "set output " << gp_quote(f.png) << "\n"
     << "set title " << gp_quote(p.title) << "\n"
     << "set xlabel " << gp_quote(p.xlabel) << "\nset ylabel " << gp_quote(p.ylabel) << "\n";
  if (p.yrange) gp << "set yrange [" << p.yrange->first << ":" << p.yrange->second << "]\n";
  gp << "set key bottom right\nset grid\nplot ";
  std::string sep;
  for (size_t i = 0; i < p.series.size(); ++i) {
    gp << sep << gp_quote(f.dat) << " index " << i << " with linespoints lw 2 title " << gp_quote(p.series[i].title);
    sep = ", ";
  }
  if (p.reference) {
    gp << sep << *p.reference << " with lines dt 2 lc rgb 'black' title " << gp_quote(p.reference_title);
    sep = ", ";
  }
  gp << "\n";
  write_file(f.gp, gp.str());

  if (!run_gnuplot) return f;
  fs::remove(f.png, ec);  // a stale PNG from an earlier run must not pass for this one
  const std::string cmd = "gnuplot " + sh_quote(f.gp) + " 1>&2";
  const int status = std::system(cmd.c_str());
  const int rc = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : status;
  if (rc == 0 && fs::exists(f.png)) {
    f.png_written = true;
  } else {
    AGENTR1_LOG(WARN) << p.context << ": gnuplot failed (exit " << rc << "), no " << stem << ".png; the data and "
                      << "script are in " << dir << ". HINT: apt-get install gnuplot-nox, then run gnuplot " << f.gp;
  }
  return f;
}

}  // namespace agentr1::cli
