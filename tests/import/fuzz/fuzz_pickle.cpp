// libFuzzer: the safe pickle reader, then the snapshot mapping over whatever it returns.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/import/pickle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    if (!bytes.empty() && bytes[0] == '<') {   // a torch.cuda._memory_viz page: the import decodes its pickle
        fuzz::import_bytes(bytes, mhc::trace::import::Format::Snapshot);
        return 0;
    }
    try {
        mhc::trace::import::PickleDoc d(bytes, "fuzz");
        // Walk what a snapshot importer would: sizes and lookups on arbitrary shapes.
        auto r = d.root();
        for (auto v : d.items(r)) { (void)d.as_str(v); (void)d.size(v); }
        (void)d.get(r, "device_traces");
    } catch (const mhc::Error&) {
        return 0;
    }
    // The full import (pickle -> trace -> checks) on inputs that parse.
    fuzz::import_bytes(bytes, mhc::trace::import::Format::Snapshot);
    return 0;
}
