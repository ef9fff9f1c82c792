#include "plot.h"

#include <cmath>
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

// Creates dir; the three paths of <dir>/<stem>.
PlotFiles plot_files(const std::string& dir, const std::string& stem) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  AGENTR1_CHECK(!ec, "cannot create directory '" << dir << "': " << ec.message());
  PlotFiles f;
  f.dat = dir + "/" + stem + ".dat";
  f.gp = dir + "/" + stem + ".gp";
  f.png = dir + "/" + stem + ".png";
  return f;
}

// Runs gnuplot on f.gp (removing a stale PNG first); a failure is a WARN with a HINT.
void draw(PlotFiles& f, const std::string& context, const std::string& dir, const std::string& stem) {
  std::error_code ec;
  fs::remove(f.png, ec);  // a stale PNG from an earlier run must not pass for this one
  const std::string cmd = "gnuplot " + sh_quote(f.gp) + " 1>&2";
  const int status = std::system(cmd.c_str());
  const int rc = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : status;
  if (rc == 0 && fs::exists(f.png)) {
    f.png_written = true;
  } else {
    AGENTR1_LOG(WARN) << context << ": gnuplot failed (exit " << rc << "), no " << stem << ".png; the data and "
                      << "script are in " << dir << ". HINT: apt-get install gnuplot-nox, then run gnuplot " << f.gp;
  }
}

}  // namespace

PlotFiles write_line_plot(const LinePlot& p, const std::string& dir, const std::string& stem, bool run_gnuplot) {
  AGENTR1_CHECK(!p.series.empty() || p.reference,
                p.context << ": plot '" << stem << "' has nothing to draw (no series and no reference line)");
  PlotFiles f = plot_files(dir, stem);

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

  if (run_gnuplot) draw(f, p.context, dir, stem);
  return f;
}

PlotFiles write_bar_plot(const BarPlot& p, const std::string& dir, const std::string& stem, bool run_gnuplot) {
  AGENTR1_CHECK(!p.categories.empty() && !p.series.empty(),
                p.context << ": bar plot '" << stem << "' has nothing to draw (no categories or no series)");
  AGENTR1_CHECK(p.values.size() == p.categories.size(), p.context << ": bar plot '" << stem << "': " << p.values.size()
                                                                 << " rows of values for " << p.categories.size()
                                                                 << " categories");
  for (size_t i = 0; i < p.values.size(); ++i)
    AGENTR1_CHECK(p.values[i].size() == p.series.size(), p.context << ": bar plot '" << stem << "': category '"
                                                                   << p.categories[i] << "' has " << p.values[i].size()
                                                                   << " values for " << p.series.size() << " series");
  PlotFiles f = plot_files(dir, stem);
  std::ostringstream dat;
  dat.precision(10);
  for (size_t i = 0; i < p.categories.size(); ++i) {
    dat << "\"";
    for (char c : p.categories[i]) dat << (c == '"' ? '\'' : c);
    dat << "\"";
    for (double v : p.values[i]) {
      if (std::isnan(v)) dat << " ?";
      else dat << " " << v;
    }
    dat << "\n";
  }
  write_file(f.dat, dat.str());

  std::ostringstream gp;
  gp << "# agentr1 " << p.context << ": " << p.title << " (gnuplot " << stem << ".gp)\n"
     << "set terminal png size " << p.width << "," << p.height << " noenhanced\n"
     << "set output " << gp_quote(f.png) << "\n"
     << "set title " << gp_quote(p.title) << "\n"
     << "set xlabel " << gp_quote(p.xlabel) << "\nset ylabel " << gp_quote(p.ylabel) << "\n";
  if (p.yrange) gp << "set yrange [" << p.yrange->first << ":" << p.yrange->second << "]\n";
  gp << "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
     << "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset key top right\nset grid ytics\nplot ";
  for (size_t i = 0; i < p.series.size(); ++i)
    gp << (i == 0 ? gp_quote(f.dat) + " using 2:xtic(1)" : ", '' using " + std::to_string(i + 2)) << " title "
       << gp_quote(p.series[i]);
  gp << "\n";
  write_file(f.gp, gp.str());
  if (run_gnuplot) draw(f, p.context, dir, stem);
  return f;
}

}  // namespace agentr1::cli
