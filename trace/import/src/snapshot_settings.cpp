// snapshot['allocator_settings'] read (snapshot_settings.hpp).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "mhc/trace/torch_sizes.hpp"
#include "snapshot_settings.hpp"

namespace mhc::trace::import::snapshot {

BlockRules add_allocator_settings(const PickleDoc& doc, std::optional<Id> settings,
                                  std::map<std::string, std::string>& meta) {
    BlockRules rules;
    if (!settings || doc.kind(*settings) != PickleDoc::Kind::Dict) return rules;
    std::string conf;
    auto put = [&](const std::string& kv) { conf += (conf.empty() ? "" : ",") + kv; };
    if (auto value = doc.get(*settings, "PYTORCH_CUDA_ALLOC_CONF"); value && doc.kind(*value) == PickleDoc::Kind::Str)
        meta["allocator.PYTORCH_CUDA_ALLOC_CONF"] = std::string(doc.as_str(*value));
    if (auto value = doc.get(*settings, "expandable_segments"); value && doc.is_int(*value)) {
        rules.expandable = doc.as_int(*value) != 0;
        rules.expandable_said = true;
        put(std::string("expandable_segments:") + (rules.expandable ? "True" : "False"));
    }
    if (auto value = doc.get(*settings, "max_split_size"); value && doc.is_int(*value)) {
        int64_t bytes = doc.as_int(*value);
        if (bytes > 0 && bytes < (int64_t{1} << 56)) {
            put("max_split_size_mb:" + std::to_string(bytes >> 20));
            rules.max_split_size = bytes;
        }
    }
    if (auto value = doc.get(*settings, "roundup_power2_divisions");
        value && doc.kind(*value) == PickleDoc::Kind::Dict) {
        auto kv = doc.items(*value);
        std::string list;
        bool any = false;
        for (size_t i = 0; i + 1 < kv.size(); i += 2) {
            if (!doc.is_int(kv[i + 1])) continue;
            int64_t divisions = doc.as_int(kv[i + 1]);
            any |= divisions != 0;
            std::string key = doc.kind(kv[i]) == PickleDoc::Kind::Str ? std::string(doc.as_str(kv[i]))
                                                                      : std::to_string(doc.as_int(kv[i]));
            list += (list.empty() ? "" : ",") + key + ":" + std::to_string(divisions);
            int64_t mib = std::atoll(key.c_str());   // the interval [mib, 2 mib) MiB
            if (mib > 0 && divisions > 0 && divisions <= (1 << 20))
                rules.divisions[static_cast<size_t>(torch::roundup_interval(mib << 20))] = divisions;
        }
        if (any) put("roundup_power2_divisions:[" + list + "]");
    } else if (value && doc.is_int(*value) && doc.as_int(*value) > 0) {
        put("roundup_power2_divisions:" + std::to_string(doc.as_int(*value)));
        if (doc.as_int(*value) <= (1 << 20)) rules.divisions.fill(doc.as_int(*value));
    }
    if (auto value = doc.get(*settings, "garbage_collection_threshold");
        value && doc.is_number(*value) && doc.as_float(*value) > 0) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", doc.as_float(*value));
        put(std::string("garbage_collection_threshold:") + text);
    }
    meta["allocator.conf"] = conf;
    return rules;
}

}  // namespace mhc::trace::import::snapshot
