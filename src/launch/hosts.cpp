#include "launch/hosts.h"

#include <arpa/inet.h>
#include <fmt/ranges.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "fault/heartbeat.h"
#include "util/error.h"

namespace ft {
namespace {

std::set<std::string> local_addresses() {
  std::set<std::string> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {0};
    if (i->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf, sizeof buf);
    } else {
      continue;
    }
    out.insert(buf);
  }
  ::freeifaddrs(ifs);
  return out;
}

// Addresses of `name`, or an error string.
std::vector<std::string> resolve(const std::string& name, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
  std::vector<std::string> out;
  if (rc != 0) {
    *error = ::gai_strerror(rc);
    return out;
  }
  for (addrinfo* a = res; a; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (a->ai_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof buf);
    else if (a->ai_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf, sizeof buf);
    else
      continue;
    out.push_back(buf);
  }
  ::freeaddrinfo(res);
  return out;
}

// Runs argv, returns (exit code, first line of its output).
std::pair<int, std::string> run_capture(const std::string& cmd) {
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {127, "cannot run: " + cmd};
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  int st = ::pclose(p);
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return {code, out};
}

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  return l.empty() ? "no output" : l;
}

}  // namespace

bool is_local_host(const std::string& name) {
  if (name == "localhost" || name.rfind("127.", 0) == 0 || name == "::1") return true;
  std::string me = this_host();
  if (name == me || me.rfind(name + ".", 0) == 0 || name.rfind(me + ".", 0) == 0) return true;
  std::string err;
  std::set<std::string> mine = local_addresses();
  for (const std::string& a : resolve(name, &err))
    if (a.rfind("127.", 0) == 0 || a == "::1" || mine.count(a)) return true;
  return false;
}

std::vector<Host> read_host_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(fmt::format("hosts file {} does not exist or cannot be read", path),
                "one host per line: NAME [slots=N]");
  std::vector<Host> hosts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ss(line);
    Host host;
    if (!(ss >> host.name)) continue;
    for (std::string tok; ss >> tok;) {
      if (tok.rfind("slots=", 0) != 0 && tok.rfind("max_slots=", 0) != 0)
        throw Error(fmt::format("{}:{}: unknown field '{}'", path, n, tok), "one host per line: NAME [slots=N]");
      if (tok.rfind("max_slots=", 0) == 0) continue;
      char* end = nullptr;
      long v = std::strtol(tok.c_str() + 6, &end, 10);
      if (*end != '\0' || v < 1 || v > 100000)
        throw Error(fmt::format("{}:{}: slots must be a positive integer, got '{}'", path, n, tok.substr(6)));
      host.slots = static_cast<int>(v);
    }
    for (const Host& h : hosts)
      if (h.name == host.name) throw Error(fmt::format("{}:{}: host {} is listed twice", path, n, host.name));
    host.local = is_local_host(host.name);
    hosts.push_back(host);
  }
  if (hosts.empty()) throw Error(fmt::format("hosts file {} names no host", path), "one host per line: NAME [slots=N]");
  return hosts;
}

std::string unreachable_reason(const Host& h) {
  if (h.local) return "";
  std::string err;
  if (resolve(h.name, &err).empty()) return "cannot resolve: " + err;
  auto [code, out] =
      run_capture("ssh -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=accept-new " + h.name + " true");
  return code == 0 ? "" : "ssh: " + first_line(out);
}

void check_hosts_reachable(const std::vector<Host>& hosts, const std::string& origin) {
  std::vector<std::string> bad;
  for (const Host& h : hosts) {
    std::string why = unreachable_reason(h);
    if (!why.empty()) bad.push_back(fmt::format("{} ({})", h.name, why));
  }
  if (!bad.empty()) {
    throw Error(fmt::format("{}: {} unreachable host(s): {}", origin, bad.size(), fmt::join(bad, "; ")),
                "fix or remove them; every host must resolve and accept `ssh -o BatchMode=yes HOST` "
                "(mpirun starts ranks over ssh)");
  }
}

bool inside_slurm() {
  return std::getenv("SLURM_JOB_ID") != nullptr;
}

std::vector<Host> slurm_hosts() {
  std::vector<Host> out;
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (!inside_slurm() || !list) return out;
  auto [code, text] = run_capture(std::string("scontrol show hostnames '") + list + "'");
  if (code != 0)
    throw Error(fmt::format("scontrol show hostnames {} failed: {}", list, first_line(text)),
                "is Slurm's scontrol on PATH inside the job?");
  // SLURM_TASKS_PER_NODE looks like "2(x3),1": counts per node in order.
  std::vector<int> per_node;
  if (const char* t = std::getenv("SLURM_TASKS_PER_NODE")) {
    std::stringstream ss(t);
    for (std::string part; std::getline(ss, part, ',');) {
      int n = std::atoi(part.c_str()), rep = 1;
      if (auto x = part.find("(x"); x != std::string::npos) rep = std::atoi(part.c_str() + x + 2);
      for (int i = 0; i < rep; ++i) per_node.push_back(n);
    }
  }
  std::stringstream ss(text);
  for (std::string name; std::getline(ss, name);) {
    if (name.empty()) continue;
    Host h{name, 1, is_local_host(name)};
    if (out.size() < per_node.size()) h.slots = std::max(1, per_node[out.size()]);
    out.push_back(h);
  }
  return out;
}

std::vector<int> ranks_to_hosts(const std::vector<Host>& hosts, int world) {
  std::vector<int> out;
  for (size_t h = 0; h < hosts.size() && static_cast<int>(out.size()) < world; ++h)
    for (int s = 0; s < hosts[h].slots && static_cast<int>(out.size()) < world; ++s) out.push_back(static_cast<int>(h));
  while (static_cast<int>(out.size()) < world) out.push_back(hosts.empty() ? 0 : static_cast<int>(hosts.size()) - 1);
  return out;
}

}  // namespace ft
