// The execution trace <-> Kineto op join (et_join.hpp says the rules).
#include "et_join.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace mhc::trace::import {

bool is_et_profiler_range(std::string_view name) { return name.rfind("[pytorch|profiler|", 0) == 0; }

namespace {

// Sequence numbers compared while aligning one thread, at most: past it the thread is left
// unjoined (only a hostile trace of endlessly repeated names comes near it).
constexpr int64_t kMaxCompared = INT64_C(1) << 27;

bool seqs_agree(int64_t et_seq, int64_t kineto_seq) { return et_seq < 0 || kineto_seq < 0 || et_seq == kineto_seq; }

// A name as PyTorch's profiler writes it into its Kineto trace, where the execution trace keeps it
// as it is: Kineto's sanitizeStrForJSON writes a backslash as '/' and drops newlines (21beef37,
// April 2023), sanitizeForNonReadableChars writes a name holding any other byte that is not
// printable ASCII as "unknown" (7ae1ce85, January 2025), and torch 2.15 writes a double quote as a
// single one (checked here: `q"x` -> `q'x`, `b\y` -> `b/y`, `caf\u00e9` and a tab -> `unknown`);
// Kineto's own escapeQuotesForJSON (eba157ad) keeps it. `quote`: the double quote's replacement.
std::string kineto_written(std::string_view name, char quote) {
    std::string out;
    for (const char ch : name) {
        if (ch == '\n') continue;
        const auto byte = static_cast<unsigned char>(ch);
        if (byte < 0x20 || byte >= 0x7f) return "unknown";
        out += ch == '\\' ? '/' : ch == '"' ? quote : ch;
    }
    return out;
}

// The names a Kineto trace may hold for an execution trace's node named `name`: itself first.
std::vector<std::string> kineto_names(std::string_view name) {
    std::vector<std::string> out{std::string(name)};
    for (const char quote : {'"', '\''}) {
        std::string written = kineto_written(name, quote);
        if (std::find(out.begin(), out.end(), written) == out.end()) out.push_back(std::move(written));
    }
    return out;
}

bool same_op_name(std::string_view kineto, std::string_view et) {
    if (kineto == et) return true;
    const std::vector<std::string> names = kineto_names(et);
    return std::find(names.begin() + 1, names.end(), kineto) != names.end();
}

// Every start of `pattern` in `text` (Knuth-Morris-Pratt: linear however repetitive both are).
std::vector<size_t> find_all(const std::vector<uint32_t>& pattern, const std::vector<uint32_t>& text) {
    std::vector<size_t> found;
    const size_t len = pattern.size();
    if (len == 0 || text.size() < len) return found;
    std::vector<size_t> border(len, 0);
    for (size_t i = 1, k = 0; i < len; ++i) {
        while (k > 0 && pattern[i] != pattern[k]) k = border[k - 1];
        if (pattern[i] == pattern[k]) ++k;
        border[i] = k;
    }
    for (size_t i = 0, k = 0; i < text.size(); ++i) {
        while (k > 0 && text[i] != pattern[k]) k = border[k - 1];
        if (text[i] == pattern[k]) ++k;
        if (k == len) {
            found.push_back(i + 1 - len);
            k = border[k - 1];
        }
    }
    return found;
}

using KinetoThreads = std::map<KinetoData::ThreadKey, std::vector<int32_t>>;

bool is_profiler_step(std::string_view name) { return name.rfind("ProfilerStep#", 0) == 0; }

// The ops of process `pid` (every process's when -1) per thread in start order: by Ev Idx (the
// profiler's own order, exact where integer-microsecond starts tie; 1.13's Profiler Event Index)
// when every op of the thread has one, else link_ops's order. Without `steps`, the profiler's
// ProfilerStep#N ranges are left out: PyTorch 1.13's ExecutionGraphObserver does not record them,
// so an execution trace of two steps never occurred in order (0 of 2066 ops joined).
KinetoThreads kineto_threads(const KinetoData& kd, int64_t pid, bool steps) {
    KinetoThreads threads;
    for (size_t i = 0; i < kd.ops.size(); ++i) {
        if (pid >= 0 && kd.ops[i].pid != pid) continue;
        if (!steps && is_profiler_step(kd.strings.list[kd.ops[i].name])) continue;
        threads[{kd.ops[i].pid, kd.ops[i].tid}].push_back(static_cast<int32_t>(i));
    }
    for (auto& [tid, ops] : threads) {
        const bool indexed = std::all_of(ops.begin(), ops.end(), [&](int32_t op) { return kd.ops[op].ev_idx >= 0; });
        if (indexed)
            std::stable_sort(ops.begin(), ops.end(),
                             [&](int32_t lhs, int32_t rhs) { return kd.ops[lhs].ev_idx < kd.ops[rhs].ev_idx; });
    }
    return threads;
}

class Joiner {
public:
    Joiner(const std::vector<EtOpRef>& nodes, const KinetoData& kd, int64_t pid) : nodes_(nodes), kd_(kd), pid_(pid) {
        j_.node_op.assign(nodes.size(), -1);
        claimed_.assign(kd.ops.size(), 0);
    }

