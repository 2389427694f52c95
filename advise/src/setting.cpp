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

void only_keys(const json& node, const std::string& where, std::initializer_list<const char*> keys) {
    for (auto it = node.begin(); it != node.end(); ++it) {
        bool known = false;
        for (const char* key : keys) known |= it.key() == key;
        if (!known) {
            std::string list;
            for (const char* key : keys) list += (list.empty() ? "" : ", ") + std::string(key);
            bad(where.empty() ? it.key() : where + "." + it.key(), "unknown key (known: " + list + ")");
        }
    }
}

std::vector<std::string> module_list(const json& node, const std::string& field) {
    if (!node.is_array()) bad(field, "must be a list of module names");
    std::vector<std::string> out;
    for (const json& module : node) {
        if (!module.is_string() || module.get<std::string>().empty()) bad(field, "must be a list of module names");
        out.push_back(module.get<std::string>());
    }
    return out;
}

int64_t integer(const json& node, const std::string& field, int64_t lo, int64_t hi) {
    if (!node.is_number_integer()) bad(field, "must be an integer");
    int64_t number = node.get<int64_t>();
    if (number < lo || number > hi)
        bad(field, std::to_string(number) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return number;
}

std::string text(const json& node, const std::string& field) {
    if (!node.is_string()) bad(field, "must be a string");
    return node.get<std::string>();
}

CheckpointGroup parse_group(const json& node, const std::string& field) {
    if (!node.is_object()) bad(field, "must be an object {\"modules\": [...], \"policy\": ...}");
    only_keys(node, field, {"modules", "policy"});
    CheckpointGroup group;
    if (!node.contains("modules")) bad(field + ".modules", "missing");
    group.modules = module_list(node["modules"], field + ".modules");
    if (node.contains("policy")) {
        std::string policy = text(node["policy"], field + ".policy");
        if (policy == "full") group.policy = Policy::Full;
        else if (policy == "save_matmuls") group.policy = Policy::SaveMatmuls;
        else if (policy == "mhc") group.policy = Policy::Mhc;
        else bad(field + ".policy", "'" + policy + "' is not one of full, save_matmuls, mhc");
    }
    return group;
}

OffloadSetting parse_offload(const json& node) {
    if (!node.is_object()) bad("offload", "must be an object");
    only_keys(node, "offload", {"mode", "modules", "min_bytes", "max_fwd_stash", "prefetch"});
    OffloadSetting offload;
    if (node.contains("mode")) {
        std::string mode = text(node["mode"], "offload.mode");
        if (mode == "sync") offload.mode = OffloadMode::Sync;
        else if (mode == "streamed") offload.mode = OffloadMode::Streamed;
        else bad("offload.mode", "'" + mode + "' is not one of sync, streamed");
    }
    if (node.contains("modules") && !node["modules"].is_null())
        offload.modules = module_list(node["modules"], "offload.modules");
    if (node.contains("min_bytes"))
        offload.min_bytes = integer(node["min_bytes"], "offload.min_bytes", 0, static_cast<int64_t>(1) << 56);
    if (node.contains("max_fwd_stash"))
        offload.max_fwd_stash = static_cast<int>(integer(node["max_fwd_stash"], "offload.max_fwd_stash", 1, 1 << 20));
    if (node.contains("prefetch"))
        offload.prefetch = static_cast<int>(integer(node["prefetch"], "offload.prefetch", 0, 1 << 20));
    if (offload.mode == OffloadMode::Sync && offload.prefetch > 0)
        bad("offload.prefetch", "a sync offload brings tensors back on demand (prefetch 0)");
    return offload;
}

void parse_optimizer(const json& node, Setting& setting) {
    if (!node.is_object()) bad("optimizer", "must be an object");
    only_keys(node, "optimizer", {"impl", "state"});
    if (node.contains("impl")) {
        std::string impl = text(node["impl"], "optimizer.impl");
        if (impl == "foreach") setting.optimizer_impl = OptimizerImpl::Foreach;
        else if (impl == "fused") setting.optimizer_impl = OptimizerImpl::Fused;
        else if (impl == "forloop") setting.optimizer_impl = OptimizerImpl::Forloop;
        else bad("optimizer.impl", "'" + impl + "' is not one of foreach, fused, forloop");
    }
    if (node.contains("state")) {
        std::string st = text(node["state"], "optimizer.state");
        if (st == "host") setting.optimizer_on_host = true;
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

std::string_view to_string(Policy policy) {
    switch (policy) {
        case Policy::Full: return "full";
        case Policy::SaveMatmuls: return "save_matmuls";
        case Policy::Mhc: return "mhc";
    }
    return "?";
}

std::string_view to_string(OptimizerImpl impl) {
    switch (impl) {
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
    json doc;
    try {
        doc = json::parse(body);
    } catch (const json::exception& e) {
        // As a link profile's parse error is said.
        throw Error("setting: not JSON: " + json_error_text(e.what()).substr(0, 160));
    }
    if (!doc.is_object()) throw Error("setting: must be a JSON object");
    // {"weights": "bf16", "weights": "fp32"} was the last: the setting as captured.
    if (const std::string twice = repeated_json_key_refusal(body); !twice.empty()) throw Error("setting: " + twice);
    only_keys(doc, "", {"checkpoint", "offload", "optimizer", "weights", "allocator", "reshard_after_forward"});
    Setting setting;
    if (doc.contains("checkpoint")) {
        const json& checkpoint = doc["checkpoint"];
        if (checkpoint.is_array()) {
            for (size_t i = 0; i < checkpoint.size(); ++i)
                setting.checkpoint.push_back(parse_group(checkpoint[i], "checkpoint[" + std::to_string(i) + "]"));
        } else {
            setting.checkpoint.push_back(parse_group(checkpoint, "checkpoint"));
        }
    }
    if (doc.contains("offload") && !doc["offload"].is_null()) setting.offload = parse_offload(doc["offload"]);
    if (doc.contains("optimizer")) parse_optimizer(doc["optimizer"], setting);
    if (doc.contains("weights")) {
        std::string weights = text(doc["weights"], "weights");
        if (weights == "bf16") setting.bf16_weights = true;
        else if (weights != "fp32") bad("weights", "'" + weights + "' is not one of fp32, bf16");
    }
    if (doc.contains("allocator")) setting.allocator = text(doc["allocator"], "allocator");
    if (doc.contains("reshard_after_forward"))
        setting.reshard_after_forward = parse_reshard(doc["reshard_after_forward"]);
    return setting;
}

}  // namespace

std::string to_json(const Setting& setting) {
    json doc = json::object();
    if (!setting.checkpoint.empty()) {
        json groups = json::array();
        for (const CheckpointGroup& group : setting.checkpoint)
            groups.push_back(json{{"modules", group.modules}, {"policy", std::string(to_string(group.policy))}});
        doc["checkpoint"] = groups.size() == 1 ? groups[0] : groups;
    }
    if (setting.offload) {
        const OffloadSetting& offload = *setting.offload;
        json oj;
        oj["mode"] = offload.mode == OffloadMode::Sync ? "sync" : "streamed";
        oj["modules"] = offload.modules ? json(*offload.modules) : json(nullptr);
        oj["min_bytes"] = offload.min_bytes;
        if (offload.mode == OffloadMode::Streamed) {
            oj["max_fwd_stash"] = offload.max_fwd_stash;
            oj["prefetch"] = offload.prefetch_or_default();
        }
        doc["offload"] = oj;
    }
    if (setting.optimizer_impl != OptimizerImpl::AsCaptured || setting.optimizer_on_host) {
        json oj = json::object();
        if (setting.optimizer_impl != OptimizerImpl::AsCaptured)
            oj["impl"] = std::string(to_string(setting.optimizer_impl));
        if (setting.optimizer_on_host) oj["state"] = "host";
        doc["optimizer"] = oj;
    }
    if (setting.bf16_weights) doc["weights"] = "bf16";
    if (!setting.allocator.empty()) doc["allocator"] = setting.allocator;
    if (!setting.reshard_after_forward.empty()) {
        json values = json::object();
        for (const auto& [module, value] : setting.reshard_after_forward)
            values[module] = value <= 1 ? json(value == 1) : json(value);
        doc["reshard_after_forward"] = values;
    }
    return doc.dump();
}

}  // namespace mhc::advise
