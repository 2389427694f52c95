// A memory snapshot saved with torch.save (docs/import.md, "PyTorch CUDA memory snapshot"): the zip
// archive and the legacy format read as the pickle inside them; archives of tensors, of several or
// no data.pkl, and entries past --max-input-size refused naming the file. Fixtures:
// fixtures/make_torch_save.py (torch 2.15.0).
#include <zip.h>

#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "mhc/trace/check.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;

namespace {

// The trace's meta but for what names the input (its path, and the container it came in).
std::map<std::string, std::string> meta_of_content(const std::string& db) {
    auto meta = mhc::trace::load_trace(db).meta;
    for (const char* key : {"import.input", "snapshot.file"}) meta.erase(key);
    return meta;
}

imp::Result import_quietly(const std::string& in, const std::string& out, uint64_t limit = imp::kDefaultMaxInputSize) {
    imp::Options opt;
    opt.warn = false;
    opt.max_input_size = limit;
    return imp::import_file(in, out, opt);
}

// `import` of `in` refused with exit 2, in one line naming the file and saying `expect`; nothing written.
void expect_refused(const std::string& in, const std::string& expect, const std::string& args = "") {
    test::TempDir dir;
    std::string err;
    CHECK(test::run_mhc("import " + in + " -o " + dir.file("out.db") + " " + args, &err) == 2);
    INFO(err);
    CHECK(err.find(in + ": ") != std::string::npos);
    CHECK(err.find(expect) != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(!std::filesystem::exists(dir.file("out.db")));
}

// A zip holding `entries` (name, bytes), deflated: what a bomb or a forged archive would be.
void write_zip(const std::string& path, const std::map<std::string, std::string>& entries) {
    int code = 0;
    zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
    REQUIRE(archive != nullptr);
    for (const auto& [name, bytes] : entries) {
        zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
        REQUIRE(zip_file_add(archive, name.c_str(), source, ZIP_FL_OVERWRITE) >= 0);
    }
    REQUIRE(zip_close(archive) == 0);
}

}   // namespace

TEST_CASE("torch.save: the archive and the legacy format import as the pickle in them", "[import][torch_save]") {
    test::TempDir dir;
    const imp::Result plain = import_quietly(test::fixture("torch_save_snapshot.pickle"), dir.file("plain.db"));
    CHECK(plain.events == 5);
    CHECK(plain.allocations == 2);
    CHECK(imp::detect_format(test::fixture("torch_save_snapshot.pt")) == imp::Format::Snapshot);
    for (const char* name : {"torch_save_snapshot.pt", "torch_save_legacy.pt", "torch_save_legacy4.pt"}) {
        INFO(name);
        const imp::Result saved = import_quietly(test::fixture(name), dir.file(std::string(name) + ".db"));
        CHECK(saved.format == imp::Format::Snapshot);
        CHECK(saved.events == plain.events);
        CHECK(saved.allocations == plain.allocations);
        // The same rows (the content digest is in meta) and the same meta, but for the input's name.
        CHECK(meta_of_content(dir.file(std::string(name) + ".db")) == meta_of_content(dir.file("plain.db")));
    }
    const imp::Result zipped = import_quietly(test::fixture("torch_save_snapshot.pt"), dir.file("zip.db"));
    CHECK(zipped.meta.at("snapshot.file") ==
          "a torch.save archive: its entry 'torch_save_snapshot/data.pkl', the snapshot's pickle");
    CHECK(import_quietly(test::fixture("torch_save_legacy.pt"), dir.file("legacy.db"))
              .meta.at("snapshot.file")
              .rfind("torch.save's legacy format", 0) == 0);
    // memory_snapshot()'s list (the end state's segments) saved so: read as that list's pickle is.
    const imp::Result segments = import_quietly(test::fixture("torch_save_segments.pt"), dir.file("segments.db"));
    CHECK(segments.events == 0);
    CHECK(segments.allocations == 1);   // the one active block of the end state
    CHECK(segments.meta.count("snapshot.end_state_only") == 1);
}

TEST_CASE("torch.save: archives that are not one snapshot are refused naming the file", "[import][torch_save]") {
    expect_refused(test::fixture("torch_save_tensor.pt"),
                   "a torch.save archive holding 1 tensor storage ('torch_save_tensor/data/0'...): not a memory "
                   "snapshot, which holds no tensors");
    expect_refused(test::fixture("torch_save_tensor_legacy.pt"),
                   "torch.save's legacy format (_use_new_zipfile_serialization=False) whose last pickle is not an "
                   "empty list of storage keys: it holds tensors");
    expect_refused(test::fixture("torch_save_two.zip"),
                   "a zip archive with 2 data.pkl entries ('archive/data.pkl', 'second/data.pkl'...): "
                   "not one torch.save archive");
    expect_refused(test::fixture("torch_save_two.zip"), "with 2 data.pkl entries", "--format snapshot");
    // Another program's zip: not read, as before; forced as a snapshot, said to be no torch.save archive.
    expect_refused(test::fixture("torch_save_none.zip"), "a zip archive, which mhc does not read");
    expect_refused(test::fixture("torch_save_none.zip"), "a zip archive without a data.pkl entry", "--format snapshot");
}

TEST_CASE("torch.save: an entry past --max-input-size is refused before it is read", "[import][torch_save]") {
    test::TempDir dir;
    // 64 MiB of one byte deflates to about 64 KiB: refused from the entry's header, not by running out
    // of memory; the same bytes under the limit are read (and refused as no pickle).
    const std::string bomb = dir.file("bomb.pt");
    write_zip(bomb, {{"bomb/data.pkl", std::string(64u << 20, 'x')}});
    CHECK(std::filesystem::file_size(bomb) < (1u << 20));
    expect_refused(bomb, "entry 'bomb/data.pkl' expands past 16 MiB; raise with --max-input-size",
                   "--max-input-size 16MiB");
    expect_refused(bomb, "pickle: ", "--max-input-size 128MiB");
    // A pickle that holds a tensor without the archive's storages (a persistent id): named so.
    const std::string persid = dir.file("persid.pt");
    write_zip(persid, {{"persid/data.pkl", std::string("\x80\x02X\x01\x00\x00\x00kQ.", 10)}});
    expect_refused(persid, "refused opcode BINPERSID: a persistent id (torch.save's reference to a tensor's storage)");
}
