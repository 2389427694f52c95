// The processes of an MPI job (process.hpp) and the transport the other MPI sources share. MPI
// itself is in libmhc_mpi.so (mpi_module.cpp), loaded here only under an MPI launcher.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "mhc/dist/process.hpp"
#include "transport.hpp"

namespace mhc::dist {

namespace detail {

World& world() {
    static World w;
    return w;
}

namespace {
constexpr int64_t kPiece = int64_t{1} << 30;
}  // namespace

void send_bytes(const std::string& b, int to, Tag tag) {
    int64_t n = static_cast<int64_t>(b.size());
    send(&n, 1, to, tag);
    for (int64_t off = 0; off < n;) {
        int part = static_cast<int>(std::min(n - off, kPiece));
        mpi().send_bytes(b.data() + off, part, to, static_cast<int>(tag));
        off += part;
    }
}

std::string recv_bytes(int from, Tag tag) {
    int64_t n = 0;
    recv(&n, 1, from, tag);
    std::string b(static_cast<size_t>(n), '\0');
    for (int64_t off = 0; off < n;) {
        int part = static_cast<int>(std::min(n - off, kPiece));
        mpi().recv_bytes(b.data() + off, part, from, static_cast<int>(tag));
        off += part;
    }
    return b;
}

}  // namespace detail

using detail::world;

namespace {

// Where libmhc_mpi.so is: lib/mhc beside the program's bin/ (an install, and build/cli/mhc in
// the build tree), else where this build made it (the build tree's other programs).
std::vector<std::string> module_paths() {
    std::vector<std::string> out;
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) out.push_back((exe.parent_path().parent_path() / "lib" / "mhc" / "libmhc_mpi.so").string());
    out.emplace_back(MHC_MPI_MODULE_BUILT);
    return out;
}

// The library's calls, or the reasons it could not be loaded. RTLD_GLOBAL: OpenMPI's own
// components, which it opens itself, take their symbols from its libraries.
const MhcMpiModule* load_module(std::string& why) {
    for (const std::string& path : module_paths()) {
        void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (lib == nullptr) {
            const char* error = dlerror();
            why += std::string(why.empty() ? "" : "; ") + (error ? error : path);
            continue;
        }
        auto* get = reinterpret_cast<const MhcMpiModule* (*)()>(dlsym(lib, "mhc_mpi_module"));
        const MhcMpiModule* module = get ? get() : nullptr;
        if (module != nullptr && module->version == kMhcMpiModuleVersion) return module;
        why += std::string(why.empty() ? "" : "; ") + path + ": not this build's";
    }
    return nullptr;
}

}  // namespace

void init(int* argc, char*** argv) {
    // Only under a launcher: a plain `mhc` never starts MPI (no daemon, no network probing) nor
    // loads its libraries.
    if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") && !std::getenv("PMIX_RANK")) return;
    std::string why;
    world().mpi = load_module(why);
    if (world().mpi == nullptr) {
        std::fprintf(stderr, "mhc: MPI: cannot load libmhc_mpi.so: %s\n", why.c_str());
        std::exit(1);
    }
    world().mpi->init(argc, argv, &world().size, &world().rank);
    world().started = true;
}

void finalize() {
    // Every process got here through agree() (main), so MPI_Finalize's own synchronisation
    // is short.
    if (world().started) detail::mpi().finalize();
    world().started = false;
}

bool enabled() { return true; }
int size() { return world().size; }
int rank() { return world().rank; }

Outcome agree(const Outcome& mine) {
    const detail::World& w = world();
    if (!w.started || w.size == 1) return mine;
    // The lowest-numbered process that failed, then its code and message from it.
    int64_t candidate = mine.code != 0 ? w.rank : w.size;
    const int64_t first = detail::mpi().allreduce_min_i64(candidate);
    if (first == w.size) return {};
    const int from = static_cast<int>(first);
    const std::string text = mine.message.substr(0, 4096);
    int64_t head[2] = {mine.code, static_cast<int64_t>(text.size())};
    detail::mpi().bcast_i64(head, 2, from);
    Outcome agreed{static_cast<int>(head[0]), w.rank == from ? text : std::string(static_cast<size_t>(head[1]), '\0')};
    if (head[1] > 0) detail::mpi().bcast_bytes(agreed.message.data(), static_cast<int>(head[1]), from);
    return agreed;
}

void enter_parallel() {
    if (!world().started || world().size == 1) return;
    Outcome o = agree({});
    if (o.code != 0) throw AgreedFailure{o};
    world().parallel = true;
}

void leave_parallel() { world().parallel = false; }
bool in_parallel() { return world().parallel; }

void abort_job(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (world().started) detail::mpi().abort_job(code);
    std::_Exit(code);   // MPI_Abort does not return; in case it does
}

}  // namespace mhc::dist
