#include "parallel/mesh.h"

#include <chrono>

#include "parallel/comm/device_comm.h"
#include "parallel/comm/host_staged_comm.h"
#include "parallel/comm/mpi_comm.h"
#include "util/error.h"

namespace ft {

void Mesh::validate(const ParallelConfig& p, int64_t world_size) {
  p.validate();
  if (p.world_size() != world_size) {
    throw Error(fmt::format("the world has {} rank(s) but {}", world_size, p.degrees_product()),
                fmt::format("choose degrees whose product is {} (e.g. --set parallel.dp={} with tp = pp = 1), "
                            "or start {} ranks",
                            world_size, world_size, p.world_size()));
  }
}

MeshCoord Mesh::coord_of(const ParallelConfig& p, int64_t r) {
  return MeshCoord{r / (p.dp * p.cp * p.tp), (r / (p.cp * p.tp)) % p.dp, (r / p.tp) % p.cp, r % p.tp};
}

Mesh Mesh::single() {
  Mesh m;
  m.world_ = make_self_communicator("world", 0);
  m.dp_ = make_self_communicator("dp", 0);
  m.tp_ = make_self_communicator("tp", 0);
  m.pp_ = make_self_communicator("pp", 0);
  m.cp_ = make_self_communicator("cp", 0);
  m.dp_cp_ = m.dp_;
  return m;
}

Mesh Mesh::create_mpi(const ParallelConfig& p, int world_rank, int world_size, const std::string& board_dir) {
  validate(p, world_size);
  Mesh m;
  m.p_ = p;
  m.world_rank_ = world_rank;
  m.coord_ = coord_of(p, world_rank);
  const MeshCoord c = m.coord_;
  CommOptions o{p.collective_timeout_s, "", false};
  m.world_ = mpi_world("world", o);
  // The arrival boards of this job live under a directory named by a nonce of rank 0's, so a
  // later job never reads a stale board.
  int64_t nonce = static_cast<int64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  m.world_->broadcast(&nonce, 8, 0);
  if (!board_dir.empty()) o.board_dir = fmt::format("{}/{:x}", board_dir, nonce);
  m.board_dir_ = o.board_dir;
  // Ranks sharing the other three coordinates form a group; keys order them along the axis. The
  // same splits in the same order on every rank (each is collective over the world).
  m.tp_ = mpi_split(static_cast<int>((c.pp * p.dp + c.dp) * p.cp + c.cp), static_cast<int>(c.tp), "tp", o);
  m.dp_ = mpi_split(static_cast<int>((c.pp * p.cp + c.cp) * p.tp + c.tp), static_cast<int>(c.dp), "dp", o);
  m.pp_ = mpi_split(static_cast<int>((c.dp * p.cp + c.cp) * p.tp + c.tp), static_cast<int>(c.pp), "pp", o);
  if (p.cp > 1) {
    m.cp_ = mpi_split(static_cast<int>((c.pp * p.dp + c.dp) * p.tp + c.tp), static_cast<int>(c.cp), "cp", o);
    m.dp_cp_ = mpi_split(static_cast<int>(c.pp * p.tp + c.tp), static_cast<int>(c.dp * p.cp + c.cp), "dp_cp", o);
  } else {
    m.cp_ = make_self_communicator("cp", world_rank);
    m.dp_cp_ = m.dp_;
  }
  return m;
}

Mesh Mesh::create_with(const ParallelConfig& p, int world_rank, const CommFactory& make) {
  validate(p, p.world_size());
  Mesh m;
  m.p_ = p;
  m.world_rank_ = world_rank;
  m.coord_ = coord_of(p, world_rank);
  const MeshCoord c = m.coord_;
  auto rank_of = [&](int64_t pp, int64_t dp, int64_t cp, int64_t tp) {
    return static_cast<int>(((pp * p.dp + dp) * p.cp + cp) * p.tp + tp);
  };
  std::vector<int> world, tp, dp, pp, cp, dp_cp;
  for (int r = 0; r < p.world_size(); ++r) world.push_back(r);
  for (int64_t i = 0; i < p.tp; ++i) tp.push_back(rank_of(c.pp, c.dp, c.cp, i));
  for (int64_t i = 0; i < p.dp; ++i) dp.push_back(rank_of(c.pp, i, c.cp, c.tp));
  for (int64_t i = 0; i < p.pp; ++i) pp.push_back(rank_of(i, c.dp, c.cp, c.tp));
  for (int64_t i = 0; i < p.cp; ++i) cp.push_back(rank_of(c.pp, c.dp, i, c.tp));
  for (int64_t i = 0; i < p.dp; ++i)
    for (int64_t j = 0; j < p.cp; ++j) dp_cp.push_back(rank_of(c.pp, i, j, c.tp));
  m.world_ = make("world", world, world_rank);
  m.tp_ = make("tp", tp, static_cast<int>(c.tp));
  m.dp_ = make("dp", dp, static_cast<int>(c.dp));
  m.pp_ = make("pp", pp, static_cast<int>(c.pp));
  if (p.cp > 1) {
    m.cp_ = make("cp", cp, static_cast<int>(c.cp));
    m.dp_cp_ = make("dp_cp", dp_cp, static_cast<int>(c.dp * p.cp + c.cp));
  } else {
    m.cp_ = make_self_communicator("cp", world_rank);
    m.dp_cp_ = m.dp_;
  }
  return m;
}

void Mesh::use_comm(const ParallelConfig& p, const ExecContext& ctx) {
  if (comm_chosen_) return;  // a second trainer on this mesh: its groups are already chosen
  comm_chosen_ = true;
  if (use_device_comm(p.comm, ctx)) {
    const DeviceCommBackend* b = device_comm_backend();
    const CommOptions o{p.collective_timeout_s, board_dir_, false};
    // The same order on every rank: each is collective over its group. The pipeline's transfers get
    // their own channels per link direction and kind (NCCL matches them without tags).
    tp_ = b->make(tp_, ctx, o);
    dp_ = b->make(dp_, ctx, o);
    pp_ = b->make(pp_, ctx, CommOptions{o.timeout_s, o.board_dir, true});
    world_ = make_host_staged_comm(world_, ctx);
    if (p.cp > 1) {
      // The ring's blocks go to the next rank and come from the previous one: a channel per link
      // direction, as the pipeline's (the all-to-all pairs ranks further apart on the group's own).
      cp_ = b->make(cp_, ctx, CommOptions{o.timeout_s, o.board_dir, true});
      dp_cp_ = b->make(dp_cp_, ctx, o);
    } else {
      dp_cp_ = dp_;
    }
    transport_ = b->name;
    return;
  }
  if (ctx.on_host()) return;
  for (auto* c : {&world_, &dp_, &tp_, &pp_}) *c = make_host_staged_comm(*c, ctx);
  if (p.cp > 1)
    for (auto* c : {&cp_, &dp_cp_}) *c = make_host_staged_comm(*c, ctx);
  else
    dp_cp_ = dp_;
  transport_ = "MPI (device buffers staged through host memory)";
}

std::string Mesh::describe() const {
  if (p_.cp > 1)
    return fmt::format("rank {} = (pp {}, dp {}, cp {}, tp {}) of pp{} × dp{} × cp{} × tp{}", world_rank_, coord_.pp,
                       coord_.dp, coord_.cp, coord_.tp, p_.pp, p_.dp, p_.cp, p_.tp);
  return fmt::format("rank {} = (pp {}, dp {}, tp {}) of pp{} × dp{} × tp{}", world_rank_, coord_.pp, coord_.dp,
                     coord_.tp, p_.pp, p_.dp, p_.tp);
}

}  // namespace ft
