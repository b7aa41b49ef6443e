// MetricsServer: serves a Registry as Prometheus text on GET /metrics (cpp-httplib), from a
// background thread with a two-thread pool. The constructor binds the port or throws.
//
//   obs::MetricsServer srv(registry, "127.0.0.1", 9450, /*fallback_tries=*/0);
//   // curl http://127.0.0.1:9450/metrics
//   srv.port();   // the port actually bound (differs from the request for port 0 or a fallback)
//
// A port already in use is an ft::Error naming the address and port. With fallback_tries > 0
// the next ports are tried in order and the one taken is logged. Unlike cpp-httplib's default,
// the socket is not opened with SO_REUSEPORT: two processes must never share a metrics port.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace ft::obs {

class Registry;

class MetricsServer {
 public:
  MetricsServer(Registry& registry, const std::string& bind_address, int port, int fallback_tries);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  Registry& registry_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string address_;
  int port_ = 0;
  std::atomic<bool> listener_done_{false};
};

}  // namespace ft::obs
