// Context parallelism (parallel.cp) as the planner prices it: what a rank of a cp group holds and
// sends for the ring (parallel/context_parallel/ring_attention.h) or the all-to-all
// (ulysses_attention.h) schedule, counted from what that code allocates and sends, and how much of
// the ring's transfer hides behind the block attention it overlaps.
//
//   CpCost c = cp_cost(job, layout);   c.bytes (per step), c.buffers (bytes held), c.seconds, c.exposed
//
// Per layer and micro-batch of B sequences, T/cp tokens per rank, Hkv' = the rank's kv heads after
// tensor parallelism, a block = B · T/cp · 2 · Hkv' · D elements (its keys and values; an element
// is Layout::wire.attention bytes: 2 in bf16 training, 4 in fp32):
//   ring        forward: cp − 1 block sends (each overlapped with one block's attention);
//               backward: cp − 1 block sends again (overlapped) and cp dK/dV hops (each waits for
//               its block's compute: not hidden); full recompute repeats the forward's;
//   all_to_all  forward: q, k, v heads out (cp − 1 pieces of B · T/cp · (H'/cp + 2 kv') · D) and the
//               outputs back (pieces of B · T/cp · H'/cp · D); backward: q, k, v, the output and its
//               gradient out, d(qkv) back; nothing overlapped (attention waits for them).
// Plus once a step the loss sum over the group (one double, all-reduced).
// Buffers (what the schedules allocate under "communication", on the rank's device or the CPU): the
// ring keeps 2 blocks (in hand, arriving), 2 for their dK/dV and every cp rank's positions (T int32;
// the softmax delta is the block attention op's scratch, "workspace"); the all-to-all the whole
// sequence's q, k, v and its gradient, the output and its gradient for its heads, send/receive
// pieces as large as the q, k, v ones, and with replicated kv heads a scratch for d(qkv)'s sums.
#pragma once

#include "plan/job.h"

namespace ft::plan {

struct CpCost {
  double bytes = 0;    // sent by one rank per step on the cp group
  double buffers = 0;  // bytes the schedule holds beside the activations (communication memory)
  double seconds = 0;  // the transfers' time per step on the cp axis's link
  double exposed = 0;  // the part the step waits for
};

// The cp axis's link: inside a node (NVLink) when tp · cp ranks fit one (tp innermost, then cp),
// else the network; at the collective efficiency.
double cp_link_bandwidth(const Job& job, const Layout& l);

// attention_s: the attention compute (forward and backward) of one micro-batch on the rank, all its
// layers — the window the ring's transfers overlap.
CpCost cp_cost(const Job& job, const Layout& l, double attention_s);

}  // namespace ft::plan
