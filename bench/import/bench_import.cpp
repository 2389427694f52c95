// mhc_bench_import [EVENTS] [DIR] [REPS]: writes a synthetic PyTorch memory snapshot pickle and a
// synthetic Kineto JSON (plain and gzip) of about EVENTS events each (default 2,000,000), then
// times import_file on each (REPS times, default 3) and prints events and input MB per second of
// CPU time (user + sys of every thread, median run) and of wall time. The Kineto JSON, plain and
// gzip, is imported with its parse on one thread and on two (plain: each parses one half; gzip:
// one inflates, one parses), where the library has the option; a build without it parses on one
// either way. Inputs are made here, so the figures can be
// reproduced on any machine.
//
// mhc_bench_import time FILE OUT [REPS] [THREADS]: times the import of FILE into OUT as above (THREADS
// 1 or 2; 0, the default, leaves the library's choice), one line; bench/import/compare.sh runs it
// on a base build and this tree in turn, input by input.
//
// mhc_bench_import memory [EVENTS] [DIR]: memory instead of speed (docs/results.md, "Import memory"). Snapshot, Kineto and
// execution-trace inputs of EVENTS and 4 x EVENTS events (default 250,000; 0: none), plain and gzip, plus a
// 1 MB gzip bomb; each is imported in a fresh process (this program, re-run), which reports its
// peak RSS (VmHWM of its own address space: wait4's ru_maxrss would include the parent's peak,
// which exec carries over); printed less the peak of a process that imports a one-event trace,
// per input event. Proportional memory shows as the same bytes per event at both sizes.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "mhc/bench/args.hpp"
#include "mhc/bench/load.hpp"
#include "mhc/trace/import/import.hpp"

