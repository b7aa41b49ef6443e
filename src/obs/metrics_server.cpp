#include "obs/metrics_server.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "obs/registry.h"
#include "util/error.h"
#include "util/log.h"

namespace ft::obs {
namespace {

// SO_REUSEADDR lets a restarted rank rebind a port in TIME_WAIT; SO_REUSEPORT (cpp-httplib's
// default) would let a second process bind the same port and split the scrapes between the two.
void metrics_socket_options(int sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

MetricsServer::MetricsServer(Registry& registry, const std::string& bind_address, int port, int fallback_tries)
    : registry_(registry), server_(std::make_unique<httplib::Server>()), address_(bind_address) {
  httplib::Server& s = *server_;
  s.new_task_queue = [] { return new httplib::ThreadPool(2); };
  s.set_socket_options(metrics_socket_options);
  s.set_keep_alive_max_count(100);
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.expose(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("fluxtrain: metrics are on /metrics\n", "text/plain");
  });

  {  // an address that is not one (or not this machine's) is not a busy port
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const int rc = ::getaddrinfo(bind_address.c_str(), nullptr, &hints, &res);
    if (res) ::freeaddrinfo(res);
    if (rc != 0)
      throw Error(fmt::format("metrics.bind_address = \"{}\" is not an address: {}", bind_address, ::gai_strerror(rc)),
                  "use \"0.0.0.0\" (all interfaces), \"127.0.0.1\" or an address of this machine");
  }
  auto bad_address = [&](int err) {
    return Error(fmt::format("metrics: cannot listen on {}: {}", bind_address, std::strerror(err)),
                 err == EADDRNOTAVAIL ? "metrics.bind_address is not an address of this machine: use \"0.0.0.0\" (all "
                                        "interfaces), \"127.0.0.1\" or one of its addresses"
                                      : "check metrics.bind_address");
  };
  if (port == 0) {
    int p = s.bind_to_any_port(bind_address);
    if (p < 0) {
      throw Error(fmt::format("metrics: cannot listen on {} (any port): {}", bind_address, std::strerror(errno)),
                  "check metrics.bind_address");
    }
    port_ = p;
  } else {
    int last = port + (fallback_tries > 0 ? fallback_tries : 0);
    int err = 0;
    for (int p = port; p <= last && p <= 65535; ++p) {
      errno = 0;
      if (s.bind_to_port(bind_address, p)) {
        port_ = p;
        break;
      }
      err = errno;
      if (err != 0 && err != EADDRINUSE) throw bad_address(err);  // no other port would do better
    }
    if (port_ == 0) {
      std::string what = err == EADDRINUSE || err == 0 ? "already in use" : std::strerror(err);
      if (last > port) {
        throw Error(fmt::format("metrics: ports {}..{} on {} are all {}", port, last, bind_address, what),
                    "free one of them, or set metrics.port to another port");
      }
      throw Error(fmt::format("metrics: port {} on {} is {}", port, bind_address, what),
                  "another process (another run, or another rank on this node) holds it: set metrics.port "
                  "to a free port, or metrics.port_fallback = true to take the next free one");
    }
    if (port_ != port) log_warn("metrics: port {} is in use; serving on port {} instead", port, port_);
  }
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listener_done_ = true;
  });
  // stop() is a no-op until the listener runs, so wait for it (microseconds) before returning.
  while (!server_->is_running() && !listener_done_) std::this_thread::sleep_for(std::chrono::microseconds(100));
  log_info("metrics: serving http://{}:{}/metrics", address_, port_);
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ft::obs
