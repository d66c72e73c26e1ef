// The run-scoped checkpoint store: pruning touches only the current run's files, --resume auto
// continues the folder's run, a finished run is recognised, a corrupt newest checkpoint is
// skipped, a resume with another seed or data set size is refused (unless forced), dead writers'
// temp files go at Open, files honour the umask, and a real full file system (tmpfs) is a
// warning on a periodic checkpoint and a resumable error on a stop or final one.
#include "trainer/checkpoint/checkpoint_store.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/testing/tmpfs.h"
#include "trainer/checkpoint/checkpoint_folder.h"
#include "trainer/data/image_files.h"

namespace ddp {
namespace {

CheckpointState TestState(int64_t step, int64_t epoch) {
  CheckpointState s;
  s.model = {{"w", torch::full({64}, static_cast<float>(step))}};
  s.momentum = {{"w", torch::zeros({64})}};
  s.schedule = "step";
  s.epoch = epoch;
  s.step = step;
  s.consumed_world_size = 1;
  s.seed = 7;
  s.dataset_size = 512;
  return s;
}

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ckpt-store-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/ck";
  }
  void TearDown() override { std::system(("rm -rf '" + root_ + "'").c_str()); }

  std::unique_ptr<CheckpointStore> Open(int keep = 3, const std::string& dir = "") {
    auto store = CheckpointStore::Open({dir.empty() ? dir_ : dir, keep});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  static CheckpointState State(int64_t step, int64_t epoch = 0) { return TestState(step, epoch); }
  static ResumeRequest Request(const std::string& resume, int64_t epochs = 2, int64_t seed = 7) {
    return {resume, seed, 512, epochs, false};
  }

  // Names in `dir`, sorted, without the manifest and the lock.
  std::vector<std::string> Files(const std::string& dir = "") const {
    std::vector<std::string> folders, files;
    EXPECT_TRUE(data::ListDirectory(dir.empty() ? dir_ : dir, &folders, &files).ok());
    files.erase(std::remove(files.begin(), files.end(), kRunManifestName), files.end());
    files.erase(std::remove(files.begin(), files.end(), kFolderLockName), files.end());
    return files;
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string root_, dir_;
};

// Saves steps of a new run and returns its id.
std::string NewRun(CheckpointStore& store, const std::vector<int64_t>& steps, int64_t epoch = 0) {
  absl::StatusOr<ResumePlan> plan = store.PlanResume({"none", 7, 512, 2, false});
  EXPECT_TRUE(plan.ok()) << plan.status();
  for (int64_t step : steps) {
    absl::StatusOr<SavedCheckpoint> saved =
        store.Save(TestState(step, epoch), CheckpointKind::kPeriodic);
    EXPECT_TRUE(saved.ok() && !saved->path.empty()) << saved.status();
  }
  return store.run_id();
}

TEST_F(CheckpointStoreTest, PruningTouchesOnlyTheCurrentRun) {
  // An earlier, longer run: ckpt-56/60/64 and its final.pt; and a file from before run ids.
  auto old_run = Open();
  const std::string a = NewRun(*old_run, {48, 52, 56, 60, 64}, 2);
  ASSERT_TRUE(old_run->Finish().ok());
  std::system(("cp '" + Path(CheckpointFileName(a, 64)) + "' '" + Path("ckpt-0000000064.pt") + "'")
                  .c_str());
  // The repro: a new run (--resume none) of one epoch in the same folder.
  auto store = Open();
  absl::StatusOr<ResumePlan> plan = store->PlanResume(Request("none", 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->state.has_value());
  const std::string b = store->run_id();
  ASSERT_NE(a, b);
  for (int64_t step : {8, 16, 24}) {
    ASSERT_TRUE(store->Save(State(step), CheckpointKind::kPeriodic).ok());
  }
  absl::StatusOr<SavedCheckpoint> last = store->Save(State(32, 1), CheckpointKind::kFinal);
  ASSERT_TRUE(last.ok() && last->path == Path(CheckpointFileName(b, 32))) << last.status();
  absl::StatusOr<FinalCheckpoint> final_ckpt = store->Finish();
  ASSERT_TRUE(final_ckpt.ok()) << final_ckpt.status();
  EXPECT_FALSE(final_ckpt->already_present);
  std::vector<std::string> want = {CheckpointFileName(a, 56), CheckpointFileName(a, 60),
                                   CheckpointFileName(a, 64), CheckpointFileName(b, 16),
                                   CheckpointFileName(b, 24), CheckpointFileName(b, 32),
                                   "ckpt-0000000064.pt",      "final.pt"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Files(), want);
  absl::StatusOr<CheckpointState> final_state = ReadCheckpoint(Path("final.pt"));
  ASSERT_TRUE(final_state.ok()) << final_state.status();
  EXPECT_EQ(final_state->run_id, b);
  EXPECT_EQ(final_state->step, 32);
}

TEST_F(CheckpointStoreTest, ResumeAutoContinuesTheFolderRunNotTheHighestStep) {
  auto first = Open();
  const std::string a = NewRun(*first, {60, 64});
  auto second = Open();
  const std::string b = NewRun(*second, {8, 12});
  auto store = Open();
  absl::StatusOr<ResumePlan> plan = store->PlanResume(Request("auto"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->state.has_value());
  EXPECT_EQ(plan->path, Path(CheckpointFileName(b, 12)));
  EXPECT_EQ(store->run_id(), b);
  EXPECT_FALSE(plan->complete);
  EXPECT_TRUE(plan->warnings.empty());
  // The continued run keeps its identity in the files it writes next.
  absl::StatusOr<SavedCheckpoint> saved = store->Save(State(16), CheckpointKind::kPeriodic);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->path, Path(CheckpointFileName(b, 16)));
  EXPECT_NE(a, b);
}

TEST_F(CheckpointStoreTest, AFinishedRunRelaunchedInPlaceIsComplete) {
  auto store = Open();
  const std::string run = NewRun(*store, {16});
  ASSERT_TRUE(store->Save(State(32, 2), CheckpointKind::kFinal).ok());
  ASSERT_TRUE(store->Finish().ok());

  auto again = Open();
  absl::StatusOr<ResumePlan> plan = again->PlanResume(Request("auto", 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->complete);
  EXPECT_EQ(again->run_id(), run);
  EXPECT_EQ(plan->state->step, 32);
  absl::StatusOr<FinalCheckpoint> final_ckpt = again->Finish();
  ASSERT_TRUE(final_ckpt.ok()) << final_ckpt.status();
  EXPECT_TRUE(final_ckpt->already_present);

  // final.pt alone (the checkpoints deleted) still says the run is done.
  ::unlink(Path(CheckpointFileName(run, 16)).c_str());
  ::unlink(Path(CheckpointFileName(run, 32)).c_str());
  auto third = Open();
  plan = third->PlanResume(Request("auto", 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->complete);
  EXPECT_EQ(plan->path, Path("final.pt"));

  // More epochs than the run had: it continues (same run) instead.
  auto longer = Open();
  plan = longer->PlanResume(Request("auto", 3));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->complete);
  EXPECT_EQ(longer->run_id(), run);
  EXPECT_EQ(plan->state->epoch, 2);
}

TEST_F(CheckpointStoreTest, ACorruptNewestCheckpointIsSkippedAndItsHistoryDropped) {
  auto store = Open();
  const std::string run = NewRun(*store, {4, 8, 12});
  const std::string newest = Path(CheckpointFileName(run, 12));
  std::string bytes;
  {
    std::ifstream in(newest, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const at::Tensor w = torch::full({64}, 12.0f);
  const size_t at = bytes.find(std::string(static_cast<const char*>(w.data_ptr()), w.nbytes()));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 100] ^= 0x40;
  std::ofstream(newest, std::ios::binary | std::ios::trunc) << bytes;

  auto again = Open();
  absl::StatusOr<ResumePlan> plan = again->PlanResume(Request("auto"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->path, Path(CheckpointFileName(run, 8)));
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(plan->warnings[0], "skipping checkpoint"));
  EXPECT_TRUE(absl::StrContains(plan->warnings[0], "payload checksum"));
  // The run continues from step 8; its corrupt step 12 belongs to an abandoned history.
  ASSERT_TRUE(again->Save(State(10), CheckpointKind::kPeriodic).ok());
  EXPECT_EQ(Files(),
            (std::vector<std::string>{CheckpointFileName(run, 4), CheckpointFileName(run, 8),
                                      CheckpointFileName(run, 10)}));
}

TEST_F(CheckpointStoreTest, FinalPtStandsInForACorruptLastCheckpoint) {
  auto store = Open();
  const std::string run = NewRun(*store, {16});
  ASSERT_TRUE(store->Save(State(32, 1), CheckpointKind::kFinal).ok());
  ASSERT_TRUE(store->Finish().ok());
  std::ofstream(Path(CheckpointFileName(run, 32)), std::ios::trunc) << "truncated";
  auto again = Open();
  absl::StatusOr<ResumePlan> plan = again->PlanResume(Request("auto", 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->path, Path("final.pt"));  // the same step, not the older step 16
  EXPECT_EQ(plan->state->step, 32);
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(plan->warnings[0], "skipping checkpoint"));
}

TEST_F(CheckpointStoreTest, ResumingWithAnotherSeedOrDataSetIsRefusedUnlessForced) {
  auto store = Open();
  const std::string run = NewRun(*store, {4});
  ResumeRequest other_seed = Request("auto", 2, /*seed=*/8);
  absl::StatusOr<ResumePlan> plan = Open()->PlanResume(other_seed);
  ASSERT_TRUE(absl::IsFailedPrecondition(plan.status())) << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "--seed 7 (this run: --seed 8)"))
      << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "--force-resume")) << plan.status();

  ResumeRequest other_data = Request("auto");
  other_data.dataset_size = 500;
  plan = Open()->PlanResume(other_data);
  ASSERT_TRUE(absl::IsFailedPrecondition(plan.status())) << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(),
                                "a data set of 512 training samples (this run: 500)"))
      << plan.status();

  // The same for an explicit PATH.
  ResumeRequest by_path = Request(Path(CheckpointFileName(run, 4)), 2, 9);
  EXPECT_TRUE(absl::IsFailedPrecondition(Open()->PlanResume(by_path).status()));

  other_seed.force = true;
  auto forced = Open();
  plan = forced->PlanResume(other_seed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->state.has_value());
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(plan->warnings[0], "resuming it anyway (--force-resume)"));
  EXPECT_EQ(forced->run_id(), run);
}

