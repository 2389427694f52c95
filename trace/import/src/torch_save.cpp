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

// pickle.dump(0x1950a86a20f9469cfc6c, f, protocol=2): the first bytes torch.save's legacy format writes.
constexpr std::string_view kLegacyMagic("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
// pickle.dump([], f, protocol=2): the storage keys, last, of a file that holds no tensors.
constexpr std::string_view kNoStorageKeys("\x80\x02]q\x00.", 6);

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
                                    " tensor storages ('" + found.first_storage +
                                    "'...): not a memory snapshot, which holds no tensors"));
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
    if (bytes.substr(0, kLegacyMagic.size()) != kLegacyMagic) return std::nullopt;
    const std::string said = "torch.save's legacy format (_use_new_zipfile_serialization=False)";
    size_t at = kLegacyMagic.size(), end = 0;
    const PickleDoc version(bytes.substr(at), path, end);
    if (!version.is_int(version.root()) || version.as_int(version.root()) != 1001)
        throw Error(where(path, said + " of a protocol version other than 1001, the one PyTorch writes"));
    at += end;
    const PickleDoc sys_info(bytes.substr(at), path, end);   // endianness and type sizes: of storages only
    at += end;
    if (bytes.size() < at + kNoStorageKeys.size() ||
        bytes.substr(bytes.size() - kNoStorageKeys.size()) != kNoStorageKeys)
        throw Error(where(path, said + " whose last pickle is not an empty list of storage keys: it holds tensors "
                                       "(or is truncated), and a memory snapshot holds none"));
    return bytes.substr(at, bytes.size() - kNoStorageKeys.size() - at);
}

}   // namespace mhc::trace::import
