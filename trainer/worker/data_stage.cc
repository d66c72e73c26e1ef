#include "trainer/worker/data_stage.h"

#include <utility>

#include "common/status_macros.h"

namespace ddp {

absl::StatusOr<DataStage> DataStage::Open(const TrainerConfig& c) {
  ASSIGN_OR_RETURN(const data::DataSpec spec, data::ParseDataSpec(c.data));
  data::DataOptions options;
  options.seed = static_cast<uint64_t>(c.seed);
  if (!c.normalize.empty()) {
    ASSIGN_OR_RETURN(options.normalization, data::ParseNormalization(c.normalize));
  }
  ASSIGN_OR_RETURN(data::DatasetPair datasets, data::OpenDatasets(spec, options));
  return DataStage(std::move(datasets));
}

}  // namespace ddp