TEST_F(CheckpointStoreTest, ResumePathContinuesThatRunAndAFolderWithoutManifestItsNewestFile) {
  auto store = Open();
  const std::string run = NewRun(*store, {4, 8});
  const std::string elsewhere = root_ + "/other";
  auto moved = Open(3, elsewhere);
  absl::StatusOr<ResumePlan> plan = moved->PlanResume(Request(Path(CheckpointFileName(run, 4))));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(moved->run_id(), run);
  ASSERT_TRUE(moved->Save(State(6), CheckpointKind::kPeriodic).ok());
  EXPECT_EQ(Files(elsewhere), std::vector<std::string>{CheckpointFileName(run, 6)});

  // A folder from before run identities: no manifest, ckpt-<step>.pt only.
  const std::string legacy = root_ + "/legacy";
  ASSERT_EQ(::mkdir(legacy.c_str(), 0700), 0);
  for (int64_t step : {20, 24}) {
    ASSERT_TRUE(
        WriteCheckpoint(legacy + "/ckpt-00000000" + std::to_string(step) + ".pt", State(step))
            .ok());
  }
  auto adopted = Open(3, legacy);
  plan = adopted->PlanResume(Request("auto"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->path, legacy + "/ckpt-0000000024.pt");
  ASSERT_TRUE(adopted->Save(State(28), CheckpointKind::kPeriodic).ok());
  EXPECT_EQ(Files(legacy), (std::vector<std::string>{"ckpt-0000000020.pt", "ckpt-0000000024.pt",
                                                     CheckpointFileName(adopted->run_id(), 28)}));
}

TEST_F(CheckpointStoreTest, PlanResumeRemovesTempFilesOfDeadWriters) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  const std::string target = Path(CheckpointFileName("0123abcd", 4));
  const pid_t pid = ::fork();
  if (pid == 0) {  // a writer killed in the middle of its checkpoint (SIGXFSZ)
    struct rlimit limit = {16 << 10, 16 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    (void)WriteFileAtomically(target, std::string(1 << 20, 'x'));
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << status;
  std::vector<std::string> left = Files();
  ASSERT_EQ(left.size(), 1u);
  ASSERT_TRUE(absl::StartsWith(left[0], CheckpointFileName("0123abcd", 4) + ".tmp."));
  auto store = Open();
  EXPECT_TRUE(store->removed_temp_files().empty());  // other ranks Open too: only rank 0 cleans
  ASSERT_TRUE(store->PlanResume(Request("auto")).ok());
  EXPECT_EQ(store->removed_temp_files(), left);
  EXPECT_TRUE(Files().empty());
}

TEST_F(CheckpointStoreTest, EveryFileHonoursTheUmask) {
  const mode_t old = ::umask(077);
  auto store = Open();
  NewRun(*store, {4});
  absl::StatusOr<SavedCheckpoint> saved = store->Save(State(8, 2), CheckpointKind::kFinal);
  absl::StatusOr<FinalCheckpoint> final_ckpt = store->Finish();
  ::umask(old);
  ASSERT_TRUE(saved.ok() && final_ckpt.ok());
  for (const std::string& path : {dir_, Path(CheckpointFileName(store->run_id(), 4)), saved->path,
                                  final_ckpt->path, Path(kRunManifestName)}) {
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0777, S_ISDIR(st.st_mode) ? 0700u : 0600u) << path;
  }
}

TEST_F(CheckpointStoreTest, AFullDiskWarnsOnPeriodicAndIsResumableOnStopAndFinal) {
  std::string why_not;
  auto fs = testing::Tmpfs::Create(4 << 20, &why_not);
  if (fs == nullptr) GTEST_SKIP() << "SKIPPED: " << why_not;
  const std::string dir = fs->path() + "/ck";
  auto store = Open(3, dir);
  const std::string run = NewRun(*store, {4});
  const std::string kept = dir + "/" + CheckpointFileName(run, 4);
  fs->Fill();

  absl::StatusOr<SavedCheckpoint> periodic = store->Save(State(8), CheckpointKind::kPeriodic);
  ASSERT_TRUE(periodic.ok()) << periodic.status();
  EXPECT_TRUE(periodic->path.empty());
  EXPECT_TRUE(absl::StrContains(periodic->warning, "No space left on device")) << periodic->warning;
  EXPECT_TRUE(absl::StrContains(periodic->warning, "training continues and keeps " + kept))
      << periodic->warning;

  for (CheckpointKind kind : {CheckpointKind::kStop, CheckpointKind::kFinal}) {
    absl::StatusOr<SavedCheckpoint> required = store->Save(State(10, 2), kind);
    ASSERT_TRUE(absl::IsResourceExhausted(required.status())) << required.status();
    EXPECT_EQ(ResumableAfter(required.status()), kept);
    EXPECT_TRUE(absl::StrContains(required.status().message(), "resumable from " + kept))
        << required.status();
  }
  // Nothing was lost and nothing half-written is left.
  EXPECT_EQ(Files(dir), std::vector<std::string>{CheckpointFileName(run, 4)});
  EXPECT_TRUE(ReadCheckpoint(kept).ok());
  // final.pt of a run whose last checkpoint is on disk: resumable as well.
  absl::StatusOr<FinalCheckpoint> final_ckpt = store->Finish();
  ASSERT_TRUE(absl::IsResourceExhausted(final_ckpt.status())) << final_ckpt.status();
  EXPECT_EQ(ResumableAfter(final_ckpt.status()), kept);

  // A run with no earlier checkpoint has nothing to resume: not resumable.
  fs->Free(64 << 10);
  auto fresh = Open(3, fs->path() + "/fresh");
  ASSERT_TRUE(fresh->PlanResume(Request("none")).ok());
  fs->Fill();
  absl::StatusOr<SavedCheckpoint> stop = fresh->Save(State(2), CheckpointKind::kStop);
  ASSERT_TRUE(absl::IsResourceExhausted(stop.status())) << stop.status();
  EXPECT_FALSE(ResumableAfter(stop.status()).has_value());
  EXPECT_TRUE(absl::StrContains(stop.status().message(), "no earlier checkpoint")) << stop.status();

  // Space comes back: the next periodic checkpoint is written and the run goes on.
  fs->RemoveFiller();
  periodic = store->Save(State(12), CheckpointKind::kPeriodic);
  ASSERT_TRUE(periodic.ok() && !periodic->path.empty()) << periodic.status();
}

TEST_F(CheckpointStoreTest, AnUnusableFolderIsAOneLineError) {
  std::ofstream(root_ + "/file") << "x";
  auto store = CheckpointStore::Open({root_ + "/file/ck", 3});
  ASSERT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_TRUE(
      absl::StrContains(store.status().message(), "--checkpoint-dir " + root_ + "/file/ck"));
}

// Checkpoints were trusted by path: a group member could plant a checkpoint in a group-writable
// folder and resume loaded it. A folder or file that is another user's, or writable by group or
// others, is refused with one line naming it.
TEST_F(CheckpointStoreTest, APlantedCheckpointIsRefused) {
  {
    auto store = Open();
    NewRun(*store, {4, 8});
  }
  // A group-writable folder: refused when opened, and when resuming from it.
  ASSERT_EQ(::chmod(dir_.c_str(), 0775), 0);
  absl::StatusOr<std::unique_ptr<CheckpointStore>> opened =
      CheckpointStore::Open({dir_, 3, "job a"});
  ASSERT_EQ(opened.status().code(), absl::StatusCode::kPermissionDenied) << opened.status();
  EXPECT_EQ(opened.status().message(),
            absl::StrCat("checkpoint folder ", dir_,
                         " is writable by its group (mode 0775): another user could have planted "
                         "a checkpoint; refusing to load from it (chmod go-w ",
                         dir_, ")"));
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  // A checkpoint file others may write, in a private folder.
  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 2u);
  const std::string planted = Path(files.back());
  ASSERT_EQ(::chmod(planted.c_str(), 0666), 0);
  auto store = Open();
  absl::StatusOr<ResumePlan> plan = store->PlanResume(Request("auto"));
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kPermissionDenied) << plan.status();
  EXPECT_EQ(plan.status().message(),
            absl::StrCat("checkpoint ", planted,
                         " is writable by its group and others (mode 0666): another user could "
                         "have planted a checkpoint; refusing to load from it (chmod go-w ",
                         planted, ")"));
  store.reset();
  // --resume PATH from a folder others may write.
  ASSERT_EQ(::chmod(planted.c_str(), 0644), 0);
  const std::string shared = root_ + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  std::system(("cp '" + planted + "' '" + shared + "/x.pt'").c_str());
  plan = Open()->PlanResume(Request(shared + "/x.pt"));
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kPermissionDenied) << plan.status();
  EXPECT_TRUE(absl::StartsWith(plan.status().message(), "checkpoint folder " + shared +
                                                            " is writable by its group and others"))
      << plan.status();
  // Another user's file (root can give it away).
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(planted.c_str(), 65534, 65534), 0);
    plan = Open()->PlanResume(Request("auto"));
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kPermissionDenied) << plan.status();
    EXPECT_EQ(plan.status().message(),
              absl::StrCat("checkpoint ", planted,
                           " is owned by uid 65534, not by this user (uid 0): refusing to load "
                           "from it"));
  }
  // What the store writes is never group or other writable, whatever the umask.
  const mode_t old = ::umask(002);
  const std::string fresh = root_ + "/fresh";
  auto writer = CheckpointStore::Open({fresh, 3, "job b"});
  ASSERT_TRUE(writer.ok()) << writer.status();
  NewRun(**writer, {4});
  ::umask(old);
  for (const std::string& path : {fresh, fresh + "/" + CheckpointFileName((*writer)->run_id(), 4),
                                  fresh + "/" + kRunManifestName}) {
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0022, 0u) << path;
  }
}

