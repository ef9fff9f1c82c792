// apps/agentr1/plot.h — line plots as gnuplot data + script, drawn by the gnuplot
// binary when it is installed. Plotting lives at the edge (the app), not in libraries.
//
//   LinePlot p;
//   p.title = "Held-out greedy accuracy";  p.xlabel = "RL step";  p.ylabel = "success";
//   p.series.push_back({"grpo", {{0, 0.50}, {25, 0.55}}});
//   p.reference = 0.50;  p.reference_title = "training-free baseline";
//   PlotFiles f = write_line_plot(p, "runs/compare", "val_accuracy", /*run_gnuplot=*/true);
//   // runs/compare/val_accuracy.dat (one block per series: "x y" lines, blocks split
//   // by two blank lines), val_accuracy.gp (PNG terminal), val_accuracy.png if gnuplot ran
//
// Bar charts (e.g. final success per task and method):
//   BarPlot b;
//   b.categories = {"arithmetic", "alfworld"};  b.series = {"baseline", "grpo"};
//   b.values = {{0.50, 0.62}, {0.10, 0.18}};    // [category][series]; NaN = no bar
//   write_bar_plot(b, "runs/benchmark", "summary", /*run_gnuplot=*/true);
//
// gnuplot's own output goes to stderr. A failing (or missing) gnuplot is a warning
// with a HINT, not an error: the data and the script stay behind to redraw the plot.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace agentr1::cli {

struct PlotSeries {
  std::string title;                              // legend entry
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
};

struct LinePlot {
  std::string title;                  // plot title
  std::string xlabel;                 // x axis label
  std::string ylabel;                 // y axis label
  std::optional<std::pair<double, double>> yrange;  // [min, max]; unset = gnuplot's autoscale
  std::vector<PlotSeries> series;     // one line (with points) each
  std::optional<double> reference;    // a dashed black horizontal line at this y
  std::string reference_title;        // its legend entry
  std::string context = "plot";       // names the caller in the warning ("compare")
  int width = 900, height = 560;      // PNG size in pixels
};

struct PlotFiles {
  std::string dat;           // <dir>/<stem>.dat
  std::string gp;            // <dir>/<stem>.gp
  std::string png;           // <dir>/<stem>.png (written only if png_written)
  bool png_written = false;  // gnuplot ran and exited 0
};

// A clustered bar chart: one group of bars per category (labelled x tic), one bar (and
// legend entry) per series in each group.
struct BarPlot {
  std::string title;                  // plot title
  std::string xlabel;                 // x axis label
  std::string ylabel;                 // y axis label
  std::optional<std::pair<double, double>> yrange;  // [min, max]; unset = gnuplot's autoscale
  std::vector<std::string> categories;              // x tic labels, in order
  std::vector<std::string> series;                  // legend entries, in bar order
  std::vector<std::vector<double>> values;          // [category][series]; NaN = no bar
  std::string context = "plot";       // names the caller in the warning ("benchmark")
  int width = 900, height = 560;      // PNG size in pixels
};

// Writes <dir>/<stem>.dat and <dir>/<stem>.gp (creating dir), then runs
// `gnuplot <dir>/<stem>.gp` if run_gnuplot (removing an older <stem>.png first). Throws
// Error when the plot has neither series nor a reference line, or naming the path when
// dir or a file cannot be written; a gnuplot failure (exit status != 0 or no PNG) only
// logs a WARN line with a HINT and leaves png_written false.
PlotFiles write_line_plot(const LinePlot& plot, const std::string& dir, const std::string& stem,
                          bool run_gnuplot);

// As write_line_plot, for a bar chart (the .dat holds one line per category: the quoted
// label, then one value per series, "?" for NaN). Throws Error when there are no
// categories or series, or values is not categories x series.
PlotFiles write_bar_plot(const BarPlot& plot, const std::string& dir, const std::string& stem, bool run_gnuplot);

}  // namespace agentr1::cli
