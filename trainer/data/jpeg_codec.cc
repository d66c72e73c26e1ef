#include "trainer/data/jpeg_codec.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <csetjmp>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp::data {
namespace {

// libjpeg reports fatal errors through error_exit, which must not return: we longjmp back to the
// decode/encode call. Only libjpeg's C frames lie between setjmp and longjmp, and the functions
// that call setjmp declare every object with a destructor before it.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

void OnError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int msg_level) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  // msg_level -1 is a warning; only "premature end of data" makes the image unusable.
  if (msg_level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) err->truncated = true;
}

void InstallErrorManager(ErrorManager* err) {
  jpeg_std_error(&err->pub);
  err->pub.error_exit = OnError;
  err->pub.emit_message = OnMessage;
  err->message[0] = '\0';
  err->truncated = false;
}

struct DestinationBuffer {
  unsigned char* data = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): libjpeg's type
};

}  // namespace

absl::Status CheckJpegPixels(int64_t width, int64_t height, const std::string& name,
                             int64_t max_pixels) {
  if (width <= max_pixels && height <= max_pixels && width * height <= max_pixels) {
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat(name, ": cannot decode JPEG: it claims ", width, "x",
                                          height, " pixels, more than the limit of ", max_pixels));
}

absl::StatusOr<RgbImage> DecodeJpeg(std::string_view bytes, const std::string& name,
                                    int64_t max_pixels) {
  RgbImage image;
  ErrorManager err;
  jpeg_decompress_struct cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = &err.pub;
  InstallErrorManager(&err);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return absl::DataLossError(absl::StrCat(name, ": cannot decode JPEG: ", err.message));
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));  // NOLINT(runtime/int)
  jpeg_read_header(&cinfo, TRUE);
  // The header's size is only a claim: check it before libjpeg or we allocate for it.
  const int64_t pixels = int64_t{cinfo.image_width} * int64_t{cinfo.image_height};
  if (absl::Status st = CheckJpegPixels(cinfo.image_width, cinfo.image_height, name, max_pixels);
      !st.ok()) {
    jpeg_destroy_decompress(&cinfo);
    return st;
  }
  // At most 4 components of 2-byte coefficients per pixel (a progressive image keeps them all),
  // plus working buffers; past that libjpeg fails cleanly instead of allocating.
  cinfo.mem->max_memory_to_use = static_cast<long>(8 * pixels + (64 << 20));  // NOLINT(runtime/int)
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  image.width = static_cast<int>(cinfo.output_width);
  image.height = static_cast<int>(cinfo.output_height);
  const size_t stride = static_cast<size_t>(image.width) * 3;
  // Rows are added as they are decoded: a short file that claims a large image costs only what
  // it holds.
  image.pixels.reserve(stride * static_cast<size_t>(image.height));
  while (cinfo.output_scanline < cinfo.output_height) {
    image.pixels.resize(stride * (cinfo.output_scanline + size_t{1}));
    JSAMPROW row = image.pixels.data() + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (err.truncated) break;
  }
  if (!err.truncated) jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (err.truncated) {
    return absl::DataLossError(absl::StrCat(name, ": cannot decode JPEG: file is truncated"));
  }
  return image;
}

absl::StatusOr<JpegInfo> ReadJpegInfo(std::string_view bytes, const std::string& name,
                                      int64_t max_pixels) {
  auto bad = [&name](const std::string& why) {
    return absl::DataLossError(absl::StrCat(name, ": not a readable JPEG (", why, ")"));
  };
  const auto byte = [&bytes](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (bytes.size() < 4 || byte(0) != 0xFF || byte(1) != 0xD8) return bad("no start-of-image");
  size_t pos = 2;
  while (true) {
    // A marker: one or more 0xFF fill bytes, then the marker code.
    if (pos >= bytes.size() || byte(pos) != 0xFF) return bad("expected a marker");
    while (pos < bytes.size() && byte(pos) == 0xFF) ++pos;
    if (pos >= bytes.size()) return bad("truncated before the frame header");
    const uint8_t marker = byte(pos++);
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no length field
    if (marker == 0xD8) return bad("a second start-of-image");
    if (marker == 0xD9 || marker == 0xDA) return bad("no frame header before the image data");
    if (pos + 2 > bytes.size()) return bad("truncated marker length");
    const size_t length = (static_cast<size_t>(byte(pos)) << 8) | byte(pos + 1);
    if (length < 2 || pos + length > bytes.size()) return bad("truncated marker segment");
    const bool frame =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {
      if (length < 8) return bad("short frame header");
      JpegInfo info;
      info.height = (byte(pos + 3) << 8) | byte(pos + 4);
      info.width = (byte(pos + 5) << 8) | byte(pos + 6);
      info.components = byte(pos + 7);
      const int kind = marker & 0x0F;
      info.progressive = kind == 2 || kind == 6 || kind == 10 || kind == 14;
      info.arithmetic = kind >= 9;
      if (info.width == 0 || info.height == 0) return bad("zero width or height");
      if (info.components == 0 || length < 8 + 3 * static_cast<size_t>(info.components)) {
        return bad("malformed frame header");
      }
      if (absl::Status st = CheckJpegPixels(info.width, info.height, name, max_pixels); !st.ok()) {
        return st;
      }
      return info;
    }
    pos += length;
  }
}

absl::StatusOr<std::string> EncodeJpeg(const RgbImage& image, int quality) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return absl::InvalidArgumentError("EncodeJpeg: pixel buffer does not match width x height x 3");
  }
  DestinationBuffer out;
  ErrorManager err;
  jpeg_compress_struct cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = &err.pub;
  InstallErrorManager(&err);
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(out.data);
    return absl::InternalError(absl::StrCat("cannot encode JPEG: ", err.message));
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &out.data, &out.size);
  cinfo.image_width = static_cast<JDIMENSION>(image.width);
  cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(image.width) * 3;
  while (cinfo.next_scanline < cinfo.image_height) {
    // libjpeg's API takes non-const rows; it does not write through them.
    JSAMPROW row = const_cast<JSAMPLE*>(image.pixels.data() + stride * cinfo.next_scanline);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string encoded(reinterpret_cast<const char*>(out.data), out.size);
  std::free(out.data);
  return encoded;
}

}  // namespace ddp::data
