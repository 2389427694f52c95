#include "screenshot.hpp"

#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>
#include <stb_image_write.h>   // implementation compiled into Debian's libstb

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"

namespace mhc::viewer {

void write_framebuffer_png(const std::string& path, int width, int height) {
    std::vector<unsigned char> px(static_cast<size_t>(width) * static_cast<size_t>(height) * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
    if (glGetError() != GL_NO_ERROR) throw Error(path + ": cannot read the rendered frame", Error::Kind::Internal);
    // GL rows go bottom-up; PNG rows top-down. Opaque alpha: the window has no transparency.
    std::vector<unsigned char> out(px.size());
    size_t row = static_cast<size_t>(width) * 4;
    for (int y = 0; y < height; ++y)
        std::copy_n(px.data() + static_cast<size_t>(height - 1 - y) * row, row, out.data() + static_cast<size_t>(y) * row);
    for (size_t i = 3; i < out.size(); i += 4) out[i] = 255;
    // Written as mhc writes its outputs (common/output_file.hpp): a temporary file of this process
    // renamed into place. It was PATH.tmp, one name for every process (two screenshots at once
    // wrote into one file), opened through a link planted there, and `--screenshot /dev/stdout`
    // (as root) replaced /dev/stdout with /dev/stdout.tmp.
    // Encoded in memory, then written with each write checked: stbi_write_png checks none, and a
    // full disk left a cut PNG under the name, exit 0.
    std::string png;
    const auto append = [](void* to, void* data, int size) {
        static_cast<std::string*>(to)->append(static_cast<const char*>(data), static_cast<size_t>(size));
    };
    if (!stbi_write_png_to_func(append, &png, width, height, 4, out.data(), static_cast<int>(row)))
        throw Error(path + ": cannot encode the PNG", Error::Kind::Internal);
    write_file_atomically(path, png, IfExists::Replace);
}

}  // namespace mhc::viewer