    EtJoin run() {
        join_by_key();
        join_by_order();
        check_parents();
        return std::move(j_);
    }

private:
    std::string_view op_name(int32_t op) const { return kd_.strings.list[kd_.ops[op].name]; }

    // The execution trace's process's op (every op when the execution trace names no process):
    // another rank's op of the same name and ids is not this trace's.
    bool recorded_process(const KOp& op) const { return pid_ < 0 || op.pid == pid_; }

    static std::string thread_label(int64_t tid, size_t ops) {
        return "execution-trace thread " + std::to_string(tid) + " (" + std::to_string(ops) + " ops)";
    }

    void link(size_t node, int32_t op) {
        j_.node_op[node] = op;
        claimed_[op] = 1;
    }

    // Record function id == rf_id; ids Kineto writes twice are nobody's (0 is "no handle").
    void join_by_key() {
        std::unordered_map<int64_t, int32_t> by_rf;
        for (size_t i = 0; i < kd_.ops.size(); ++i) {
            if (kd_.ops[i].rf_id <= 0 || !recorded_process(kd_.ops[i])) continue;
            auto [it, fresh] = by_rf.emplace(kd_.ops[i].rf_id, static_cast<int32_t>(i));
            if (!fresh) it->second = -1;
        }
        if (by_rf.empty()) return;
        for (size_t n = 0; n < nodes_.size(); ++n) {
            const EtOpRef& node = nodes_[n];
            if (node.rf_id <= 0 || is_et_profiler_range(node.name)) continue;
            auto it = by_rf.find(node.rf_id);
            // An rf_id the ET repeats joins its first node only.
            if (it == by_rf.end() || it->second < 0 || claimed_[it->second]) continue;
            if (!same_op_name(op_name(it->second), node.name) || !seqs_agree(node.seq, kd_.ops[it->second].seq))
                continue;
            link(n, it->second);
            ++j_.by_key;
        }
    }

    // Threads with no node joined by the key: each aligned whole, or not at all. A Kineto trace
    // that writes the key (0 for the ops no execution trace recorded) has already said that
    // these threads' ops are not in it: order would only pair them with another iteration's.
    void join_by_order() {
        std::map<int64_t, std::vector<size_t>> threads;
        std::set<int64_t> keyed;
        for (size_t n = 0; n < nodes_.size(); ++n) {
            if (is_et_profiler_range(nodes_[n].name)) continue;
            threads[nodes_[n].tid].push_back(n);
            if (j_.node_op[n] >= 0) keyed.insert(nodes_[n].tid);
        }
        if (threads.size() == keyed.size()) return;
        const bool et_steps =
            std::any_of(nodes_.begin(), nodes_.end(), [](const EtOpRef& node) { return is_profiler_step(node.name); });
        const auto kthreads = kd_.has_rf_id ? KinetoThreads() : kineto_threads(kd_, pid_, et_steps);
        for (const auto& [tid, list] : threads) {
            if (keyed.count(tid)) continue;
            if (kd_.has_rf_id) j_.notes.push_back(thread_label(tid, list.size()) + ": not joined, " + why_no_key(list));
            else align_thread(tid, list, kthreads);
        }
    }

