#include "trainer/data/nvjpeg_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddp::data::nvjpeg {
namespace {

template <typename Fn>
bool Resolve(void* dl, const char* name, Fn* out, std::vector<std::string>* missing) {
  void* symbol = dlsym(dl, name);
  if (symbol == nullptr) {
    missing->push_back(name);
    return false;
  }
  *out = reinterpret_cast<Fn>(symbol);
  return true;
}

absl::StatusOr<Library> LoadOnce() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("DDP_NVJPEG_LIBRARY"); env != nullptr && *env != '\0') {
    candidates.push_back(env);
  }
  candidates.push_back("libnvjpeg.so.13");
  candidates.push_back("libnvjpeg.so");
  void* dl = nullptr;
  std::vector<std::string> errors;
  Library lib{};
  for (const std::string& name : candidates) {
    dl = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl != nullptr) {
      lib.path = name;
      break;
    }
    const char* why = dlerror();
    errors.push_back(why != nullptr ? why : name);
  }
  if (dl == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nvJPEG not found (", absl::StrJoin(errors, "; "),
        "); install NVIDIA's nvidia-nvjpeg wheel or a CUDA toolkit and put its lib folder on "
        "LD_LIBRARY_PATH, or set DDP_NVJPEG_LIBRARY to the library's path"));
  }
  // The library stays loaded for the life of the process (nothing unloads CUDA libraries).
  std::vector<std::string> missing;
  Resolve(dl, "nvjpegCreateEx", &lib.CreateEx, &missing);
  Resolve(dl, "nvjpegDestroy", &lib.Destroy, &missing);
  Resolve(dl, "nvjpegJpegStateCreate", &lib.JpegStateCreate, &missing);
  Resolve(dl, "nvjpegJpegStateDestroy", &lib.JpegStateDestroy, &missing);
  Resolve(dl, "nvjpegGetImageInfo", &lib.GetImageInfo, &missing);
  Resolve(dl, "nvjpegDecode", &lib.Decode, &missing);
  Resolve(dl, "nvjpegDecodeBatchedInitialize", &lib.DecodeBatchedInitialize, &missing);
  Resolve(dl, "nvjpegDecodeBatched", &lib.DecodeBatched, &missing);
  Resolve(dl, "nvjpegJpegStreamCreate", &lib.JpegStreamCreate, &missing);
  Resolve(dl, "nvjpegJpegStreamDestroy", &lib.JpegStreamDestroy, &missing);
  Resolve(dl, "nvjpegJpegStreamParseHeader", &lib.JpegStreamParseHeader, &missing);
  Resolve(dl, "nvjpegDecodeBatchedSupported", &lib.DecodeBatchedSupported, &missing);
  Resolve(dl, "nvjpegGetHardwareDecoderInfo", &lib.GetHardwareDecoderInfo, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        lib.path, " lacks nvJPEG entry points: ", absl::StrJoin(missing, ", "), " (too old?)"));
  }
  return lib;
}

}  // namespace

absl::StatusOr<const Library*> Load() {
  static std::once_flag once;
  static absl::StatusOr<Library>* loaded = nullptr;
  std::call_once(once, [] { loaded = new absl::StatusOr<Library>(LoadOnce()); });
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

std::string StatusName(Status status) {
  static const char* const kNames[] = {"SUCCESS",
                                       "NOT_INITIALIZED",
                                       "INVALID_PARAMETER",
                                       "BAD_JPEG",
                                       "JPEG_NOT_SUPPORTED",
                                       "ALLOCATOR_FAILURE",
                                       "EXECUTION_FAILED",
                                       "ARCH_MISMATCH",
                                       "INTERNAL_ERROR",
                                       "IMPLEMENTATION_NOT_SUPPORTED",
                                       "INCOMPLETE_BITSTREAM"};
  const char* name =
      status >= 0 && status < static_cast<int>(std::size(kNames)) ? kNames[status] : "UNKNOWN";
  return absl::StrCat("NVJPEG_STATUS_", name, " (", status, ")");
}

}  // namespace ddp::data::nvjpeg
