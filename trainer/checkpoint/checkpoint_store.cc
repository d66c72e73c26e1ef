#include "trainer/checkpoint/checkpoint_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace ddp {
namespace {

constexpr char kResumablePayload[] = "type.slurm-ddp/checkpoint.ResumableFrom";
constexpr char kProbeName[] = ".write-test";
constexpr size_t kMaxManifestBytes = 4096;

// mkdir -p, each new parent 0777 less the umask, the folder itself 0755 less the umask.
absl::Status MakeDirs(const std::string& dir) {
  for (size_t pos = 0; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    const std::string path = dir.substr(0, pos);
    const mode_t mode = pos == std::string::npos || pos + 1 == dir.size() ? 0755 : 0777;
    if (!path.empty() && ::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("--checkpoint-dir ", dir, " cannot be created: ", std::strerror(errno)));
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--checkpoint-dir ", dir, " cannot be created: not a directory"));
  }
  return absl::OkStatus();
}

bool IsOwnedName(absl::string_view name) {
  return ParseCheckpointFileName(name).has_value() || name == kFinalCheckpointName ||
         name == kRunManifestName || name == kProbeName;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::string> ReadBytes(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " cannot be opened"));
  std::string bytes;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    bytes.append(chunk, static_cast<size_t>(in.gcount()));
    if (bytes.size() > limit) return absl::DataLossError(absl::StrCat(path, " is too large"));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return bytes;
}

struct FileEntry {
  std::string path;
  std::string run_id;
  int64_t step = 0;  // final.pt: the manifest's finished_step
  int64_t mtime_ns = 0;
  bool final = false;
};

absl::Status WithResumable(absl::Status status, const std::string& path) {
  status.SetPayload(kResumablePayload, absl::Cord(path));
  return status;
}

// OK when `state` continues the training `request` describes (or request.force, with a warning).
absl::Status CheckMatches(const std::string& path, const CheckpointState& state,
                          const ResumeRequest& request, std::vector<std::string>* warnings) {
  std::vector<std::string> diffs;
  if (state.seed != request.seed) {
    diffs.push_back(absl::StrCat("--seed ", state.seed, " (this run: --seed ", request.seed, ")"));
  }
  if (state.dataset_size > 0 && state.dataset_size != request.dataset_size) {
    diffs.push_back(absl::StrCat("a data set of ", state.dataset_size,
                                 " training samples (this run: ", request.dataset_size, ")"));
  }
  if (diffs.empty()) return absl::OkStatus();
  const std::string what =
      absl::StrCat("checkpoint ", path, " was written with ", absl::StrJoin(diffs, " and "));
  if (request.force) {
    warnings->push_back(absl::StrCat(what, "; resuming it anyway (--force-resume)"));
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      what,
      ": resuming it would not continue the same training. Use the same --seed and data, "
      "--resume none to start a new run, or --force-resume to resume anyway"));
}

}  // namespace

std::optional<std::string> ResumableAfter(const absl::Status& status) {
  const auto path = status.GetPayload(kResumablePayload);  // absl::optional<absl::Cord>
  if (!path) return std::nullopt;
  return std::string(*path);
}

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(
    CheckpointStoreOptions options) {
  options.keep = std::max(options.keep, 1);
  std::unique_ptr<CheckpointStore> store(new CheckpointStore(std::move(options)));
  const std::string& dir = store->options_.dir;
  if (dir.empty()) return store;
  RETURN_IF_ERROR(MakeDirs(dir));
  if (store->options_.owner.empty()) {
    store->options_.owner = absl::StrCat("process ", ::getpid(), " on ", HostName());
  }
  RETURN_IF_ERROR(CheckOwnedAndPrivate(dir, "checkpoint folder"));
  // The probe is named like a temp file, so a probe left by a killed process is cleaned up too.
  const std::string probe =
      absl::StrCat(dir, "/", kProbeName, ".tmp.", ::getpid(), ".0.0.", HostName());
  ScopedFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--checkpoint-dir ", dir, " is not writable: ", std::strerror(errno)));
  }
  fd.Close();
  ::unlink(probe.c_str());
  RETURN_IF_ERROR(CheckpointFolderLock::CheckAvailable(dir, store->options_.owner));
  return store;
}

void CheckpointStore::RemoveDeadWritersTempFiles() {
  removed_temp_files_.clear();
  std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(options_.dir.c_str()), &::closedir);
  if (handle == nullptr) return;
  const bool locked = lock_ != nullptr && lock_->held();
  while (const dirent* entry = ::readdir(handle.get())) {
    const std::string name = entry->d_name;
    const std::optional<TempFileName> temp = ParseTempFileName(name);
    if (!temp || !IsOwnedName(temp->target)) continue;
    const std::string path = PathOf(name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const double mtime =
        static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
    const std::optional<bool> alive = TempWriterAlive(temp->pid, temp->host, mtime);
    // A writer on another host: gone when this process holds the folder (its job ended), but a
    // write probe may be a live rank's of this job.
    const bool dead = alive.has_value() ? !*alive : locked && temp->target != kProbeName;
    if (dead && ::unlink(path.c_str()) == 0) removed_temp_files_.push_back(name);
  }
}