    // Why a thread's rf_ids are on no Kineto op. Record function ids are one counter for the whole
    // process: where the thread's overlap the ids of the ops joined on other threads, the profiler
    // was recording then, and did not record that thread (the profiler's callbacks are the thread's it
    // was started on and of those that inherit its state: a Python thread of the program is not
    // recorded unless profile_all_threads is set, while the execution trace's callbacks, global,
    // record it). Before 2026-12-03 every such thread was
    // said to be "other ops than the execution trace" (another iteration), which sent users to
    // record again for nothing.
    std::string why_no_key(const std::vector<size_t>& list) const {
        int64_t lo = INT64_MAX, hi = INT64_MIN, first = INT64_MAX, last = INT64_MIN;
        for (size_t n = 0; n < nodes_.size(); ++n) {
            if (j_.node_op[n] < 0) continue;
            lo = std::min(lo, nodes_[n].rf_id);
            hi = std::max(hi, nodes_[n].rf_id);
        }
        for (size_t node : list) {
            if (nodes_[node].rf_id <= 0) continue;
            first = std::min(first, nodes_[node].rf_id);
            last = std::max(last, nodes_[node].rf_id);
        }
        const std::string line = "no Kineto op carries one of its rf_ids as its Record function id ";
        if (first <= last && first <= hi && lo <= last)
            return line + "although the profiler recorded other threads' ops while it ran (rf_ids " +
                   std::to_string(first) + " to " + std::to_string(last) + " within " + std::to_string(lo) + " to " +
                   std::to_string(hi) +
                   "): the profiler did not record this thread (it records the thread it was "
                   "started on and those that inherit its state, such as autograd's; "
                   "experimental_config=_ExperimentalConfig(profile_all_threads=True) records every thread)";
        return line + "(the profiler recorded other ops than the execution trace)";
    }

    struct Fit {
        const std::vector<int32_t>* ops;
        size_t start;
    };

    // Where the thread's names occur in order on Kineto threads, and at which of those places
    // the autograd sequence numbers agree too (at most two: two is already ambiguous).
    struct Places {
        std::vector<Fit> by_name, fits;
        bool over_budget = false;
    };

    Places places(const std::vector<size_t>& list, const std::vector<uint32_t>& names,
                  const KinetoThreads& kthreads) const {
        Places out;
        int64_t compared = 0;
        for (const auto& [ktid, ops] : kthreads) {
            std::vector<uint32_t> text;
            text.reserve(ops.size());
            for (int32_t op : ops) text.push_back(kd_.ops[op].name);
            for (size_t start : find_all(names, text)) {
                out.by_name.push_back({&ops, start});
                size_t agreed = 0;
                while (agreed < list.size() && seqs_agree(nodes_[list[agreed]].seq, kd_.ops[ops[start + agreed]].seq))
                    ++agreed;
                compared += static_cast<int64_t>(agreed) + 1;
                if (agreed == list.size()) out.fits.push_back({&ops, start});
                if (out.fits.size() == 2) return out;
                if (compared > kMaxCompared) {
                    out.over_budget = true;
                    return out;
                }
            }
        }
        return out;
    }

