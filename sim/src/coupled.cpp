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
#include <sstream>

#include "engine.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/text_table.hpp"
#include "mhc/common/units.hpp"
#include "mhc/common/wrap.hpp"
#include "mhc/trace/comm_kernels.hpp"
#include "mhc/trace/runs.hpp"
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
CrossRole p2p_role(const Prepared& prep, int32_t seq, const std::string& op) {
    if (op == "Send") return CrossRole::Send;
    if (op == "Recv") return CrossRole::Recv;
    if (prep.assumed_accesses) return CrossRole::SendRecv;
    bool writes = false, reads = false;
    for (int64_t j = prep.acc_begin[seq]; j < prep.acc_begin[seq + 1]; ++j) {
        int32_t a = prep.acc_alloc[j];
        if (prep.t->allocations.category[a] == trace::Category::Comm) continue;
        if (prep.acc_write[j]) writes = true;
        else if (prep.acc_read[j]) reads = true;
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

namespace {

// Stage 1: each rank's global rank, clock origin and recorded span. by_global: global rank ->
// input index.
void read_ranks(const std::vector<RankTrace>& ranks, JobPlan& plan, std::map<int, int>& by_global) {
    const int n = static_cast<int>(ranks.size());
    if (n == 0) bad("simulate --ranks: no rank traces given");
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
}

// An NCCL kernel of one rank, before its communicator is known.
struct NcclKernel {
    int32_t seq;
    int64_t stream;
    std::string op;
    CrossRole role;
};

// What stage 2 finds: per rank its NCCL kernels and the communicator of each of their streams;
// streams without a meta communicator are shared by every rank with NCCL kernels on the same
// stream number (stream_users: stream -> global ranks).
struct FoundEvents {
    std::vector<std::vector<NcclKernel>> kernels;
    std::vector<std::map<int64_t, CommSpec>> specs;
    std::map<int64_t, std::vector<int>> stream_users;
};

// Stage 2: the NCCL kernels of every rank, with their stream's communicator.
FoundEvents find_events(const std::vector<RankTrace>& ranks, const JobPlan& plan) {
    const size_t n = ranks.size();
    FoundEvents f;
    f.kernels.resize(n);
    f.specs.resize(n);
    for (size_t r = 0; r < n; ++r) {
        const Prepared& prep = *ranks[r].prepared;
        const trace::TraceData& t = *prep.t;
        const int me = plan.global_rank[r];
        for (int32_t s = 0; s < static_cast<int32_t>(prep.korder.size()); ++s) {
            int32_t row = prep.korder[size_t(s)];
            std::string op = trace::comm_kernel_op(t.str(t.kernels.name[size_t(row)]));
            if (op.empty()) continue;
            int64_t stream = t.kernels.stream[size_t(row)];
            f.kernels[r].push_back({s, stream, op, is_p2p(op) ? p2p_role(prep, s, op) : CrossRole::Collective});
            if (f.specs[r].count(stream)) continue;
            std::string key = "nccl.stream." + std::to_string(stream);
            auto it = t.meta.find(key);
            if (it != t.meta.end()) {
                CommSpec c = parse_comm(ranks[r].path, key, it->second);
                if (std::find(c.members.begin(), c.members.end(), me) == c.members.end())
                    bad(who(ranks, plan, int(r)) + ": meta " + key + " = '" + it->second + "' does not list the rank itself");
                f.specs[r][stream] = c;
            } else {
                f.specs[r][stream] = CommSpec{"stream " + std::to_string(stream), {}};
                auto& u = f.stream_users[stream];
                if (u.empty() || u.back() != me) u.push_back(me);
            }
        }
    }
    return f;
}

// Stage 3: one communicator per name, whose members agree on every rank that names it; each
// rank's events numbered per communicator. Returns the communicators' members as input indices.
std::vector<std::vector<int>> build_communicators(const std::vector<RankTrace>& ranks, FoundEvents& f,
                                                  const std::map<int, int>& by_global, JobPlan& plan) {
    const size_t n = ranks.size();
    std::map<std::string, int32_t> comm_index;
    std::vector<std::vector<int>> comm_members;
    std::vector<int> comm_first;   // the rank that introduced it (for messages)
    for (size_t r = 0; r < n; ++r)
        for (auto& [stream, c] : f.specs[r]) {
            if (c.members.empty()) {
                c.members = f.stream_users[stream];
                std::sort(c.members.begin(), c.members.end());
            }
            auto [it, fresh] = comm_index.emplace(c.name, static_cast<int32_t>(plan.comm_names.size()));
            if (fresh) {
                plan.comm_names.push_back(c.name);
                comm_members.push_back(c.members);
                comm_first.push_back(int(r));
                for (int m : c.members)
                    if (!by_global.count(m))
                        bad(who(ranks, plan, int(r)) + ": communicator " + c.name + " includes rank " + std::to_string(m) +
                            ", which is not among the rank traces given");
            } else if (comm_members[size_t(it->second)] != c.members) {
                bad(who(ranks, plan, int(r)) + ": communicator " + c.name + " has other members than on " +
                    who(ranks, plan, comm_first[size_t(it->second)]));
            }
        }
    plan.events.resize(n);
    plan.gate_of.resize(n);
    for (size_t r = 0; r < n; ++r) {
        plan.gate_of[r].assign(ranks[r].prepared->korder.size(), -1);
        std::vector<int32_t> count(plan.comm_names.size(), 0);
        for (const NcclKernel& x : f.kernels[r]) {
            CrossEvent e;
            e.seq = x.seq;
            e.row = ranks[r].prepared->korder[size_t(x.seq)];
            e.comm = comm_index.at(f.specs[r].at(x.stream).name);
            e.order = count[size_t(e.comm)]++;
            e.op = x.op;
            e.role = x.role;
            plan.gate_of[r][size_t(x.seq)] = static_cast<int32_t>(plan.events[r].size());
            plan.events[r].push_back(e);
        }
    }
    std::vector<std::vector<int>> inputs(plan.comm_names.size());
    for (size_t c = 0; c < plan.comm_names.size(); ++c)
        for (int m : comm_members[c]) inputs[c].push_back(by_global.at(m));
    return inputs;
}

// A channel of one communicator: its key ("collective", "sendrecv" or "a>b" for the transfers
// from global rank a to b) and, per input rank, its events on it in order.
using Channels = std::map<std::string, std::map<int, std::vector<int32_t>>>;

// A collective's channel is the whole communicator (every member has the same sequence of
// operations); point-to-point operations (2-rank communicators) are matched per direction as
// NCCL does: the k-th send from a to b with the k-th receive on b from a; send-receives
// (direction unknown) with each other in order.
std::vector<Channels> channels_of(const std::vector<RankTrace>& ranks, const JobPlan& plan,
                                  const std::vector<std::vector<int>>& comm_inputs) {
    std::vector<Channels> chans(plan.comm_names.size());
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r)
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
    return chans;
}

// One channel of communicator `cname`, its participants `parts` (input indices).
struct Channel {
    const std::string& cname;
    const std::string& key;
    const std::map<int, std::vector<int32_t>>& per_rank;
    std::vector<int> parts;
    const std::vector<int32_t>& list(int r) const {
        static const std::vector<int32_t> none;
        auto it = per_rank.find(r);
        return it == per_rank.end() ? none : it->second;
    }
};

// Every participant has the reference's sequence: the same count (and, for collectives, the
// same operations), else a one-line refusal naming the first event that does not match.
void check_channel(const std::vector<RankTrace>& ranks, const JobPlan& plan, const Channel& ch) {
    auto what = [&](int r, int32_t i) {
        const CrossEvent& e = plan.events[size_t(r)][size_t(i)];
        return is_p2p(e.op) ? std::string(role_name(e.role)) + " (" + e.op + ")" : e.op;
    };
    const int ref = ch.parts.front();
    const auto& rev = ch.list(ref);
    for (int m : ch.parts) {
        const auto& mev = ch.list(m);
        const size_t common = std::min(rev.size(), mev.size());
        if (ch.key == "collective")
            for (size_t k = 0; k < common; ++k)
                if (plan.events[size_t(ref)][size_t(rev[k])].op != plan.events[size_t(m)][size_t(mev[k])].op)
                    bad(who(ranks, plan, m) + ": collective #" + std::to_string(k) + " on communicator " + ch.cname +
                        " is " + what(m, mev[k]) + ", but on " + who(ranks, plan, ref) + " it is " + what(ref, rev[k]));
        if (rev.size() == mev.size()) continue;
        const bool more = mev.size() > rev.size();
        const int r_more = more ? m : ref;
        const int32_t first = (more ? mev : rev)[common];
        const std::string kind = ch.key == "collective" ? "collectives"
                               : ch.key == "sendrecv"   ? "send-receives"
                                                        : "transfers " + ch.key;
        bad(who(ranks, plan, m) + ": " + std::to_string(mev.size()) + " " + kind + " on communicator " + ch.cname +
            ", but " + std::to_string(rev.size()) + " on " + who(ranks, plan, ref) + "; the first unmatched is " +
            what(r_more, first) + " #" + std::to_string(plan.events[size_t(r_more)][size_t(first)].order) + " of rank " +
            std::to_string(plan.global_rank[size_t(r_more)]));
    }
}

// The waits and slacks of each instance on a checked channel: every participant but a send
// waits for every other, each absorbing how much earlier than the last it arrived.
void add_waits(const std::vector<RankTrace>& ranks, JobPlan& plan, const Channel& ch) {
    auto arrived = [&](int m, size_t k) {
        const CrossEvent& e = plan.events[size_t(m)][size_t(ch.list(m)[k])];
        return ranks[size_t(m)].prepared->kstart[size_t(e.seq)] + plan.origin[size_t(m)];
    };
    for (size_t k = 0; k < ch.list(ch.parts.front()).size(); ++k) {
        int64_t last = INT64_MIN;
        for (int m : ch.parts) last = std::max(last, arrived(m, k));
        for (int m : ch.parts) {
            const int32_t em = ch.list(m)[k];
            if (plan.events[size_t(m)][size_t(em)].role == CrossRole::Send) continue;   // a send waits for nobody
            for (int p : ch.parts)
                if (p != m) plan.waits[size_t(m)][size_t(em)].push_back({p, ch.list(p)[k], last - arrived(p, k)});
        }
    }
}

// Stage 4: matching, per communicator and channel.
void match(const std::vector<RankTrace>& ranks, const std::map<int, int>& by_global,
           const std::vector<std::vector<int>>& comm_inputs, JobPlan& plan) {
    plan.waits.resize(ranks.size());
    for (size_t r = 0; r < ranks.size(); ++r) plan.waits[r].resize(plan.events[r].size());
    const std::vector<Channels> chans = channels_of(ranks, plan, comm_inputs);
    for (size_t c = 0; c < plan.comm_names.size(); ++c)
        for (const auto& [key, per_rank] : chans[c]) {
            Channel ch{plan.comm_names[c], key, per_rank, comm_inputs[c]};   // collectives, send-receives: every member
            const size_t arrow = key.find('>');
            if (arrow != std::string::npos)
                ch.parts = {by_global.at(std::stoi(key.substr(0, arrow))), by_global.at(std::stoi(key.substr(arrow + 1)))};
            check_channel(ranks, plan, ch);
            add_waits(ranks, plan, ch);
        }
}

// Stage 5: the recorded order must let every rank get through (a consistent recording does):
// walk the ranks' cross-event starts and ends in the engine's event order, an end waiting for
// the starts it depends on.
void check_deadlock(const std::vector<RankTrace>& ranks, const JobPlan& plan) {
    const size_t n = ranks.size();
    std::vector<std::vector<std::pair<bool, int32_t>>> steps(n);   // (is_end, event)
    for (size_t r = 0; r < n; ++r) {
        const Prepared& prep = *ranks[r].prepared;
        if (plan.events[r].empty()) continue;
        EventCursor cur(prep, *prep.t);
        RecordedEvent e;
        while (cur.next(e)) {
            if (e.what != Recorded::KernelStart && e.what != Recorded::KernelEnd) continue;
            int32_t g = plan.gate_of[r][size_t(e.seq)];
            if (g >= 0) steps[r].push_back({e.what == Recorded::KernelEnd, g});
        }
    }
    std::vector<size_t> pos(n, 0);
    std::vector<std::vector<uint8_t>> started(n);
    for (size_t r = 0; r < n; ++r) started[r].assign(plan.events[r].size(), 0);
    auto waits_for = [&](size_t r, int32_t g) -> const CrossWait* {   // the first wait not started yet
        for (const CrossWait& w : plan.waits[r][size_t(g)])
            if (!started[size_t(w.rank)][size_t(w.event)]) return &w;
        return nullptr;
    };
    for (bool moved = true; moved;) {
        moved = false;
        for (size_t r = 0; r < n; ++r)
            for (auto& p = pos[r]; p < steps[r].size(); ++p, moved = true) {
                auto [is_end, g] = steps[r][p];
                if (is_end && waits_for(r, g)) break;
                if (!is_end) started[r][size_t(g)] = 1;
            }
    }
    for (size_t r = 0; r < n; ++r)
        if (pos[r] < steps[r].size()) {
            const int32_t g = steps[r][pos[r]].second;
            const CrossEvent& e = plan.events[r][size_t(g)];
            const CrossWait* w = waits_for(r, g);
            bad(who(ranks, plan, int(r)) + ": " + e.op + " #" + std::to_string(e.order) + " on communicator " +
                plan.comm_names[size_t(e.comm)] + " waits for " + (w ? who(ranks, plan, w->rank) : std::string()) +
                ", which never gets there in the recorded order (the ranks' orders deadlock)");
        }
}

}  // namespace

JobPlan plan_job(const std::vector<RankTrace>& ranks) {
    JobPlan plan;
    std::map<int, int> by_global;
    read_ranks(ranks, plan, by_global);
    FoundEvents found = find_events(ranks, plan);
    const std::vector<std::vector<int>> comm_inputs = build_communicators(ranks, found, by_global, plan);
    match(ranks, by_global, comm_inputs, plan);
    check_deadlock(ranks, plan);
    return plan;
}

namespace {

template <class Policy>
class Runner final : public RankRunner {
public:
    Runner(const Prepared& p, const Config& c, const JobPlan& plan, int rank, int64_t cap, int64_t host_cap,
           Result&& r)
        : result(std::move(r)), config(c), engine(p, config, result, cap, host_cap) {
        engine.begin(&plan.gate_of[size_t(rank)], plan.events[size_t(rank)].size());
    }
    int32_t advance() override { return engine.advance(); }
    void release(int64_t delay) override { engine.release(delay); }
    int64_t arrival(int32_t g) const override { return engine.arrival(g); }
    void halt() override { engine.halt(); }
    bool oom() const override { return engine.oom_happened(); }
    Result finish() override {
        engine.finish();
        return std::move(result);
    }

private:
    Result result;
    Config config;
    Engine<Policy> engine;   // holds references to the two above, declared after them
};

}  // namespace

std::unique_ptr<RankRunner> make_runner(const Prepared& p, const Config& c, const JobPlan& plan, int rank) {
    validate(c);
    int64_t cap = 0, host_cap = 0;
    Result r = start_result(p, c, cap, host_cap);
    return with_eviction_policy(parse_eviction(c.eviction), [&]<class Policy>(std::type_identity<Policy>) {
        return std::unique_ptr<RankRunner>(std::make_unique<Runner<Policy>>(p, c, plan, rank, cap, host_cap, std::move(r)));
    });
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
    // Sized by a first pass: a line holds a kernel's name and a trace's path, which real traces
    // make longer than any fixed buffer (a 512-byte one cut the out-of-memory line of a Kineto
    // trace's templated kernel, newline included).
    va_list ap;
    va_start(ap, f);
    va_list again;
    va_copy(again, ap);
    const int length = std::vsnprintf(nullptr, 0, f, ap);
    va_end(ap);
    std::string out(length > 0 ? static_cast<size_t>(length) : 0, '\0');
    if (length > 0) std::vsnprintf(out.data(), out.size() + 1, f, again);
    va_end(again);
    return out;
}
}  // namespace

