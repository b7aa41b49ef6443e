// Metrics registry: counters, gauges and histograms with labels, exposed in the Prometheus text
// format (version 0.0.4). Registration allocates and locks; updates are lock-free atomics, so
// the step loop, the loader and the communicator can update series from any thread.
//
//   obs::Registry reg(obs::Labels{{"run", "demo"}, {"rank", "0"}});  // constant labels of the process
//   obs::Counter& bytes = reg.counter("fluxtrain_comm_bytes_total", "bytes moved", {{"op", "all_reduce"}});
//   obs::Histogram& step = reg.histogram("fluxtrain_step_duration_seconds", "step time",
//                                        obs::exponential_buckets(0.01, 2, 12));
//   bytes.inc(4096);        // hot path: one relaxed atomic add
//   step.observe(0.25);
//   std::string text = reg.expose();   // what GET /metrics returns
//
// Asking twice for the same name and labels returns the same series. A gauge that was never
// set (or was cleared) is not exposed, so "missing" can be told apart from any value.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ft::obs {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };
const char* metric_type_name(MetricType t);  // "counter", "gauge", "histogram"

// A metric's name, type, help text and variable label names, declared once (metric_names.h).
struct MetricDef {
  const char* name;
  MetricType type;
  const char* help;         // help text as exposed (says the unit)
  const char* label_names;  // comma-separated variable labels ("" = none); documentation only
};

class Counter {
 public:
  void inc(double v = 1.0) { v_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
};

class Gauge {
 public:
  void set(double v) {
    v_.store(v, std::memory_order_relaxed);
    if (!set_.load(std::memory_order_relaxed)) set_.store(true, std::memory_order_release);
  }
  void add(double v) {
    v_.fetch_add(v, std::memory_order_relaxed);
    if (!set_.load(std::memory_order_relaxed)) set_.store(true, std::memory_order_release);
  }
  // Removes the series from the exposition until the next set().
  void clear() { set_.store(false, std::memory_order_release); }
  bool has_value() const { return set_.load(std::memory_order_acquire); }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
  std::atomic<bool> set_{false};
};

class Histogram {
 public:
  // upper_bounds: strictly increasing, finite; the +Inf bucket is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

// start, start*factor, ... (count bounds).
std::vector<double> exponential_buckets(double start, double factor, int count);

class Registry {
 public:
  explicit Registry(Labels constant_labels = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Counter& counter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& histogram(std::string_view name, std::string_view help, std::vector<double> upper_bounds,
                       const Labels& labels = {});

  Counter& counter(const MetricDef& d, const Labels& labels = {});
  Gauge& gauge(const MetricDef& d, const Labels& labels = {});
  Histogram& histogram(const MetricDef& d, std::vector<double> upper_bounds, const Labels& labels = {});

  // fn runs at the start of every expose() (e.g. to copy memory counters into gauges).
  void on_collect(std::function<void()> fn);

  // Prometheus text format 0.0.4; families in registration order.
  std::string expose() const;

  const Labels& constant_labels() const { return constant_labels_; }

 private:
  struct Series;
  struct Family;
  Series& series(std::string_view name, std::string_view help, MetricType type, const Labels& labels,
                 const std::vector<double>* bounds);

  Labels constant_labels_;
  std::string constant_text_;  // rendered constant labels: run="x",rank="0"
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
  std::map<std::string, Family*, std::less<>> by_name_;
  mutable std::mutex collect_mu_;
  std::vector<std::function<void()>> collectors_;
};

// Helpers shared with tests and other writers of the text format.
std::string escape_label_value(std::string_view v);
std::string format_sample_value(double v);  // "1.5", "1e+06", "NaN", "+Inf", "-Inf"
bool is_valid_metric_name(std::string_view name);
bool is_valid_label_name(std::string_view name);

}  // namespace ft::obs
