// Coupled multi-rank simulation: cross-rank events, their matching per communicator, and the
// conservative driver that stops a rank only at its cross-rank events (docs/simulator.md,
// "Coupled ranks"; docs/trace-format.md, "Multi-rank traces").
#include "mhc/sim/coupled.hpp"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <map>

#include "engine.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/units.hpp"
#include "mhc/trace/comm_kernels.hpp"
#include "prepared.hpp"

namespace mhc::sim {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(what, Error::Kind::BadInput); }

bool is_p2p(const std::string& op) { return op == "SendRecv" || op == "Send" || op == "Recv"; }

const char* role_name(CrossRole r) {
    switch (r) {
        case CrossRole::Send: return "a send";
        case CrossRole::Recv: return "a receive";
        case CrossRole::SendRecv: return "a send-receive";
        default: return "a collective";
    }
}

// A point-to-point kernel that writes a non-communication buffer receives; one that only
// reads such buffers sends; otherwise (no accesses, or both) it does both (NCCL's SendRecv).
// Only recorded accesses say so: accesses the simulator assumes (a trace without any) are
// a guess about memory, not about the direction of a transfer.
CrossRole p2p_role(const Prepared& P, int32_t seq, const std::string& op) {
    if (op == "Send") return CrossRole::Send;
    if (op == "Recv") return CrossRole::Recv;
    if (P.assumed_accesses) return CrossRole::SendRecv;
    bool writes = false, reads = false;
    for (int64_t j = P.acc_begin[seq]; j < P.acc_begin[seq + 1]; ++j) {
        int32_t a = P.acc_alloc[j];
        if (P.t->allocations.category[a] == trace::Category::Comm) continue;
        if (P.acc_write[j]) writes = true;
        else if (P.acc_read[j]) reads = true;
    }
    if (writes && !reads) return CrossRole::Recv;
    if (reads && !writes) return CrossRole::Send;
    return CrossRole::SendRecv;
}

struct CommSpec {
    std::string name;
    std::vector<int> members;   // global ranks, as listed
};

// meta nccl.stream.N = "name:r0,r1,...". Throws naming the file and key when malformed.
CommSpec parse_comm(const std::string& path, const std::string& key, const std::string& v) {
    size_t colon = v.rfind(':');
    if (colon == std::string::npos || colon == 0)
        bad(path + ": meta " + key + " = '" + v + "': expected NAME:RANK,RANK,...");
    CommSpec c;
    c.name = v.substr(0, colon);
    std::string rest = v.substr(colon + 1);
    size_t p = 0;
    while (p <= rest.size()) {
        size_t q = rest.find(',', p);
        if (q == std::string::npos) q = rest.size();
        const auto r = parse_integer<int64_t>(rest.substr(p, q - p));
        if (!r || *r < 0 || *r > (1 << 24))
            bad(path + ": meta " + key + " = '" + v + "': '" + rest.substr(p, q - p) + "' is not a rank");
        c.members.push_back(static_cast<int>(*r));
        p = q + 1;
    }
    return c;
}

std::string who(const std::vector<RankTrace>& ranks, const JobPlan& plan, int r) {
    return ranks[size_t(r)].path + " (rank " + std::to_string(plan.global_rank[size_t(r)]) + ")";
}

}  // namespace

size_t JobPlan::cross_events() const {
    size_t n = 0;
    for (const auto& e : events) n += e.size();
    return n;
}

