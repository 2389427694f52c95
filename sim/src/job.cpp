// Job identity of per-rank traces (job.hpp).
#include "mhc/sim/job.hpp"

#include <algorithm>
#include <map>

#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/units.hpp"
#include "prepared.hpp"

namespace mhc::sim {

namespace {

struct Ranks {
    const std::vector<RankTrace>& r;
    const std::string* meta(size_t i, const char* key) const {
        const auto& m = r[i].trace->meta;
        auto it = m.find(key);
        return it == m.end() ? nullptr : &it->second;
    }
    // "b.db (rank 1)": the rank its meta gives, else its place on the command line.
    std::string who(size_t i) const {
        const std::string* g = meta(i, kRankKey);
        return r[i].path + " (rank " + (g ? *g : std::to_string(i)) + ")";
    }
    int64_t number(size_t i, const char* key) const {
        const std::string* s = meta(i, key);
        const std::optional<int64_t> value = s ? parse_integer<int64_t>(*s) : std::nullopt;
        if (!value || *value < (std::string(key) == kTimeOriginKey ? INT64_MIN : 0))
            throw Error(who(i) + ": meta " + key + " = '" + (s ? *s : "") + "' is not " +
                        (std::string(key) == kTimeOriginKey ? "a time in ns" : "a non-negative integer"));
        return *value;
    }
};

// A key that some ranks have and others lack: traces of different sources or jobs.
void same_presence(const Ranks& k, const char* key, size_t& present) {
    present = 0;
    size_t with = 0, without = 0;
    for (size_t i = 0; i < k.r.size(); ++i) {
        if (k.meta(i, key)) { with = i; ++present; }
        else without = i;
    }
    if (present != 0 && present != k.r.size())
        throw Error(k.who(without) + ": no meta " + key + ", while " + k.who(with) + " has '" + *k.meta(with, key) +
                    "': not the ranks of one job");
}

void check_world(const Ranks& k) {
    const size_t n = k.r.size();
    const int64_t world = k.number(0, kWorldSizeKey);
    for (size_t i = 1; i < n; ++i)
        if (k.number(i, kWorldSizeKey) != world)
            throw Error(k.who(i) + ": meta world_size is " + *k.meta(i, kWorldSizeKey) + ", not " + std::to_string(world) +
                        " as " + k.who(0) + " says: not the ranks of one job");
    std::vector<int64_t> given;
    for (size_t i = 0; i < n && k.meta(i, kRankKey); ++i) {
        int64_t g = k.number(i, kRankKey);
        if (g >= world)
            throw Error(k.who(i) + ": meta rank " + std::to_string(g) + " is outside the job's world_size " +
                        std::to_string(world));
        given.push_back(g);
    }
    if (static_cast<int64_t>(n) == world) return;
    std::sort(given.begin(), given.end());
    std::string missing;
    int listed = 0;
    for (int64_t g = 0; g < world && !given.empty() && listed <= 8; ++g)
        if (!std::binary_search(given.begin(), given.end(), g) && listed++ < 8)
            missing += (missing.empty() ? "" : ", ") + std::to_string(g);
    throw Error(k.who(0) + ": meta world_size is " + std::to_string(world) + " but " + std::to_string(n) +
                " rank traces were given" + (missing.empty() ? "" : " (missing: rank " + missing + (listed > 8 ? ", …" : "") + ")") +
                ": a job is simulated whole");
}

// The ranks of a job run at the same time: on the shared clock every rank's span overlaps every
// other's. The rank that starts last must start before the rank that ends first has ended.
void check_overlap(const Ranks& k) {
    size_t late = 0, early = 0;
    __int128 begin_max = 0, end_min = 0;
    for (size_t i = 0; i < k.r.size(); ++i) {
        const __int128 o = k.number(i, kTimeOriginKey);
        const __int128 b = o + k.r[i].prepared->t_begin, e = o + k.r[i].prepared->t_end;
        if (i == 0 || b > begin_max) { begin_max = b; late = i; }
        if (i == 0 || e < end_min) { end_min = e; early = i; }
    }
    if (begin_max <= end_min) return;
    const __int128 gap = begin_max - end_min;
    throw Error(k.who(late) + ": meta time_origin_ns puts its trace " +
                format_ns(gap > INT64_MAX ? INT64_MAX : static_cast<int64_t>(gap)) + " after the end of " + k.who(early) +
                "'s: the ranks of one job run at the same time");
}

}  // namespace

std::vector<std::string> check_job_identity(const std::vector<RankTrace>& ranks) {
    std::vector<std::string> assumed;
    // One trace is checked too: one rank of a larger job is not the whole job (before 2026-12-06 it
    // was simulated alone, as a job of one).
    Ranks k{ranks};
    size_t ids = 0, worlds = 0, numbered = 0, clocks = 0;
    same_presence(k, kJobIdKey, ids);
    same_presence(k, kWorldSizeKey, worlds);
    same_presence(k, kRankKey, numbered);
    same_presence(k, kTimeOriginKey, clocks);
    for (size_t i = 1; i < ranks.size() && ids; ++i)
        if (*k.meta(i, kJobIdKey) != *k.meta(0, kJobIdKey))
            throw Error(k.who(i) + ": meta job.id is '" + *k.meta(i, kJobIdKey) + "', not '" + *k.meta(0, kJobIdKey) +
                        "' as " + k.who(0) + " says: not the ranks of one job");
    if (worlds) check_world(k);
    if (clocks) check_overlap(k);
    // One trace without the keys is a job of one: nothing to assume about coupling.
    if (ranks.size() > 1) {
        if (!ids) assumed.emplace_back("no meta job.id: the traces are taken to be the ranks of one job");
        if (!worlds)
            assumed.emplace_back("no meta world_size: the " + std::to_string(ranks.size()) +
                                 " traces are taken to be the whole job");
        if (!numbered) assumed.emplace_back("no meta rank: ranks are numbered by their order on the command line");
        if (!clocks) assumed.emplace_back("no meta time_origin_ns: every trace's time 0 is taken to be the same instant");
    }
    // Collectives that ran on the host (a gloo job; the Kineto importer's meta): no NCCL kernel
    // couples those ranks, whatever the count of cross-rank kernels shows.
    std::string host;
    for (size_t i = 0; i < ranks.size(); ++i)
        if (k.meta(i, "kineto.host_collectives") != nullptr) host += (host.empty() ? "" : ", ") + k.who(i);
    if (!host.empty())
        assumed.push_back(host + ": torch.distributed's collectives ran on the host, not as NCCL kernels (meta " +
                          "kineto.host_collectives): those ranks are not coupled at them");
    return assumed;
}

}  // namespace mhc::sim
