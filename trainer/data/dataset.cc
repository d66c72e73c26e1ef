#include "trainer/data/dataset.h"

#include <utility>

#include "common/status_macros.h"

namespace ddp::data {

absl::StatusOr<Batch> Dataset::GetBatch(absl::Span<const int64_t> indices, int64_t epoch) const {
  std::vector<at::Tensor> images;
  images.reserve(indices.size());
  at::Tensor labels =
      at::empty({static_cast<int64_t>(indices.size())}, at::TensorOptions(at::kLong));
  int64_t* label_data = labels.data_ptr<int64_t>();
  for (size_t i = 0; i < indices.size(); ++i) {
    ASSIGN_OR_RETURN(Example example, Get(indices[i], epoch));
    images.push_back(std::move(example.image));
    label_data[i] = example.label;
  }
  if (images.empty()) {
    std::vector<int64_t> shape = sample_shape();
    shape.insert(shape.begin(), 0);
    return Batch{at::empty(shape, at::TensorOptions(at::kFloat)), labels};
  }
  return Batch{at::stack(images), labels};
}

}  // namespace ddp::data
