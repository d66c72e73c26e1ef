// A small counter-based random generator for reproducible per-sample randomness (augmentation
// parameters, synthetic data): the stream for a sample depends only on (seed, epoch, index), never
// on thread scheduling or on how many samples were drawn before it.
//
// Thread safety: a SampleRng is a value; each thread uses its own.
#ifndef SLURM_DDP_TRAINER_DATA_SAMPLE_RNG_H_
#define SLURM_DDP_TRAINER_DATA_SAMPLE_RNG_H_

#include <cmath>
#include <cstdint>

namespace ddp::data {

// SplitMix64's finalizer: a bijective 64-bit mix with good avalanche.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class SampleRng {
 public:
  SampleRng(uint64_t seed, int64_t epoch, int64_t index)
      : state_(Mix64(Mix64(Mix64(seed) ^ static_cast<uint64_t>(epoch)) ^
                     static_cast<uint64_t>(index))) {}

  uint64_t NextU64() {
    state_ += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [lo, hi) (hi > lo).
  int64_t UniformInt(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(NextU64() % static_cast<uint64_t>(hi - lo));
  }

 private:
  uint64_t state_;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_SAMPLE_RNG_H_
