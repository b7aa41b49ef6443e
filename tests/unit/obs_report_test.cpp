#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "obs/metrics_reader.h"
#include "obs/run_report.h"
#include "obs/svg_plot.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::obs {
namespace {

namespace fs = std::filesystem;

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ft_report_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(dir_ / "metrics.jsonl") << text; }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(ReportTest, ReadsRecordsMergingRepeatedSteps) {
  write(
      "{\"step\":1,\"loss\":4.0,\"lr\":0.001,\"tokens_per_s\":100}\n"
      "{\"step\":2,\"loss\":null,\"lr\":0.002}\n"
      "\n"
      "{\"step\":2,\"val_loss\":3.5,\"val_bpc\":1.9}\n"  // an evaluation line for step 2
      "{\"step\":1,\"loss\":3.9,\"lr\":0.001}\n");       // a resumed run re-logs step 1
  auto r = read_metrics_jsonl((dir_ / "metrics.jsonl").string());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].step, 1);
  EXPECT_DOUBLE_EQ(r[0].loss, 3.9);
  EXPECT_TRUE(std::isnan(r[0].tokens_per_s));  // the resumed line supersedes the old one
  EXPECT_TRUE(std::isnan(r[1].loss));
  EXPECT_DOUBLE_EQ(r[1].lr, 0.002);
  EXPECT_DOUBLE_EQ(r[1].val_bpc, 1.9);
}

TEST_F(ReportTest, GoodputStragglersAndTheSupervisorsRecordAreInTheSummary) {
  write(
      "{\"step\":1,\"loss\":4.0,\"step_s\":2.0,\"goodput\":0.5}\n"
      "{\"step\":2,\"loss\":3.9,\"step_s\":3.0,\"goodput\":0.6,\"straggler_cost_s\":1.5,\"stragglers\":[]}\n");
  std::string html = render_report_html("t", read_metrics_jsonl((dir_ / "metrics.jsonl").string()));
  EXPECT_NE(html.find("60.0% (rank 0 at step 2)"), std::string::npos);
  EXPECT_NE(html.find("1.5 s over 1 step(s) (30.0% of step time)"), std::string::npos);
  std::ofstream(dir_ / "supervisor.jsonl")
      << "{\"event\":\"failure\",\"attempt\":1,\"kind\":\"hang\",\"ranks\":[2],\"host\":\"node3\"}\n"
         "{\"event\":\"recovered\",\"recovery_s\":4.25}\n"
         "{\"event\":\"finished\",\"restarts\":1,\"goodput\":0.25,\"productive_s\":5.0,\"wall_s\":20.0}\n";
  JobSummary job = read_job_summary((dir_ / "supervisor.jsonl").string());
  ASSERT_TRUE(job.present);
  EXPECT_DOUBLE_EQ(job.goodput, 0.25);
  html = render_report_html("t", read_metrics_jsonl((dir_ / "metrics.jsonl").string()), job);
  EXPECT_NE(html.find("goodput</th><td>25.0%"), std::string::npos);
  EXPECT_NE(html.find("attempt 1: hang rank [2] on node3"), std::string::npos);
  EXPECT_NE(html.find("4.2 s"), std::string::npos);
  EXPECT_FALSE(read_job_summary((dir_ / "none.jsonl").string()).present);
}

TEST_F(ReportTest, TheBadputByKindIsInTheSummaryFromTheLastRowOrBadputJson) {
  BadputTotals t;
  t.started_at = 100, t.at = 130, t.productive_s = 20;
  t.seconds[static_cast<size_t>(BadputKind::kStartup)] = 4;
  t.seconds[static_cast<size_t>(BadputKind::kCheckpoint)] = 6;
  write("{\"step\":1,\"loss\":4.0,\"badput\":" + t.to_json().dump() + "}\n");
  std::string html = read_file(write_run_report(dir_.string(), ""));
  EXPECT_NE(html.find("20.0 s productive of 30.0 s; badput: checkpoint 6.0 s, startup 4.0 s"), std::string::npos);
  t.at = 140, t.seconds[static_cast<size_t>(BadputKind::kEval)] = 10;  // the run's end: badput.json
  std::ofstream(dir_ / "badput.json") << t.to_json().dump();
  html = read_file(write_run_report(dir_.string(), ""));
  EXPECT_NE(html.find("20.0 s productive of 40.0 s; badput: evaluation 10.0 s, checkpoint 6.0 s"), std::string::npos);
}

TEST_F(ReportTest, TruncatedLastLineIsSkippedOtherBadLinesAreErrors) {
  write("{\"step\":1,\"loss\":4.0}\n{\"step\":2,\"lo");
  testing::internal::CaptureStderr();
  EXPECT_EQ(read_metrics_jsonl((dir_ / "metrics.jsonl").string()).size(), 1u);
  EXPECT_NE(testing::internal::GetCapturedStderr().find(":2: last line is incomplete"), std::string::npos);
  write("{\"step\":1}\nnot json\n{\"step\":3}\n");
  std::string e = error_of([&] { read_metrics_jsonl((dir_ / "metrics.jsonl").string()); });
  EXPECT_NE(e.find("metrics.jsonl:2: not a JSON object"), std::string::npos) << e;
  write("{\"loss\":1}\n{\"step\":3}\n");
  e = error_of([&] { read_metrics_jsonl((dir_ / "metrics.jsonl").string()); });
  EXPECT_NE(e.find("metrics.jsonl:1: no integer \"step\""), std::string::npos) << e;
}