std::string CheckpointStore::PathOf(const std::string& name) const {
  return absl::StrCat(options_.dir, "/", name);
}

absl::StatusOr<std::optional<RunManifest>> CheckpointStore::ReadManifest() const {
  const std::string path = PathOf(kRunManifestName);
  if (!Exists(path)) return std::optional<RunManifest>();
  RETURN_IF_ERROR(CheckOwnedAndPrivate(path, "run manifest"));
  ASSIGN_OR_RETURN(const std::string text, ReadBytes(path, kMaxManifestBytes));
  absl::StatusOr<RunManifest> manifest = ParseRunManifest(text);
  if (!manifest.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", manifest.status().message()));
  }
  return std::optional<RunManifest>(*std::move(manifest));
}

absl::Status CheckpointStore::WriteManifest(const RunManifest& manifest) const {
  if (options_.dir.empty()) return absl::OkStatus();
  return WriteFileAtomically(PathOf(kRunManifestName), SerializeRunManifest(manifest),
                             CheckpointFileMode());
}

std::vector<std::string> CheckpointStore::Candidates(
    const std::optional<RunManifest>& manifest) const {
  std::vector<FileEntry> found;
  if (DIR* d = ::opendir(options_.dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      FileEntry entry;
      entry.path = PathOf(name);
      if (name == kFinalCheckpointName) {
        entry.final = true;
        if (manifest && !manifest->finished()) continue;
        entry.run_id = manifest ? manifest->run_id : "";
        entry.step = manifest ? manifest->finished_step : 0;
      } else if (auto info = ParseCheckpointFileName(name)) {
        if (manifest && info->run_id != manifest->run_id) continue;
        entry.run_id = info->run_id;
        entry.step = info->step;
      } else {
        continue;
      }
      struct stat st;
      if (::stat(entry.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      entry.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      found.push_back(std::move(entry));
    }
    ::closedir(d);
  }
  // The manifest's run: by step, a checkpoint before final.pt (its copy) at the same step.
  // Without a manifest, steps of different runs cannot be compared: the newest file first.
  std::sort(found.begin(), found.end(), [&](const FileEntry& a, const FileEntry& b) {
    if (manifest) return std::make_tuple(a.step, !a.final) > std::make_tuple(b.step, !b.final);
    return std::make_tuple(a.mtime_ns, a.step) > std::make_tuple(b.mtime_ns, b.step);
  });
  std::vector<std::string> paths;
  for (const FileEntry& e : found) paths.push_back(e.path);
  return paths;
}

absl::StatusOr<ResumePlan> CheckpointStore::PlanResume(const ResumeRequest& request) {
  ResumePlan plan;
  absl::StatusOr<std::optional<RunManifest>> manifest = std::optional<RunManifest>();
  if (!options_.dir.empty()) {
    if (lock_ == nullptr) {
      ASSIGN_OR_RETURN(lock_, CheckpointFolderLock::Acquire(options_.dir, options_.owner));
    }
    RETURN_IF_ERROR(CheckOwnedAndPrivate(options_.dir, "checkpoint folder"));
    RemoveDeadWritersTempFiles();
    manifest = ReadManifest();
  }
  if (absl::IsPermissionDenied(manifest.status())) return manifest.status();
  if (!manifest.ok()) {
    plan.warnings.push_back(
        absl::StrCat("ignoring the run manifest: ", manifest.status().message()));
    manifest = std::optional<RunManifest>();
  }
  std::optional<CheckpointState> chosen;
  if (request.resume == "auto") {
    for (const std::string& path : Candidates(*manifest)) {
      RETURN_IF_ERROR(CheckOwnedAndPrivate(path, "checkpoint"));
      absl::StatusOr<CheckpointState> state = ReadCheckpoint(path);
      if (!state.ok()) {
        plan.warnings.push_back(absl::StrCat("skipping checkpoint: ", state.status().message()));
        continue;
      }
      if (*manifest && state->run_id != (*manifest)->run_id) {
        plan.warnings.push_back(absl::StrCat("skipping checkpoint ", path, ": it holds run ",
                                             state->run_id, ", not the folder's current run ",
                                             (*manifest)->run_id));
        continue;
      }
      chosen = *std::move(state);
      plan.path = path;
      break;
    }
  } else if (request.resume != "none") {
    if (Exists(request.resume)) {
      RETURN_IF_ERROR(CheckOwnedAndPrivate(DirName(request.resume), "checkpoint folder"));
      RETURN_IF_ERROR(CheckOwnedAndPrivate(request.resume, "checkpoint"));
    }
    ASSIGN_OR_RETURN(chosen, ReadCheckpoint(request.resume));
    plan.path = request.resume;
  }
  if (chosen) RETURN_IF_ERROR(CheckMatches(plan.path, *chosen, request, &plan.warnings));

  RunManifest next;
  if (chosen && !chosen->run_id.empty()) {
    next.run_id = chosen->run_id;
  } else {
    ASSIGN_OR_RETURN(next.run_id, NewRunId());
  }
  run_id_ = next.run_id;
  if (lock_ != nullptr) RETURN_IF_ERROR(lock_->SetRun(run_id_));
  if (chosen) {
    plan.complete = chosen->epoch >= request.epochs;
    last_path_ = plan.path;
    last_epoch_ = chosen->epoch;
    last_step_ = chosen->step;
    // A finished run relaunched in place keeps its record of final.pt.
    if (plan.complete && *manifest && (*manifest)->run_id == run_id_) next = **manifest;
  }
  if (!*manifest || SerializeRunManifest(**manifest) != SerializeRunManifest(next)) {
    RETURN_IF_ERROR(WriteManifest(next));
  }
  manifest_ = next;
  plan.state = std::move(chosen);
  return plan;
}

absl::StatusOr<SavedCheckpoint> CheckpointStore::Save(CheckpointState state, CheckpointKind kind) {
  if (options_.dir.empty()) return absl::FailedPreconditionError("no --checkpoint-dir to save to");
  state.run_id = run_id_;
  const int64_t step = state.step;
  const std::string path = PathOf(CheckpointFileName(run_id_, step));
  absl::Status st = WriteCheckpoint(path, state);
  if (st.ok()) {
    last_path_ = path;
    last_epoch_ = state.epoch;
    last_step_ = step;
    Prune(step);
    return SavedCheckpoint{path, ""};
  }
  if (!absl::IsResourceExhausted(st)) return st;
  if (kind == CheckpointKind::kPeriodic) {
    return SavedCheckpoint{
        "", absl::StrCat("checkpoint at step ", step, " not written (", st.message(),
                         "); training continues",
                         last_path_.empty() ? "; this run has no checkpoint yet"
                                            : absl::StrCat(" and keeps ", last_path_, " (step ",
                                                           last_step_, ")"))};
  }
  const std::string what =
      absl::StrCat(kind == CheckpointKind::kStop ? "the stop" : "the final", " checkpoint at step ",
                   step, " could not be written (", st.message(), ")");
  if (last_path_.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " and this run has no earlier checkpoint to resume from"));
  }
  return WithResumable(absl::ResourceExhaustedError(absl::StrCat(
                           what, "; resumable from ", last_path_, " (step ", last_step_, ")")),
                       last_path_);
}

