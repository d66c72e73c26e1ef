#include "trainer/data/image_files.h"

#include <dirent.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ddp::data {
namespace {

constexpr uint32_t kIdxImagesMagic = 0x00000803;
constexpr uint32_t kIdxLabelsMagic = 0x00000801;
constexpr int64_t kCifarSide = 32;
constexpr int64_t kCifarChannels = 3;
constexpr int64_t kCifarRecord = 1 + kCifarChannels * kCifarSide * kCifarSide;

}  // namespace

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status ListDirectoryEntries(const std::string& dir, std::vector<DirEntry>* folders,
                                  std::vector<DirEntry>* files) {
  std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(dir.c_str()), &::closedir);
  if (handle == nullptr) {
    const int err = errno;
    return absl::NotFoundError(absl::StrCat(dir, ": cannot list: ", std::strerror(err)));
  }
  folders->clear();
  files->clear();
  while (const dirent* entry = ::readdir(handle.get())) {
    DirEntry e;
    e.name = entry->d_name;
    if (e.name == "." || e.name == "..") continue;
    struct stat st;
    if (::stat((dir + "/" + e.name).c_str(), &st) == 0) {
      e.valid = true;
      e.dev = st.st_dev;
      e.ino = st.st_ino;
      e.mode = st.st_mode;
      e.size = static_cast<int64_t>(st.st_size);
    }
    (e.valid && S_ISDIR(e.mode) ? folders : files)->push_back(std::move(e));
  }
  const auto by_name = [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; };
  std::sort(folders->begin(), folders->end(), by_name);
  std::sort(files->begin(), files->end(), by_name);
  return absl::OkStatus();
}

absl::Status ListDirectory(const std::string& dir, std::vector<std::string>* folders,
                           std::vector<std::string>* files) {
  std::vector<DirEntry> sub_entries;
  std::vector<DirEntry> file_entries;
  RETURN_IF_ERROR(ListDirectoryEntries(dir, &sub_entries, &file_entries));
  folders->clear();
  files->clear();
  for (DirEntry& e : sub_entries) folders->push_back(std::move(e.name));
  for (DirEntry& e : file_entries) files->push_back(std::move(e.name));
  return absl::OkStatus();
}

namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status TooLarge(const std::string& path, size_t max_bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": larger than the limit of ", max_bytes, " bytes for one file"));
}

}  // namespace

absl::Status CheckReadableFile(const std::string& path, const DirEntry& entry, size_t max_bytes) {
  if (!entry.valid) return absl::OkStatus();  // reading it names the problem (ENOENT, ELOOP)
  if (!S_ISREG(entry.mode) && !S_ISFIFO(entry.mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is ", KindOf(entry.mode), ", expected a regular file"));
  }
  if (S_ISREG(entry.mode) && static_cast<uint64_t>(entry.size) > max_bytes) {
    return TooLarge(path, max_bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  // The type first (stat does not open): opening a device can have effects of its own.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is ", KindOf(st.st_mode), ", expected a regular file"));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rbe"), &std::fclose);
  if (file == nullptr) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  // Again on what was opened: the path may have been replaced in between.
  if (::fstat(::fileno(file.get()), &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    return TooLarge(path, max_bytes);
  }
  std::string data;
  if (S_ISREG(st.st_mode)) data.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file.get())) > 0) {
    if (n > max_bytes - std::min(max_bytes, data.size())) return TooLarge(path, max_bytes);
    data.append(chunk, n);
  }
  if (std::ferror(file.get())) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return data;
}

namespace {

absl::StatusOr<std::string> Gunzip(const std::string& path, const std::string& compressed,
                                   size_t max_output) {
  std::string out;
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  // 16 + MAX_WBITS: expect a gzip header and trailer.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(absl::StrCat(path, ": zlib init failed"));
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  char chunk[1 << 16];
  int rc = Z_OK;
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof(chunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = sizeof(chunk) - zs.avail_out;
    if (produced > max_output - out.size()) {
      inflateEnd(&zs);
      return absl::DataLossError(absl::StrCat(
          path, ": gzip stream inflates to more than the limit of ", max_output, " bytes"));
    }
    out.append(chunk, produced);
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are legal: continue with the next one, if any.
      if (zs.avail_in == 0) break;
      if (inflateReset(&zs) != Z_OK) break;
      continue;
    }
    if (rc != Z_OK) break;
    if (zs.avail_in == 0 && zs.avail_out != 0) {
      rc = Z_BUF_ERROR;  // input ended inside the stream
      break;
    }
  }
  std::string msg = zs.msg != nullptr ? zs.msg : "";
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    if (rc == Z_BUF_ERROR) {
      return absl::DataLossError(absl::StrCat(path, ": truncated gzip stream"));
    }
    return absl::DataLossError(
        absl::StrCat(path, ": bad gzip stream", msg.empty() ? "" : ": ", msg));
  }
  return out;
}

