#pragma once
// What the MPI sources share: the world this process is in, the tags of their messages, and the
// loaded MPI library's calls (mpi_module.hpp), which wait politely.
#include <cstdint>
#include <string>

#include "mpi_module.hpp"

namespace mhc::dist::detail {

struct World {
    int size = 1, rank = 0;
    bool started = false;    // MPI_Init was called (under a launcher)
    bool parallel = false;   // between enter_parallel() and leave_parallel()
    const MhcMpiModule* mpi = nullptr;   // the loaded libmhc_mpi.so (under a launcher)
};
World& world();
// The loaded library's calls; only after init() started MPI (world().started).
inline const MhcMpiModule& mpi() { return *world().mpi; }

// One tag per conversation, so that messages of one never match receives of another.
enum class Tag : int { Exchange = 1, RankResult = 2, SweepResult = 3 };

inline void send(const int64_t* data, int count, int to, Tag tag) { mpi().send_i64(data, count, to, static_cast<int>(tag)); }
// from < 0: from any process
inline void recv(int64_t* data, int count, int from, Tag tag) { mpi().recv_i64(data, count, from, static_cast<int>(tag)); }
// Any length, in pieces below 2^31 bytes (MPI counts are int).
void send_bytes(const std::string& b, int to, Tag tag);
std::string recv_bytes(int from, Tag tag);

}  // namespace mhc::dist::detail