    void align_thread(int64_t tid, const std::vector<size_t>& list, const KinetoThreads& kthreads) {
        const std::string thread = thread_label(tid, list.size());
        std::vector<uint32_t> names;
        for (size_t node : list) {
            auto it = kd_.strings.index.end();
            for (const std::string& name : kineto_names(nodes_[node].name))
                if (it == kd_.strings.index.end()) it = kd_.strings.index.find(name);
            if (it == kd_.strings.index.end()) {
                j_.notes.push_back(thread + ": not joined, its op '" + std::string(nodes_[node].name) + "' (node " +
                                   std::to_string(nodes_[node].id) + ") is on no Kineto thread");
                return;
            }
            names.push_back(it->second);
        }
        const Places found = places(list, names, kthreads);
        if (found.over_budget) {
            j_.notes.push_back(thread +
                               ": not joined, its names occur at too many places in the Kineto trace to check");
        } else if (found.fits.size() > 1) {
            j_.notes.push_back(thread +
                               ": not joined, it fits at more than one place in the Kineto trace "
                               "(names and autograd sequence numbers alike)");
        } else if (found.fits.empty()) {
            j_.notes.push_back(thread + ": not joined, " + why_no_fit(list, found.by_name));
        } else if (!link_fit(list, found.fits[0])) {
            j_.notes.push_back(thread + ": not joined, the Kineto ops it fits are another thread's");
        }
    }

    bool link_fit(const std::vector<size_t>& list, const Fit& fit) {
        const auto first = fit.ops->begin() + static_cast<long>(fit.start);
        if (std::any_of(first, first + static_cast<long>(list.size()), [&](int32_t op) { return claimed_[op] != 0; }))
            return false;
        for (size_t i = 0; i < list.size(); ++i) link(list[i], (*fit.ops)[fit.start + i]);
        j_.by_order += static_cast<int64_t>(list.size());
        return true;
    }

    // A place whose sequence numbers all differ by one amount is the same code in another
    // iteration: the Kineto trace did not record the execution trace's.
    std::string why_no_fit(const std::vector<size_t>& list, const std::vector<Fit>& by_name) const {
        if (by_name.empty()) return "its ops do not occur in this order on any Kineto thread";
        std::set<int64_t> offsets;
        for (size_t i = 0; i < list.size(); ++i) {
            const int64_t et_seq = nodes_[list[i]].seq,
                          kineto_seq = kd_.ops[(*by_name[0].ops)[by_name[0].start + i]].seq;
            if (et_seq >= 0 && kineto_seq >= 0) offsets.insert(kineto_seq - et_seq);
        }
        std::string where = "its ops occur in this order at " + std::to_string(by_name.size()) +
                            " place(s) in the Kineto trace, at none with the same autograd sequence numbers";
        if (offsets.size() == 1)
            where += " (at the first they all differ by " + std::to_string(*offsets.begin()) +
                     ": the Kineto trace records other iterations)";
        return where;
    }

    // A joined node's joined parent must enclose its op on Kineto's timeline.
    void check_parents() {
        for (size_t n = 0; n < nodes_.size(); ++n) {
            const int32_t op = j_.node_op[n];
            const int64_t parent = nodes_[n].parent;
            if (op < 0 || parent < 0 || j_.node_op[parent] < 0) continue;
            const KOp &child = kd_.ops[op], &above = kd_.ops[j_.node_op[parent]];
            if (child.tid != above.tid || child.pid != above.pid) {
                ++j_.parent_on_other_thread;
                continue;
            }
            int32_t up = kd_.ops[op].parent;
            for (int depth = 0; up >= 0 && up != j_.node_op[parent] && depth < 1024; ++depth) up = kd_.ops[up].parent;
            if (up != j_.node_op[parent]) ++j_.parent_disagreements;
        }
    }

    const std::vector<EtOpRef>& nodes_;
    const KinetoData& kd_;
    int64_t pid_;
    EtJoin j_;
    std::vector<char> claimed_;
};

}   // namespace

EtJoin join_et_kineto(const std::vector<EtOpRef>& nodes, const KinetoData& kd, int64_t pid) {
    return Joiner(nodes, kd, pid).run();
}

}   // namespace mhc::trace::import
