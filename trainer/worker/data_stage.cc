#include "trainer/worker/data_stage.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/data/gpu_jpeg_loader.h"
#include "trainer/data/image_folder_dataset.h"
#include "trainer/data/loader.h"

namespace ddp {

absl::StatusOr<DataStage> DataStage::Open(const Options& o) {
  ASSIGN_OR_RETURN(const data::DataSpec spec, data::ParseDataSpec(o.data));
  data::DataOptions options;
  options.seed = static_cast<uint64_t>(o.seed);
  if (!o.normalize.empty()) {
    ASSIGN_OR_RETURN(options.normalization, data::ParseNormalization(o.normalize));
  }
  ASSIGN_OR_RETURN(data::DatasetPair datasets, data::OpenDatasets(spec, options));
  return DataStage(std::move(datasets));
}

absl::StatusOr<std::string> DataStage::SetUpPipeline(const std::string& data_pipeline,
                                                     at::Device device) {
  if (data_pipeline == "cpu") return std::string();
  const bool folder = dynamic_cast<const data::ImageFolderDataset*>(&train()) != nullptr;
  if (!folder || !device.is_cuda()) {
    if (data_pipeline == "gpu") {
      return absl::InvalidArgumentError(
          "--data-pipeline gpu needs imagefolder data and a CUDA device");
    }
    return std::string();
  }
  auto decoder = data::GpuJpegDecoder::Create(device.index());
  if (!decoder.ok()) {
    if (data_pipeline == "gpu") return decoder.status();
    return absl::StrCat(
        "data pipeline: cpu (GPU pipeline unavailable: ", decoder.status().message(), ")");
  }
  gpu_decoder_ = *std::move(decoder);
  return absl::StrCat("data pipeline: gpu (nvJPEG ", gpu_decoder_->backend_name(),
                      "; transforms on the GPU)");
}

absl::StatusOr<std::unique_ptr<data::BatchSource>> DataStage::OpenBatches(
    const data::Dataset& dataset, std::vector<int64_t> indices, int64_t batch_size, int64_t epoch,
    int workers, at::Device device) const {
  const auto* folder = dynamic_cast<const data::ImageFolderDataset*>(&dataset);
  if (gpu_decoder_ != nullptr && folder != nullptr) {
    data::GpuJpegLoaderOptions go;
    go.batch_size = batch_size;
    go.epoch = epoch;
    go.read_threads = std::max(1, workers);
    ASSIGN_OR_RETURN(auto loader,
                     data::GpuJpegLoader::Create(*folder, *gpu_decoder_, std::move(indices), go));
    return std::unique_ptr<data::BatchSource>(std::move(loader));
  }
  data::LoaderOptions lo;
  lo.batch_size = batch_size;
  lo.workers = workers;
  lo.epoch = epoch;
  lo.pin_memory = device.is_cuda();
  ASSIGN_OR_RETURN(auto loader, data::Loader::Create(dataset, std::move(indices), lo));
  return std::unique_ptr<data::BatchSource>(std::move(loader));
}

}  // namespace ddp
