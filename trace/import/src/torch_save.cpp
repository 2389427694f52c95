// torch.save's archives of a memory snapshot (torch_save.hpp), read with libzip.
#include "torch_save.hpp"

#include <zip.h>

#include <memory>
#include <vector>

#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/import/pickle.hpp"

namespace mhc::trace::import {

namespace {

using Archive = std::unique_ptr<zip_t, decltype(&zip_discard)>;

Archive open_zip(const std::string& path) {
    int code = 0;
    zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
    if (archive == nullptr) {
        zip_error_t error;
        zip_error_init_with_code(&error, code);
        const std::string said = zip_error_strerror(&error);
        zip_error_fini(&error);
        throw Error(where(path, "a zip archive that cannot be read (" + said + "): a damaged or truncated file"));
    }
    return Archive(archive, &zip_discard);
}

// torch.save writes `<name>/data.pkl` (the object) and `<name>/data/<key>` (one per tensor storage).
bool in_top_folder(std::string_view name, std::string_view rest) {
    const size_t slash = name.find('/');
    return slash != std::string_view::npos && slash > 0 && name.substr(slash + 1) == rest;
}

struct Entries {
    std::vector<std::string> pickles;   // <name>/data.pkl
    int64_t storages = 0;               // <name>/data/<key>
    std::string first_storage;
};

Entries list_entries(zip_t* archive) {
    Entries found;
    const zip_int64_t count = zip_get_num_entries(archive, 0);
    for (zip_int64_t i = 0; i < count; ++i) {
        const char* raw = zip_get_name(archive, static_cast<zip_uint64_t>(i), 0);
        if (raw == nullptr) continue;
        const std::string_view name(raw);
        if (in_top_folder(name, "data.pkl")) found.pickles.emplace_back(name);
        const size_t slash = name.find('/');
        if (slash != std::string_view::npos && name.substr(slash + 1).rfind("data/", 0) == 0 &&
            name.size() > slash + 6 && found.storages++ == 0)
            found.first_storage = std::string(name);
    }
    return found;
}

std::optional<std::string> one_pickle(const std::string& path, const Entries& found) {
    if (found.pickles.empty()) return std::nullopt;
    if (found.pickles.size() > 1)
        throw Error(where(path, "a zip archive with " + std::to_string(found.pickles.size()) + " data.pkl entries ('" +
                                    found.pickles[0] + "', '" + found.pickles[1] +
                                    "'...): not one torch.save archive; extract the snapshot's and import that"));
    return found.pickles[0];
}

// The LONG1 of torch.save's legacy magic number, 0x1950a86a20f9469cfc6c, and the STOP after it.
constexpr std::string_view kMagicNumber("\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 13);

// The length of the magic number's pickle at the start of `bytes` (PROTO 2 to 5, and FRAME from 4
// on: torch.save's pickle_protocol), or 0.
size_t legacy_magic_size(std::string_view bytes) {
    if (bytes.size() < 2 || bytes[0] != '\x80' || bytes[1] < 2 || bytes[1] > 5) return 0;
    size_t at = 2;
    if (bytes.size() > at && bytes[at] == '\x95') at += 9;   // FRAME and its 8-byte length
    return bytes.substr(at, kMagicNumber.size()) == kMagicNumber ? at + kMagicNumber.size() : 0;
}

// The length of the pickle of [] that ends `bytes` (the storage keys of a file without tensors:
// EMPTY_LIST then BINPUT 0, or MEMOIZE from protocol 4 on), or 0.
size_t empty_keys_size(std::string_view bytes) {
    for (const std::string_view list : {std::string_view("]q\x00.", 4), std::string_view("]\x94.", 3)}) {
        const size_t size = list.size() + 2;   // after PROTO
        if (bytes.size() >= size && bytes.substr(bytes.size() - list.size()) == list &&
            bytes[bytes.size() - size] == '\x80')
            return size;
    }
    return 0;
}

}   // namespace

bool is_zip(std::string_view head) { return head.substr(0, 4) == std::string_view("PK\x03\x04", 4); }

std::optional<std::string> torch_save_entry(const std::string& path) {
    const Archive archive = open_zip(path);
    return one_pickle(path, list_entries(archive.get()));
}

std::string torch_save_pickle(const std::string& path, uint64_t limit, std::string& entry) {
    const Archive archive = open_zip(path);
    const Entries found = list_entries(archive.get());
    const std::optional<std::string> name = one_pickle(path, found);
    if (!name) throw Error(where(path, "a zip archive without a data.pkl entry: not a torch.save archive"));
    if (found.storages > 0)
        throw Error(where(path, "a torch.save archive holding " + std::to_string(found.storages) +
                                    (found.storages == 1 ? " tensor storage ('" : " tensor storages ('") +
                                    found.first_storage + "'...): not a memory snapshot, which holds no tensors"));
    entry = *name;
    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_stat(archive.get(), name->c_str(), 0, &stat) != 0 || (stat.valid & ZIP_STAT_SIZE) == 0)
        throw Error(where(path, "entry '" + *name + "': " + zip_strerror(archive.get())));
    if (stat.size > limit) throw Error(where(path, "entry '" + *name + "' " + expansion_message(limit)));
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(zip_fopen(archive.get(), name->c_str(), 0), &zip_fclose);
    if (!file) throw Error(where(path, "entry '" + *name + "': " + zip_strerror(archive.get())));
    std::string bytes(static_cast<size_t>(stat.size), '\0');
    // One byte more than the stated size: an entry that expands past it (a forged header) is refused.
    char extra = 0;
    const zip_int64_t got = zip_fread(file.get(), bytes.data(), stat.size);
    if (got != static_cast<zip_int64_t>(stat.size) || zip_fread(file.get(), &extra, 1) != 0)
        throw Error(where(path, "entry '" + *name + "' is damaged (" + zip_file_strerror(file.get()) +
                                    "): it does not expand to the " + std::to_string(stat.size) +
                                    " bytes its header says"));
    return bytes;
}

std::optional<std::string_view> legacy_torch_save_object(std::string_view bytes, const std::string& path) {
    size_t at = legacy_magic_size(bytes), end = 0;
    if (at == 0) return std::nullopt;
    const std::string said = "torch.save's legacy format (_use_new_zipfile_serialization=False)";
    const PickleDoc version(bytes.substr(at), path, end);
    if (!version.is_int(version.root()) || version.as_int(version.root()) != 1001)
        throw Error(where(path, said + " of a protocol version other than 1001, the one PyTorch writes"));
    at += end;
    const PickleDoc sys_info(bytes.substr(at), path, end);   // byte order and type sizes: of storages only
    at += end;
    const size_t keys = empty_keys_size(bytes);
    if (keys == 0 || bytes.size() < at + keys)
        throw Error(where(path, said + " whose last pickle is not an empty list of storage keys: it holds tensors "
                                       "(or is truncated), and a memory snapshot holds none"));
    return bytes.substr(at, bytes.size() - keys - at);
}

}   // namespace mhc::trace::import
