// The processes of an MPI job (process.hpp) and the transport the other MPI sources share.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mhc/dist/process.hpp"
#include "transport.hpp"

namespace mhc::dist {

namespace detail {

World& world() {
    static World w;
    return w;
}

void wait(MPI_Request& req) {
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

void send(const void* data, int count, MPI_Datatype type, int to, Tag tag) {
    MPI_Request req;
    MPI_Isend(data, count, type, to, static_cast<int>(tag), MPI_COMM_WORLD, &req);
    wait(req);
}

void recv(void* data, int count, MPI_Datatype type, int from, Tag tag) {
    MPI_Request req;
    MPI_Irecv(data, count, type, from, static_cast<int>(tag), MPI_COMM_WORLD, &req);
    wait(req);
}

namespace {
constexpr int64_t kPiece = int64_t{1} << 30;
}  // namespace

void send_bytes(const std::string& b, int to, Tag tag) {
    int64_t n = static_cast<int64_t>(b.size());
    send(&n, 1, MPI_INT64_T, to, tag);
    for (int64_t off = 0; off < n;) {
        int part = static_cast<int>(std::min(n - off, kPiece));
        send(b.data() + off, part, MPI_BYTE, to, tag);
        off += part;
    }
}

std::string recv_bytes(int from, Tag tag) {
    int64_t n = 0;
    recv(&n, 1, MPI_INT64_T, from, tag);
    std::string b(static_cast<size_t>(n), '\0');
    for (int64_t off = 0; off < n;) {
        int part = static_cast<int>(std::min(n - off, kPiece));
        recv(b.data() + off, part, MPI_BYTE, from, tag);
        off += part;
    }
    return b;
}

}  // namespace detail

using detail::world;

void init(int* argc, char*** argv) {
    // Only under a launcher: a plain `mhc` never starts MPI (no daemon, no network probing).
    if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") && !std::getenv("PMIX_RANK")) return;
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &world().size);
    MPI_Comm_rank(MPI_COMM_WORLD, &world().rank);
    world().started = true;
}

void finalize() {
    // Every process got here through agree() (main), so MPI_Finalize's own synchronisation
    // is short.
    if (world().started) MPI_Finalize();
    world().started = false;
}

bool enabled() { return true; }
int size() { return world().size; }
int rank() { return world().rank; }

Outcome agree(const Outcome& mine) {
    const detail::World& w = world();
    if (!w.started || w.size == 1) return mine;
    // The lowest-numbered process that failed, then its code and message from it.
    int64_t candidate = mine.code != 0 ? w.rank : w.size, first = w.size;
    MPI_Request req;
    MPI_Iallreduce(&candidate, &first, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD, &req);
    detail::wait(req);
    if (first == w.size) return {};
    const int from = static_cast<int>(first);
    const std::string text = mine.message.substr(0, 4096);
    int64_t head[2] = {mine.code, static_cast<int64_t>(text.size())};
    MPI_Ibcast(head, 2, MPI_INT64_T, from, MPI_COMM_WORLD, &req);
    detail::wait(req);
    Outcome agreed{static_cast<int>(head[0]), w.rank == from ? text : std::string(static_cast<size_t>(head[1]), '\0')};
    if (head[1] > 0) {
        MPI_Ibcast(agreed.message.data(), static_cast<int>(head[1]), MPI_CHAR, from, MPI_COMM_WORLD, &req);
        detail::wait(req);
    }
    return agreed;
}

void enter_parallel() {
    if (!world().started || world().size == 1) return;
    Outcome o = agree({});
    if (o.code != 0) throw AgreedFailure{o};
    world().parallel = true;
}

void leave_parallel() { world().parallel = false; }
bool in_parallel() { return world().parallel; }

void abort_job(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);   // MPI_Abort does not return; in case it does
}

}  // namespace mhc::dist