// Two jobs sharing a checkpoint folder shared one manifest, and the second adopted and pruned the
// first's run. The folder is held by one job at a time; the same job (a requeue, a replaced rank
// 0) continues; once the holder is gone another job may take it.
TEST_F(CheckpointStoreTest, ASecondJobOnTheSameFolderIsRefused) {
  auto first = CheckpointStore::Open({dir_, 3, "job 101"});
  ASSERT_TRUE(first.ok()) << first.status();
  auto early = CheckpointStore::Open({dir_, 3, "job 202"});  // opened before the folder is held
  ASSERT_TRUE(early.ok()) << early.status();
  const std::string run = NewRun(**first, {4, 8});
  const std::string in_use =
      absl::StrCat("checkpoint folder ", dir_, " is in use by job 101 (run ", run, ", pid ",
                   ::getpid(), " on ", HostName(), ", since ");
  absl::StatusOr<std::unique_ptr<CheckpointStore>> second =
      CheckpointStore::Open({dir_, 3, "job 202"});
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_TRUE(absl::StartsWith(second.status().message(), in_use)) << second.status();
  EXPECT_TRUE(absl::EndsWith(second.status().message(),
                             "): two jobs must not share a checkpoint folder; use another "
                             "--checkpoint-dir, or wait for that job to end"))
      << second.status();
  absl::StatusOr<ResumePlan> plan = (*early)->PlanResume(Request("none"));
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
  EXPECT_TRUE(absl::StartsWith(plan.status().message(), in_use)) << plan.status();
  EXPECT_EQ(Files().size(), 2u);  // nothing adopted, nothing pruned
  // The same job resumes its run.
  auto same = CheckpointStore::Open({dir_, 3, "job 101"});
  ASSERT_TRUE(same.ok()) << same.status();
  plan = (*same)->PlanResume(Request("auto"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*same)->run_id(), run);
  EXPECT_EQ(plan->path, Path(CheckpointFileName(run, 8)));
  same->reset();
  first->reset();
  // The holder is gone: another job may use the folder.
  auto later = CheckpointStore::Open({dir_, 3, "job 202"});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_TRUE((*later)->PlanResume(Request("auto")).ok());
}

