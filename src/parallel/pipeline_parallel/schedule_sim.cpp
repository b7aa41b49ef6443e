#include "parallel/pipeline_parallel/schedule_sim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "util/error.h"

namespace ft {
namespace {

std::string act(const PipelineAction& a) {
  return fmt::format("{}(mb {}, chunk {})", action_name(a.kind), a.mb, a.chunk);
}

// Messages of one link: (tag, receiving stage). Sends append; receives take the next index.
struct Link {
  std::vector<std::pair<int, double>> sent;  // (micro-batch, time)
  std::vector<int> posted;                   // micro-batches of the receives, in order
};

class Simulator {
 public:
  Simulator(const Schedule& s, SimCosts c) : s_(s), c_(c) {
    const size_t p = static_cast<size_t>(s.stages);
    pos_.assign(p, 0);
    clock_.assign(p, 0);
    alive_.assign(p, 0);
    r_.times.resize(p);
    r_.busy.assign(p, 0);
    r_.max_in_flight.assign(p, 0);
    for (size_t i = 0; i < p; ++i) r_.times[i].resize(s.actions[i].size());
    for (auto* v : {&c.chunk_forward, &c.chunk_backward})
      if (!v->empty() && v->size() != static_cast<size_t>(s.chunks()))
        throw Error(fmt::format("schedule {}: {} chunk costs for {} chunks", s.describe(), v->size(), s.chunks()));
    if (s.actions.size() != p || s.in_flight_bound.size() != p)
      throw Error(fmt::format("schedule {}: {} action lists and {} bounds for {} stages", s.describe(),
                              s.actions.size(), s.in_flight_bound.size(), p));
  }

  ScheduleReport run() {
    while (true) {
      bool moved = false, all_done = true;
      for (int st = 0; st < s_.stages; ++st) {
        while (step(st)) moved = true;
        all_done = all_done && pos_[static_cast<size_t>(st)] == s_.actions[static_cast<size_t>(st)].size();
      }
      if (all_done) break;
      if (!moved) throw Error(fmt::format("schedule {} deadlocks: {}", s_.describe(), waiting()));
    }
    check_complete();
    for (int st = 0; st < s_.stages; ++st) r_.makespan = std::max(r_.makespan, clock_[static_cast<size_t>(st)]);
    double busy = 0;
    for (double b : r_.busy) busy += b;
    r_.bubble = r_.makespan > 0 ? 1 - busy / (s_.stages * r_.makespan) : 0;
    return r_;
  }

 private:
  using Key = std::tuple<int, int, int>;  // (op, mb, chunk)

  [[noreturn]] void fail(int st, const PipelineAction& a, const std::string& what) const {
    throw Error(fmt::format("schedule {}: stage {}, action {} ({}): {}", s_.describe(), st,
                            pos_[static_cast<size_t>(st)], act(a), what));
  }

  // The link a message for action a travels on, and the stage that sends it.
  std::pair<int, int> link_of(const PipelineAction& a) const {
    switch (a.kind) {
      case PipelineActionKind::kRecvActivation:
        return {activation_tag(a.chunk - 1), s_.stage_of(a.chunk - 1)};
      case PipelineActionKind::kSendActivation:
        return {activation_tag(a.chunk), s_.stage_of(a.chunk + 1)};
      case PipelineActionKind::kRecvGrad:
        return {grad_tag(a.chunk + 1), s_.stage_of(a.chunk + 1)};
      case PipelineActionKind::kSendGrad:
        return {grad_tag(a.chunk), s_.stage_of(a.chunk - 1)};
      default:
        return {-1, -1};
    }
  }

