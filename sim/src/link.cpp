#include "mhc/sim/link.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"
#include "mhc/common/small_file.hpp"
#include "mhc/common/output_file.hpp"

namespace mhc::sim {

// Figures from docs/design.md §4 (measured, pinned memory, one direction). duplex_factor is the
// per-direction bandwidth when both directions run divided by the one-way figure.
const std::vector<LinkModel>& link_presets() {
    static const std::vector<LinkModel> presets = [] {
        auto mk = [](std::string name, double gbps, double duplex, std::string src) {
            LinkModel l;
            l.name = std::move(name);
            l.h2d = {gbps * 1e9, 6e-6};
            l.d2h = {gbps * 1e9, 6e-6};
            l.copy_engines = 2;
            l.duplex_factor = duplex;
            l.source = std::move(src);
            return l;
        };
        return std::vector<LinkModel>{
            mk("pcie3", 12, 0.5,
               "PCIe 3 x16 ~12 GB/s one way; both-directions slowdown assumed like PCIe 4 (no "
               "measured figure); 6 us per transfer"),
            mk("pcie4", 25, 0.5,
               "A100 PCIe 4: 25-26 GB/s one way, 12-13 GB/s each when both run; 6 us per transfer"),
            mk("pcie5", 55, 52.0 / 55.0,
               "H100 PCIe 5: 55 GB/s each way measured, ~52 GB/s both ways; 6 us per transfer"),
            mk("nvlink-c2c", 320, 160.0 / 320.0,
               "GH200 NVLink-C2C: 300-340 GB/s measured (450 by spec), ~160 GB/s H2D when both "
               "run; 6 us per transfer"),
            mk("nvlink4-peer", 380, 375.0 / 380.0,
               "H100 NVLink 4 peer-to-peer: 370-390 GB/s one way, ~750 GB/s both ways; 6 us per "
               "transfer"),
        };
    }();
    return presets;
}

void validate(const LinkModel& l, const std::string& what) {
    auto bad = [&](const std::string& field, const std::string& why) {
        throw Error(where(what, "field '" + field + "': " + why));
    };
    // Bounds (docs/simulator.md) keep every transfer time inside the int64 ns range.
    auto bandwidth_ok = [](double v) { return v >= kMinBandwidthBps && v <= kMaxBandwidthBps; };
    const std::string bw_range = "must be a number in [1e3, 1e15] B/s";
    if (!bandwidth_ok(l.h2d.bandwidth_Bps)) bad("h2d.bandwidth_Bps", bw_range);
    if (!bandwidth_ok(l.d2h.bandwidth_Bps)) bad("d2h.bandwidth_Bps", bw_range);
    if (!(l.h2d.latency_s >= 0 && l.h2d.latency_s <= kMaxLatencyS)) bad("h2d.latency_s", "must be in [0, 10] s");
    if (!(l.d2h.latency_s >= 0 && l.d2h.latency_s <= kMaxLatencyS)) bad("d2h.latency_s", "must be in [0, 10] s");
    if (l.copy_engines < 1 || l.copy_engines > kMaxCopyEngines) bad("copy_engines", "must be in 1..64");
    for (size_t i = 0; i < l.by_chunk.size(); ++i) {
        const auto& c = l.by_chunk[i];
        std::string pre = "by_chunk[" + std::to_string(i) + "].";
        if (c.bytes < 1) bad(pre + "bytes", "must be in [1, 2^56]");
        // Rows in increasing size, as mhc calibrate writes them: a rate is interpolated between the
        // rows around a chunk size, and rows out of order or of one size gave a chunk the rate of
        // another size (a reversed profile: every chunk the largest's rate) without a word.
        if (i > 0 && c.bytes <= l.by_chunk[i - 1].bytes)
            bad(pre + "bytes", std::to_string(c.bytes) + " is not more than by_chunk[" + std::to_string(i - 1) +
                                   "].bytes " + std::to_string(l.by_chunk[i - 1].bytes) + " (rows in increasing size)");
        // A row measuring nothing (every rate 0, "not measured", or left out) was read without a
        // word: a profile of such rows predicted with its flat figures as though it held none.
        if (c.h2d_Bps == 0 && c.d2h_Bps == 0 && c.both_h2d_Bps == 0 && c.both_d2h_Bps == 0)
            bad(pre.substr(0, pre.size() - 1), "no rate measured (h2d_Bps, d2h_Bps, both_h2d_Bps and both_d2h_Bps "
                                                "are each 0 or left out); give one, or leave the row out");
        if (c.h2d_Bps != 0 && !bandwidth_ok(c.h2d_Bps)) bad(pre + "h2d_Bps", bw_range);
        if (c.d2h_Bps != 0 && !bandwidth_ok(c.d2h_Bps)) bad(pre + "d2h_Bps", bw_range);
        if (c.both_h2d_Bps != 0 && !bandwidth_ok(c.both_h2d_Bps)) bad(pre + "both_h2d_Bps", bw_range);
        if (c.both_d2h_Bps != 0 && !bandwidth_ok(c.both_d2h_Bps)) bad(pre + "both_d2h_Bps", bw_range);
    }
    if (!(l.duplex_factor > 0 && l.duplex_factor <= 1)) bad("duplex_factor", "must be in (0, 1]");
    if (!(l.nccl_share >= 0 && l.nccl_share < 1)) bad("nccl_share", "must be in [0, 1)");
    if (!(l.memcpy_share >= 0 && l.memcpy_share < 1)) bad("memcpy_share", "must be in [0, 1)");
}

namespace {

using nlohmann::json;

double number(const json& obj, const std::string& key, const std::string& path,
              const std::string& prefix) {
    std::string field = prefix + key;
    if (!obj.is_object() || !obj.contains(key))
        throw Error(where(path, "field '" + field + "': missing"));
    const json& v = obj.at(key);
    if (!v.is_number()) throw Error(where(path, "field '" + field + "': must be a number"));
    return v.get<double>();
}

Direction direction(const json& root, const std::string& key, const std::string& path) {
    if (!root.contains(key)) throw Error(where(path, "field '" + key + "': missing"));
    const json& d = root.at(key);
    if (!d.is_object()) throw Error(where(path, "field '" + key + "': must be an object"));
    return {number(d, "bandwidth_Bps", path, key + "."), number(d, "latency_s", path, key + ".")};
}

}  // namespace

LinkModel load_link_profile(const std::string& path) {
    // A FIFO waits for a writer, a device never ends: refused before it is opened, wherever the
    // path comes from (validate --link auto's cache file, where one planted hung the command).
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
        throw Error(where(path, std::filesystem::is_directory(path, ec) ? "is a directory, not a link profile"
                                                                        : "not a regular file, not a link profile"));
    if (!std::filesystem::exists(path, ec)) throw Error(no_such_file(path));
    const std::string text = read_small_file(path, "link profile");
    json root;
    try {
        root = json::parse(text);
    } catch (const json::exception& e) {
        // The place (json_error_text). A number beyond a double ("1e999": out_of_range.406) is said
        // so too (it was an internal error).
        throw Error(where(path, "not a link profile: not valid JSON (" + json_error_text(e.what()) + ")"));
    }
    if (!root.is_object()) throw Error(where(path, "a link profile must be a JSON object"));
    // {"copy_engines": 2, "copy_engines": 1} ran with the last.
    if (const std::string twice = repeated_json_key_refusal(text); !twice.empty()) throw Error(where(path, twice));
    LinkModel l;
    if (!root.contains("name") || !root.at("name").is_string())
        throw Error(where(path, "field 'name': missing or not a string"));
    l.name = root.at("name").get<std::string>();
    // The name goes into every run's name (lru+none@80%/NAME), printed by simulate, info and sweep
    // and stored: a newline or an escape in it split their lines or reached the terminal.
    // A character a terminal acts on or does not show (U+009B, U+202E) made a run's name show as
    // another's.
    if (const std::string hidden = hidden_character(l.name); !hidden.empty())
        throw Error(where(path, "field 'name': holds a control character or one not shown (" + hidden +
                                    ": a newline, a tab, an escape, a bidirectional override); a name is one "
                                    "line shown as it is"));
    l.h2d = direction(root, "h2d", path);
    l.d2h = direction(root, "d2h", path);
    if (!root.contains("copy_engines") || !root.at("copy_engines").is_number_integer())
        throw Error(where(path, "field 'copy_engines': missing or not an integer"));
    {
        // Read wide, then range-check: get<int>() would cut 2^32+1 to 1.
        const json& ce = root.at("copy_engines");
        bool in_range = ce.is_number_unsigned() ? ce.get<uint64_t>() <= static_cast<uint64_t>(kMaxCopyEngines)
                                                : ce.get<int64_t>() >= 1 && ce.get<int64_t>() <= kMaxCopyEngines;
        if (!in_range) throw Error(where(path, "field 'copy_engines': must be in 1..64"));
        l.copy_engines = static_cast<int>(ce.get<int64_t>());
    }
    l.duplex_factor = number(root, "duplex_factor", path, "");
    if (root.contains("source")) {
        if (!root.at("source").is_string())
            throw Error(where(path, "field 'source': must be a string"));
        l.source = root.at("source").get<std::string>();
    }
    if (root.contains("notes")) {
        const json& n = root.at("notes");
        if (!n.is_array()) throw Error(where(path, "field 'notes': must be an array of strings"));
        for (size_t i = 0; i < n.size(); ++i) {
            if (!n[i].is_string()) throw Error(where(path, "field 'notes[" + std::to_string(i) + "]': must be a string"));
            l.notes.push_back(n[i].get<std::string>());
        }
    }
    if (root.contains("measured_load_average"))
        l.measured_load_average = number(root, "measured_load_average", path, "");
    if (root.contains("nccl_share")) l.nccl_share = number(root, "nccl_share", path, "");
    if (root.contains("memcpy_share")) l.memcpy_share = number(root, "memcpy_share", path, "");
    if (root.contains("by_chunk")) {
        const json& bc = root.at("by_chunk");
        if (!bc.is_array()) throw Error(where(path, "field 'by_chunk': must be an array"));
        for (size_t i = 0; i < bc.size(); ++i) {
            std::string pre = "by_chunk[" + std::to_string(i) + "].";
            const json& c = bc[i];
            if (!c.is_object()) throw Error(where(path, "field '" + pre.substr(0, pre.size() - 1) + "': must be an object"));
            LinkModel::Chunk ch;
            double b = number(c, "bytes", path, pre);
            if (!(b >= 1 && b <= 72057594037927936.0))
                throw Error(where(path, "field '" + pre + "bytes': must be in [1, 2^56]"));
            if (b != std::floor(b))   // 4096.5 was read as 4096
                throw Error(where(
                    path, "field '" + pre + "bytes': " + c.at("bytes").dump() + " is not a whole number of bytes"));
            ch.bytes = static_cast<int64_t>(b);
            if (c.contains("h2d_Bps")) ch.h2d_Bps = number(c, "h2d_Bps", path, pre);
            if (c.contains("d2h_Bps")) ch.d2h_Bps = number(c, "d2h_Bps", path, pre);
            if (c.contains("both_h2d_Bps")) ch.both_h2d_Bps = number(c, "both_h2d_Bps", path, pre);
            if (c.contains("both_d2h_Bps")) ch.both_d2h_Bps = number(c, "both_d2h_Bps", path, pre);
            l.by_chunk.push_back(ch);
        }
    }
    validate(l, path);
    return l;
}

std::vector<std::string> clamp_measured_link(LinkModel& l) {
    std::vector<std::string> notes;
    auto fmt = [](double v) {
        char b[32];
        std::snprintf(b, sizeof b, "%.3g", v);
        return std::string(b);
    };
    // NaN is "not measured": the lower bound. Returns whether it changed `v`.
    auto clamp = [&](double& v, double lo, double hi, const std::string& field, const std::string& why) {
        double to = std::isnan(v) ? lo : std::clamp(v, lo, hi);
        if (to == v) return;
        notes.push_back(field + " measured " + fmt(v) + why + "; clamped to " + fmt(to));
        v = to;
    };
    // Above 1 (both directions at once no slower than one) is noise for the model, which
    // needs (0, 1]; 0.05 keeps a nearly stalled measurement finite.
    clamp(l.duplex_factor, 0.05, 1.0, "duplex factor",
          l.duplex_factor > 1 ? " (> 1: both directions no slower than one)" : " (both directions nearly stalled)");
    clamp(l.h2d.bandwidth_Bps, kMinBandwidthBps, kMaxBandwidthBps, "h2d bandwidth", " B/s (out of range)");
    clamp(l.d2h.bandwidth_Bps, kMinBandwidthBps, kMaxBandwidthBps, "d2h bandwidth", " B/s (out of range)");
    clamp(l.h2d.latency_s, 0, kMaxLatencyS, "h2d latency", " s (out of range)");
    clamp(l.d2h.latency_s, 0, kMaxLatencyS, "d2h latency", " s (out of range)");
    if (l.copy_engines < 1 || l.copy_engines > kMaxCopyEngines) {
        int to = std::clamp(l.copy_engines, 1, kMaxCopyEngines);
        notes.push_back("copy engines " + std::to_string(l.copy_engines) + " out of range; clamped to " + std::to_string(to));
        l.copy_engines = to;
    }
    for (size_t i = 0; i < l.by_chunk.size(); ++i) {
        auto& c = l.by_chunk[i];
        const std::string pre = "by_chunk[" + std::to_string(i) + "].";
        // A rate of 0 means "not measured" in a row; anything else must be in range.
        for (auto [v, name] : {std::pair{&c.h2d_Bps, "h2d_Bps"}, {&c.d2h_Bps, "d2h_Bps"},
                               {&c.both_h2d_Bps, "both_h2d_Bps"}, {&c.both_d2h_Bps, "both_d2h_Bps"}})
            if (*v != 0) clamp(*v, kMinBandwidthBps, kMaxBandwidthBps, pre + name, " B/s (out of range)");
    }
    if (!(l.nccl_share >= 0 && l.nccl_share < 1)) { notes.push_back("nccl_share out of [0, 1); set to 0"); l.nccl_share = 0; }
    if (!(l.memcpy_share >= 0 && l.memcpy_share < 1)) { notes.push_back("memcpy_share out of [0, 1); set to 0"); l.memcpy_share = 0; }
    l.notes.insert(l.notes.end(), notes.begin(), notes.end());
    return notes;
}

std::vector<std::string> write_link_profile(const std::string& path, LinkModel l) {
    std::vector<std::string> notes = clamp_measured_link(l);
    json by_chunk = json::array();
    for (const auto& chunk : l.by_chunk) {   // a rate not measured (0) left out; a row of none, too
        json row = {{"bytes", chunk.bytes}};
        for (auto [rate, name] : {std::pair{chunk.h2d_Bps, "h2d_Bps"}, {chunk.d2h_Bps, "d2h_Bps"},
                                  {chunk.both_h2d_Bps, "both_h2d_Bps"}, {chunk.both_d2h_Bps, "both_d2h_Bps"}})
            if (rate != 0) row[name] = rate;
        if (row.size() > 1) by_chunk.push_back(row);
    }
    json j = {{"name", l.name},
              {"h2d", {{"bandwidth_Bps", l.h2d.bandwidth_Bps}, {"latency_s", l.h2d.latency_s}}},
              {"d2h", {{"bandwidth_Bps", l.d2h.bandwidth_Bps}, {"latency_s", l.d2h.latency_s}}},
              {"copy_engines", l.copy_engines},
              {"duplex_factor", l.duplex_factor},
              {"source", l.source}};
    // The shares only when they are not the reader's default (calibrate measures neither).
    const LinkModel defaults;
    if (l.nccl_share != defaults.nccl_share) j["nccl_share"] = l.nccl_share;
    if (l.memcpy_share != defaults.memcpy_share) j["memcpy_share"] = l.memcpy_share;
    if (!by_chunk.empty()) j["by_chunk"] = by_chunk;
    if (!l.notes.empty()) j["notes"] = l.notes;
    if (l.measured_load_average >= 0) j["measured_load_average"] = l.measured_load_average;
    const std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    OutputFile out(path, IfExists::Replace);
    {
        std::ofstream f(out.temp_path(), std::ios::trunc);
        if (!f) throw Error(where(path, "cannot open for writing"));
        f << text;
        if (!f.flush()) throw Error(where(path, "write failed"));
    }
    // The profile must load where it will be used: the reader is the judge, before the file
    // takes its name.
    try {
        load_link_profile(out.temp_path());
    } catch (const Error& e) {
        throw Error(where(path, std::string("the profile written does not load: ") + e.what()), Error::Kind::Internal);
    }
    out.commit();
    return notes;
}

LinkModel link_from_spec(const std::string& spec) {
    for (const auto& p : link_presets())
        if (p.name == spec) return p;
    std::error_code ec;
    if (std::filesystem::is_regular_file(spec, ec)) return load_link_profile(spec);
    // A folder or a device named as a profile was "no such file".
    if (std::filesystem::is_directory(spec, ec)) throw Error(where(spec, "is a directory, not a link profile"));
    if (std::filesystem::exists(spec, ec)) throw Error(where(spec, "not a regular file, not a link profile"));
    // A link to nothing, or a loop of links, is a file the user named: "unknown link 'x'" was said.
    if (std::filesystem::is_symlink(spec, ec)) throw Error(no_such_file(spec));
    // A name with a folder or a .json ending meant a profile file.
    if (spec.find('/') != std::string::npos || spec.ends_with(".json")) throw Error(no_such_file(spec));
    std::string names;
    std::vector<std::string> list;
    for (const auto& p : link_presets()) {
        names += (names.empty() ? "" : ", ") + p.name;
        list.push_back(p.name);
    }
    throw Error("'" + spec + "': not a link; use one of " + names +
                " or a link profile JSON file" + did_you_mean(spec, list));
}

}  // namespace mhc::sim
