#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <set>
#include <sstream>
#include <thread>

#include "obs/metric_names.h"
#include "obs/registry.h"
#include "util/error.h"

namespace ft::obs {
namespace {

// Every sample line of an exposition whose name (with suffix) is `name`.
std::vector<std::string> samples(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) == 0 && (line.size() > name.size()) &&
        (line[name.size()] == '{' || line[name.size()] == ' '))
      out.push_back(line);
  }
  return out;
}

TEST(Registry, ExposesConstantAndSeriesLabels) {
  Registry r(Labels{{"run", "r1"}, {"rank", "3"}});
  r.counter("fluxtrain_comm_bytes_total", "bytes", {{"op", "all_reduce"}}).inc(4096);
  r.gauge("fluxtrain_loss", "loss").set(2.5);
  std::string t = r.expose();
  EXPECT_NE(t.find("# HELP fluxtrain_comm_bytes_total bytes\n# TYPE fluxtrain_comm_bytes_total counter\n"),
            std::string::npos)
      << t;
  auto s = samples(t, "fluxtrain_comm_bytes_total");
  ASSERT_EQ(s.size(), 1u) << t;
  EXPECT_EQ(s[0], "fluxtrain_comm_bytes_total{run=\"r1\",rank=\"3\",op=\"all_reduce\"} 4096");
  s = samples(t, "fluxtrain_loss");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0], "fluxtrain_loss{run=\"r1\",rank=\"3\"} 2.5");
}

