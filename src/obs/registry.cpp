#include "obs/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace ft::obs {

const char* metric_type_name(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    FT_CHECK(std::isfinite(bounds_[i]), "histogram bound {} is not finite", bounds_[i]);
    FT_CHECK(i == 0 || bounds_[i] > bounds_[i - 1], "histogram bounds must increase strictly");
  }
  counts_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::observe(double v) {
  // Buckets are few (~12): a linear scan beats a binary search here. NaN lands in +Inf.
  size_t i = 0;
  while (i < bounds_.size() && !(v <= bounds_[i])) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = acc;
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  FT_CHECK(start > 0 && factor > 1 && count > 0, "exponential_buckets({}, {}, {})", start, factor, count);
  std::vector<double> b(static_cast<size_t>(count));
  double v = start;
  for (auto& x : b) {
    x = v;
    v *= factor;
  }
  return b;
}

bool is_valid_metric_name(std::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view n) {
  if (n.empty() || n.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

static std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_sample_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

static std::string render_labels(const Labels& labels) {
  std::string s;
  for (const auto& [k, v] : labels) {
    if (!s.empty()) s += ',';
    s += k;
    s += "=\"";
    s += escape_label_value(v);
    s += '"';
  }
  return s;
}

struct Registry::Series {
  std::string label_text;  // constant labels + the series' own, rendered
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
};

struct Registry::Family {
  std::string name, help;
  MetricType type;
  std::vector<double> bounds;
  std::vector<std::unique_ptr<Series>> series;
  std::map<std::string, Series*> by_labels;
};

Registry::Registry(Labels constant_labels) : constant_labels_(std::move(constant_labels)) {
  for (auto& [k, v] : constant_labels_) FT_CHECK(is_valid_label_name(k), "bad constant label name '{}'", k);
  constant_text_ = render_labels(constant_labels_);
}

Registry::~Registry() = default;

Registry::Series& Registry::series(std::string_view name, std::string_view help, MetricType type, const Labels& labels,
                                   const std::vector<double>* bounds) {
  FT_CHECK(is_valid_metric_name(name), "bad metric name '{}'", name);
  FT_CHECK(type != MetricType::kCounter || (name.size() > 6 && name.substr(name.size() - 6) == "_total"),
           "counter '{}' must end in _total", name);
  for (auto& [k, v] : labels) {
    FT_CHECK(is_valid_label_name(k), "metric {}: bad label name '{}'", name, k);
    FT_CHECK(!(type == MetricType::kHistogram && k == "le"), "metric {}: 'le' is reserved", name);
    for (auto& [ck, cv] : constant_labels_) FT_CHECK(k != ck, "metric {}: label '{}' is a constant label", name, k);
  }
  std::lock_guard<std::mutex> lock(mu_);
  Family* f;
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    auto fam = std::make_unique<Family>();
    fam->name = std::string(name);
    fam->help = std::string(help);
    fam->type = type;
    if (bounds) fam->bounds = *bounds;
    f = fam.get();
    by_name_.emplace(fam->name, f);
    families_.push_back(std::move(fam));
  } else {
    f = it->second;
    FT_CHECK(f->type == type, "metric {} registered as {} and as {}", name, metric_type_name(f->type),
             metric_type_name(type));
    FT_CHECK(!bounds || f->bounds == *bounds, "metric {} registered with two bucket layouts", name);
  }
  std::string own = render_labels(labels);
  auto sit = f->by_labels.find(own);
  if (sit != f->by_labels.end()) return *sit->second;

  auto s = std::make_unique<Series>();
  s->label_text = constant_text_;
  if (!own.empty()) s->label_text += (s->label_text.empty() ? "" : ",") + own;
  switch (type) {
    case MetricType::kCounter:
      s->counter = std::make_unique<Counter>();
      break;
    case MetricType::kGauge:
      s->gauge = std::make_unique<Gauge>();
      break;
    case MetricType::kHistogram:
      s->histogram = std::make_unique<Histogram>(f->bounds);
      break;
  }
  Series* raw = s.get();
  f->by_labels.emplace(own, raw);
  f->series.push_back(std::move(s));
  return *raw;
}

Counter& Registry::counter(std::string_view name, std::string_view help, const Labels& labels) {
  return *series(name, help, MetricType::kCounter, labels, nullptr).counter;
}
Gauge& Registry::gauge(std::string_view name, std::string_view help, const Labels& labels) {
  return *series(name, help, MetricType::kGauge, labels, nullptr).gauge;
}
Histogram& Registry::histogram(std::string_view name, std::string_view help, std::vector<double> upper_bounds,
                               const Labels& labels) {
  return *series(name, help, MetricType::kHistogram, labels, &upper_bounds).histogram;
}

Counter& Registry::counter(const MetricDef& d, const Labels& labels) {
  FT_CHECK(d.type == MetricType::kCounter, "{} is not a counter", d.name);
  return counter(d.name, d.help, labels);
}
Gauge& Registry::gauge(const MetricDef& d, const Labels& labels) {
  FT_CHECK(d.type == MetricType::kGauge, "{} is not a gauge", d.name);
  return gauge(d.name, d.help, labels);
}
Histogram& Registry::histogram(const MetricDef& d, std::vector<double> upper_bounds, const Labels& labels) {
  FT_CHECK(d.type == MetricType::kHistogram, "{} is not a histogram", d.name);
  return histogram(d.name, d.help, std::move(upper_bounds), labels);
}

void Registry::on_collect(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(collect_mu_);
  collectors_.push_back(std::move(fn));
}

static void sample_line(std::string& out, std::string_view name, std::string_view suffix, const std::string& labels,
                        std::string_view extra, double v) {
  out += name;
  out += suffix;
  if (!labels.empty() || !extra.empty()) {
    out += '{';
    out += labels;
    if (!labels.empty() && !extra.empty()) out += ',';
    out += extra;
    out += '}';
  }
  out += ' ';
  out += format_sample_value(v);
  out += '\n';
}

std::string Registry::expose() const {
  {
    // Collectors may register series, so they run before the registry lock is taken.
    std::lock_guard<std::mutex> lock(collect_mu_);
    for (auto& fn : collectors_) fn();
  }
  std::string out;
  out.reserve(8192);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : families_) {
    // A family whose gauges are all unset is left out entirely (no HELP without samples).
    bool any = f->type != MetricType::kGauge;
    for (const auto& s : f->series) any = any || s->gauge->has_value();
    if (!any || f->series.empty()) continue;
    out +=
        fmt::format("# HELP {} {}\n# TYPE {} {}\n", f->name, escape_help(f->help), f->name, metric_type_name(f->type));
    for (const auto& s : f->series) {
      switch (f->type) {
        case MetricType::kCounter:
          sample_line(out, f->name, "", s->label_text, "", s->counter->value());
          break;
        case MetricType::kGauge:
          if (s->gauge->has_value()) sample_line(out, f->name, "", s->label_text, "", s->gauge->value());
          break;
        case MetricType::kHistogram: {
          auto snap = s->histogram->snapshot();
          const auto& b = s->histogram->bounds();
          for (size_t i = 0; i <= b.size(); ++i) {
            std::string le = "le=\"" + (i < b.size() ? format_sample_value(b[i]) : std::string("+Inf")) + "\"";
            sample_line(out, f->name, "_bucket", s->label_text, le, static_cast<double>(snap.cumulative[i]));
          }
          sample_line(out, f->name, "_sum", s->label_text, "", snap.sum);
          sample_line(out, f->name, "_count", s->label_text, "", static_cast<double>(snap.cumulative.back()));
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace ft::obs
