// Line plots as inline SVG (no scripts, no external files), for the HTML run report.
//
//   obs::Plot p{.title = "Training loss", .x_label = "step", .y_label = "nats/token"};
//   p.series.push_back({.name = "train", .color = "#1f77b4", .points = {{1, 4.2}, {2, 3.9}}});
//   std::string svg = obs::render_svg(p);
//
// Non-finite points break the line and are counted in the legend. Series longer than the plot
// is wide are reduced to the min and max of each pixel column, so spikes stay visible.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ft::obs {

struct PlotSeries {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points{};  // (x, y), x ascending
  bool markers = false;                             // dots at each point (sparse series)
};

struct Plot {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series{};
  int width = 560, height = 300;
};

std::string render_svg(const Plot& p);

// Tick positions covering [lo, hi] at a 1-2-5 spacing, about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);
std::string html_escape(const std::string& s);

}  // namespace ft::obs