TEST(Registry, SameNameAndLabelsIsTheSameSeries) {
  Registry r;
  Counter& a = r.counter("x_total", "h", {{"k", "v"}});
  Counter& b = r.counter("x_total", "h", {{"k", "v"}});
  Counter& c = r.counter("x_total", "h", {{"k", "w"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_THROW(r.gauge("x_total", "h"), Error);      // one name, two types: a bug
  EXPECT_THROW(r.counter("no_suffix", "h"), Error);  // counters end in _total
  EXPECT_THROW(r.gauge("bad-name", "h"), Error);
  EXPECT_THROW(r.gauge("g", "h", {{"__reserved", "v"}}), Error);
}

TEST(Registry, UnsetGaugeIsAbsentNotZero) {
  Registry r;
  Gauge& g = r.gauge("fluxtrain_validation_loss", "val");
  EXPECT_EQ(r.expose().find("fluxtrain_validation_loss"), std::string::npos);
  g.set(0);
  EXPECT_EQ(samples(r.expose(), "fluxtrain_validation_loss").size(), 1u);
  g.clear();
  EXPECT_EQ(r.expose().find("fluxtrain_validation_loss"), std::string::npos);
}

TEST(Registry, NonFiniteValuesUsePrometheusSpelling) {
  Registry r;
  r.gauge("a", "h").set(NAN);
  r.gauge("b", "h").set(INFINITY);
  r.gauge("c", "h").set(-INFINITY);
  r.gauge("d", "h").set(1e21);
  std::string t = r.expose();
  EXPECT_EQ(samples(t, "a")[0], "a NaN");
  EXPECT_EQ(samples(t, "b")[0], "b +Inf");
  EXPECT_EQ(samples(t, "c")[0], "c -Inf");
  EXPECT_DOUBLE_EQ(std::stod(samples(t, "d")[0].substr(2)), 1e21);
}

TEST(Registry, EscapesLabelValuesAndHelp) {
  Registry r(Labels{{"run", "a\"b\\c\nd"}});
  r.gauge("g", "line one\nline two \\ end").set(1);
  std::string t = r.expose();
  EXPECT_NE(t.find("g{run=\"a\\\"b\\\\c\\nd\"} 1"), std::string::npos) << t;
  EXPECT_NE(t.find("# HELP g line one\\nline two \\\\ end"), std::string::npos) << t;
}

TEST(Registry, HistogramBucketsAreCumulative) {
  Registry r(Labels{{"rank", "0"}});
  Histogram& h = r.histogram("fluxtrain_step_duration_seconds", "step", {0.1, 1, 10});
  std::vector<double> obs = {0.05, 0.1, 0.5, 2, 3, 100};
  double sum = 0;
  for (double v : obs) h.observe(v), sum += v;
  std::string t = r.expose();
  auto b = samples(t, "fluxtrain_step_duration_seconds_bucket");
  ASSERT_EQ(b.size(), 4u) << t;
  EXPECT_EQ(b[0], "fluxtrain_step_duration_seconds_bucket{rank=\"0\",le=\"0.1\"} 2");  // le is inclusive
  EXPECT_EQ(b[1], "fluxtrain_step_duration_seconds_bucket{rank=\"0\",le=\"1\"} 3");
  EXPECT_EQ(b[2], "fluxtrain_step_duration_seconds_bucket{rank=\"0\",le=\"10\"} 5");
  EXPECT_EQ(b[3], "fluxtrain_step_duration_seconds_bucket{rank=\"0\",le=\"+Inf\"} 6");
  EXPECT_EQ(samples(t, "fluxtrain_step_duration_seconds_count")[0],
            "fluxtrain_step_duration_seconds_count{rank=\"0\"} 6");
  auto s = samples(t, "fluxtrain_step_duration_seconds_sum")[0];
  EXPECT_DOUBLE_EQ(std::stod(s.substr(s.find("} ") + 2)), sum);
}

TEST(Registry, ConcurrentUpdatesLoseNothing) {
  Registry r;
  Counter& c = r.counter("c_total", "h");
  Histogram& h = r.histogram("h_seconds", "h", exponential_buckets(1, 2, 8));
  Gauge& g = r.gauge("g", "h");
  constexpr int kThreads = 4, kIters = 50000;
  std::vector<std::thread> ts;
  std::atomic<bool> stop{false};
  std::thread scraper([&] {  // exposition concurrently with updates
    while (!stop) r.expose();
  });
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        c.inc(0.5);
        h.observe(static_cast<double>(i % 300));
        g.add(1);
      }
    });
  for (auto& t : ts) t.join();
  stop = true;
  scraper.join();
  EXPECT_DOUBLE_EQ(c.value(), 0.5 * kThreads * kIters);
  EXPECT_DOUBLE_EQ(g.value(), kThreads * kIters);
  auto snap = h.snapshot();
  EXPECT_EQ(snap.cumulative.back(), static_cast<uint64_t>(kThreads * kIters));
  double expect_sum = 0;
  for (int i = 0; i < kIters; ++i) expect_sum += i % 300;
  EXPECT_DOUBLE_EQ(snap.sum, expect_sum * kThreads);
}

TEST(Registry, CollectorsRunBeforeEachExposition) {
  Registry r;
  int calls = 0;
  Gauge& g = r.gauge("g", "h");
  r.on_collect([&] { g.set(++calls); });
  EXPECT_NE(r.expose().find("g 1"), std::string::npos);
  EXPECT_NE(r.expose().find("g 2"), std::string::npos);
}

TEST(MetricNames, FollowPrometheusConventions) {
  std::set<std::string> seen;
  for (const MetricDef* d : kAllMetrics) {
    std::string n = d->name;
    EXPECT_TRUE(seen.insert(n).second) << "declared twice: " << n;
    EXPECT_EQ(n.rfind("fluxtrain_", 0), 0u) << n;
    EXPECT_TRUE(is_valid_metric_name(n)) << n;
    bool total = n.size() > 6 && n.substr(n.size() - 6) == "_total";
    EXPECT_EQ(total, d->type == MetricType::kCounter) << n << ": _total is for counters, and counters only";
    EXPECT_NE(std::string(d->help).size(), 0u) << n;
  }
}

}  // namespace
}  // namespace ft::obs
