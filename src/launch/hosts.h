// Hosts a job may run on: a host file (`fluxtrain launch --hosts FILE`), a Slurm allocation, or
// this machine alone — and whether each can be reached before anything is started.
//
//   # hosts file: one host per line, optional slots (ranks it runs; default 1), # comments
//   node01 slots=8
//   node02 slots=8
//
//   std::vector<Host> hosts = read_host_file("hosts.txt");   // throws naming file:line
//   check_hosts_reachable(hosts, "hosts.txt");                // one error listing every
//   unreachable host
//
// A name that resolves to this machine (localhost, 127.x.y.z, its hostname or one of its
// addresses) is local: no ssh is needed. Several local entries stand for one machine — the
// supervisor then still attributes ranks to them by slots, which lets the tests exercise host
// bookkeeping (bad hosts, elastic shrinking) on one machine.
#pragma once

#include <string>
#include <vector>

namespace ft {

struct Host {
  std::string name;
  int slots = 1;
  bool local = false;
};

std::vector<Host> read_host_file(const std::string& path);
bool is_local_host(const std::string& name);
// Resolves every host, and for remote ones tries `ssh -o BatchMode=yes HOST true`; throws one
// ft::Error naming each unreachable host and why.
void check_hosts_reachable(const std::vector<Host>& hosts, const std::string& origin);
// Why `host` cannot be reached now ("cannot resolve: ...", "ssh: ..."), or "" when it can (local
// hosts always can). Bounded by ssh's 5 s connect timeout.
std::string unreachable_reason(const Host& host);
// The nodes of the current Slurm allocation (SLURM_JOB_NODELIST via `scontrol show hostnames`)
// with SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE slots; empty when not inside one.
std::vector<Host> slurm_hosts();
bool inside_slurm();  // SLURM_JOB_ID is set

// Host index of each rank when ranks fill hosts in order, slots at a time (mpirun --map-by slot).
std::vector<int> ranks_to_hosts(const std::vector<Host>& hosts, int world);

}  // namespace ft