namespace {

// ---- a protocol-4 pickle writer for the subset snapshots use ----
// Like CPython: every str/dict/list is memoized; a string object seen before (dict keys,
// repeated file names) is written as a BINGET/LONG_BINGET of its memo slot.
struct P {
    std::string b;
    uint32_t memo = 0;
    std::unordered_map<std::string, uint32_t> seen;
    void op(uint8_t o) { b += static_cast<char>(o); }   // an opcode or a raw byte
    void memoize() { op(0x94); ++memo; }
    void str(const std::string& s) {
        auto it = seen.find(s);
        if (it != seen.end()) {
            if (it->second < 256) { op('h'); op(static_cast<uint8_t>(it->second)); }
            else { op('j'); uint32_t n = it->second; b.append(reinterpret_cast<char*>(&n), 4); }
            return;
        }
        if (s.size() < 256) { op(0x8c); op(static_cast<uint8_t>(s.size())); }
        else { op('X'); uint32_t n = static_cast<uint32_t>(s.size()); b.append(reinterpret_cast<char*>(&n), 4); }
        b += s;
        seen.emplace(s, memo);
        memoize();
    }
    void integer(int64_t v) {
        if (v >= 0 && v < 256) { op('K'); op(static_cast<uint8_t>(v)); }
        else if (v >= INT32_MIN && v <= INT32_MAX) { op('J'); int32_t x = static_cast<int32_t>(v); b.append(reinterpret_cast<char*>(&x), 4); }
        else { op(0x8a); op(8); b.append(reinterpret_cast<char*>(&v), 8); }
    }
};

void make_snapshot(const std::string& path, int64_t events) {
    P p;
    p.op(0x80); p.op(4);
    p.op('}'); p.memoize(); p.op('(');
    p.str("segments"); p.op(']'); p.memoize();
    p.str("device_traces"); p.op(']'); p.memoize(); p.op(']'); p.memoize(); p.op('(');
    std::mt19937_64 rng(1);
    std::vector<int64_t> live;
    int64_t t = 1700000000000000, n = 0, next_addr = 0x7f0000000000;
    auto frames = [&](int line) {
        p.op(']'); p.memoize(); p.op('(');
        for (int f = 0; f < 3; ++f) {
            p.op('}'); p.memoize(); p.op('(');
            p.str("name"); p.str(f == 0 ? "forward" : "_call_impl");
            p.str("filename"); p.str(f == 0 ? "/home/u/model.py" : "/usr/lib/python3/site-packages/torch/nn/module.py");
            p.str("line"); p.integer(line + f);
            p.op('u');
        }
        p.op('e');
    };
    auto event = [&](const char* action, int64_t addr, int64_t size) {
        p.op('}'); p.memoize(); p.op('(');
        p.str("action"); p.str(action);
        p.str("addr"); p.integer(addr);
        p.str("size"); p.integer(size);
        p.str("stream"); p.integer(0);
        p.str("time_us"); p.integer(t);
        p.str("frames"); frames(static_cast<int>(n % 500));
        p.op('u');
        ++n;
        t += 1 + static_cast<int64_t>(rng() % 5);
        if (n % 1000 == 0) { p.op('e'); p.op('('); }   // APPENDS in batches, as CPython
    };
    while (n < events) {
        if (live.size() < 200 || (rng() % 2 && live.size() < 5000)) {
            int64_t size = 512 * (1 + static_cast<int64_t>(rng() % 4096));
            next_addr += 1 << 22;
            live.push_back(next_addr);
            event("alloc", next_addr, size);
        } else {
            size_t i = rng() % live.size();
            std::swap(live[i], live.back());
            event("free_requested", live.back(), 512);
            event("free_completed", live.back(), 512);
            live.pop_back();
        }
    }
    p.op('e'); p.op('a');   // close the device list and append it to device_traces
    p.op('u'); p.op('.');
    std::ofstream(path, std::ios::binary).write(p.b.data(), static_cast<std::streamsize>(p.b.size()));
}

void make_kineto(const std::string& path, int64_t events) {
    std::string s = "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"Synthetic GPU\", "
                    "\"totalGlobalMem\": 85899345920}], \"traceEvents\": [\n";
    std::mt19937_64 rng(2);
    double ts = 5116365092788.754;
    std::vector<std::pair<int64_t, int64_t>> live;   // (address, bytes)
    int64_t addr = 0x7f0000000000, total = 0;
    char buf[1024];
    for (int64_t i = 0; i < events; ++i) {
        int kind = static_cast<int>(i % 4);
        int n = 0;
        if (kind == 0) {
            n = std::snprintf(buf, sizeof buf,
                "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::addmm\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, \"dur\": 3.5, "
                "\"args\": {\"External id\": %lld, \"Record function id\": %lld, \"Input Dims\": [[16, 32], [64, 32], [64]]}}",
                ts, static_cast<long long>(i), static_cast<long long>(i));
        } else if (kind == 1) {
            n = std::snprintf(buf, sizeof buf,
                "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, "
                "\"dur\": 1.2, \"args\": {\"External id\": %lld, \"correlation\": %lld}}",
                ts + 0.5, static_cast<long long>(i), static_cast<long long>(i));
        } else if (kind == 2) {
            n = std::snprintf(buf, sizeof buf,
                "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ampere_sgemm_128x64_tn\", \"pid\": 0, \"tid\": 7, \"ts\": %.3f, "
                "\"dur\": 2.0, \"args\": {\"External id\": %lld, \"device\": 0, \"stream\": 7, \"correlation\": %lld, "
                "\"registers per thread\": 128, \"shared memory\": 32768, \"grid\": [64, 2, 1], \"block\": [256, 1, 1]}}",
                ts + 1.0, static_cast<long long>(i - 1), static_cast<long long>(i - 1));
        } else {
            bool alloc = live.size() < 100 || (rng() % 2 && live.size() < 5000);
            int64_t a, b;
            // A free names its block's size, as the allocator reports it.
            if (alloc) { addr += 1 << 20; a = addr; b = 512 * (1 + static_cast<int64_t>(rng() % 1000)); live.push_back({a, b}); }
            else { size_t k = rng() % live.size(); std::swap(live[k], live.back()); a = live.back().first; b = -live.back().second; live.pop_back(); }
            total += b;
            n = std::snprintf(buf, sizeof buf,
                "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, "
                "\"ts\": %.3f, \"args\": {\"Total Reserved\": 0, \"Total Allocated\": %lld, \"Bytes\": %lld, \"Device Id\": 0, "
                "\"Device Type\": 1, \"Addr\": %lld}}",
                ts + 0.2, static_cast<long long>(total), static_cast<long long>(b), static_cast<long long>(a));
            ts += 4.0;
        }
        s.append(buf, static_cast<size_t>(n));
        s += i + 1 < events ? ",\n" : "\n";
    }
    s += "]}\n";
    std::ofstream(path, std::ios::binary).write(s.data(), static_cast<std::streamsize>(s.size()));
    gzFile g = gzopen((path + ".gz").c_str(), "wb6");
    gzwrite(g, s.data(), static_cast<unsigned>(s.size()));
    gzclose(g);
}

// An execution trace (1.0.x schema): one root node, then ops with two input and one output tensor.
void make_et(const std::string& path, int64_t events) {
    std::string s = "{\"schema\": \"1.0.1\", \"pid\": 1, \"nodes\": [\n"
                    "{\"id\": 1, \"name\": \"[pytorch|profiler|execution_trace|thread]\", \"parent\": 1, \"tid\": 1}";
    char buf[1024];
    for (int64_t i = 2; i <= events; ++i) {
        long long st = 1 + i % 5000, a = 1 + (i * 7) % 5000, o = 1 + (i * 13) % 5000;
        int n = std::snprintf(buf, sizeof buf,
            ",\n{\"id\": %lld, \"name\": \"aten::addmm\", \"parent\": 1, \"rf_id\": %lld, \"tid\": 1, "
            "\"inputs\": [[%lld, %lld, 0, 4096, 4, \"cuda:0\"], [%lld, %lld, 0, 1024, 4, \"cuda:0\"], 1.0], "
            "\"input_shapes\": [[64, 64], [1024], []], \"input_types\": [\"Tensor(float)\", \"Tensor(float)\", \"Scalar\"], "
            "\"outputs\": [[%lld, %lld, 0, 4096, 4, \"cuda:0\"]], \"output_shapes\": [[64, 64]], \"output_types\": [\"Tensor(float)\"]}",
            static_cast<long long>(i), static_cast<long long>(i), st, st, a, a, o, o);
        s.append(buf, static_cast<size_t>(n));
    }
    s += "\n]}\n";
    std::ofstream(path, std::ios::binary).write(s.data(), static_cast<std::streamsize>(s.size()));
}

void gzip_file(const std::string& in, const std::string& out) {
    std::ifstream f(in, std::ios::binary);
    gzFile g = gzopen(out.c_str(), "wb6");
    std::vector<char> buf(1 << 20);
    while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0)
        gzwrite(g, buf.data(), static_cast<unsigned>(f.gcount()));
    gzclose(g);
}

