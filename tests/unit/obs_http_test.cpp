#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "obs/metrics_server.h"
#include "obs/registry.h"
#include "util/error.h"

namespace ft::obs {
namespace {

// A plain socket listening on a free loopback port, as another process would hold it.
struct PortHolder {
  int fd = -1, port = 0;
  PortHolder() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd, 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~PortHolder() { ::close(fd); }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(MetricsServer, ServesTheRegistryOverHttp) {
  Registry reg(Labels{{"rank", "0"}});
  reg.counter("fluxtrain_steps_total", "steps").inc(7);
  MetricsServer srv(reg, "127.0.0.1", 0, 0);
  ASSERT_GT(srv.port(), 0);
  httplib::Client cli("127.0.0.1", srv.port());
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res->body.find("fluxtrain_steps_total{rank=\"0\"} 7\n"), std::string::npos) << res->body;
  // The values are live: a later update shows in the next scrape.
  reg.counter("fluxtrain_steps_total", "steps").inc();
  res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("fluxtrain_steps_total{rank=\"0\"} 8\n"), std::string::npos);
  EXPECT_EQ(cli.Get("/nope")->status, 404);
}

TEST(MetricsServer, PortInUseNamesThePort) {
  PortHolder held;
  Registry reg;
  std::string e = error_of([&] { MetricsServer srv(reg, "127.0.0.1", held.port, 0); });
  EXPECT_NE(e.find(fmt::format("port {} on 127.0.0.1 is already in use", held.port)), std::string::npos) << e;
  EXPECT_NE(e.find("metrics.port_fallback"), std::string::npos) << e;
}

TEST(MetricsServer, SecondServerOnTheSamePortFails) {
  // cpp-httplib's default SO_REUSEPORT would let this bind succeed and split scrapes.
  Registry a, b;
  MetricsServer first(a, "127.0.0.1", 0, 0);
  std::string e = error_of([&] { MetricsServer second(b, "127.0.0.1", first.port(), 0); });
  EXPECT_NE(e.find(std::to_string(first.port())), std::string::npos) << e;
}

TEST(MetricsServer, FallbackTakesTheNextFreePort) {
  PortHolder held;
  Registry reg;
  // The port after the held one may itself be taken on a busy machine; allow a few.
  MetricsServer srv(reg, "127.0.0.1", held.port, 8);
  EXPECT_GT(srv.port(), held.port);
  EXPECT_LE(srv.port(), held.port + 8);
  httplib::Client cli("127.0.0.1", srv.port());
  ASSERT_TRUE(cli.Get("/metrics"));
}

// Whether a listening socket can be bound to 127.0.0.1:port now (SO_REUSEADDR, as a restarted
// server would: a closed connection's TIME_WAIT does not count, a live listener does).
bool port_is_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 1) == 0;
  ::close(fd);
  return ok;
}

TEST(MetricsServer, StartsAndStopsRepeatedly) {
  Registry reg;
  Counter& steps = reg.counter("fluxtrain_steps_total", "steps");
  int port = 0;
  for (int i = 0; i < 20; ++i) {
    {
      // The same port every time (no fallback): a server that did not release it would make the
      // next start fail with "already in use".
      MetricsServer srv(reg, "127.0.0.1", port, 0);
      if (i == 0) port = srv.port();
      ASSERT_EQ(srv.port(), port);
      EXPECT_FALSE(port_is_free(port)) << "round " << i << ": the running server does not hold its port";
      steps.inc();
      httplib::Client cli("127.0.0.1", port);
      cli.set_connection_timeout(5);
      cli.set_read_timeout(5);
      auto res = cli.Get("/metrics");
      ASSERT_TRUE(res) << "round " << i << ": " << httplib::to_string(res.error());
      EXPECT_EQ(res->status, 200);
      EXPECT_NE(res->body.find(fmt::format("fluxtrain_steps_total {}\n", i + 1)), std::string::npos)
          << "round " << i << ": " << res->body;
    }
    EXPECT_TRUE(port_is_free(port)) << "round " << i << ": port " << port << " still held after stop";
  }
}

}  // namespace
}  // namespace ft::obs
