#include "screenshot.hpp"

#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>
#include <png.h>
#include <zlib.h>

#include <csetjmp>
#include <string>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"

namespace mhc::viewer {

namespace {

// libpng's error handler: back to encode_png's setjmp without a word (the caller says it in one line).
[[noreturn]] void quiet_error(png_structp png, png_const_charp) { png_longjmp(png, 1); }
void quiet_warning(png_structp, png_const_charp) {}

// libpng's write callback: the encoded bytes appended to the std::string it was given.
void append_to_string(png_structp png, png_bytep data, size_t length) {
    static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), length);
}

// `rows` (top row first, RGBA, 8 bits a channel) into `out` as a PNG, by libpng: each row with
// filter type None and zlib at its default level, as the hand-written encoder it replaced did
// (stb_image_write's own deflate took 290 ms of a 1400x700 screenshot's 400 ms of CPU, zlib about
// 45 ms; libpng's adaptive filters cost more CPU for a file a little smaller). False on an error:
// libpng reports one by longjmp, so this function holds nothing that needs destroying.
bool encode_png(png_structp png, png_infop info, png_bytepp rows, int width, int height, std::string& out) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_set_write_fn(png, &out, append_to_string, nullptr);
    png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
                 PNG_COLOR_TYPE_RGB_ALPHA, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
    png_set_compression_level(png, Z_DEFAULT_COMPRESSION);
    png_set_rows(png, info, rows);
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
    return true;
}

// GL's RGBA rows (bottom row first) as a PNG in memory, or "" when libpng fails.
std::string png_of(std::vector<unsigned char>& rgba, int width, int height) {
    std::vector<png_bytep> rows(static_cast<size_t>(height));
    const size_t row = static_cast<size_t>(width) * 4;
    for (int y = 0; y < height; ++y)   // PNG rows go top-down: GL's last row first, no copy
        rows[static_cast<size_t>(y)] = rgba.data() + static_cast<size_t>(height - 1 - y) * row;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, quiet_error, quiet_warning);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    std::string out;
    out.reserve(rgba.size() / 4);
    const bool ok = info && encode_png(png, info, rows.data(), width, height, out);
    png_destroy_write_struct(&png, &info);
    return ok ? out : std::string();
}

}  // namespace

void write_framebuffer_png(const std::string& path, int width, int height) {
    std::vector<unsigned char> px(static_cast<size_t>(width) * static_cast<size_t>(height) * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
    if (glGetError() != GL_NO_ERROR) throw Error(path + ": cannot read the rendered frame", Error::Kind::Internal);
    // Opaque alpha: the window has no transparency.
    for (size_t i = 3; i < px.size(); i += 4) px[i] = 255;
    // Written as mhc writes its outputs (common/output_file.hpp): a temporary file of this process
    // renamed into place. It was PATH.tmp, one name for every process (two screenshots at once
    // wrote into one file), opened through a link planted there, and `--screenshot /dev/stdout`
    // (as root) replaced /dev/stdout with /dev/stdout.tmp.
    // Encoded in memory, then written with each write checked: a full disk left a cut PNG under
    // the name, exit 0, when the encoder wrote the file itself.
    std::string png = png_of(px, width, height);
    if (png.empty()) throw Error(path + ": cannot encode the PNG", Error::Kind::Internal);
    write_file_atomically(path, png, IfExists::Replace);
}

}  // namespace mhc::viewer