namespace {
// A rank that ran out of memory, or stopped waiting for one, did not finish: no loss (as for
// one rank, docs/simulator.md "What the output says"); neither has a job with such a rank.
bool finished(const CoupledResult& c, size_t r) { return !c.ranks[r].oom.happened && !c.stopped[r]; }
}  // namespace

namespace {
// A rank a row, under the names `mhc simulate` and sweep give the figures (throughput loss, stall
// time), a rank that stopped waiting says STOPPED where its loss would be.
std::string ranks_table(const CoupledResult& c, int width) {
    TextTable table({{{"rank"}, true, true},
                     {{"capacity"}},
                     {{"baseline", "peak"}},
                     {{"peak"}},
                     {{"throughput", "loss"}},
                     {{"stall", "time"}},
                     {{"stalls"}},
                     {{"wait", "time"}},
                     {{"waits"}},
                     {{"trace"}, true}});
    for (size_t r = 0; r < c.ranks.size(); ++r) {
        const Result& x = c.ranks[r];
        const std::string loss = x.oom.happened ? "OOM"
                                 : c.stopped[r] ? "STOPPED"
                                                : fmt("%.2f%%", x.throughput_loss * 100);
        // the device each rank simulated when not GPU 0, as mhc info names a run's ("Inputs")
        const std::string trace = x.device == 0 ? c.paths[r] : c.paths[r] + " (" + trace::device_name(x.device) + ")";
        table.add_row({std::to_string(c.global_rank[r]),
                       x.capacity >= kUnlimited ? "unlimited" : format_bytes(x.capacity), format_bytes(x.baseline_peak),
                       format_bytes(x.simulated_peak), loss, format_ns(x.stall_time), std::to_string(x.stall_count),
                       format_ns(x.coupled_wait_time), std::to_string(x.coupled_wait_count), trace});
    }
    return table.render(width);
}
}   // namespace

