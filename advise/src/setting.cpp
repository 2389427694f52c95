// Setting <-> JSON (docs/advise.md "Settings").
#include "mhc/advise/setting.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"
#include "mhc/common/small_file.hpp"

namespace mhc::advise {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
    throw Error("setting: field '" + field + "': " + why);
}

void only_keys(const json& j, const std::string& where, std::initializer_list<const char*> keys) {
    for (auto it = j.begin(); it != j.end(); ++it) {
        bool known = false;
        for (const char* k : keys) known |= it.key() == k;
        if (!known) {
            std::string list;
            for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
            bad(where.empty() ? it.key() : where + "." + it.key(), "unknown key (known: " + list + ")");
        }
    }
}

std::vector<std::string> module_list(const json& j, const std::string& field) {
    if (!j.is_array()) bad(field, "must be a list of module names");
    std::vector<std::string> out;
    for (const json& m : j) {
        if (!m.is_string() || m.get<std::string>().empty()) bad(field, "must be a list of module names");
        out.push_back(m.get<std::string>());
    }
    return out;
}

int64_t integer(const json& j, const std::string& field, int64_t lo, int64_t hi) {
    if (!j.is_number_integer()) bad(field, "must be an integer");
    int64_t v = j.get<int64_t>();
    if (v < lo || v > hi) bad(field, std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
}

std::string text(const json& j, const std::string& field) {
    if (!j.is_string()) bad(field, "must be a string");
    return j.get<std::string>();
}

CheckpointGroup parse_group(const json& j, const std::string& field) {
    if (!j.is_object()) bad(field, "must be an object {\"modules\": [...], \"policy\": ...}");
    only_keys(j, field, {"modules", "policy"});
    CheckpointGroup g;
    if (!j.contains("modules")) bad(field + ".modules", "missing");
    g.modules = module_list(j["modules"], field + ".modules");
    if (j.contains("policy")) {
        std::string p = text(j["policy"], field + ".policy");
        if (p == "full") g.policy = Policy::Full;
        else if (p == "save_matmuls") g.policy = Policy::SaveMatmuls;
        else if (p == "mhc") g.policy = Policy::Mhc;
        else bad(field + ".policy", "'" + p + "' is not one of full, save_matmuls, mhc");
    }
    return g;
}

OffloadSetting parse_offload(const json& j) {
    if (!j.is_object()) bad("offload", "must be an object");
    only_keys(j, "offload", {"mode", "modules", "min_bytes", "max_fwd_stash", "prefetch"});
    OffloadSetting o;
    if (j.contains("mode")) {
        std::string m = text(j["mode"], "offload.mode");
        if (m == "sync") o.mode = OffloadMode::Sync;
        else if (m == "streamed") o.mode = OffloadMode::Streamed;
        else bad("offload.mode", "'" + m + "' is not one of sync, streamed");
    }
    if (j.contains("modules") && !j["modules"].is_null()) o.modules = module_list(j["modules"], "offload.modules");
    if (j.contains("min_bytes")) o.min_bytes = integer(j["min_bytes"], "offload.min_bytes", 0, int64_t(1) << 56);
    if (j.contains("max_fwd_stash")) o.max_fwd_stash = static_cast<int>(integer(j["max_fwd_stash"], "offload.max_fwd_stash", 1, 1 << 20));
    if (j.contains("prefetch")) o.prefetch = static_cast<int>(integer(j["prefetch"], "offload.prefetch", 0, 1 << 20));
    if (o.mode == OffloadMode::Sync && o.prefetch > 0) bad("offload.prefetch", "a sync offload brings tensors back on demand (prefetch 0)");
    return o;
}

void parse_optimizer(const json& j, Setting& s) {
    if (!j.is_object()) bad("optimizer", "must be an object");
    only_keys(j, "optimizer", {"impl", "state"});
    if (j.contains("impl")) {
        std::string i = text(j["impl"], "optimizer.impl");
        if (i == "foreach") s.optimizer_impl = OptimizerImpl::Foreach;
        else if (i == "fused") s.optimizer_impl = OptimizerImpl::Fused;
        else if (i == "forloop") s.optimizer_impl = OptimizerImpl::Forloop;
        else bad("optimizer.impl", "'" + i + "' is not one of foreach, fused, forloop");
    }
    if (j.contains("state")) {
        std::string st = text(j["state"], "optimizer.state");
        if (st == "host") s.optimizer_on_host = true;
        else if (st != "device") bad("optimizer.state", "'" + st + "' is not one of device, host");
    }
}

// {"blocks.0": false, "blocks.1": 2, ...}: FSDP2's reshard_after_forward per fully_shard module
// (true, false, or the ranks of a smaller group to reshard to), in the order given.
std::vector<std::pair<std::string, int>> parse_reshard(const json& object) {
    const std::string field = "reshard_after_forward";
    if (!object.is_object()) bad(field, "must be an object {\"module\": true|false|ranks, ...}");
    std::vector<std::pair<std::string, int>> out;
    for (auto it = object.begin(); it != object.end(); ++it) {
        if (it.key().empty()) bad(field, "a module name is empty");
        if (it.value().is_boolean()) out.emplace_back(it.key(), it.value().get<bool>() ? 1 : 0);
        else if (it.value().is_number_integer())
            out.emplace_back(it.key(), static_cast<int>(integer(it.value(), field + "." + it.key(), 2, 1 << 20)));
        else bad(field + "." + it.key(), "must be true, false or a number of ranks (2 or more)");
    }
    return out;
}

// The setting's text, and the file it was read from ("" for JSON text).
std::pair<std::string, std::string> read_text(const std::string& text) {
    std::error_code ec;
    if (!text.empty() && text.front() != '{' && std::filesystem::is_regular_file(text, ec))
        return {read_small_file(text, "setting file"), text};
    return {text, ""};
}

Setting parse_setting_text(const std::string& body);

}  // namespace