TEST_F(ReportTest, UnreadableRunDirectoryIsAClearError) {
  std::string e = error_of([&] { write_run_report((dir_ / "missing").string(), ""); });
  EXPECT_NE(e.find("run directory " + (dir_ / "missing").string() + " does not exist"), std::string::npos) << e;
  e = error_of([&] { write_run_report(dir_.string(), ""); });
  EXPECT_NE(e.find("has no metrics.jsonl"), std::string::npos) << e;
  write("{\"step\":1}\n");
  e = error_of([&] { write_run_report((dir_ / "metrics.jsonl").string(), ""); });
  EXPECT_NE(e.find("is not a directory"), std::string::npos) << e;
}

TEST_F(ReportTest, WritesOneSelfContainedFileWithAPlotPerQuantity) {
  std::string lines;
  for (int s = 1; s <= 200; ++s) {
    lines += fmt::format(
        "{{\"step\":{},\"loss\":{},\"lr\":{},\"grad_norm\":1.0,\"tokens\":{},\"tokens_per_s\":{},"
        "\"step_s\":0.5,\"mfu\":0.3,\"data_wait_s\":0.05",
        s, 5.0 / (1 + 0.02 * s), 1e-3 * std::min(1.0, s / 20.0), s * 512, 1000 + (s % 7));
    if (s % 50 == 0)
      lines += fmt::format(",\"val_loss\":{},\"val_bpc\":{}", 4.0 / (1 + 0.02 * s), 2.0 / (1 + 0.01 * s));
    lines += "}\n";
  }
  write(lines);
  std::string path = write_run_report(dir_.string(), "");
  EXPECT_EQ(path, (dir_ / "report.html").string());
  std::string html = read_file(path);
  // Self-contained: no scripts, no external references.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  std::regex svg("<svg ");
  EXPECT_EQ(std::distance(std::sregex_iterator(html.begin(), html.end(), svg), std::sregex_iterator()), 5);
  for (const char* title : {"Loss", "Validation bits per character", "Throughput", "Learning rate"})
    EXPECT_NE(html.find(std::string(">") + title + "</text>"), std::string::npos) << title;
  // Four validation points drawn as markers in two plots (loss and bits/char).
  std::regex circle("<circle ");
  EXPECT_EQ(std::distance(std::sregex_iterator(html.begin(), html.end(), circle), std::sregex_iterator()), 8);
  EXPECT_NE(html.find("best validation bits/char</th><td>" + fmt::format("{:.4f}", 2.0 / 3.0) + " at step 200"),
            std::string::npos);
  EXPECT_NE(html.find("waiting for data</th><td>10.0% of step time"), std::string::npos);
}

TEST(SvgPlot, TicksAreRoundAndCoverTheRange) {
  auto t = nice_ticks(0.013, 0.97, 5);
  ASSERT_FALSE(t.empty());
  EXPECT_DOUBLE_EQ(t.front(), 0.2);
  EXPECT_NEAR(t.back(), 0.8, 1e-12);
  t = nice_ticks(-3, 17, 4);
  EXPECT_EQ(t, (std::vector<double>{0, 5, 10, 15}));
  EXPECT_TRUE(nice_ticks(1, 1, 5).empty());
}

TEST(SvgPlot, NonFiniteValuesBreakTheLineAndAreCounted) {
  Plot p{.title = "t", .x_label = "x", .y_label = "y"};
  p.series.push_back(
      {.name = "loss", .color = "#000", .points = {{1, 1}, {2, 2}, {3, NAN}, {4, INFINITY}, {5, 1}, {6, 2}}});
  std::string svg = render_svg(p);
  std::regex poly("<polyline ");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), poly), std::sregex_iterator()), 2);
  EXPECT_NE(svg.find("loss (2 non-finite not shown)"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgPlot, LongSeriesAreReducedPerPixelColumnKeepingSpikes) {
  Plot p{.title = "t", .x_label = "x", .y_label = "y", .width = 300};
  PlotSeries s{.name = "s", .color = "#000"};
  for (int i = 0; i < 100000; ++i) s.points.push_back({static_cast<double>(i), i == 50000 ? 100.0 : 1.0});
  p.series.push_back(s);
  std::string svg = render_svg(p);
  EXPECT_LT(svg.size(), 20000u);
  // The spike survives the reduction: some point lies in the top tenth of the plot area
  // (which starts 28 px down and is 228 px tall), while the flat line sits near the bottom.
  std::string pts = svg.substr(svg.find("points=\"") + 8);
  pts = pts.substr(0, pts.find('"'));
  double min_y = 1e9, max_y = -1e9;
  std::istringstream in(pts);
  for (std::string xy; in >> xy;) {
    double y = std::stod(xy.substr(xy.find(',') + 1));
    min_y = std::min(min_y, y), max_y = std::max(max_y, y);
  }
  EXPECT_LT(min_y, 28 + 22.8);
  EXPECT_GT(max_y, 28 + 228 - 22.8);
}

}  // namespace
}  // namespace ft::obs
