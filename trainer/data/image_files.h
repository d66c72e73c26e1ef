// Readers for the on-disk formats of the in-memory datasets: IDX (MNIST, Fashion-MNIST; raw or
// gzip-compressed) and the CIFAR-10 binary batches. Torch-free; the results are plain uint8 arrays
// that InMemoryDataset wraps into tensors.
//
// Every error is a one-line absl::Status naming the file: NotFound for a missing file, DataLoss
// for a corrupt one (bad magic, bad gzip stream, truncated data, trailing bytes, mismatched
// counts), InvalidArgument for one that is not a regular file or is larger than the reader's
// bound. Every read is bounded: a file by kMaxDataFileBytes (or the caller's limit), a gzip
// stream's output by kMaxGunzipBytes, so a link to /dev/zero or a decompression bomb costs a
// bounded amount of memory and time.
//
// Thread safety: free functions without shared state.
#ifndef SLURM_DDP_TRAINER_DATA_IMAGE_FILES_H_
#define SLURM_DDP_TRAINER_DATA_IMAGE_FILES_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp::data {

// A set of equally sized uint8 images with their labels.
struct RawImageSet {
  int64_t count = 0;
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;  // count x channels x height x width, row-major (NCHW)
  std::vector<int64_t> labels;  // count entries
};

// The most bytes read from one data file (an IDX or CIFAR-10 file; the largest public ones are
// well below 1 GiB), and the most a gzip stream may inflate to.
inline constexpr size_t kMaxDataFileBytes = size_t{1} << 30;
inline constexpr size_t kMaxGunzipBytes = size_t{1} << 30;

// File-system helpers (POSIX, following symlinks). We avoid std::filesystem in binaries that link
// LibTorch: the 2.11 wheel's libtorch.so exports its own, partly broken, std::filesystem symbols
// (remove_all crashes through a null pointer), which interpose on libstdc++'s.
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
// Names in `dir` (without "." and ".."), split into subfolders and other entries, each sorted.
absl::Status ListDirectory(const std::string& dir, std::vector<std::string>* folders,
                           std::vector<std::string>* files);

// A directory entry as stat(2) sees it through any symlink. `valid` is false when the entry
// cannot be followed (a dangling link, a link loop): it is then listed as a file.
struct DirEntry {
  std::string name;
  bool valid = false;
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t mode = 0;
  int64_t size = 0;
};
// As ListDirectory, with what stat says of each entry (sorted by name).
absl::Status ListDirectoryEntries(const std::string& dir, std::vector<DirEntry>* folders,
                                  std::vector<DirEntry>* files);

// OK when `entry` may be read as a data file: a regular file of at most `max_bytes`, or a FIFO
// (read like a slow file, still bounded). InvalidArgument naming `path` otherwise (a device such
// as /dev/zero, a socket, a file too large).
absl::Status CheckReadableFile(const std::string& path, const DirEntry& entry, size_t max_bytes);

// The whole file as bytes. Refused (InvalidArgument naming the file) when it is not a regular
// file or a FIFO, or holds more than `max_bytes`: reading stops at the bound.
absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes = kMaxDataFileBytes);

// The whole file; gunzipped when it starts with the gzip magic (whatever its name).
absl::StatusOr<std::string> ReadFileMaybeGzip(const std::string& path);

// An IDX image file (magic 0x00000803: count, rows, cols) and label file (magic 0x00000801)
// into one set with channels == 1. Counts must agree; labels must be < `num_classes`.
absl::StatusOr<RawImageSet> ReadIdxPair(const std::string& images_path,
                                        const std::string& labels_path, int num_classes);

// CIFAR-10 binary batches (each record: 1 label byte + 3x32x32 pixel bytes), concatenated in the
// order given.
absl::StatusOr<RawImageSet> ReadCifar10Batches(const std::vector<std::string>& paths);

// The parsers behind the readers, on bytes already in memory (`name` names them in errors):
// what the fuzz harnesses (fuzz/) drive.
// Gunzips `*bytes` in place when they start with the gzip magic. DataLoss naming `name` when the
// output would exceed `max_output` bytes (a decompression bomb).
absl::Status MaybeGunzip(const std::string& name, std::string* bytes,
                         size_t max_output = kMaxGunzipBytes);
absl::StatusOr<RawImageSet> ParseIdxPair(const std::string& images_name, const std::string& images,
                                         const std::string& labels_name, const std::string& labels,
                                         int num_classes);
// Appends the records of one CIFAR-10 batch to `set`, which must be empty or hold CIFAR-10 images.
absl::Status AppendCifar10Batch(const std::string& name, const std::string& data, RawImageSet* set);

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_IMAGE_FILES_H_
