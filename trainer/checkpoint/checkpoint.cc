#include "trainer/checkpoint/checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/serialize.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "trainer/checkpoint/checkpoint_folder.h"
#include "trainer/checkpoint/pickle_check.h"

namespace ddp {
namespace {

c10::impl::GenericDict NewDict() {
  return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

c10::Dict<std::string, at::Tensor> ToDict(const std::vector<models::NamedTensor>& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& t : tensors) dict.insert(t.name, t.tensor);
  return dict;
}

std::vector<models::NamedTensor> FromDict(const c10::IValue& value) {
  std::vector<models::NamedTensor> out;
  for (const auto& entry : value.toGenericDict()) {
    out.push_back({entry.key().toStringRef(), entry.value().toTensor()});
  }
  return out;
}

at::Tensor OnCpu(const at::Tensor& t) { return t.detach().cpu().contiguous(); }

// The tensors of `s` detached, contiguous and on the CPU: what is written and checksummed.
CheckpointState OnCpu(const CheckpointState& s) {
  CheckpointState cpu = s;
  for (auto& t : cpu.model) t.tensor = OnCpu(t.tensor);
  for (auto& t : cpu.momentum) t.tensor = OnCpu(t.tensor);
  cpu.rng = s.rng.defined() ? OnCpu(s.rng) : at::empty({0}, at::kByte);
  return cpu;
}

// Running CRC-32 (zlib) over the documented byte stream.
class Crc32 {
 public:
  void Bytes(const void* data, size_t size) {
    if (size == 0) return;  // zlib: a null buffer (an empty tensor's) would reset the CRC
    value_ = crc32_z(value_, static_cast<const Bytef*>(data), size);
  }
  void Str(const std::string& s) { Bytes(s.c_str(), s.size() + 1); }  // with its 0 byte
  void Int(int64_t v) { Bytes(&v, sizeof(v)); }                       // little-endian hosts
  void Dbl(double v) { Bytes(&v, sizeof(v)); }
  void Tensor(const std::string& name, const at::Tensor& t) {
    Str(name);
    Int(t.dim());
    for (int64_t d : t.sizes()) Int(d);
    const at::Tensor c = t.contiguous();
    Bytes(c.data_ptr(), c.nbytes());
  }
  uint32_t value() const { return static_cast<uint32_t>(value_); }

 private:
  uLong value_ = crc32_z(0, nullptr, 0);
};

absl::Status Corrupt(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("checkpoint ", path, " is corrupt: ", why));
}

// Bytes in memory for torch's zip reader, with every read checked against the end: torch's own
// memory readers copy whatever offset a (corrupt) zip directory names.
class BoundedReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReader(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    const size_t got = pos >= bytes_.size() ? 0 : std::min<uint64_t>(n, bytes_.size() - pos);
    if (got > 0) std::memcpy(buf, bytes_.data() + pos, got);
    if (got < n) std::memset(static_cast<char*>(buf) + got, 0, n - got);
    return got;
  }

 private:
  const std::vector<char>& bytes_;
};

// torch's reader allocates as many bytes as a record's zip entry claims before it reads the
// record, and its unpickler as many as a length in the pickle program claims: one flipped bit in
// a size would allocate gigabytes, an OOM kill on resume instead of "skipping checkpoint". Every
// record must lie inside the file, and the pickle program's lengths inside it (pickle_check.h).
absl::Status CheckArchive(const std::string& path, size_t file_size,
                          caffe2::serialize::PyTorchStreamReader& reader) {
  for (const std::string& name : reader.getAllRecords()) {
    const size_t size = reader.getRecordSize(name);
    const size_t offset = reader.getRecordOffset(name);
    if (offset > file_size || size > file_size - offset) {
      return Corrupt(path, absl::StrCat("record ", name, " claims ", size, " bytes at offset ",
                                        offset, " of a ", file_size, "-byte file"));
    }
  }
  const auto [program, size] = reader.getRecord("data.pkl");
  const absl::Status st =
      CheckPickle(absl::string_view(static_cast<const char*>(program.get()), size));
  return st.ok() ? st : Corrupt(path, st.message());
}

// A tensor's view must lie inside its storage: torch's unpickler takes sizes, strides and the
// offset from the pickle program as they are, so one flipped byte in a stride gave a tensor that
// reads past the end of its storage (a crash, or other memory in the weights).
absl::Status CheckInStorage(const std::string& path, const std::string& name, const at::Tensor& t) {
  if (t.numel() == 0) return absl::OkStatus();
  int64_t last = t.storage_offset();
  bool ok = last >= 0;
  for (int64_t d = 0; ok && d < t.dim(); ++d) {
    const int64_t size = t.size(d), stride = t.stride(d);
    int64_t span = 0;
    ok = size >= 0 && stride >= 0 && !__builtin_mul_overflow(size - 1, stride, &span) &&
         !__builtin_add_overflow(last, span, &last);
  }
  int64_t end = 0;
  ok = ok && !__builtin_add_overflow(last, int64_t{1}, &end) &&
       !__builtin_mul_overflow(end, static_cast<int64_t>(t.element_size()), &end) &&
       static_cast<uint64_t>(end) <= t.storage().nbytes();
  if (ok) return absl::OkStatus();
  return Corrupt(path, absl::StrCat("tensor ", name, " (sizes ", c10::str(t.sizes()), ", strides ",
                                    c10::str(t.strides()), ", offset ", t.storage_offset(),
                                    ") lies outside its ", t.storage().nbytes(), "-byte storage"));
}

}  // namespace