// VmHWM of this process, bytes.
int64_t vm_hwm() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    return -1;
}

// Peak RSS (bytes) of `self --import-one IN OUT RESULT` and its exit status.
std::pair<int64_t, int> peak_rss(const std::string& self, const std::string& in, const std::string& out) {
    std::string result = out + ".rss";
    std::vector<std::string> args = {self, "--import-one", in, out, result};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return {-1, -1};
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    std::filesystem::remove(out);
    int64_t peak = -1;
    std::ifstream(result) >> peak;
    std::filesystem::remove(result);
    return {peak, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

int memory_bench(const std::string& self, int64_t events, const std::string& dir) {
    std::string out = dir + "/bench-mem-out.db";
    std::string tiny = dir + "/bench-mem-tiny.json";
    std::ofstream(tiny) << "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 1, "
                           "\"args\": {\"device\": 0, \"stream\": 7}}]}\n";
    int64_t base = peak_rss(self, tiny, out).first;
    std::printf("peak RSS of a process importing a one-event trace (subtracted below): %.1f MiB\n"
                "%-26s %9s %10s %10s %12s %s\n", static_cast<double>(base) / (1 << 20), "input", "events", "file MB",
                "peak MiB", "bytes/event", "");
    std::vector<std::string> made = {tiny};
    for (int64_t n : {events, 4 * events}) {
        if (n <= 0) continue;   // EVENTS 0: the bomb alone
        std::string tag = std::to_string(n);
        std::string snap = dir + "/bench-mem-" + tag + ".pickle", kin = dir + "/bench-mem-" + tag + ".json",
                    et = dir + "/bench-mem-et-" + tag + ".json";
        make_snapshot(snap, n);
        make_kineto(kin, n);   // also writes kin + ".gz"
        make_et(et, n);
        gzip_file(snap, snap + ".gz");
        gzip_file(et, et + ".gz");
        for (auto& [label, in] : std::vector<std::pair<std::string, std::string>>{
                 {"snapshot (pickle)", snap}, {"snapshot (pickle.gz)", snap + ".gz"}, {"kineto (json)", kin},
                 {"kineto (json.gz)", kin + ".gz"}, {"execution trace (json)", et}, {"execution trace (json.gz)", et + ".gz"}}) {
            auto [peak, rc] = peak_rss(self, in, out);
            std::printf("%-26s %9lld %10.1f %10.1f %12.0f %s\n", label.c_str(), static_cast<long long>(n),
                        static_cast<double>(std::filesystem::file_size(in)) / 1e6, static_cast<double>(peak) / (1 << 20),
                        static_cast<double>(peak - base) / static_cast<double>(n), rc == 0 ? "" : "(import failed)");
            std::fflush(stdout);
            made.push_back(in);
        }
    }
    // ~1 MB of gzip that expands to ~1.1 GiB: one node with a ~1.1 GiB name. Refused once the
    // default --max-input-size (256 MiB) is decompressed.
    std::string bomb = dir + "/bench-mem-bomb.json.gz";
    {
        gzFile g = gzopen(bomb.c_str(), "wb9");
        std::string head = "{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 1, \"name\": \"", chunk(1 << 20, 'a');
        gzwrite(g, head.data(), static_cast<unsigned>(head.size()));
        for (int i = 0; i < 1100; ++i) gzwrite(g, chunk.data(), static_cast<unsigned>(chunk.size()));
        gzwrite(g, "\"}]}", 4);
        gzclose(g);
    }
    auto [peak, rc] = peak_rss(self, bomb, out);
    std::printf("%-26s %9s %10.1f %10.1f %12s exit %d (expands to 1100 MiB: refused past the 256 MiB default)\n",
                "gzip bomb (et json.gz)", "1", static_cast<double>(std::filesystem::file_size(bomb)) / 1e6,
                static_cast<double>(peak) / (1 << 20), "-", rc);
    made.push_back(bomb);
    if (!std::getenv("MHC_BENCH_KEEP"))
        for (auto& f : made) std::filesystem::remove(f);
    return 0;
}

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

using mhc::bench::loadavg;

// Options::parse_threads (1 or 2) where the library has it; nothing otherwise (0 leaves the default).
template <class Options>
void set_parse_threads(Options& opt, int threads) {
    if constexpr (requires { opt.parse_threads; })
        if (threads > 0) opt.parse_threads = static_cast<decltype(opt.parse_threads)>(threads);
}

// Imports `in` `reps` times and prints the median run. CPU time is user + sys of this process
// (getrusage, every thread): on a shared machine the wall clock also counts waiting for a core.
void time_import(const std::string& label, const std::string& in, const std::string& out, int reps, int threads = 0) {
    mhc::trace::import::Options opt;
    opt.warn = false;
    set_parse_threads(opt, threads);
    struct Run {
        double wall, user, sys;
        double cpu() const { return user + sys; }
    };
    std::vector<Run> runs;
    mhc::trace::import::Result r;
    for (int i = 0; i < reps; ++i) {
        rusage u0{}, u1{};
        getrusage(RUSAGE_SELF, &u0);
        auto t0 = std::chrono::steady_clock::now();
        r = mhc::trace::import::import_file(in, out, opt);
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        getrusage(RUSAGE_SELF, &u1);
        runs.push_back({wall, seconds(u1.ru_utime) - seconds(u0.ru_utime), seconds(u1.ru_stime) - seconds(u0.ru_stime)});
        std::filesystem::remove(out);
    }
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.cpu() < b.cpu(); });
    const Run& m = runs[runs.size() / 2];
    const Run& best = runs.front();
    double ev = static_cast<double>(r.events), mb = static_cast<double>(std::filesystem::file_size(in)) / 1e6;
    std::printf("%-26s %8lld events %6.1f MB | median of %d: cpu %6.3f s (user %6.3f + sys %6.3f) = %5.2f M ev/s "
                "%4.0f MB/s, wall %6.3f s = %5.2f M ev/s %4.0f MB/s | best cpu %6.3f s = %5.2f M ev/s | %lld rows "
                "(%lld allocations, %lld kernels) | load %s\n",
                label.c_str(), static_cast<long long>(r.events), mb, reps, m.cpu(), m.user, m.sys, ev / m.cpu() / 1e6,
                mb / m.cpu(), m.wall, ev / m.wall / 1e6, mb / m.wall, best.cpu(), ev / best.cpu() / 1e6,
                static_cast<long long>(r.allocations + r.kernels + r.copies + r.markers),
                static_cast<long long>(r.allocations), static_cast<long long>(r.kernels), loadavg().c_str());
    std::fflush(stdout);
}

}  // namespace

