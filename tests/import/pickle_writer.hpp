#pragma once
// A small pickle writer (protocol 2 opcodes: dict, list, tuple, str, int, bool, float, None) for tests that
// build PyTorch memory snapshots by hand: Py::dict({{"action", "alloc"}, {"size", 512}}).
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace test {

struct Py {
    enum Kind { Int, Str, Bool, Float, List, Tuple, Dict, None } kind = Int;
    int64_t i = 0;
    double f = 0;
    std::string s;
    std::vector<Py> items;                          // List, Tuple
    std::vector<std::pair<std::string, Py>> kv;     // Dict

    Py(int v) : kind(Int), i(v) {}
    Py(int64_t v) : kind(Int), i(v) {}
    Py(long long v) : kind(Int), i(static_cast<int64_t>(v)) {}
    Py(double v) : kind(Float), f(v) {}
    Py(const char* v) : kind(Str), s(v) {}
    Py(std::string v) : kind(Str), s(std::move(v)) {}
    static Py boolean(bool b) { Py p(0); p.kind = Bool; p.i = b; return p; }
    static Py none() {
        Py value(0);
        value.kind = None;
        return value;
    }
    static Py list(std::vector<Py> v) { Py p(0); p.kind = List; p.items = std::move(v); return p; }
    static Py tuple(std::vector<Py> values) {
        Py value(0);
        value.kind = Tuple;
        value.items = std::move(values);
        return value;
    }
    // A memory pool's id as PyTorch pickles it (segment_pool_id, a trace entry's pool_id): (first, second).
    static Py pool(int64_t first, int64_t second) { return tuple({Py(first), Py(second)}); }
    static Py dict(std::vector<std::pair<std::string, Py>> v) { Py p(0); p.kind = Dict; p.kv = std::move(v); return p; }

    void write(std::string& o) const {
        switch (kind) {
            case Int: {   // LONG1: little-endian two's complement, 8 bytes
                o += '\x8a';
                o += '\x08';
                for (int k = 0; k < 8; ++k) o += static_cast<char>((static_cast<uint64_t>(i) >> (8 * k)) & 0xff);
                break;
            }
            case Bool: o += i ? '\x88' : '\x89'; break;
            case None: o += 'N'; break;
            case Float: {
                uint64_t bits;
                std::memcpy(&bits, &f, sizeof bits);
                o += 'G';
                for (int k = 7; k >= 0; --k) o += static_cast<char>((bits >> (8 * k)) & 0xff);
                break;
            }
            case Str: {
                o += 'X';
                auto n = static_cast<uint32_t>(s.size());
                for (int k = 0; k < 4; ++k) o += static_cast<char>((n >> (8 * k)) & 0xff);
                o += s;
                break;
            }
            case List:
                o += ']';
                if (items.empty()) break;
                o += '(';
                for (const auto& x : items) x.write(o);
                o += 'e';
                break;
            case Tuple:   // MARK items TUPLE
                o += '(';
                for (const auto& item : items) item.write(o);
                o += 't';
                break;
            case Dict:
                o += '}';
                if (kv.empty()) break;
                o += '(';
                for (const auto& [k, v] : kv) {
                    Py(k).write(o);
                    v.write(o);
                }
                o += 'u';
                break;
        }
    }
    std::string pickle() const {
        std::string o = "\x80\x02";
        write(o);
        return o + '.';
    }
};

// One trace entry of a snapshot.
inline Py event(const char* action, int64_t addr, int64_t size, int64_t stream = 0, double time_us = -1) {
    std::vector<std::pair<std::string, Py>> kv{{"action", action}, {"addr", addr}, {"size", size}, {"stream", stream}};
    if (time_us >= 0) kv.push_back({"time_us", time_us});
    return Py::dict(std::move(kv));
}

// One trace entry as torch 2.15 writes it: with the pool it acts in (pool_id; (0, 0) the default pool).
inline Py pool_event(const char* action, int64_t addr, int64_t size, int64_t pool_second, double time_us,
                     int64_t pool_first = 0) {
    Py entry = event(action, addr, size, 0, time_us);
    entry.kv.emplace_back("pool_id", Py::pool(pool_first, pool_second));
    return entry;
}

// A block of an end-state segment: live (active_allocated, its request its size) or free.
inline Py snapshot_block(int64_t addr, int64_t bytes, bool live) {
    return Py::dict({{"address", addr},
                     {"size", bytes},
                     {"requested_size", live ? bytes : 0},
                     {"state", live ? "active_allocated" : "inactive"},
                     {"frames", Py::list({})}});
}

// An end-state segment of the default pool (device 0, stream 0, large, not expandable).
inline Py snapshot_segment(int64_t addr, int64_t bytes, std::vector<Py> blocks) {
    return Py::dict({{"device", 0},
                     {"address", addr},
                     {"total_size", bytes},
                     {"stream", 0},
                     {"segment_type", "large"},
                     {"segment_pool_id", Py::pool(0, 0)},
                     {"is_expandable", Py::boolean(false)},
                     {"blocks", Py::list(std::move(blocks))}});
}

}  // namespace test
