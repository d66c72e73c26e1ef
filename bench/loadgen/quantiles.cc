#include "bench/loadgen/quantiles.h"

#include <algorithm>

namespace ddp::bench {

Quantiles Summarize(std::vector<double>* sample) {
  Quantiles q;
  q.count = sample->size();
  if (sample->empty()) return q;
  std::sort(sample->begin(), sample->end());
  auto at = [&](double p) {
    const size_t i = static_cast<size_t>(p * static_cast<double>(sample->size()));
    return (*sample)[std::min(sample->size() - 1, i)];
  };
  q.p50 = at(0.50);
  q.p99 = at(0.99);
  q.max = sample->back();
  return q;
}

Quantiles Worst(const std::vector<Quantiles>& parts) {
  Quantiles w;
  for (const Quantiles& q : parts) {
    if (q.count == 0) continue;
    w.count += q.count;
    w.p50 = std::max(w.p50, q.p50);
    w.p99 = std::max(w.p99, q.p99);
    w.max = std::max(w.max, q.max);
  }
  return w;
}

}  // namespace ddp::bench