// Within `width` columns (0: no limit; a narrower terminal gets the ranks' figures in blocks, the
// rank in each): the columns and notes of `mhc sweep` (peaks, loss "OOM", the estimate note).
std::string to_text(const CoupledResult& c, int width) {
    std::string s;
    const Result& first = c.ranks.front();
    s += "coupled run    " + run_name(first.config) + " on " + std::to_string(c.ranks.size()) + " ranks, " +
         std::to_string(c.cross_events) + " cross-rank kernels\n";
    s += ranks_table(c, width);
    std::string stopped;
    for (size_t r = 0; r < c.ranks.size(); ++r)
        if (c.stopped[r]) stopped += (stopped.empty() ? "" : ", ") + std::to_string(c.global_rank[r]);
    int64_t stalls = 0, waits = 0;
    for (const Result& x : c.ranks) { stalls += x.stall_time; waits += x.coupled_wait_time; }
    s += fmt("job            peak %s (baseline %s: the largest rank's)\n", format_bytes(c.job_peak).c_str(),
             format_bytes(c.job_baseline_peak).c_str());
    if (c.oom >= 0)
        s += fmt("               stopped by an OOM after %s of simulated time (no loss: it did not finish)\n",
                 format_ns(c.job_simulated_makespan).c_str());
    else
        s += fmt("               makespan recorded %s -> simulated %s (throughput loss %.2f%%)\n",
                 format_ns(c.job_baseline_makespan).c_str(), format_ns(c.job_simulated_makespan).c_str(),
                 c.job_loss * 100);
    s += fmt("               stall time %s, wait time %s (all ranks)\n", format_ns(stalls).c_str(),
             format_ns(waits).c_str());
    if (c.limiting >= 0)
        s += fmt("limiting rank  %d (%s of its own stalls; rank %d finishes last)\n",
                 c.global_rank[static_cast<size_t>(c.limiting)],
                 format_ns(c.ranks[static_cast<size_t>(c.limiting)].stall_time).c_str(),
                 c.global_rank[static_cast<size_t>(c.last)]);
    else
        s += fmt("limiting rank  none (no rank stalls; rank %d finishes last)\n",
                 c.global_rank[static_cast<size_t>(c.last)]);
    if (c.oom >= 0)
        s += fmt("out of memory  rank %d: %s: %s\n", c.global_rank[static_cast<size_t>(c.oom)],
                 c.ranks[static_cast<size_t>(c.oom)].oom.where.c_str(), c.ranks[static_cast<size_t>(c.oom)].oom.why.c_str());
    if (!stopped.empty())
        s += "stopped        rank" + std::string(stopped.find(',') == std::string::npos ? " " : "s ") + stopped +
             (c.oom >= 0 ? fmt(": waited for rank %d, out of memory", c.global_rank[static_cast<size_t>(c.oom)])
                         : std::string(": waited for a rank that failed")) + "\n";
    s += std::string("peaks: ") + peak_meaning(parse_allocator(first.config.allocator)) + "\n";
    std::string notes =
        "baseline peak: a rank's peak without a limit; stall time: waiting for its own swaps or "
        "recomputations\n"
        "wait time: waiting at a cross-rank kernel for a later rank (the stalls of others, passed on)\n";
    if (!first.order_only) notes += std::string("throughput loss, times: ") + kEstimateNote + "\n";
    // Each note within the width (100 columns for a file), its lines after the first indented.
    std::istringstream lines(notes);
    for (std::string note; std::getline(lines, note);) s += wrap(note, width > 0 ? width : 100, 2);
    return s;
}

std::string to_json(const CoupledResult& c) {
    auto loss = [](bool known, double v) { return known ? fmt("%.17g", v) : std::string("null"); };
    std::string s = "{\"ranks\":[";
    for (size_t r = 0; r < c.ranks.size(); ++r) {
        const Result& x = c.ranks[r];
        s += fmt("%s{\"rank\":%d,\"trace\":%s,\"device\":%d,\"capacity\":%lld,\"baseline_peak\":%lld,\"simulated_peak\":%lld,"
                 "\"baseline_makespan\":%lld,\"simulated_makespan\":%lld,\"throughput_loss\":%s,"
                 "\"stall_time\":%lld,\"stall_count\":%lld,\"coupled_wait_time\":%lld,\"coupled_wait_count\":%lld,"
                 "\"oom\":%s,\"stopped\":%s}",
                 r ? "," : "", c.global_rank[r], json_string(c.paths[r]).c_str(), x.device,
                 // unlimited reads -1, as the stored capacity_bytes
                 x.capacity >= kUnlimited ? -1LL : static_cast<long long>(x.capacity),
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
