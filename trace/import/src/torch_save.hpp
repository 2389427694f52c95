// A memory snapshot saved with torch.save (docs/import.md, "PyTorch CUDA memory snapshot"): the zip
// archive of PyTorch 1.6 on, whose `<name>/data.pkl` entry is the snapshot's pickle, and the legacy
// format (_use_new_zipfile_serialization=False), a sequence of pickles with the snapshot's among them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mhc::trace::import {

// Whether a file starts as a zip archive does (a local file header).
bool is_zip(std::string_view head);

// The name of a torch.save archive's one `<name>/data.pkl` entry; nothing for a zip without one
// (another program's archive). Refused naming the file where it holds several or cannot be read.
std::optional<std::string> torch_save_entry(const std::string& path);

// The bytes of that entry: refused where there is none, where it would expand past `limit` (checked
// before reading: a zip bomb does not fill memory) and where the archive holds tensors' storages.
std::string torch_save_pickle(const std::string& path, uint64_t limit, std::string& entry);

// The snapshot's pickle inside a file of torch.save's legacy format; nothing where `bytes` does not
// start with its magic number. Refused where the file holds tensors (storages after the pickles).
std::optional<std::string_view> legacy_torch_save_object(std::string_view bytes, const std::string& path);

}   // namespace mhc::trace::import