void CheckpointStore::Prune(int64_t saved_step) {
  std::vector<std::pair<int64_t, std::string>> mine;
  if (DIR* d = ::opendir(options_.dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      auto info = ParseCheckpointFileName(e->d_name);
      if (!info || info->run_id != run_id_) continue;
      const std::string path = PathOf(e->d_name);
      if (info->step > saved_step) {
        ::unlink(path.c_str());  // an abandoned history of this run
      } else {
        mine.emplace_back(info->step, path);
      }
    }
    ::closedir(d);
  }
  std::sort(mine.rbegin(), mine.rend());
  for (size_t i = static_cast<size_t>(options_.keep); i < mine.size(); ++i) {
    ::unlink(mine[i].second.c_str());
  }
}

absl::StatusOr<FinalCheckpoint> CheckpointStore::Finish() {
  FinalCheckpoint out;
  if (options_.dir.empty()) return out;
  if (last_path_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id_, " has no checkpoint to make ", kFinalCheckpointName, " of"));
  }
  out.path = PathOf(kFinalCheckpointName);
  RunManifest finished = manifest_;
  finished.run_id = run_id_;
  finished.finished_epoch = last_epoch_;
  finished.finished_step = last_step_;
  out.already_present =
      last_path_ == out.path ||
      (Exists(out.path) && manifest_.run_id == run_id_ && manifest_.finished_step == last_step_);
  absl::Status st;
  if (!out.already_present) {
    absl::StatusOr<std::string> bytes = ReadBytes(last_path_, SIZE_MAX);
    st = bytes.ok() ? WriteFileAtomically(out.path, *bytes, CheckpointFileMode()) : bytes.status();
  }
  if (st.ok() && SerializeRunManifest(finished) != SerializeRunManifest(manifest_)) {
    st = WriteManifest(finished);
  }
  if (!st.ok()) {
    const std::string message = absl::StrCat(kFinalCheckpointName, " could not be written (",
                                             st.message(), "); the run's last checkpoint is ",
                                             last_path_, ": run the same command again to finish");
    if (absl::IsResourceExhausted(st)) {
      return WithResumable(absl::ResourceExhaustedError(message), last_path_);
    }
    return absl::Status(st.code(), message);
  }
  manifest_ = finished;
  return out;
}

}  // namespace ddp