JobPlan plan_job(const std::vector<RankTrace>& ranks) {
    JobPlan plan;
    const int n = static_cast<int>(ranks.size());
    if (n == 0) bad("simulate --ranks: no rank traces given");
    std::map<int, int> by_global;
    for (int r = 0; r < n; ++r) {
        const trace::TraceData& t = *ranks[size_t(r)].trace;
        int64_t g = r;
        auto it = t.meta.find("rank");
        if (it != t.meta.end() && ((g = parse_integer<int64_t>(it->second).value_or(-1)) < 0 || g > (1 << 24)))
            bad(ranks[size_t(r)].path + ": meta rank = '" + it->second + "' is not a rank number");
        auto ot = t.meta.find("time_origin_ns");
        const auto origin = ot == t.meta.end() ? std::optional<int64_t>(0) : parse_integer<int64_t>(ot->second);
        if (!origin)
            bad(ranks[size_t(r)].path + ": meta time_origin_ns = '" + ot->second + "' is not a number");
        if (!by_global.emplace(static_cast<int>(g), r).second)
            bad(ranks[size_t(r)].path + ": rank " + std::to_string(g) + " is also " + ranks[size_t(by_global[int(g)])].path);
        plan.global_rank.push_back(static_cast<int>(g));
        plan.origin.push_back(*origin);
        plan.t_begin.push_back(ranks[size_t(r)].prepared->t_begin);
        plan.t_end.push_back(ranks[size_t(r)].prepared->t_end);
    }
    // Pass 1: NCCL kernels per rank, with their stream; streams without a meta communicator
    // are shared by every rank that has NCCL kernels on the same stream number.
    struct Raw { int32_t seq; int64_t stream; std::string op; CrossRole role; };
    std::vector<std::vector<Raw>> raw(static_cast<size_t>(n));
    std::map<int64_t, std::vector<int>> stream_users;   // stream -> global ranks (no meta)
    std::vector<std::map<int64_t, CommSpec>> specs(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        const Prepared& P = *ranks[size_t(r)].prepared;
        const trace::TraceData& t = *P.t;
        for (int32_t s = 0; s < static_cast<int32_t>(P.korder.size()); ++s) {
            int32_t row = P.korder[size_t(s)];
            std::string op = trace::comm_kernel_op(t.str(t.kernels.name[size_t(row)]));
            if (op.empty()) continue;
            int64_t stream = t.kernels.stream[size_t(row)];
            raw[size_t(r)].push_back({s, stream, op, is_p2p(op) ? p2p_role(P, s, op) : CrossRole::Collective});
            if (!specs[size_t(r)].count(stream)) {
                std::string key = "nccl.stream." + std::to_string(stream);
                auto it = t.meta.find(key);
                if (it != t.meta.end()) {
                    CommSpec c = parse_comm(ranks[size_t(r)].path, key, it->second);
                    if (std::find(c.members.begin(), c.members.end(), plan.global_rank[size_t(r)]) == c.members.end())
                        bad(who(ranks, plan, r) + ": meta " + key + " = '" + it->second + "' does not list the rank itself");
                    specs[size_t(r)][stream] = c;
                } else {
                    specs[size_t(r)][stream] = CommSpec{"stream " + std::to_string(stream), {}};
                    auto& u = stream_users[stream];
                    if (u.empty() || u.back() != plan.global_rank[size_t(r)]) u.push_back(plan.global_rank[size_t(r)]);
                }
            }
        }
    }
    // Communicators: one per name; members agree on every rank that names it.
    std::map<std::string, int32_t> comm_index;
    std::vector<std::vector<int>> comm_members;
    std::vector<int> comm_first;   // the rank that introduced it (for messages)
    for (int r = 0; r < n; ++r)
        for (auto& [stream, c] : specs[size_t(r)]) {
            if (c.members.empty()) {
                c.members = stream_users[stream];
                std::sort(c.members.begin(), c.members.end());
            }
            auto [it, fresh] = comm_index.emplace(c.name, static_cast<int32_t>(plan.comm_names.size()));
            if (fresh) {
                plan.comm_names.push_back(c.name);
                comm_members.push_back(c.members);
                comm_first.push_back(r);
                for (int m : c.members)
                    if (!by_global.count(m))
                        bad(who(ranks, plan, r) + ": communicator " + c.name + " includes rank " + std::to_string(m) +
                            ", which is not among the rank traces given");
            } else if (comm_members[size_t(it->second)] != c.members) {
                bad(who(ranks, plan, r) + ": communicator " + c.name + " has other members than on " +
                    who(ranks, plan, comm_first[size_t(it->second)]));
            }
        }
    // Events per rank, numbered per communicator.
    plan.events.resize(size_t(n));
    plan.gate_of.resize(size_t(n));
    for (int r = 0; r < n; ++r) {
        plan.gate_of[size_t(r)].assign(ranks[size_t(r)].prepared->korder.size(), -1);
        std::vector<int32_t> count(plan.comm_names.size(), 0);
        for (const Raw& x : raw[size_t(r)]) {
            CrossEvent e;
            e.seq = x.seq;
            e.row = ranks[size_t(r)].prepared->korder[size_t(x.seq)];
            e.comm = comm_index.at(specs[size_t(r)].at(x.stream).name);
            e.order = count[size_t(e.comm)]++;
            e.op = x.op;
            e.role = x.role;
            plan.gate_of[size_t(r)][size_t(x.seq)] = static_cast<int32_t>(plan.events[size_t(r)].size());
            plan.events[size_t(r)].push_back(e);
        }
    }
    // Matching, per communicator and channel: a collective's channel is the whole
    // communicator (every member has the same sequence of operations); point-to-point
    // operations (2-rank communicators) are matched per direction as NCCL does: the k-th send
    // from a to b with the k-th receive on b from a; send-receives (direction unknown) with
    // each other in order.
    plan.waits.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) plan.waits[size_t(r)].resize(plan.events[size_t(r)].size());
    std::vector<std::vector<int>> comm_inputs(plan.comm_names.size());
    for (size_t c = 0; c < plan.comm_names.size(); ++c)
        for (int m : comm_members[c]) comm_inputs[c].push_back(by_global.at(m));
    // channel key -> (input rank -> its events on the channel, in order)
    std::vector<std::map<std::string, std::map<int, std::vector<int32_t>>>> chans(plan.comm_names.size());
    for (int r = 0; r < n; ++r)
        for (int32_t i = 0; i < static_cast<int32_t>(plan.events[size_t(r)].size()); ++i) {
            const CrossEvent& e = plan.events[size_t(r)][size_t(i)];
            const auto& members = comm_inputs[size_t(e.comm)];
            std::string key = "collective";
            if (is_p2p(e.op)) {
                if (members.size() != 2)
                    bad(who(ranks, plan, r) + ": " + e.op + " #" + std::to_string(e.order) + " on communicator " +
                        plan.comm_names[size_t(e.comm)] + ", which has " + std::to_string(members.size()) +
                        " members (point-to-point needs 2)");
                const int peer = members[0] == r ? members[1] : members[0];
                const std::string me = std::to_string(plan.global_rank[size_t(r)]);
                const std::string other = std::to_string(plan.global_rank[size_t(peer)]);
                key = e.role == CrossRole::Send ? me + ">" + other
                    : e.role == CrossRole::Recv ? other + ">" + me
                                                : std::string("sendrecv");
            }
            chans[size_t(e.comm)][key][r].push_back(i);
        }
    for (size_t c = 0; c < plan.comm_names.size(); ++c) {
        const std::string& cname = plan.comm_names[c];
        const auto& members = comm_inputs[c];
        for (auto& [key, per_rank] : chans[c]) {
            std::vector<int> parts = members;   // collectives and send-receives: every member
            size_t arrow = key.find('>');
            if (arrow != std::string::npos) {
                parts = {by_global.at(std::stoi(key.substr(0, arrow))), by_global.at(std::stoi(key.substr(arrow + 1)))};
            }
            auto what = [&](int r, int32_t i) {
                const CrossEvent& e = plan.events[size_t(r)][size_t(i)];
                return is_p2p(e.op) ? std::string(role_name(e.role)) + " (" + e.op + ")" : e.op;
            };
            const int ref = parts.front();
            const std::vector<int32_t> none;
            auto list = [&](int r) -> const std::vector<int32_t>& {
                auto it = per_rank.find(r);
                return it == per_rank.end() ? none : it->second;
            };
            const auto& rev = list(ref);
            for (int m : parts) {
                const auto& mev = list(m);
                const size_t common = std::min(rev.size(), mev.size());
                if (key == "collective")
                    for (size_t k = 0; k < common; ++k)
                        if (plan.events[size_t(ref)][size_t(rev[k])].op != plan.events[size_t(m)][size_t(mev[k])].op)
                            bad(who(ranks, plan, m) + ": collective #" + std::to_string(k) + " on communicator " + cname +
                                " is " + what(m, mev[k]) + ", but on " + who(ranks, plan, ref) + " it is " +
                                what(ref, rev[k]));
                if (rev.size() != mev.size()) {
                    const bool more = mev.size() > rev.size();
                    const int r_more = more ? m : ref;
                    const int32_t first = (more ? mev : rev)[common];
                    const std::string kind = key == "collective" ? "collectives"
                                           : key == "sendrecv"   ? "send-receives"
                                                                 : "transfers " + key;
                    bad(who(ranks, plan, m) + ": " + std::to_string(mev.size()) + " " + kind + " on communicator " + cname +
                        ", but " + std::to_string(rev.size()) + " on " + who(ranks, plan, ref) + "; the first unmatched is " +
                        what(r_more, first) + " #" + std::to_string(plan.events[size_t(r_more)][size_t(first)].order) +
                        " of rank " + std::to_string(plan.global_rank[size_t(r_more)]));
                }
            }
            // Waits and slacks of each instance.
            for (size_t k = 0; k < rev.size(); ++k) {
                int64_t last = INT64_MIN;
                for (int m : parts) {
                    const CrossEvent& e = plan.events[size_t(m)][size_t(list(m)[k])];
                    last = std::max(last, ranks[size_t(m)].prepared->kstart[size_t(e.seq)] + plan.origin[size_t(m)]);
                }
                for (int m : parts) {
                    const int32_t em = list(m)[k];
                    const CrossEvent& e = plan.events[size_t(m)][size_t(em)];
                    if (e.role == CrossRole::Send) continue;   // a send waits for nobody
                    for (int p : parts) {
                        if (p == m) continue;
                        const int32_t ep = list(p)[k];
                        const CrossEvent& f = plan.events[size_t(p)][size_t(ep)];
                        int64_t arrived = ranks[size_t(p)].prepared->kstart[size_t(f.seq)] + plan.origin[size_t(p)];
                        plan.waits[size_t(m)][size_t(em)].push_back({p, ep, last - arrived});
                    }
                }
            }
        }
    }
    // The recorded order must let every rank get through (a consistent recording does): walk
    // the ranks' cross-event starts and ends in the engine's event order, an end waiting for
    // the starts it depends on.
    std::vector<std::vector<std::pair<bool, int32_t>>> steps(static_cast<size_t>(n));   // (is_end, event)
    for (int r = 0; r < n; ++r) {
        const Prepared& P = *ranks[size_t(r)].prepared;
        if (plan.events[size_t(r)].empty()) continue;
        EventCursor cur(P, *P.t);
        RecordedEvent e;
        while (cur.next(e)) {
            if (e.what != Recorded::KernelStart && e.what != Recorded::KernelEnd) continue;
            int32_t g = plan.gate_of[size_t(r)][size_t(e.seq)];
            if (g >= 0) steps[size_t(r)].push_back({e.what == Recorded::KernelEnd, g});
        }
    }
    std::vector<size_t> pos(size_t(n), 0);
    std::vector<std::vector<uint8_t>> started(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) started[size_t(r)].assign(plan.events[size_t(r)].size(), 0);
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < n; ++r) {
            auto& p = pos[size_t(r)];
            while (p < steps[size_t(r)].size()) {
                auto [is_end, g] = steps[size_t(r)][p];
                if (is_end) {
                    bool ok = true;
                    for (const CrossWait& w : plan.waits[size_t(r)][size_t(g)])
                        if (!started[size_t(w.rank)][size_t(w.event)]) ok = false;
                    if (!ok) break;
                } else {
                    started[size_t(r)][size_t(g)] = 1;
                }
                ++p;
                moved = true;
            }
        }
    }
    for (int r = 0; r < n; ++r)
        if (pos[size_t(r)] < steps[size_t(r)].size()) {
            int32_t g = steps[size_t(r)][pos[size_t(r)]].second;
            const CrossEvent& e = plan.events[size_t(r)][size_t(g)];
            std::string on;
            for (const CrossWait& w : plan.waits[size_t(r)][size_t(g)])
                if (!started[size_t(w.rank)][size_t(w.event)]) { on = who(ranks, plan, w.rank); break; }
            bad(who(ranks, plan, r) + ": " + e.op + " #" + std::to_string(e.order) + " on communicator " +
                plan.comm_names[size_t(e.comm)] + " waits for " + on +
                ", which never gets there in the recorded order (the ranks' orders deadlock)");
        }
    return plan;
}

