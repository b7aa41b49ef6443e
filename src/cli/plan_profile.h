// `fluxtrain plan --profile` and `--profile-file` (cmd_plan.cpp parses, these run):
//
//   fluxtrain plan --profile --config configs/llama-20m.toml --nproc 2 --out cpu.json
//       the config's real step timed op by op on this CPU (at 1 thread and at every CPU), and with
//       --nproc N each mesh axis's collectives timed over N ranks under mpirun (dp, tp, pp, cp in
//       turn) and the ops timed again by N processes at once under mpirun (each the whole op trace,
//       in lock-step: the contention of N ranks on this host), and at 2, 4, ... of them;
//   fluxtrain plan --profile-file cpu.json --config configs/llama-20m.toml --set parallel.tp=2 [--json]
//       the layout's step time predicted from the profile (dryrun/step_profile.h).
#pragma once

#include <string>
#include <vector>

namespace ft::cli {

struct ProfileArgs {
  std::string config, out, profile_file, collectives_out;
  std::string ops_rank_dir;  // one rank of --profile's concurrent op timing writes its ops here
  std::vector<std::string> sets;
  std::vector<int> threads;  // thread counts to profile at (empty: 1 and every CPU)
  int nproc = 0;             // ranks to time the collectives over (0, 1: none)
  int predict_threads = 0;   // threads per rank for the prediction (0: train.threads, else CPUs / ranks)
  int repeats = 3;
  bool json = false;
};

int run_profile(const ProfileArgs& a);
int run_profile_collectives(const ProfileArgs& a);  // one rank of --profile's mpirun (hidden option)
int run_profile_ops_rank(const ProfileArgs& a);     // one of --profile's N concurrent op timers (hidden)
int run_profile_file(const ProfileArgs& a);

}  // namespace ft::cli