int run(int argc, char** argv) {
    if (argc == 5 && std::string(argv[1]) == "--import-one") {   // a child of the memory benchmark
        mhc::trace::import::Options opt;
        opt.warn = false;
        int rc = 0;
        try {
            mhc::trace::import::import_file(argv[2], argv[3], opt);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s\n", e.what());
            rc = 2;
        }
        std::ofstream(argv[4]) << vm_hwm();
        return rc;
    }
    const mhc::bench::Args args(argc, argv, "[EVENTS] [DIR] [REPS] | time FILE OUT [REPS] [THREADS] | memory [EVENTS] [DIR]");
    const std::string tmp = std::filesystem::temp_directory_path().string();
    if (args.has(0) && args.word(0) == "time") {
        args.at_most(5);
        if (!args.has(2)) args.refuse("time needs FILE and OUT");
        const int threads = static_cast<int>(args.count(4, "THREADS", 0, 0, 2));
        std::string label = std::filesystem::path(args.word(1)).filename().string();
        if (threads > 0) label += threads == 1 ? ", 1 thread" : ", 2 threads";
        time_import(label, args.word(1), args.word(2), static_cast<int>(args.count(3, "REPS", 1, 1, 1000)), threads);
        return 0;
    }
    if (args.has(0) && args.word(0) == "memory") {
        args.at_most(3);
        return memory_bench("/proc/self/exe", args.count(1, "EVENTS", 250000, 0, int64_t(1) << 40), args.text(2, tmp));
    }
    args.at_most(3);
    int64_t events = args.count(0, "EVENTS", 2000000, 1, int64_t(1) << 40);
    std::string dir = args.text(1, tmp);
    std::string snap = dir + "/bench-snapshot.pickle", kin = dir + "/bench-kineto.json";
    int reps = static_cast<int>(args.count(2, "REPS", 3, 1, 1000));
    if (!std::filesystem::is_directory(dir)) args.refuse("DIR '" + dir + "' is not a directory");
    make_snapshot(snap, events);
    make_kineto(kin, events);
    std::printf("events = input events as import_file counts them (Result::events, meta import.events): "
                "snapshot entries of device_traces; Kineto elements of traceEvents.\n"
                "Each import: parse, write the trace (SQLite), check it, rename. Load average before: %s\n",
                loadavg().c_str());
    time_import("snapshot (pickle)", snap, dir + "/bench-out.db", reps);
    time_import("kineto (json), 1 thread", kin, dir + "/bench-out.db", reps, 1);
    time_import("kineto (json), 2 threads", kin, dir + "/bench-out.db", reps, 2);
    time_import("kineto (json.gz), 1 thread", kin + ".gz", dir + "/bench-out.db", reps, 1);
    time_import("kineto (json.gz), 2 threads", kin + ".gz", dir + "/bench-out.db", reps, 2);
    if (!std::getenv("MHC_BENCH_KEEP"))   // keep the inputs for profiling
        for (auto& f : {snap, kin, kin + ".gz"}) std::filesystem::remove(f);
    return 0;
}

int main(int argc, char** argv) {
    return mhc::bench::guarded("mhc_bench_import", [&] { return run(argc, argv); });
}
