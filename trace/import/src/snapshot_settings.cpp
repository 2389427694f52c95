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

BlockRules add_allocator_settings(const PickleDoc& d, std::optional<Id> settings, std::map<std::string, std::string>& meta) {
    BlockRules rules;
    if (!settings || d.kind(*settings) != PickleDoc::Kind::Dict) return rules;
    std::string conf;
    auto put = [&](const std::string& kv) { conf += (conf.empty() ? "" : ",") + kv; };
    if (auto v = d.get(*settings, "PYTORCH_CUDA_ALLOC_CONF"); v && d.kind(*v) == PickleDoc::Kind::Str)
        meta["allocator.PYTORCH_CUDA_ALLOC_CONF"] = std::string(d.as_str(*v));
    if (auto v = d.get(*settings, "expandable_segments"); v && d.is_int(*v)) {
        rules.expandable = d.as_int(*v) != 0;
        rules.expandable_said = true;
        put(std::string("expandable_segments:") + (rules.expandable ? "True" : "False"));
    }
    if (auto v = d.get(*settings, "max_split_size"); v && d.is_int(*v)) {
        int64_t b = d.as_int(*v);
        if (b > 0 && b < (int64_t{1} << 56)) {
            put("max_split_size_mb:" + std::to_string(b >> 20));
            rules.max_split_size = b;
        }
    }
    if (auto v = d.get(*settings, "roundup_power2_divisions"); v && d.kind(*v) == PickleDoc::Kind::Dict) {
        auto kv = d.items(*v);
        std::string list;
        bool any = false;
        for (size_t i = 0; i + 1 < kv.size(); i += 2) {
            if (!d.is_int(kv[i + 1])) continue;
            int64_t n = d.as_int(kv[i + 1]);
            any |= n != 0;
            std::string key = d.kind(kv[i]) == PickleDoc::Kind::Str ? std::string(d.as_str(kv[i]))
                                                                   : std::to_string(d.as_int(kv[i]));
            list += (list.empty() ? "" : ",") + key + ":" + std::to_string(n);
            int64_t mib = std::atoll(key.c_str());   // the interval [mib, 2 mib) MiB
            if (mib > 0 && n > 0 && n <= (1 << 20))
                rules.divisions[static_cast<size_t>(torch::roundup_interval(mib << 20))] = n;
        }
        if (any) put("roundup_power2_divisions:[" + list + "]");
    } else if (v && d.is_int(*v) && d.as_int(*v) > 0) {
        put("roundup_power2_divisions:" + std::to_string(d.as_int(*v)));
        if (d.as_int(*v) <= (1 << 20)) rules.divisions.fill(d.as_int(*v));
    }
    if (auto v = d.get(*settings, "garbage_collection_threshold"); v && d.is_number(*v) && d.as_float(*v) > 0) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", d.as_float(*v));
        put(std::string("garbage_collection_threshold:") + b);
    }
    meta["allocator.conf"] = conf;
    return rules;
}

}  // namespace mhc::trace::import::snapshot
