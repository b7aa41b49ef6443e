// Exit codes of `fluxtrain train` that the supervisor (`fluxtrain launch`) acts on.
//
//   0  training finished
//   2  an error a restart would repeat (bad config, non-finite loss under fault.nan_policy =
//      "stop", ...): the supervisor stops with that error
//   3  a communication failure — a peer died or hangs (collective timeout naming the ranks that
//      never arrived or never finished it): the supervisor restarts from the newest valid checkpoint
// Anything else (a rank killed by a signal, mpirun's own codes) also counts as a failure to
// restart from, within fault.max_restarts.
#pragma once

namespace ft {

inline constexpr int kExitError = 2;
inline constexpr int kExitCommFailure = 3;

}  // namespace ft