uint32_t ReadBigEndian32(const std::string& data, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + offset);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Validates an IDX header with `dims` dimensions; returns the dimensions.
absl::StatusOr<std::vector<int64_t>> ParseIdxHeader(const std::string& path,
                                                    const std::string& data, uint32_t magic,
                                                    int dims) {
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (data.size() < header) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated IDX header (", data.size(), " bytes)"));
  }
  const uint32_t got = ReadBigEndian32(data, 0);
  if (got != magic) {
    return absl::DataLossError(absl::StrCat(path, ": bad IDX magic 0x",
                                            absl::Hex(got, absl::kZeroPad8), ", expected 0x",
                                            absl::Hex(magic, absl::kZeroPad8)));
  }
  std::vector<int64_t> shape;
  // Up to three 32-bit dimensions: their product can exceed 64 bits.
  uint64_t expected = 1;
  bool saturated = false;
  for (int d = 0; d < dims; ++d) {
    const uint32_t dim = ReadBigEndian32(data, 4 + 4 * static_cast<size_t>(d));
    shape.push_back(dim);
    saturated = saturated || __builtin_mul_overflow(expected, uint64_t{dim}, &expected);
  }
  if (saturated) {
    if (std::find(shape.begin(), shape.end(), 0) == shape.end()) {
      return absl::DataLossError(absl::StrCat(path, ": header promises ",
                                              absl::StrJoin(shape, " x "),
                                              " bytes of data, more than any file holds"));
    }
    expected = 0;
  }
  const uint64_t payload = data.size() - header;
  if (payload < expected) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: header promises ", expected,
                                            " bytes of data, file has ", payload));
  }
  if (payload > expected) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", payload - expected, " unexpected bytes after the data"));
  }
  return shape;
}

}  // namespace

absl::Status MaybeGunzip(const std::string& name, std::string* bytes, size_t max_output) {
  if (bytes->size() < 2 || static_cast<unsigned char>((*bytes)[0]) != 0x1f ||
      static_cast<unsigned char>((*bytes)[1]) != 0x8b) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(*bytes, Gunzip(name, *bytes, max_output));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileMaybeGzip(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  RETURN_IF_ERROR(MaybeGunzip(path, &bytes));
  return bytes;
}

absl::StatusOr<RawImageSet> ParseIdxPair(const std::string& images_name, const std::string& images,
                                         const std::string& labels_name, const std::string& labels,
                                         int num_classes) {
  ASSIGN_OR_RETURN(std::vector<int64_t> image_shape,
                   ParseIdxHeader(images_name, images, kIdxImagesMagic, 3));
  ASSIGN_OR_RETURN(std::vector<int64_t> label_shape,
                   ParseIdxHeader(labels_name, labels, kIdxLabelsMagic, 1));
  if (image_shape[0] != label_shape[0]) {
    return absl::DataLossError(absl::StrCat(images_name, ": has ", image_shape[0], " images but ",
                                            labels_name, " has ", label_shape[0], " labels"));
  }
  RawImageSet set;
  set.count = image_shape[0];
  set.channels = 1;
  set.height = image_shape[1];
  set.width = image_shape[2];
  set.pixels.assign(images.begin() + 16, images.end());
  set.labels.reserve(static_cast<size_t>(set.count));
  for (size_t i = 8; i < labels.size(); ++i) {
    const int64_t label = static_cast<unsigned char>(labels[i]);
    if (label >= num_classes) {
      return absl::DataLossError(absl::StrCat(labels_name, ": label ", label, " at index ", i - 8,
                                              " is not below ", num_classes));
    }
    set.labels.push_back(label);
  }
  return set;
}

absl::StatusOr<RawImageSet> ReadIdxPair(const std::string& images_path,
                                        const std::string& labels_path, int num_classes) {
  ASSIGN_OR_RETURN(std::string images, ReadFileMaybeGzip(images_path));
  ASSIGN_OR_RETURN(std::string labels, ReadFileMaybeGzip(labels_path));
  return ParseIdxPair(images_path, images, labels_path, labels, num_classes);
}

absl::Status AppendCifar10Batch(const std::string& name, const std::string& data,
                                RawImageSet* set) {
  constexpr int64_t kPixels = kCifarRecord - 1;
  set->channels = kCifarChannels;
  set->height = kCifarSide;
  set->width = kCifarSide;
  if (data.empty() || data.size() % kCifarRecord != 0) {
    return absl::DataLossError(absl::StrCat(name, ": size ", data.size(),
                                            " is not a positive multiple of the CIFAR-10 record "
                                            "size ",
                                            kCifarRecord));
  }
  const int64_t records = static_cast<int64_t>(data.size()) / kCifarRecord;
  set->pixels.reserve(set->pixels.size() + static_cast<size_t>(records * kPixels));
  for (int64_t r = 0; r < records; ++r) {
    const char* record = data.data() + r * kCifarRecord;
    const int64_t label = static_cast<unsigned char>(record[0]);
    if (label >= 10) {
      return absl::DataLossError(
          absl::StrCat(name, ": label ", label, " in record ", r, " is not below 10"));
    }
    set->labels.push_back(label);
    set->pixels.insert(set->pixels.end(), record + 1, record + kCifarRecord);
  }
  set->count += records;
  return absl::OkStatus();
}

absl::StatusOr<RawImageSet> ReadCifar10Batches(const std::vector<std::string>& paths) {
  RawImageSet set;
  set.channels = kCifarChannels;
  set.height = kCifarSide;
  set.width = kCifarSide;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::string data, ReadFile(path));
    RETURN_IF_ERROR(AppendCifar10Batch(path, data, &set));
  }
  return set;
}

}  // namespace ddp::data