  // Executes stage st's next action if it can; false when done or blocked.
  bool step(int st) {
    const size_t i = static_cast<size_t>(st);
    if (pos_[i] == s_.actions[i].size()) return false;
    const PipelineAction& a = s_.actions[i][pos_[i]];
    if (a.chunk < 0 || a.chunk >= s_.chunks() || s_.stage_of(a.chunk) != st)
      fail(st, a, fmt::format("chunk {} does not run on this stage", a.chunk));
    if (a.mb < 0 || a.mb >= s_.micro_batches) fail(st, a, "no such micro-batch");
    if (!s_.training && (a.kind == PipelineActionKind::kBackward || a.kind == PipelineActionKind::kRecvGrad ||
                         a.kind == PipelineActionKind::kSendGrad))
      fail(st, a, "a forward-only schedule has a backward action");
    double start = clock_[i], end = start;
    switch (a.kind) {
      case PipelineActionKind::kRecvActivation:
      case PipelineActionKind::kRecvGrad: {
        if (a.kind == PipelineActionKind::kRecvActivation && a.chunk == 0)
          fail(st, a, "chunk 0 receives no activation");
        if (a.kind == PipelineActionKind::kRecvGrad && a.chunk == s_.chunks() - 1)
          fail(st, a, "the last chunk receives no gradient");
        auto [tag, from] = link_of(a);
        Link& l = links_[{tag, st}];
        if (!posted_.insert({st, key(a)}).second) fail(st, a, "received twice");
        recv_index_[{st, key(a)}] = l.posted.size();
        l.posted.push_back(a.mb);
        if (a.kind == PipelineActionKind::kRecvActivation) acquire(st);
        break;
      }
      case PipelineActionKind::kForward:
      case PipelineActionKind::kBackward: {
        const bool fwd = a.kind == PipelineActionKind::kForward;
        if (!done_.insert({st, key(a)}).second) fail(st, a, "computed twice");
        if (!fwd && !done_.count({st, Key{static_cast<int>(PipelineActionKind::kForward), a.mb, a.chunk}}))
          fail(st, a, "backward before its forward");
        const bool needs = fwd ? a.chunk > 0 : a.chunk < s_.chunks() - 1;
        if (needs) {
          PipelineAction r{fwd ? PipelineActionKind::kRecvActivation : PipelineActionKind::kRecvGrad, a.mb, a.chunk};
          auto it = recv_index_.find({st, key(r)});
          if (it == recv_index_.end()) fail(st, a, fmt::format("its input was never received ({} missing)", act(r)));
          auto [tag, from] = link_of(r);
          Link& l = links_[{tag, st}];
          if (it->second >= l.sent.size()) {  // not sent yet: blocked
            done_.erase({st, key(a)});
            return false;
          }
          auto [mb, t] = l.sent[it->second];
          if (mb != a.mb)
            fail(st, a,
                 fmt::format("tag {} from stage {}: the receive matches the send of micro-batch {} "
                             "(messages of one tag are matched in order)",
                             tag, from, mb));
          start = std::max(start, t);
        }
        if (fwd && a.chunk == 0) acquire(st);
        const auto& per_chunk = fwd ? c_.chunk_forward : c_.chunk_backward;
        end = start + (per_chunk.empty() ? (fwd ? c_.forward : c_.backward) : per_chunk[static_cast<size_t>(a.chunk)]);
        r_.busy[i] += end - start;
        clock_[i] = end;
        if (!fwd || !s_.training) --alive_[i];
        break;
      }
      case PipelineActionKind::kSendActivation:
      case PipelineActionKind::kSendGrad: {
        if (a.kind == PipelineActionKind::kSendActivation && a.chunk == s_.chunks() - 1)
          fail(st, a, "the last chunk sends no activation");
        if (a.kind == PipelineActionKind::kSendGrad && a.chunk == 0) fail(st, a, "chunk 0 sends no gradient");
        PipelineActionKind producer = a.kind == PipelineActionKind::kSendActivation ? PipelineActionKind::kForward
                                                                                    : PipelineActionKind::kBackward;
        if (!done_.count({st, Key{static_cast<int>(producer), a.mb, a.chunk}}))
          fail(st, a, "sent before it was computed");
        if (!posted_.insert({st, key(a)}).second) fail(st, a, "sent twice");
        auto [tag, to] = link_of(a);
        links_[{tag, to}].sent.push_back({a.mb, clock_[i]});
        break;
      }
    }
    r_.times[i][pos_[i]] = {start, end};
    ++pos_[i];
    return true;
  }