namespace {

template <class Policy>
class Runner final : public RankRunner {
public:
    Runner(const Prepared& p, const Config& c, const JobPlan& plan, int rank, int64_t cap, int64_t host_cap,
           Result&& r)
        : R(std::move(r)), cfg(c), E(p, cfg, R, cap, host_cap) {
        E.begin(&plan.gate_of[size_t(rank)], plan.events[size_t(rank)].size());
    }
    int32_t advance() override { return E.advance(); }
    void release(int64_t delay) override { E.release(delay); }
    int64_t arrival(int32_t g) const override { return E.arrival(g); }
    void halt() override { E.halt(); }
    bool oom() const override { return E.oom_happened(); }
    Result finish() override {
        E.finish();
        return std::move(R);
    }

private:
    Result R;
    Config cfg;
    Engine<Policy> E;
};

}  // namespace

// The result skeleton and capacities exactly as simulate() sets them (engine.cpp).
Result start_result(const Prepared& p, const Config& c, int64_t& cap, int64_t& host_cap);
void end_result(const Prepared& p, Result& r, double seconds);

std::unique_ptr<RankRunner> make_runner(const Prepared& p, const Config& c, const JobPlan& plan, int rank) {
    validate(c);
    int64_t cap = 0, host_cap = 0;
    Result r = start_result(p, c, cap, host_cap);
    if (c.eviction == "lru") return std::make_unique<Runner<LruPolicy>>(p, c, plan, rank, cap, host_cap, std::move(r));
    if (c.eviction == "largest") return std::make_unique<Runner<LargestPolicy>>(p, c, plan, rank, cap, host_cap, std::move(r));
    if (c.eviction == "belady") return std::make_unique<Runner<BeladyPolicy>>(p, c, plan, rank, cap, host_cap, std::move(r));
    if (c.eviction == "dtr") return std::make_unique<Runner<DtrPolicy>>(p, c, plan, rank, cap, host_cap, std::move(r));
    return std::make_unique<Runner<CostAwarePolicy>>(p, c, plan, rank, cap, host_cap, std::move(r));
}