uint32_t CheckpointCrc32(const CheckpointState& s) {
  static_assert(sizeof(double) == 8, "float64");
  Crc32 crc;
  for (const auto& t : s.model) crc.Tensor(t.name, t.tensor);
  for (const auto& t : s.momentum) crc.Tensor(t.name, t.tensor);
  crc.Tensor("rng", s.rng.defined() ? s.rng : at::empty({0}, at::kByte));
  crc.Str(s.run_id);
  crc.Str(s.schedule);
  for (int64_t v : {s.epoch, s.step, s.consumed, s.consumed_world_size, s.seed, s.dataset_size}) {
    crc.Int(v);
  }
  for (double v : {s.lr, s.base_lr, s.momentum_factor, s.weight_decay}) crc.Dbl(v);
  const uint8_t nesterov = s.nesterov ? 1 : 0;
  crc.Bytes(&nesterov, 1);
  return crc.value();
}

absl::Status WriteCheckpoint(const std::string& path, const CheckpointState& state) {
  const CheckpointState s = OnCpu(state);
  c10::impl::GenericDict optimizer = NewDict();
  optimizer.insert("momentum_buffer", ToDict(s.momentum));
  optimizer.insert("lr", s.lr);
  optimizer.insert("momentum", s.momentum_factor);
  optimizer.insert("weight_decay", s.weight_decay);
  optimizer.insert("nesterov", s.nesterov);
  c10::impl::GenericDict schedule = NewDict();
  schedule.insert("name", s.schedule);
  schedule.insert("base_lr", s.base_lr);
  c10::impl::GenericDict sampler = NewDict();
  sampler.insert("epoch", s.epoch);
  sampler.insert("consumed", s.consumed);
  sampler.insert("world_size", s.consumed_world_size);
  sampler.insert("seed", s.seed);
  sampler.insert("dataset_size", s.dataset_size);
  c10::impl::GenericDict root = NewDict();
  root.insert("format", std::string(kCheckpointFormat));
  root.insert("run_id", s.run_id);
  root.insert("model", ToDict(s.model));
  root.insert("optimizer", optimizer);
  root.insert("schedule", schedule);
  root.insert("epoch", s.epoch);
  root.insert("step", s.step);
  root.insert("sampler", sampler);
  root.insert("rng", s.rng);
  root.insert("payload_crc32", static_cast<int64_t>(CheckpointCrc32(s)));

  std::vector<char> bytes;
  try {
    bytes = torch::pickle_save(c10::IValue(root));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("serializing checkpoint: ", e.what()));
  }
  return WriteFileAtomically(path, absl::string_view(bytes.data(), bytes.size()),
                             CheckpointFileMode());
}

absl::StatusOr<CheckpointState> ReadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be opened"));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CheckpointState s;
  bool v1 = false;
  int64_t stored_crc = -1;
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BoundedReader>(bytes));
    if (absl::Status st = CheckArchive(path, bytes.size(), reader); !st.ok()) return st;
    // What torch::pickle_load does, on the checked reader.
    const c10::IValue value = torch::jit::readArchiveAndTensors("data", "", "", std::nullopt,
                                                                std::nullopt, std::nullopt, reader);
    const auto root = value.toGenericDict();
    const std::string format = root.contains("format") ? root.at("format").toStringRef() : "";
    v1 = format == kCheckpointFormatV1;
    if (!v1 && format != kCheckpointFormat) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", path, " is not a ", kCheckpointFormat, " file"));
    }
    s.model = FromDict(root.at("model"));
    const auto optimizer = root.at("optimizer").toGenericDict();
    s.momentum = FromDict(optimizer.at("momentum_buffer"));
    s.lr = optimizer.at("lr").toDouble();
    s.momentum_factor = optimizer.at("momentum").toDouble();
    s.weight_decay = optimizer.at("weight_decay").toDouble();
    s.nesterov = optimizer.at("nesterov").toBool();
    const auto schedule = root.at("schedule").toGenericDict();
    s.schedule = schedule.at("name").toStringRef();
    s.base_lr = schedule.at("base_lr").toDouble();
    s.epoch = root.at("epoch").toInt();
    s.step = root.at("step").toInt();
    const auto sampler = root.at("sampler").toGenericDict();
    s.consumed = sampler.at("consumed").toInt();
    s.consumed_world_size = sampler.at("world_size").toInt();
    s.seed = sampler.at("seed").toInt();
    s.rng = root.at("rng").toTensor();
    if (!v1) {
      s.run_id = root.at("run_id").toStringRef();
      s.dataset_size = sampler.at("dataset_size").toInt();
      stored_crc = root.at("payload_crc32").toInt();
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return Corrupt(path, what.substr(0, what.find('\n')));
  }
  for (const auto* tensors : {&s.model, &s.momentum}) {
    for (const auto& t : *tensors) RETURN_IF_ERROR(CheckInStorage(path, t.name, t.tensor));
  }
  RETURN_IF_ERROR(CheckInStorage(path, "rng", s.rng));
  if (!v1) {
    const uint32_t computed = CheckpointCrc32(s);
    if (stored_crc != static_cast<int64_t>(computed)) {
      return Corrupt(path, absl::StrCat("payload checksum 0x", absl::Hex(computed, absl::kZeroPad8),
                                        " does not match the stored 0x",
                                        absl::Hex(stored_crc, absl::kZeroPad8)));
    }
  }
  if (s.model.empty() || s.epoch < 0 || s.step < 0 || s.consumed < 0 || s.consumed_world_size < 1 ||
      s.dataset_size < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " has inconsistent fields"));
  }
  return s;
}

}  // namespace ddp
