// The coupled simulation spread over the processes (run.hpp): each process drives the ranks it
// owns (sim::drive) and exchanges with the others only what they wait for, the arrival delays
// at cross-rank events, then rank 0 gathers every rank's result.
#include <algorithm>
#include <chrono>

#include "mhc/dist/codec.hpp"
#include "mhc/dist/process.hpp"
#include "mhc/dist/run.hpp"
#include "transport.hpp"

namespace mhc::dist {

namespace {

using detail::Tag;
using detail::world;

// What one process tells another during the run. One tag for all, so that MPI's per-sender
// order keeps a sender's arrivals before its Done.
enum class Message : int64_t {
    Arrival,   // rank `rank` reached cross-rank event `event` with delay `delay`
    Halted,    // rank `rank` stopped early (out of memory, or waiting for one that did)
    Done,      // the sender drives no rank any more
};
struct Note {
    Message kind;
    int32_t rank = 0, event = 0;
    int64_t delay = 0;
};

void send_note(const Note& n, int to) {
    const int64_t m[4] = {static_cast<int64_t>(n.kind), n.rank, n.event, n.delay};
    detail::send(m, 4, to, Tag::Exchange);
}

Note recv_note() {
    int64_t m[4];
    detail::recv(m, 4, -1, Tag::Exchange);   // from any process
    return {static_cast<Message>(m[0]), static_cast<int32_t>(m[1]), static_cast<int32_t>(m[2]), m[3]};
}

void send_to_others(const Note& n) {
    for (int p = 0; p < world().size; ++p)
        if (p != world().rank) send_note(n, p);
}

int owner(int rank) { return rank % world().size; }

// Per rank and cross-rank event: the other processes that own a rank waiting for it.
std::vector<std::vector<std::vector<int>>> readers_of(const sim::JobPlan& plan) {
    const size_t n = plan.events.size();
    std::vector<std::vector<std::vector<int>>> readers(n);
    for (size_t r = 0; r < n; ++r) readers[r].resize(plan.events[r].size());
    for (size_t r = 0; r < n; ++r)
        for (const auto& ws : plan.waits[r])
            for (const sim::CrossWait& w : ws) {
                const int reader = owner(static_cast<int>(r));
                auto& v = readers[static_cast<size_t>(w.rank)][static_cast<size_t>(w.event)];
                if (reader != owner(w.rank) && std::find(v.begin(), v.end(), reader) == v.end()) v.push_back(reader);
            }
    return readers;
}

// sim::Exchange over MPI messages, and the drain at the end that leaves none unreceived.
class MpiExchange {
public:
    explicit MpiExchange(const sim::JobPlan& plan) : readers_(readers_of(plan)) {}

    sim::Exchange exchange() {
        sim::Exchange x;
        x.publish = [this](int32_t r, int32_t g, int64_t d) {
            for (int p : readers_[static_cast<size_t>(r)][static_cast<size_t>(g)]) send_note({Message::Arrival, r, g, d}, p);
        };
        x.halted = [](int32_t r) { send_to_others({Message::Halted, r}); };
        x.remote = [this](const auto& set_arrival, const auto& set_halted) {
            if (done_from_ == world().size - 1) return false;   // everyone else finished: nothing more can come
            receive_one(set_arrival, set_halted);
            return true;
        };
        return x;
    }

    // This process is done: tell the others, then take what they still send until each said
    // it is done; halts still on their way are noted for the report.
    void finish(std::vector<uint8_t>& halted) {
        send_to_others({Message::Done});
        auto ignore = [](int32_t, int32_t, int64_t) {};
        auto note = [&](int32_t r) { halted[static_cast<size_t>(r)] = 1; };
        while (done_from_ < world().size - 1) receive_one(ignore, note);
    }

private:
    void receive_one(const std::function<void(int32_t, int32_t, int64_t)>& set_arrival,
                     const std::function<void(int32_t)>& set_halted) {
        const Note n = recv_note();
        switch (n.kind) {
            case Message::Arrival: set_arrival(n.rank, n.event, n.delay); break;
            case Message::Halted: set_halted(n.rank); break;
            case Message::Done: ++done_from_; break;
        }
    }

    std::vector<std::vector<std::vector<int>>> readers_;
    int done_from_ = 0;
};

int64_t total_pauses(int64_t mine) { return detail::mpi().reduce_sum_i64(mine); }

}  // namespace

sim::CoupledResult simulate_coupled(const std::vector<sim::RankTrace>& ranks, const sim::JobPlan& plan,
                                    const sim::Config& c) {
    if (size() == 1) return sim::simulate_coupled(ranks, plan, c);
    enter_parallel();
    const auto t0 = std::chrono::steady_clock::now();
    const int n = static_cast<int>(ranks.size());
    std::vector<int> local;
    for (int r = 0; r < n; ++r)
        if (owner(r) == rank()) local.push_back(r);
    MpiExchange exchange(plan);
    sim::DriveStats stats;
    std::vector<sim::Result> results =
        sim::drive(plan, ranks, std::vector<sim::Config>(ranks.size(), c), local, exchange.exchange(), &stats);
    exchange.finish(stats.halted);
    const int64_t pauses = total_pauses(stats.pauses);
    if (!is_root()) {
        for (int r : local) detail::send_bytes(pack(results[static_cast<size_t>(r)]), 0, Tag::RankResult);
        leave_parallel();
        sim::CoupledResult partial;
        partial.ranks = std::move(results);
        return partial;
    }
    for (int r = 0; r < n; ++r)
        if (owner(r) != 0) results[static_cast<size_t>(r)] = unpack(detail::recv_bytes(owner(r), Tag::RankResult));
    leave_parallel();
    sim::CoupledResult out = sim::summarize(plan, ranks, std::move(results), stats.halted);
    out.pauses = pauses;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace mhc::dist