void SetMtime(const std::string& path, time_t when) {
  struct timeval times[2] = {{when, 0}, {when, 0}};
  ASSERT_EQ(::utimes(path.c_str(), times), 0) << path;
}

// Temp files were removed after 10 idle minutes even when their writer was alive but suspended
// (`scontrol suspend` is SIGSTOP). A writer of this host is alive when its pid exists and started
// before the file was last written: idle time alone decides nothing.
TEST_F(CheckpointStoreTest, ATempFileOfALiveWriterStaysHoweverIdle) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  const std::string host = HostName();
  const time_t now = ::time(nullptr);
  // A writer that has been alive for long (pid 1) and idle for 11 minutes.
  const std::optional<double> init_start = ProcessStartTime(1);
  ASSERT_TRUE(init_start.has_value());
  const bool init_is_old = *init_start < static_cast<double>(now) - 15 * 60;
  const std::string idle_name = CheckpointFileName("0123abcd", 4) + ".tmp.1.0.0." + host;
  if (init_is_old) {
    std::ofstream(Path(idle_name)) << "partial";
    SetMtime(Path(idle_name), now - 11 * 60);
  }
  // A suspended writer, stopped in the middle of its checkpoint.
  const pid_t writer = ::fork();
  if (writer == 0) {
    const std::string name =
        absl::StrCat(CheckpointFileName("0123abcd", 8), ".tmp.", ::getpid(), ".0.0.", host);
    std::ofstream(dir_ + "/" + name) << "partial";
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, WUNTRACED), writer);
  ASSERT_TRUE(WIFSTOPPED(status));
  const std::string stopped_name =
      absl::StrCat(CheckpointFileName("0123abcd", 8), ".tmp.", writer, ".0.0.", host);
  // A pid that a later process reuses: the file is older than the process with that pid.
  const std::string reused_name =
      absl::StrCat(CheckpointFileName("0123abcd", 12), ".tmp.", writer, ".1.0.", host);
  std::ofstream(Path(reused_name)) << "partial";
  SetMtime(Path(reused_name), now - 3600);
  {
    auto store = Open();
    ASSERT_TRUE(store->PlanResume(Request("auto")).ok());
    EXPECT_EQ(store->removed_temp_files(), std::vector<std::string>{reused_name});
  }
  std::vector<std::string> kept = Files();
  EXPECT_NE(std::find(kept.begin(), kept.end(), stopped_name), kept.end());
  if (init_is_old) {
    EXPECT_NE(std::find(kept.begin(), kept.end(), idle_name), kept.end());
    ::unlink(Path(idle_name).c_str());
  }
  // Once the writer is gone, its file goes.
  ::kill(writer, SIGKILL);
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  auto store = Open();
  ASSERT_TRUE(store->PlanResume(Request("auto")).ok());
  EXPECT_EQ(store->removed_temp_files(), std::vector<std::string>{stopped_name});
  if (!init_is_old) GTEST_SKIP() << "pid 1 started less than 15 minutes ago: idle case not run";
}

}  // namespace
}  // namespace ddp