bool Setting::empty() const {
    return checkpoint.empty() && !offload && optimizer_impl == OptimizerImpl::AsCaptured && !optimizer_on_host &&
           !bf16_weights && allocator.empty() && reshard_after_forward.empty();
}

std::string_view to_string(Policy p) {
    switch (p) {
        case Policy::Full: return "full";
        case Policy::SaveMatmuls: return "save_matmuls";
        case Policy::Mhc: return "mhc";
    }
    return "?";
}

std::string_view to_string(OptimizerImpl i) {
    switch (i) {
        case OptimizerImpl::AsCaptured: return "as captured";
        case OptimizerImpl::Foreach: return "foreach";
        case OptimizerImpl::Fused: return "fused";
        case OptimizerImpl::Forloop: return "forloop";
    }
    return "?";
}

Setting parse_setting(const std::string& input) {
    const auto [body, file] = read_text(input);
    try {
        return parse_setting_text(body);
    } catch (const Error& e) {
        // What a setting file holds is said naming it ("setting: s.json: field ..."), as mhc-torch
        // says it; it named no file.
        const std::string what = e.what();
        if (file.empty() || what.rfind("setting: ", 0) != 0) throw;
        throw Error("setting: " + file + ": " + what.substr(9), e.kind());
    }
}

namespace {

Setting parse_setting_text(const std::string& body) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception& e) {
        // Without the library's tag and its raw bytes (a binary file's are control bytes), as a
        // link profile's parse error is said.
        std::string what = e.what();
        if (const size_t tag = what.find("] "); tag != std::string::npos) what = what.substr(tag + 2);
        if (const size_t raw = what.find("; last read"); raw != std::string::npos) what.resize(raw);
        throw Error("setting: not JSON: " + what.substr(0, 160));
    }
    if (!j.is_object()) throw Error("setting: must be a JSON object");
    // {"weights": "bf16", "weights": "fp32"} was the last: the setting as captured.
    if (const std::string twice = repeated_json_key(body); !twice.empty())
        throw Error("setting: field '" + twice + "' is given twice: JSON readers take either value; give it once");
    only_keys(j, "", {"checkpoint", "offload", "optimizer", "weights", "allocator", "reshard_after_forward"});
    Setting s;
    if (j.contains("checkpoint")) {
        const json& c = j["checkpoint"];
        if (c.is_array()) {
            for (size_t i = 0; i < c.size(); ++i) s.checkpoint.push_back(parse_group(c[i], "checkpoint[" + std::to_string(i) + "]"));
        } else {
            s.checkpoint.push_back(parse_group(c, "checkpoint"));
        }
    }
    if (j.contains("offload") && !j["offload"].is_null()) s.offload = parse_offload(j["offload"]);
    if (j.contains("optimizer")) parse_optimizer(j["optimizer"], s);
    if (j.contains("weights")) {
        std::string w = text(j["weights"], "weights");
        if (w == "bf16") s.bf16_weights = true;
        else if (w != "fp32") bad("weights", "'" + w + "' is not one of fp32, bf16");
    }
    if (j.contains("allocator")) s.allocator = text(j["allocator"], "allocator");
    if (j.contains("reshard_after_forward")) s.reshard_after_forward = parse_reshard(j["reshard_after_forward"]);
    return s;
}

}  // namespace

std::string to_json(const Setting& s) {
    json j = json::object();
    if (!s.checkpoint.empty()) {
        json groups = json::array();
        for (const CheckpointGroup& g : s.checkpoint)
            groups.push_back(json{{"modules", g.modules}, {"policy", std::string(to_string(g.policy))}});
        j["checkpoint"] = groups.size() == 1 ? groups[0] : groups;
    }
    if (s.offload) {
        const OffloadSetting& o = *s.offload;
        json oj;
        oj["mode"] = o.mode == OffloadMode::Sync ? "sync" : "streamed";
        oj["modules"] = o.modules ? json(*o.modules) : json(nullptr);
        oj["min_bytes"] = o.min_bytes;
        if (o.mode == OffloadMode::Streamed) {
            oj["max_fwd_stash"] = o.max_fwd_stash;
            oj["prefetch"] = o.prefetch_or_default();
        }
        j["offload"] = oj;
    }
    if (s.optimizer_impl != OptimizerImpl::AsCaptured || s.optimizer_on_host) {
        json oj = json::object();
        if (s.optimizer_impl != OptimizerImpl::AsCaptured) oj["impl"] = std::string(to_string(s.optimizer_impl));
        if (s.optimizer_on_host) oj["state"] = "host";
        j["optimizer"] = oj;
    }
    if (s.bf16_weights) j["weights"] = "bf16";
    if (!s.allocator.empty()) j["allocator"] = s.allocator;
    if (!s.reshard_after_forward.empty()) {
        json values = json::object();
        for (const auto& [module, value] : s.reshard_after_forward)
            values[module] = value <= 1 ? json(value == 1) : json(value);
        j["reshard_after_forward"] = values;
    }
    return j.dump();
}

}  // namespace mhc::advise
