// A PyTorch memory snapshot's trace events decoded (snapshot_events.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mhc/common/error.hpp"
#include "limits.hpp"
#include "snapshot_events.hpp"

namespace mhc::trace::import::snapshot {

namespace {

Action action_of(std::string_view name) {
    for (size_t i = 0; i < index(Action::Unknown); ++i)
        if (name == kActionNames[i]) return static_cast<Action>(i);
    return Action::Unknown;
}

// The actions whose events allocate or free memory: their 'addr' must be there.
bool moves_memory(Action action) {
    return action != Action::Oom && action != Action::Snapshot && action != Action::Annotate &&
           action != Action::UserDefined && action != Action::Unknown;
}

// A user_defined entry's range (PyTorch wrote its context as one frame: the stage as 'name', the
// range's name as 'filename'; pytorch#124179 shows one). Refused naming the entry where it is not so.
template <class Bad> Annotation user_defined_range(const PickleDoc& doc, const Event& ev, size_t dev, const Bad& bad) {
    std::optional<Id> frame;
    if (ev.frames && doc.kind(*ev.frames) == PickleDoc::Kind::List && doc.size(*ev.frames) > 0)
        frame = doc.items(*ev.frames).front();
    if (!frame || doc.kind(*frame) != PickleDoc::Kind::Dict)
        throw bad(
            "user_defined entry without its range (frames[0] with the stage as 'name' and the range as "
            "'filename')");
    auto text = [&](const char* key) {
        auto value = doc.get(*frame, key);
        if (!value || doc.kind(*value) != PickleDoc::Kind::Str)
            throw bad(std::string("user_defined entry: frames[0]['") + key + "'] is " +
                      (value ? type_name(doc, *value) : "missing") + ", not a str");
        return std::string(doc.as_str(*value));
    };
    const std::string stage = text("name");
    if (stage != "START" && stage != "END")
        throw bad("user_defined entry: frames[0]['name'] is '" + stage + "', not START or END");
    Annotation note;
    note.name = text("filename");
    note.start = stage == "START";
    note.device = static_cast<int64_t>(dev);
    note.time_us = ev.time_us;
    return note;
}

// A trace entry's 'pool_id': a pair of ints (a tuple in the pickle, a list in JSON), else refused.
template <class Bad> PoolKey pool_field(const PickleDoc& doc, Id value, const Bad& bad) {
    const auto kind = doc.kind(value);
    if (kind == PickleDoc::Kind::Tuple || kind == PickleDoc::Kind::List) {
        const auto items = doc.items(value);
        if (items.size() == 2 && doc.kind(items[0]) == PickleDoc::Kind::Int &&
            doc.kind(items[1]) == PickleDoc::Kind::Int)
            return {doc.as_int(items[0]), doc.as_int(items[1])};
    }
    throw bad(std::string("'pool_id' is ") + type_name(doc, value) + ", not a pair of ints");
}

}  // namespace

std::vector<int64_t> event_times(const std::vector<Event>& evs, bool all_timed, double t_min) {
    std::vector<int64_t> times(evs.size());
    if (!all_timed) {
        for (size_t k = 0; k < evs.size(); ++k) times[k] = static_cast<int64_t>(k) + 1;
        return times;
    }
    for (size_t k = 0; k < evs.size(); ++k) times[k] = static_cast<int64_t>(std::floor(evs[k].time_us - t_min));
    if (std::is_sorted(times.begin(), times.end())) {
        // The allocator's order is time order (as recorded): the events of one microsecond are
        // one run, numbered within it without a table.
        for (size_t first = 0, end = 0; first < times.size(); first = end) {
            while (end < times.size() && times[end] == times[first]) ++end;
            const auto count = static_cast<int64_t>(end - first);
            for (size_t k = first; k < end; ++k) {
                const auto seen = static_cast<int64_t>(k - first);
                times[k] = times[k] * 1000 + 1 + (count <= 1000 ? seen : seen * 1000 / count);
            }
        }
        return times;
    }
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> per_us;   // us -> (events, seen so far)
    per_us.reserve(evs.size());
    for (size_t k = 0; k < evs.size(); ++k) ++per_us[times[k]].first;
    for (size_t k = 0; k < evs.size(); ++k) {
        auto& [n, seen] = per_us[times[k]];
        const int64_t offset = n <= 1000 ? seen : seen * 1000 / n;
        ++seen;
        times[k] = times[k] * 1000 + 1 + offset;
    }
    return times;
}

std::string at_event(size_t dev, size_t event_index) {
    return "device_traces[" + std::to_string(dev) + "][" + std::to_string(event_index) + "]";
}

Decoded decode_events(const PickleDoc& doc, Id traces, NodeCodes& keys, const std::string& in) {
    NodeCodes actions(doc.node_count());
    Decoded out;
    bool have_t = false;
    for (Id dev : doc.items(traces)) {
        if (doc.kind(dev) != PickleDoc::Kind::List)
            throw Error(where(in, "device_traces[" + std::to_string(out.devices.size()) + "] is " +
                                      type_name(doc, dev) + ", not a list of trace events"));
        auto& evs = out.devices.emplace_back();
        evs.reserve(doc.size(dev));
        for (Id event : doc.items(dev)) {
            Event ev;
            auto bad = [&](const std::string& what) {
                return Error(where(in, at_event(out.devices.size() - 1, evs.size()) + ": " + what));
            };
            if (doc.kind(event) != PickleDoc::Kind::Dict)
                throw bad(std::string("is ") + type_name(doc, event) + ", not a dict");
            auto kv = doc.items(event);
            for (size_t i = 0; i + 1 < kv.size(); i += 2) {
                Id key = kv[i], value = kv[i + 1];
                switch (keys.get(key, [&] { return key_code(doc.as_str(key)); })) {
                    case KeyCode::Action:
                        if (doc.kind(value) != PickleDoc::Kind::Str)
                            throw bad(std::string("'action' is ") + type_name(doc, value) + ", not a str");
                        ev.action = actions.get(value, [&] { return action_of(doc.as_str(value)); });
                        ev.has_action = true;
                        if (ev.action == Action::Unknown) ++out.unknown_actions[std::string(doc.as_str(value))];
                        break;
                    case KeyCode::Addr:
                        ev.addr = int_field(doc, value, "addr", bad);
                        ev.has_addr = true;
                        break;
                    case KeyCode::Size:
                        ev.size = int_field(doc, value, "size", bad);
                        ev.has_size = true;
                        if (ev.size < 0 || ev.size > kMaxBytes)
                            throw bad("size " + std::to_string(ev.size) + " is out of range");
                        break;
                    case KeyCode::Stream: ev.stream = int_field(doc, value, "stream", bad); break;
                    case KeyCode::TimeUs:
                        if (!doc.is_number(value) || doc.kind(value) == PickleDoc::Kind::Bool)
                            throw bad(std::string("'time_us' is ") + type_name(doc, value) + ", not a number");
                        ev.time_us = doc.as_float(value);
                        // |t| <= 4e15 us keeps differences * 1000 inside int64 nanoseconds.
                        if (!(std::fabs(ev.time_us) <= 4e15)) throw bad("time_us is out of range");
                        ev.timed = true;
                        break;
                    case KeyCode::Frames: ev.frames = value; break;
                    case KeyCode::PoolId:
                        ev.pool = pool_field(doc, value, bad);
                        ev.has_pool = true;
                        break;
                    case KeyCode::Other: ++out.unknown_keys[std::string(doc.as_str(key))]; break;
                    default: break;
                }
            }
            if (!ev.has_action) throw bad("event has no 'action'");
            if (moves_memory(ev.action) && !ev.has_addr)
                throw bad(std::string(name_of(ev.action)) + " event has no 'addr'");
            if (moves_memory(ev.action) && !ev.has_size && ev.action != Action::FreeRequested &&
                ev.action != Action::FreeCompleted && ev.action != Action::Free)
                throw bad(std::string(name_of(ev.action)) + " event has no 'size'");
            out.pooled += ev.has_pool;
            if (ev.action == Action::UserDefined)
                out.user_defined.push_back(user_defined_range(doc, ev, out.devices.size() - 1, bad));
            if (ev.timed) {
                out.t_min = have_t ? std::min(out.t_min, ev.time_us) : ev.time_us;
                have_t = true;
                ++out.timed;
            } else {
                out.all_timed = false;
            }
            evs.push_back(ev);
            ++out.events;
        }
    }
    return out;
}

}  // namespace mhc::trace::import::snapshot