int64_t coupling_delay(const JobPlan& plan, int r, int32_t g,
                       const std::function<int64_t(int32_t, int32_t)>& arrival) {
    int64_t d = INT64_MIN;
    for (const CrossWait& w : plan.waits[size_t(r)][size_t(g)]) d = std::max(d, arrival(w.rank, w.event) - w.slack);
    return d;
}

std::vector<Result> drive(const JobPlan& plan, const std::vector<RankTrace>& ranks, const std::vector<Config>& configs,
                          const std::vector<int>& local, const Exchange& x, DriveStats* stats) {
    const size_t n = ranks.size();
    std::vector<std::unique_ptr<RankRunner>> run(n);
    std::vector<double> secs(n, 0);
    for (int r : local) {
        auto t0 = std::chrono::steady_clock::now();
        run[size_t(r)] = make_runner(*ranks[size_t(r)].prepared, configs.at(size_t(r)), plan, r);
        secs[size_t(r)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    // Arrival delays of every rank's events (local ones copied from the runners, remote ones
    // delivered), and which ranks stopped early.
    std::vector<std::vector<int64_t>> arr(n);
    for (size_t r = 0; r < n; ++r) arr[r].assign(plan.events[r].size(), RankRunner::kNoArrival);
    std::vector<uint8_t> halted(n, 0), ended(n, 0);
    std::vector<int32_t> paused_at(n, -1);
    std::vector<size_t> published(n, 0);
    auto set_arrival = [&](int32_t r, int32_t g, int64_t d) { arr[size_t(r)][size_t(g)] = d; };
    auto set_halted = [&](int32_t r) { halted[size_t(r)] = 1; };
    int64_t n_pauses = 0;
    size_t left = local.size();
    std::vector<uint8_t> runnable(n, 0);
    for (int r : local) runnable[size_t(r)] = 1;
    while (left > 0) {
        bool moved = false;
        for (int r : local) {
            if (!runnable[size_t(r)]) continue;
            auto t0 = std::chrono::steady_clock::now();
            int32_t g = run[size_t(r)]->advance();
            secs[size_t(r)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            runnable[size_t(r)] = 0;
            moved = true;
            auto& pub = published[size_t(r)];
            while (pub < arr[size_t(r)].size() && run[size_t(r)]->arrival(static_cast<int32_t>(pub)) != RankRunner::kNoArrival) {
                int64_t d = run[size_t(r)]->arrival(static_cast<int32_t>(pub));
                arr[size_t(r)][pub] = d;
                if (x.publish) x.publish(r, static_cast<int32_t>(pub), d);
                ++pub;
            }
            if (g < 0) {
                ended[size_t(r)] = 1;
                --left;
                // A rank that stopped waiting, or ended before reaching all its cross-rank
                // events (out of memory), never delivers the rest: whoever waits for them
                // stops too, however many ranks away the one out of memory is.
                if (halted[size_t(r)] || pub < arr[size_t(r)].size()) {
                    halted[size_t(r)] = 1;
                    if (x.halted) x.halted(r);
                }
            } else {
                paused_at[size_t(r)] = g;
                ++n_pauses;
            }
        }
        for (int r : local) {
            const int32_t g = paused_at[size_t(r)];
            if (g < 0) continue;
            bool ready = true, blocked_by_halt = false;
            for (const CrossWait& w : plan.waits[size_t(r)][size_t(g)])
                if (arr[size_t(w.rank)][size_t(w.event)] == RankRunner::kNoArrival) {
                    ready = false;
                    if (halted[size_t(w.rank)]) blocked_by_halt = true;
                }
            if (blocked_by_halt) {
                // A participant ran out of memory before it got there: this rank cannot go on.
                halted[size_t(r)] = 1;
                run[size_t(r)]->halt();
                paused_at[size_t(r)] = -1;
                runnable[size_t(r)] = 1;
                moved = true;
                continue;
            }
            if (!ready) continue;
            int64_t d = coupling_delay(plan, r, g, [&](int32_t p, int32_t e) { return arr[size_t(p)][size_t(e)]; });
            auto t0 = std::chrono::steady_clock::now();
            run[size_t(r)]->release(d);
            secs[size_t(r)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            paused_at[size_t(r)] = -1;
            runnable[size_t(r)] = 1;
            moved = true;
        }
        if (!moved && left > 0) {
            if (!x.remote || !x.remote(set_arrival, set_halted))
                throw Error("coupled simulation: every rank waits for another (a deadlock the recorded order did not show)",
                            Error::Kind::Internal);
        }
    }
    std::vector<Result> out(n);
    for (int r : local) {
        auto t0 = std::chrono::steady_clock::now();
        out[size_t(r)] = run[size_t(r)]->finish();
        secs[size_t(r)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        end_result(*ranks[size_t(r)].prepared, out[size_t(r)], secs[size_t(r)]);
    }
    if (stats) {
        stats->pauses = n_pauses;
        stats->halted = halted;
    }
    return out;
}

CoupledResult summarize(const JobPlan& plan, const std::vector<RankTrace>& ranks, std::vector<Result> results,
                        const std::vector<uint8_t>& halted) {
    CoupledResult c;
    c.ranks = std::move(results);
    c.stopped.assign(c.ranks.size(), 0);
    for (size_t r = 0; r < halted.size() && r < c.ranks.size(); ++r)
        c.stopped[r] = halted[r] && !c.ranks[r].oom.happened;
    c.global_rank = plan.global_rank;
    c.cross_events = plan.cross_events();
    // best = r when r's value beats best's (larger, or smaller when !largest); ties go to the
    // lowest global rank, whatever the order in which the files were given.
    auto pick = [&](int& best, int64_t& best_v, int r, int64_t v, bool largest) {
        const bool better = best < 0 || (v != best_v ? (largest ? v > best_v : v < best_v)
                                                     : plan.global_rank[size_t(r)] < plan.global_rank[size_t(best)]);
        if (better) { best = r; best_v = v; }
    };
    int64_t b0 = INT64_MAX, b1 = INT64_MIN, s1 = INT64_MIN, most_stall = 0, first_oom = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
        const int r = static_cast<int>(i);
        const Result& x = c.ranks[i];
        c.paths.push_back(ranks[i].path);
        const int64_t begin = plan.t_begin[i] + plan.origin[i];
        b0 = std::min(b0, begin);
        b1 = std::max(b1, plan.t_end[i] + plan.origin[i]);
        // On the shared clock: the rank's simulated end (out of memory: its OOM's instant;
        // stopped: where it stopped).
        pick(c.last, s1, r, begin + x.simulated_makespan, true);
        c.job_peak = std::max(c.job_peak, x.simulated_peak);
        c.job_baseline_peak = std::max(c.job_baseline_peak, x.baseline_peak);
        if (x.stall_time > 0) pick(c.limiting, most_stall, r, x.stall_time, true);
        // Several ranks out of memory: the first to run out on the shared clock.
        if (x.oom.happened) pick(c.oom, first_oom, r, plan.origin[i] + x.oom.time, false);
        c.events += x.rows;
        c.seconds += x.seconds;
    }
    c.job_baseline_makespan = b1 - b0;
    c.job_simulated_makespan = s1 - b0;
    c.job_loss = c.job_baseline_makespan > 0
                     ? static_cast<double>(c.job_simulated_makespan) / static_cast<double>(c.job_baseline_makespan) - 1.0
                     : 0;
    return c;
}

CoupledResult simulate_coupled(const std::vector<RankTrace>& ranks, const JobPlan& plan, const Config& c) {
    return simulate_coupled(ranks, plan, std::vector<Config>(ranks.size(), c));
}

CoupledResult simulate_coupled(const std::vector<RankTrace>& ranks, const JobPlan& plan, const std::vector<Config>& configs) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int> all(ranks.size());
    for (size_t r = 0; r < ranks.size(); ++r) all[r] = static_cast<int>(r);
    DriveStats stats;
    std::vector<Result> results = drive(plan, ranks, configs, all, Exchange{}, &stats);
    CoupledResult out = summarize(plan, ranks, std::move(results), stats.halted);
    out.pauses = stats.pauses;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

namespace {
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
    char b[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
}
}  // namespace

namespace {
// A rank that ran out of memory, or stopped waiting for one, did not finish: no loss (as for
// one rank, docs/simulator.md "What the output says"); neither has a job with such a rank.
bool finished(const CoupledResult& c, size_t r) { return !c.ranks[r].oom.happened && !c.stopped[r]; }
}  // namespace

std::string to_text(const CoupledResult& c) {
    std::string s;
    const Result& first = c.ranks.front();
    s += "coupled run    " + run_name(first.config) + " on " + std::to_string(c.ranks.size()) + " ranks, " +
         std::to_string(c.cross_events) + " cross-rank kernels\n";
    s += fmt("%-6s %-10s %-10s %-10s %8s %10s %7s %10s %7s  %s\n", "rank", "capacity", "baseline", "peak", "loss",
             "stalls", "count", "waits", "count", "trace");
    for (size_t r = 0; r < c.ranks.size(); ++r) {
        const Result& x = c.ranks[r];
        const std::string loss = finished(c, r) ? fmt("%7.2f%%", x.throughput_loss * 100) : "-";
        const std::string note = x.oom.happened ? "  OUT OF MEMORY"
                                 : !c.stopped[r]  ? ""
                                 : c.oom >= 0     ? fmt("  STOPPED (rank %d ran out of memory)", c.global_rank[size_t(c.oom)])
                                                  : "  STOPPED (a rank it waits for failed)";
        s += fmt("%-6d %-10s %-10s %-10s %8s %10s %7lld %10s %7lld  %s%s\n", c.global_rank[r],
                 x.capacity >= kUnlimited ? "unlimited" : format_bytes(x.capacity).c_str(),
                 format_bytes(x.baseline_peak).c_str(), format_bytes(x.simulated_peak).c_str(), loss.c_str(),
                 format_ns(x.stall_time).c_str(), (long long)x.stall_count, format_ns(x.coupled_wait_time).c_str(),
                 (long long)x.coupled_wait_count, c.paths[r].c_str(), note.c_str());
    }
    int64_t stalls = 0, waits = 0;
    for (const Result& x : c.ranks) { stalls += x.stall_time; waits += x.coupled_wait_time; }
    if (c.oom >= 0)
        s += fmt("job            peak %s (baseline %s), stopped at an out-of-memory after %s (no loss: it did not "
                 "finish), stalls %s, waits %s\n",
                 format_bytes(c.job_peak).c_str(), format_bytes(c.job_baseline_peak).c_str(),
                 format_ns(c.job_simulated_makespan).c_str(), format_ns(stalls).c_str(), format_ns(waits).c_str());
    else
        s += fmt("job            peak %s (baseline %s), makespan %s -> %s, loss %.2f%%, stalls %s, waits %s\n",
                 format_bytes(c.job_peak).c_str(), format_bytes(c.job_baseline_peak).c_str(),
                 format_ns(c.job_baseline_makespan).c_str(), format_ns(c.job_simulated_makespan).c_str(), c.job_loss * 100,
                 format_ns(stalls).c_str(), format_ns(waits).c_str());
    if (c.limiting >= 0)
        s += fmt("limiting rank  %d (%s of its own stalls; rank %d finishes last)\n", c.global_rank[size_t(c.limiting)],
                 format_ns(c.ranks[size_t(c.limiting)].stall_time).c_str(), c.global_rank[size_t(c.last)]);
    else
        s += "limiting rank  none (no rank stalls)\n";
    if (c.oom >= 0)
        s += fmt("out of memory  rank %d: %s: %s\n", c.global_rank[size_t(c.oom)], c.ranks[size_t(c.oom)].oom.where.c_str(),
                 c.ranks[size_t(c.oom)].oom.why.c_str());
    return s;
}

std::string to_json(const CoupledResult& c) {
    auto loss = [](bool known, double v) { return known ? fmt("%.17g", v) : std::string("null"); };
    std::string s = "{\"ranks\":[";
    for (size_t r = 0; r < c.ranks.size(); ++r) {
        const Result& x = c.ranks[r];
        s += fmt("%s{\"rank\":%d,\"trace\":%s,\"capacity\":%lld,\"baseline_peak\":%lld,\"simulated_peak\":%lld,"
                 "\"baseline_makespan\":%lld,\"simulated_makespan\":%lld,\"throughput_loss\":%s,"
                 "\"stall_time\":%lld,\"stall_count\":%lld,\"coupled_wait_time\":%lld,\"coupled_wait_count\":%lld,"
                 "\"oom\":%s,\"stopped\":%s}",
                 r ? "," : "", c.global_rank[r], json_string(c.paths[r]).c_str(), (long long)x.capacity,
                 (long long)x.baseline_peak, (long long)x.simulated_peak, (long long)x.baseline_makespan,
                 (long long)x.simulated_makespan,
                 loss(finished(c, r), x.throughput_loss).c_str(), (long long)x.stall_time, (long long)x.stall_count,
                 (long long)x.coupled_wait_time, (long long)x.coupled_wait_count, x.oom.happened ? "true" : "false",
                 c.stopped[r] ? "true" : "false");
    }
    s += fmt("],\"job\":{\"peak\":%lld,\"baseline_peak\":%lld,\"baseline_makespan\":%lld,\"simulated_makespan\":%lld,"
             "\"throughput_loss\":%s,\"limiting_rank\":%d,\"last_rank\":%d,\"oom_rank\":%d,\"cross_events\":%zu}}",
             (long long)c.job_peak, (long long)c.job_baseline_peak, (long long)c.job_baseline_makespan,
             (long long)c.job_simulated_makespan, loss(c.oom < 0, c.job_loss).c_str(),
             c.limiting >= 0 ? c.global_rank[size_t(c.limiting)] : -1, c.last >= 0 ? c.global_rank[size_t(c.last)] : -1,
             c.oom >= 0 ? c.global_rank[size_t(c.oom)] : -1, c.cross_events);
    return s;
}

}  // namespace mhc::sim
