// The checkpoint file format: a round trip keeps every field; the payload checksum is the
// documented CRC-32 stream; a flipped byte anywhere in the file either fails to load (DATA_LOSS)
// or leaves the payload exactly as written, never a silently different checkpoint; files of the
// first format (v1) still load.
#include "trainer/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + name + "." +
         std::to_string(::getpid());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

CheckpointState MakeState() {
  torch::manual_seed(11);
  CheckpointState s;
  s.run_id = "0123abcd";
  // A weight with recognisable bytes, so a test can find it in the file.
  s.model = {{"fc.weight", torch::arange(0, 96, torch::kFloat).reshape({8, 12}) + 0.5},
             {"fc.bias", torch::randn({8})},
             {"bn.num_batches_tracked", torch::tensor(7, torch::kLong)}};
  s.momentum = {{"fc.weight", torch::randn({8, 12})}, {"fc.bias", torch::randn({8})}};
  s.lr = 0.05;
  s.base_lr = 0.1;
  s.momentum_factor = 0.9;
  s.weight_decay = 1e-4;
  s.nesterov = true;
  s.schedule = "cosine";
  s.epoch = 3;
  s.step = 1234;
  s.consumed = 640;
  s.consumed_world_size = 4;
  s.seed = 7;
  s.dataset_size = 60000;
  s.rng = at::detail::getDefaultCPUGenerator().get_state();
  return s;
}

void ExpectSame(const CheckpointState& a, const CheckpointState& b) {
  EXPECT_EQ(a.run_id, b.run_id);
  ASSERT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    EXPECT_EQ(a.model[i].name, b.model[i].name);
    EXPECT_TRUE(torch::equal(a.model[i].tensor, b.model[i].tensor)) << a.model[i].name;
  }
  ASSERT_EQ(a.momentum.size(), b.momentum.size());
  for (size_t i = 0; i < a.momentum.size(); ++i) {
    EXPECT_EQ(a.momentum[i].name, b.momentum[i].name);
    EXPECT_TRUE(torch::equal(a.momentum[i].tensor, b.momentum[i].tensor));
  }
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.base_lr, b.base_lr);
  EXPECT_EQ(a.momentum_factor, b.momentum_factor);
  EXPECT_EQ(a.weight_decay, b.weight_decay);
  EXPECT_EQ(a.nesterov, b.nesterov);
  EXPECT_EQ(a.schedule, b.schedule);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.consumed, b.consumed);
  EXPECT_EQ(a.consumed_world_size, b.consumed_world_size);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.dataset_size, b.dataset_size);
  EXPECT_TRUE(torch::equal(a.rng, b.rng));
}

TEST(CheckpointTest, RoundTripKeepsEveryField) {
  const std::string path = TempPath("ckpt-roundtrip.pt");
  const CheckpointState s = MakeState();
  ASSERT_TRUE(WriteCheckpoint(path, s).ok());
  absl::StatusOr<CheckpointState> back = ReadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(s, *back);
  ::unlink(path.c_str());
}

TEST(CheckpointTest, ChecksumIsTheDocumentedCrc32Stream) {
  CheckpointState s;
  s.run_id = "feedf00d";
  s.schedule = "step";
  s.model = {{"w", torch::tensor({1.0f, 2.0f})}};
  s.rng = torch::empty({0}, torch::kByte);
  s.epoch = 1;
  s.step = 2;
  s.consumed = 3;
  s.consumed_world_size = 4;
  s.seed = 5;
  s.dataset_size = 6;
  s.lr = 0.5;
  s.base_lr = 0.25;
  s.momentum_factor = 0.75;
  s.weight_decay = 0.125;
  s.nesterov = true;
  std::string stream;
  auto i64 = [&](int64_t v) { stream.append(reinterpret_cast<const char*>(&v), 8); };
  auto f64 = [&](double v) { stream.append(reinterpret_cast<const char*>(&v), 8); };
  stream.append("w", 2);  // with its 0 byte
  i64(1);
  i64(2);
  const float w[2] = {1.0f, 2.0f};
  stream.append(reinterpret_cast<const char*>(w), sizeof(w));
  stream.append("rng", 4);
  i64(1);
  i64(0);
  stream.append("feedf00d", 9);
  stream.append("step", 5);
  for (int64_t v : {1, 2, 3, 4, 5, 6}) i64(v);
  for (double v : {0.5, 0.25, 0.75, 0.125}) f64(v);
  stream.push_back('\1');
  const uLong want =
      crc32(0, reinterpret_cast<const Bytef*>(stream.data()), static_cast<uInt>(stream.size()));
  EXPECT_EQ(CheckpointCrc32(s), static_cast<uint32_t>(want));
}

