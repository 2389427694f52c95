#pragma once
// What the MPI sources share: the world this process is in, the tags of their messages, and
// sends and receives that wait politely.
#include <mpi.h>

#include <cstdint>
#include <string>

namespace mhc::dist::detail {

struct World {
    int size = 1, rank = 0;
    bool started = false;    // MPI_Init was called (under a launcher)
    bool parallel = false;   // between enter_parallel() and leave_parallel()
};
World& world();

// One tag per conversation, so that messages of one never match receives of another.
enum class Tag : int { Exchange = 1, RankResult = 2, SweepResult = 3 };

// OpenMPI's blocking calls poll at 100% of a core, which on a machine with fewer free cores
// than processes takes the CPU from the process that is still computing. These test, then
// sleep 100 us.
void wait(MPI_Request& req);
void send(const void* data, int count, MPI_Datatype type, int to, Tag tag);
void recv(void* data, int count, MPI_Datatype type, int from, Tag tag);
// Any length, in pieces below 2^31 bytes (MPI counts are int).
void send_bytes(const std::string& b, int to, Tag tag);
std::string recv_bytes(int from, Tag tag);

}  // namespace mhc::dist::detail
