#include "obs/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ft::obs {

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> t;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return t;
  double raw = (hi - lo) / std::max(target, 1);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

static std::string tick_label(double v) {
  double a = std::abs(v);
  if (a == 0) return "0";
  if (a >= 1e9) return fmt::format("{:.4g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.4g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.4g}k", v / 1e3);
  if (a < 1e-3) return fmt::format("{:.3g}", v);
  return fmt::format("{:.4g}", v);
}

std::string render_svg(const Plot& p) {
  const double W = p.width, H = p.height;
  const double left = 64, right = 22, top = 28, bottom = 44;
  const double pw = W - left - right, ph = H - top - bottom;

  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  std::vector<size_t> nonfinite(p.series.size(), 0);
  for (size_t si = 0; si < p.series.size(); ++si)
    for (auto [x, y] : p.series[si].points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++nonfinite[si];
        continue;
      }
      xmin = std::min(xmin, x), xmax = std::max(xmax, x), ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    }

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"#fff\"/>\n"
      "<text x=\"{2}\" y=\"17\" font-size=\"13\" font-weight=\"bold\">{3}</text>\n",
      W, H, left, html_escape(p.title));

  if (!std::isfinite(xmin)) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccc\"/>\n", left, top,
                     pw, ph);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no data in metrics.jsonl</text>\n",
                     left + pw / 2, top + ph / 2);
    return s + "</svg>\n";
  }
  if (xmax == xmin) xmin -= 0.5, xmax += 0.5;
  if (ymax == ymin) {
    double d = ymin == 0 ? 1 : std::abs(ymin) * 0.1;
    ymin -= d, ymax += d;
  } else {
    double pad = (ymax - ymin) * 0.05;
    ymin -= pad, ymax += pad;
  }
  auto X = [&](double x) { return left + (x - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double y) { return top + ph - (y - ymin) / (ymax - ymin) * ph; };

  // Grid and axes.
  for (double t : nice_ticks(ymin, ymax, 5)) {
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#444\">{}</text>\n",
        left, Y(t), left + pw, Y(t), left - 5, Y(t) + 4, tick_label(t));
  }
  for (double t : nice_ticks(xmin, xmax, 6)) {
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#444\">{}</text>\n",
        X(t), top, X(t), top + ph, X(t), top + ph + 15, tick_label(t));
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", left, top,
                   pw, ph);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#222\">{}</text>\n", left + pw / 2,
                   H - 8, html_escape(p.x_label));
  s += fmt::format(
      "<text transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\" fill=\"#222\">{}</text>\n",
      top + ph / 2, html_escape(p.y_label));

  // Series: polylines broken at non-finite points, reduced to min/max per pixel column.
  for (size_t si = 0; si < p.series.size(); ++si) {
    const PlotSeries& ser = p.series[si];
    std::vector<std::vector<std::pair<double, double>>> runs(1);
    int col = std::numeric_limits<int>::min();
    double cmin = 0, cmax = 0, cx = 0;
    auto emit = [&] {
      if (col == std::numeric_limits<int>::min()) return;
      runs.back().push_back({cx, cmin});
      if (cmax != cmin) runs.back().push_back({cx, cmax});
    };
    for (auto [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        emit();
        col = std::numeric_limits<int>::min();
        if (!runs.back().empty()) runs.emplace_back();
        continue;
      }
      double px = X(x), py = Y(y);
      int c = static_cast<int>(px);
      if (ser.markers || c != col) {
        emit();
        col = c, cx = px, cmin = py, cmax = py;
      } else {
        cmin = std::min(cmin, py), cmax = std::max(cmax, py);
      }
    }
    emit();
    for (const auto& run : runs) {
      if (run.empty()) continue;
      if (ser.markers) {
        for (auto [x, y] : run)
          s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>", x, y, ser.color);
        s += '\n';
      }
      if (run.size() > 1 || !ser.markers) {
        s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"", ser.color);
        for (auto [x, y] : run) s += fmt::format("{:.1f},{:.1f} ", x, y);
        s += "\"/>\n";
      }
    }
  }
  // Legend in the top margin, right-aligned, so it never hides the curves.
  double lx = left + pw;
  for (size_t si = p.series.size(); si-- > 0;) {
    const PlotSeries& ser = p.series[si];
    std::string label = ser.name;
    if (nonfinite[si]) label += fmt::format(" ({} non-finite not shown)", nonfinite[si]);
    lx -= 6.2 * static_cast<double>(label.size()) + 30;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"13\" x2=\"{1:.1f}\" y2=\"13\" stroke=\"{2}\" stroke-width=\"2\"/>"
        "<text x=\"{3:.1f}\" y=\"17\" fill=\"#222\">{4}</text>\n",
        lx, lx + 18, ser.color, lx + 22, html_escape(label));
  }
  return s + "</svg>\n";
}

}  // namespace ft::obs
