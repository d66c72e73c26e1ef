// A main for the fuzz harnesses where libFuzzer is not available (the default GCC build, where
// `make test` runs them): it replays every input of the given corpus folders, then mutates them
// at random (bit flips, interesting bytes and integers, inserted, deleted, duplicated and spliced
// ranges) for the given time. Built with AddressSanitizer and UBSan, like libFuzzer's builds. On
// a crash the input is written to crash-<harness>-<n> in $FUZZ_ARTIFACT_DIR (or the current
// folder) and the process dies with the crash, so the test fails with a reproducer.
//
//   fuzz_<name> [-seconds=S] [-seed=N] [-max_len=BYTES] CORPUS_DIR_OR_FILE...
//
// `make fuzz` (fuzz/run.sh) builds the same harnesses with clang and libFuzzer instead.
//
// Thread safety: single-threaded.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#if defined(__has_include)
#if __has_include(<sanitizer/common_interface_defs.h>) && \
    (defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__))
#include <sanitizer/common_interface_defs.h>
#define DDP_FUZZ_HAVE_SANITIZER_CALLBACK 1
#endif
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input being run, for the crash handlers (written before each run).
std::vector<uint8_t> g_current;
char g_artifact[4096];

void SaveCurrentInput() {
  const int fd = ::open(g_artifact, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current.size()) {
    const ssize_t n = ::write(fd, g_current.data() + done, g_current.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  static const char kMsg[] = "fuzz: the crashing input is saved in ";
  (void)!::write(2, kMsg, sizeof(kMsg) - 1);
  (void)!::write(2, g_artifact, std::strlen(g_artifact));
  (void)!::write(2, "\n", 1);
}

void OnCrash(int sig) {
  SaveCurrentInput();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void ReadInputs(const std::string& path, std::vector<std::vector<uint8_t>>* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz: %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(2);
  }
  if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') names.push_back(e->d_name);
      }
      ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) ReadInputs(path + "/" + name, out);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  out->emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::vector<uint8_t> Mutate(const std::vector<std::vector<uint8_t>>& corpus, size_t max_len) {
    std::vector<uint8_t> v = corpus.empty() ? std::vector<uint8_t>() : corpus[Below(corpus.size())];
    const int ops = 1 + static_cast<int>(Below(8));
    for (int i = 0; i < ops; ++i) Step(&v, corpus);
    if (v.size() > max_len) v.resize(max_len);
    return v;
  }

 private:
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

  void Step(std::vector<uint8_t>* v, const std::vector<std::vector<uint8_t>>& corpus) {
    static const uint64_t kInteresting[] = {
        0,          1,           0x7f,       0x80,
        0xff,       0x100,       0x7fff,     0x8000,
        0xffff,     0x10000,     0x7fffffff, 0x80000000,
        0xffffffff, 0x100000000, ~0ull,      0x7fffffffffffffff};
    switch (Below(v->empty() ? 2 : 9)) {
      case 0:  // insert random bytes
      case 1: {
        const size_t at = Below(v->size() + 1), n = 1 + Below(16);
        std::vector<uint8_t> bytes(n);
        for (auto& b : bytes) b = static_cast<uint8_t>(rng_());
        v->insert(v->begin() + static_cast<std::ptrdiff_t>(at), bytes.begin(), bytes.end());
        break;
      }
      case 2:  // flip a bit
        (*v)[Below(v->size())] ^= static_cast<uint8_t>(1u << Below(8));
        break;
      case 3:  // a random byte
        (*v)[Below(v->size())] = static_cast<uint8_t>(rng_());
        break;
      case 4: {  // an interesting integer, 1/2/4/8 bytes, either byte order
        const uint64_t x = kInteresting[Below(std::size(kInteresting))];
        const size_t width = size_t{1} << Below(4);
        const size_t at = Below(v->size());
        const bool big = Below(2) == 0;
        for (size_t k = 0; k < width && at + k < v->size(); ++k) {
          const size_t shift = 8 * (big ? width - 1 - k : k);
          (*v)[at + k] = static_cast<uint8_t>(shift < 64 ? x >> shift : 0);
        }
        break;
      }
      case 5: {  // delete a range
        const size_t at = Below(v->size()), n = 1 + Below(std::min<size_t>(64, v->size() - at));
        v->erase(v->begin() + static_cast<std::ptrdiff_t>(at),
                 v->begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      case 6: {  // duplicate a range
        const size_t at = Below(v->size()), n = 1 + Below(std::min<size_t>(64, v->size() - at));
        const std::vector<uint8_t> copy(v->begin() + static_cast<std::ptrdiff_t>(at),
                                        v->begin() + static_cast<std::ptrdiff_t>(at + n));
        const size_t to = Below(v->size() + 1);
        v->insert(v->begin() + static_cast<std::ptrdiff_t>(to), copy.begin(), copy.end());
        break;
      }
      case 7: {  // splice in part of another input
        if (corpus.empty()) break;
        const std::vector<uint8_t>& other = corpus[Below(corpus.size())];
        if (other.empty()) break;
        const size_t from = Below(other.size());
        const size_t n = 1 + Below(other.size() - from);
        const size_t at = Below(v->size());
        v->resize(at);
        v->insert(v->end(), other.begin() + static_cast<std::ptrdiff_t>(from),
                  other.begin() + static_cast<std::ptrdiff_t>(from + n));
        break;
      }
      default:  // truncate
        v->resize(Below(v->size()));
        break;
    }
  }

  std::mt19937_64 rng_;
};

void RunOne(const std::vector<uint8_t>& input) {
  g_current = input;
  LLVMFuzzerTestOneInput(g_current.data(), g_current.size());
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  uint64_t seed =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  size_t max_len = 4096;
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-seconds=", 0) == 0) {
      seconds = std::atof(arg.c_str() + 9);
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 6, nullptr, 10);
    } else if (arg.rfind("-max_len=", 0) == 0) {
      max_len = std::strtoull(arg.c_str() + 9, nullptr, 10);
    } else {
      ReadInputs(arg, &corpus);
    }
  }
  const char* dir = std::getenv("FUZZ_ARTIFACT_DIR");
  std::string name = argv[0];
  name = name.substr(name.rfind('/') + 1);
  std::snprintf(g_artifact, sizeof(g_artifact), "%s/crash-%s-%d", dir != nullptr ? dir : ".",
                name.c_str(), static_cast<int>(::getpid()));
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, OnCrash);
#ifdef DDP_FUZZ_HAVE_SANITIZER_CALLBACK
  __sanitizer_set_death_callback(SaveCurrentInput);
#endif

  for (const auto& input : corpus) RunOne(input);
  std::printf("%s: replayed %zu inputs\n", name.c_str(), corpus.size());
  Mutator mutator(seed);
  uint64_t runs = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 64; ++i, ++runs) RunOne(mutator.Mutate(corpus, max_len));
  }
  std::printf("%s: %llu mutated runs in %.1f s (seed %llu)\n", name.c_str(),
              static_cast<unsigned long long>(runs), seconds,
              static_cast<unsigned long long>(seed));
  return 0;
}
