// Latency summaries for the scale benchmarks: p50 / p99 / max of a sample, and the merge of
// several processes' summaries. Pure value types; thread-compatible.
#ifndef SLURM_DDP_BENCH_LOADGEN_QUANTILES_H_
#define SLURM_DDP_BENCH_LOADGEN_QUANTILES_H_

#include <cstddef>
#include <vector>

namespace ddp::bench {

struct Quantiles {
  size_t count = 0;
  double p50 = 0;  // nearest rank: the value at index floor(q * count) of the sorted sample
  double p99 = 0;
  double max = 0;
};

// Summarizes `sample` (sorted in place). An empty sample gives count 0 and zeros.
Quantiles Summarize(std::vector<double>* sample);

// The worst of several summaries taken from disjoint samples (one per process): the largest p50,
// p99 and max, and the summed count. An upper bound on the merged sample's quantiles, which is
// what a latency limit needs.
Quantiles Worst(const std::vector<Quantiles>& parts);

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_QUANTILES_H_
