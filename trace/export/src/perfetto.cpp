// Chrome trace JSON for ui.perfetto.dev: one process per device (kernels per stream as
// threads, copies on their own tracks), a process for markers, counter tracks of live
// allocated bytes per device, and with a run: its kernels at simulated times, its events
// (swaps, evictions, stalls, ...) per kind and its memory samples.
#include <algorithm>
#include <map>
#include <set>

#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/export/export.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "output.hpp"

namespace mhc::trace::exporter {

namespace {

constexpr int64_t kMarkerPid = 1;
constexpr int64_t kDevicePid = 100;    // + device (host, device -1, is 99)
constexpr int64_t kRunPid = 10000;     // + device: simulated kernels
constexpr int64_t kRunEventsPid = 20000;
constexpr int64_t kCopyTid = 1000000;  // + copy kind: copy tracks

class Json {
public:
    explicit Json(Output& o) : out_(o) {}
    // Starts one event object; fields are appended by the caller, then end().
    std::string& begin() {
        s_.clear();
        s_ += first_ ? "\n{" : ",\n{";
        first_ = false;
        ++count_;
        return s_;
    }
    void end() {
        s_ += '}';
        out_.write(s_);
    }
    int64_t count() const { return count_; }

private:
    Output& out_;
    std::string s_;
    bool first_ = true;
    int64_t count_ = 0;
};

void str_field(std::string& s, const char* key, const std::string& v) {
    s += '"';
    s += key;
    s += "\":";
    append_json_string(s, v);
}

void meta_event(Json& j, const char* what, int64_t pid, int64_t tid, const std::string& name, int64_t sort) {
    std::string& s = j.begin();
    s += "\"ph\":\"M\",\"name\":\"";
    s += what;
    s += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"args\":{";
    str_field(s, "name", name);
    s += "}";
    j.end();
    if (std::string(what) == "process_name") {
        std::string& t = j.begin();
        t += "\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(pid) +
             ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(sort) + "}";
        j.end();
    }
}

void slice(Json& j, int64_t pid, int64_t tid, const std::string& name, const char* cat, int64_t t0, int64_t t1,
           const std::string& args) {
    std::string& s = j.begin();
    s += "\"ph\":\"X\",";
    str_field(s, "name", name);
    s += ",\"cat\":\"";
    s += cat;
    s += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + us(t0) +
         ",\"dur\":" + us(std::max<int64_t>(0, t1 - t0));
    if (!args.empty()) s += ",\"args\":{" + args + "}";
    j.end();
}

void counter(Json& j, int64_t pid, const std::string& name, int64_t t, const std::string& key, int64_t v) {
    std::string& s = j.begin();
    s += "\"ph\":\"C\",";
    str_field(s, "name", name);
    s += ",\"pid\":" + std::to_string(pid) + ",\"tid\":0,\"ts\":" + us(t) + ",\"args\":{\"" + key +
         "\":" + std::to_string(v) + "}";
    j.end();
}

std::string device_label(int32_t d) { return d < 0 ? std::string("host") : "GPU " + std::to_string(d); }

// The trace's string table: a name by its id ("" for an id outside it).
struct Names {
    std::vector<std::string> strings;
    const std::string& operator()(int64_t id) const {
        static const std::string empty;
        return id >= 0 && static_cast<size_t>(id) < strings.size() ? strings[id] : empty;
    }
};

// What the recorded rows put on tracks, named once they are all written.
struct Tracks {
    std::set<int32_t> devices;
    std::set<std::pair<int32_t, int64_t>> streams, copy_tracks;
    std::map<int64_t, std::pair<int32_t, int64_t>> kernel_info;   // id -> (device, name) for the run
    bool markers = false;
};

// The trace's meta table as the document's otherData.
void write_meta(Output& document, const Reader& reader) {
    std::string text;
    bool first = true;
    for (auto& [key, value] : reader.meta()) {
        text += first ? "" : ",";
        first = false;
        append_json_string(text, key);
        text += ':';
        append_json_string(text, value);
    }
    document << text;
}

// The recorded kernels per stream, copies per kind and markers per kind, as slices.
void write_recorded_slices(Json& events, Reader& reader, const Names& str, bool with_run, Tracks& tracks) {
    reader.for_each([&](const Kernel& k) {
        tracks.devices.insert(k.device);
        tracks.streams.insert({k.device, k.stream});
        std::string args = "\"id\":" + std::to_string(k.id) + ",\"step\":" + std::to_string(k.step) +
                           ",\"correlation\":" + std::to_string(k.correlation) + ",\"grid\":[" +
                           std::to_string(k.grid[0]) + "," + std::to_string(k.grid[1]) + "," + std::to_string(k.grid[2]) +
                           "],\"block\":[" + std::to_string(k.block[0]) + "," + std::to_string(k.block[1]) + "," +
                           std::to_string(k.block[2]) + "]";
        slice(events, kDevicePid + k.device, k.stream, str(k.name), "kernel", k.t_start, k.t_end, args);
        if (with_run) tracks.kernel_info[k.id] = {k.device, k.name};
    });
    reader.for_each([&](const Copy& c) {
        tracks.devices.insert(c.device);
        int64_t tid = kCopyTid + static_cast<int64_t>(c.kind);
        tracks.copy_tracks.insert({c.device, tid});
        slice(events, kDevicePid + c.device, tid, std::string(to_string(c.kind)) + " " + std::to_string(c.bytes) + " B",
              "copy", c.t_start, c.t_end, "\"id\":" + std::to_string(c.id) + ",\"bytes\":" + std::to_string(c.bytes));
    });
    reader.for_each([&](const Marker& m) {
        tracks.markers = true;
        slice(events, kMarkerPid, static_cast<int64_t>(m.kind), str(m.name), "marker", m.t_start, m.t_end,
              "\"index\":" + std::to_string(m.index));
    });
}

// Live allocated bytes per device: +bytes at t_alloc, -bytes at t_free, one sample per instant.
void write_live_bytes(Json& events, Reader& reader, std::set<int32_t>& devices) {
    std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> deltas;
    reader.for_each([&](const Allocation& a) {
        devices.insert(a.device);
        deltas[a.device].push_back({a.t_alloc, a.bytes});
        if (a.t_free != kNoTime) deltas[a.device].push_back({a.t_free, -a.bytes});
    });
    for (auto& [dev, v] : deltas) {
        std::sort(v.begin(), v.end());
        int64_t live = 0;
        for (size_t i = 0; i < v.size(); ++i) {
            live += v[i].second;
            if (i + 1 < v.size() && v[i + 1].first == v[i].first) continue;   // one sample per instant
            counter(events, kDevicePid + dev, "live bytes", v[i].first, "bytes", live);
        }
    }
}

// The names of the recorded processes (devices, markers) and threads (streams, copy kinds, marker kinds).
void write_track_names(Json& events, const Tracks& tracks) {
    for (int32_t device : tracks.devices)
        meta_event(events, "process_name", kDevicePid + device, 0, device_label(device), kDevicePid + device);
    for (auto& [d, s] : tracks.streams) meta_event(events, "thread_name", kDevicePid + d, s, "stream " + std::to_string(s), 0);
    for (auto& [d, t] : tracks.copy_tracks)
        meta_event(events, "thread_name", kDevicePid + d, t,
                   std::string("copies ") + std::string(to_string(static_cast<CopyKind>(t - kCopyTid))), 0);
    if (tracks.markers) {
        meta_event(events, "process_name", kMarkerPid, 0, "markers", kMarkerPid);
        for (int k = 0; k < 3; ++k)
            meta_event(events, "thread_name", kMarkerPid, k, std::string(to_string(static_cast<MarkerKind>(k))), 0);
    }
}

// A run: its kernels at simulated times per device, its events per kind and its memory samples.
void write_run(Json& events, const Run& run, int64_t run_id, const Tracks& tracks, const Names& str) {
    const std::string tag = "run " + std::to_string(run_id) + " (" + run.name + ")";
    std::set<int32_t> run_devices;
    for (const auto& kt : run.kernel_times) {
        auto it = tracks.kernel_info.find(kt.kernel);
        int32_t dev = it == tracks.kernel_info.end() ? 0 : it->second.first;
        run_devices.insert(dev);
        slice(events, kRunPid + dev, 0,
              it == tracks.kernel_info.end() ? "kernel " + std::to_string(kt.kernel) : str(it->second.second),
              "simulated", kt.t_start, kt.t_end, "\"kernel\":" + std::to_string(kt.kernel));
    }
    for (int32_t device : run_devices)
        meta_event(events, "process_name", kRunPid + device, 0, tag + " " + device_label(device) + " kernels",
                   kRunPid + device);
    std::set<int> kinds;
    for (const auto& event : run.events) {
        int kind = static_cast<int>(event.kind);
        kinds.insert(kind);
        slice(events, kRunEventsPid, kind, std::string(to_string(event.kind)), "run-event", event.t_start,
              event.t_end,
              "\"allocation\":" + std::to_string(event.allocation) + ",\"kernel\":" + std::to_string(event.kernel) +
                  ",\"bytes\":" + std::to_string(event.bytes));
    }
    for (const auto& sample : run.memory) {
        counter(events, kRunEventsPid, "simulated device bytes", sample.t, "bytes", sample.device_bytes);
        counter(events, kRunEventsPid, "simulated host bytes", sample.t, "bytes", sample.host_bytes);
    }
    meta_event(events, "process_name", kRunEventsPid, 0, tag + " events", kRunEventsPid);
    for (int kind : kinds)
        meta_event(events, "thread_name", kRunEventsPid, kind, std::string(to_string(static_cast<EventKind>(kind))), 0);
}

}  // namespace

int64_t export_perfetto(const std::string& trace_path, const std::string& out, const PerfettoOptions& opt) {
    refuse_input_as_output(trace_path, out);
    if (!opt.runs_db.empty()) refuse_input_as_output(opt.runs_db, out);
    Reader reader(trace_path);
    // The rows that `mhc check` refuses (a kernel ending before it starts, a free before its
    // allocation, an unknown kernel) are refused here too, naming the first: drawn, they were
    // clamped or left out, and the export said it succeeded.
    require_ok(check_trace(load_trace(trace_path)), trace_path);
    Run run;
    // Throws for an unknown id, and for a runs database of another trace.
    if (opt.run_id > 0) run = load_run(trace_path, opt.run_id, opt.runs_db);
    else if (!opt.runs_db.empty()) list_runs(trace_path, opt.runs_db);
    const Names str{reader.strings()};
    bool gz = out.size() > 3 && out.compare(out.size() - 3, 3, ".gz") == 0;
    Output document(out, gz, opt.if_exists);
    document << "{\"displayTimeUnit\":\"ns\",\"otherData\":{";
    write_meta(document, reader);
    document << "},\"traceEvents\":[";
    Json events(document);
    Tracks tracks;
    write_recorded_slices(events, reader, str, opt.run_id > 0, tracks);
    write_live_bytes(events, reader, tracks.devices);
    write_track_names(events, tracks);
    if (opt.run_id > 0) write_run(events, run, opt.run_id, tracks, str);
    document << "\n]}\n";
    document.commit();
    return events.count();
}

}  // namespace mhc::trace::exporter