TEST(CheckpointTest, AFlippedByteNeverLoadsAsADifferentCheckpoint) {
  const std::string path = TempPath("ckpt-flip.pt");
  const CheckpointState s = MakeState();
  ASSERT_TRUE(WriteCheckpoint(path, s).ok());
  const std::string good = ReadAll(path);
  // torch.load does not check the zip's CRCs: a flip inside the weight loads silently there.
  const at::Tensor weight = s.model[0].tensor.contiguous();
  const std::string raw(static_cast<const char*>(weight.data_ptr()), weight.nbytes());
  const size_t at = good.find(raw);
  ASSERT_NE(at, std::string::npos) << "the weight's bytes are not stored as they are";
  std::string bad = good;
  bad[at + raw.size() / 2] ^= 0x01;
  WriteAll(path, bad);
  absl::StatusOr<CheckpointState> loaded = ReadCheckpoint(path);
  ASSERT_TRUE(absl::IsDataLoss(loaded.status())) << loaded.status();
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "payload checksum")) << loaded.status();
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), path)) << loaded.status();

  // Every byte: DATA_LOSS, or exactly the payload that was written.
  int refused = 0, harmless = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    bad = good;
    bad[i] ^= 0x20;
    WriteAll(path, bad);
    loaded = ReadCheckpoint(path);
    if (!loaded.ok()) {
      ASSERT_TRUE(absl::IsDataLoss(loaded.status())) << "byte " << i << ": " << loaded.status();
      ++refused;
      continue;
    }
    ++harmless;
    ASSERT_EQ(loaded->step, s.step) << "byte " << i;
    ASSERT_EQ(CheckpointCrc32(*loaded), CheckpointCrc32(s)) << "byte " << i;
    ExpectSame(s, *loaded);
  }
  std::printf("%zu bytes flipped: %d refused, %d outside the payload\n", good.size(), refused,
              harmless);
  EXPECT_GT(refused, 0);
  ::unlink(path.c_str());
}

// Found by the test above: one flipped byte in a stride in the pickle program made the unpickler
// build a tensor that reads past the end of its storage (a segfault in the checksum, or other
// memory in the weights). The view is now checked against its storage.
TEST(CheckpointTest, ATensorViewOutsideItsStorageIsDataLoss) {
  CheckpointState s = MakeState();
  s.model = {{"w", torch::ones({777})}};  // 777 = 0x0309: size (777,), stride (1,) in the pickle
  const std::string path = TempPath("ckpt-stride.pt");
  ASSERT_TRUE(WriteCheckpoint(path, s).ok());
  std::string bytes = ReadAll(path);
  // MARK BININT2 777 TUPLE (the size), MARK BININT1 1 TUPLE (the stride).
  const std::string pattern("(M\x09\x03t(K\x01t", 9);
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos) << "the pickle does not hold the size and stride as expected";
  bytes[at + 7] = 0x21;  // stride 33: the view would reach element 33 x 776 of 777
  WriteAll(path, bytes);
  absl::StatusOr<CheckpointState> loaded = ReadCheckpoint(path);
  ASSERT_TRUE(absl::IsDataLoss(loaded.status())) << loaded.status();
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "lies outside its 3108-byte storage"))
      << loaded.status();
  ::unlink(path.c_str());
}

TEST(CheckpointTest, TruncatedAndForeignFilesAreDataLoss) {
  const std::string path = TempPath("ckpt-trunc.pt");
  ASSERT_TRUE(WriteCheckpoint(path, MakeState()).ok());
  const std::string good = ReadAll(path);
  for (size_t size : {size_t{0}, size_t{10}, good.size() / 2, good.size() - 1}) {
    WriteAll(path, good.substr(0, size));
    EXPECT_TRUE(absl::IsDataLoss(ReadCheckpoint(path).status())) << size;
  }
  c10::impl::GenericDict other(c10::StringType::get(), c10::AnyType::get());
  other.insert("format", std::string("something-else"));
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(other));
  WriteAll(path, std::string(bytes.begin(), bytes.end()));
  absl::StatusOr<CheckpointState> loaded = ReadCheckpoint(path);
  EXPECT_TRUE(absl::IsDataLoss(loaded.status())) << loaded.status();
  ::unlink(path.c_str());
  EXPECT_TRUE(absl::IsNotFound(ReadCheckpoint(path).status()));
}

TEST(CheckpointTest, FirstFormatFilesStillLoad) {
  // A v1 file as the previous release wrote it: no run_id, dataset_size or checksum.
  const CheckpointState s = MakeState();
  auto dict = [] { return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()); };
  c10::Dict<std::string, at::Tensor> model, momentum;
  for (const auto& t : s.model) model.insert(t.name, t.tensor);
  for (const auto& t : s.momentum) momentum.insert(t.name, t.tensor);
  c10::impl::GenericDict optimizer = dict(), schedule = dict(), sampler = dict(), root = dict();
  optimizer.insert("momentum_buffer", momentum);
  optimizer.insert("lr", s.lr);
  optimizer.insert("momentum", s.momentum_factor);
  optimizer.insert("weight_decay", s.weight_decay);
  optimizer.insert("nesterov", s.nesterov);
  schedule.insert("name", s.schedule);
  schedule.insert("base_lr", s.base_lr);
  sampler.insert("epoch", s.epoch);
  sampler.insert("consumed", s.consumed);
  sampler.insert("world_size", s.consumed_world_size);
  sampler.insert("seed", s.seed);
  root.insert("format", std::string(kCheckpointFormatV1));
  root.insert("model", model);
  root.insert("optimizer", optimizer);
  root.insert("schedule", schedule);
  root.insert("epoch", s.epoch);
  root.insert("step", s.step);
  root.insert("sampler", sampler);
  root.insert("rng", s.rng);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(root));
  const std::string path = TempPath("ckpt-v1.pt");
  WriteAll(path, std::string(bytes.begin(), bytes.end()));
  absl::StatusOr<CheckpointState> loaded = ReadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  CheckpointState want = s;
  want.run_id = "";
  want.dataset_size = 0;
  ExpectSame(want, *loaded);
  ::unlink(path.c_str());
}

TEST(CheckpointTest, FilesHonourTheUmask) {
  const std::string path = TempPath("ckpt-umask.pt");
  const mode_t old = ::umask(077);
  const absl::Status st = WriteCheckpoint(path, MakeState());
  ::umask(old);
  ASSERT_TRUE(st.ok()) << st;
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace ddp
