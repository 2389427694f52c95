#include "mhc/common/small_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"

namespace mhc {

std::string read_small_file(const std::string& path, const std::string& what, uint64_t limit) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(path + ": cannot read the " + what + ": " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    const auto too_large = [&]() {
        return Error(path + ": more than " + format_bytes(static_cast<int64_t>(limit)) + ", larger than a " + what +
                     " is (a trace or another file given by mistake?)");
    };
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit)
        throw too_large();
    // Read up to the limit whatever the size said (a file growing meanwhile).
    std::string text;
    char buffer[65536];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw Error(path + ": cannot read the " + what + ": " + std::strerror(errno));
        if (got == 0) break;
        text.append(buffer, static_cast<size_t>(got));
        if (text.size() > limit) throw too_large();
    }
    return text;
}

}   // namespace mhc