  static Key key(const PipelineAction& a) { return {static_cast<int>(a.kind), a.mb, a.chunk}; }

  void acquire(int st) {
    const size_t i = static_cast<size_t>(st);
    int& n = alive_[i];
    r_.max_in_flight[i] = std::max(r_.max_in_flight[i], ++n);
    if (n > s_.in_flight_bound[i])
      fail(st, s_.actions[i][pos_[i]],
           fmt::format("{} activation sets in flight, more than the bound {}", n, s_.in_flight_bound[i]));
  }

  std::string waiting() const {
    std::string out;
    for (int st = 0; st < s_.stages; ++st) {
      size_t i = static_cast<size_t>(st);
      if (pos_[i] == s_.actions[i].size()) continue;
      out += fmt::format("{}stage {} waits at {}", out.empty() ? "" : "; ", st, act(s_.actions[i][pos_[i]]));
    }
    return out;
  }

  void check_complete() const {
    const int n = s_.training ? 2 : 1;
    for (int st = 0; st < s_.stages; ++st) {
      int expected = n * s_.micro_batches * s_.virtual_stages, got = 0;
      for (auto& [k, v] : done_) got += k == st;
      if (got != expected)
        throw Error(
            fmt::format("schedule {}: stage {} runs {} computations, not {}", s_.describe(), st, got, expected));
    }
    for (auto& [k, l] : links_)
      if (l.sent.size() != l.posted.size())
        throw Error(fmt::format("schedule {}: tag {} to stage {}: {} send(s) but {} receive(s)", s_.describe(), k.first,
                                k.second, l.sent.size(), l.posted.size()));
  }

  const Schedule& s_;
  SimCosts c_;
  ScheduleReport r_;
  std::vector<size_t> pos_;
  std::vector<double> clock_;
  std::vector<int> alive_;
  std::map<std::pair<int, int>, Link> links_;  // (tag, receiving stage)
  std::set<std::pair<int, Key>> done_, posted_;
  std::map<std::pair<int, Key>, size_t> recv_index_;
};

}  // namespace

ScheduleReport simulate(const Schedule& s, SimCosts costs) {
  return Simulator(s, costs).run();
}

std::string timeline(const Schedule& s, const ScheduleReport& r) {
  auto label = [&](const PipelineAction& a) {
    std::string l = fmt::format("{}{}", a.kind == PipelineActionKind::kForward ? 'F' : 'B', a.mb);
    if (s.virtual_stages > 1) l += fmt::format(".{}", s.local_chunk(a.chunk));
    return l;
  };
  size_t width = 1;
  for (auto& list : s.actions)
    for (auto& a : list)
      if (a.kind == PipelineActionKind::kForward || a.kind == PipelineActionKind::kBackward)
        width = std::max(width, label(a).size());
  const int cols = static_cast<int>(std::ceil(r.makespan - 1e-9));
  std::string out = fmt::format("{} — one column per time unit\n", s.describe());
  for (int st = 0; st < s.stages; ++st) {
    std::vector<std::string> cells(static_cast<size_t>(cols), std::string("."));
    const auto& list = s.actions[static_cast<size_t>(st)];
    for (size_t k = 0; k < list.size(); ++k) {
      const PipelineAction& a = list[k];
      if (a.kind != PipelineActionKind::kForward && a.kind != PipelineActionKind::kBackward) continue;
      auto span = r.times[static_cast<size_t>(st)][k];
      for (int t = static_cast<int>(std::lround(span.start)); t < static_cast<int>(std::lround(span.end)) && t < cols;
           ++t)
        cells[static_cast<size_t>(t)] = t == static_cast<int>(std::lround(span.start)) ? label(a) : "~";
    }
    out += fmt::format("stage {:>2} |", st);
    for (auto& c : cells) out += fmt::format(" {:<{}}", c, width);
    out += fmt::format(" | idle {:.0f}\n", r.makespan - r.busy[static_cast<size_t>(st)]);
  }
  return out;
}

}  // namespace ft
