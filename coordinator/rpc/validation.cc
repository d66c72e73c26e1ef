#include "coordinator/rpc/validation.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "coordinator/job/job.h"

namespace ddp {
namespace {

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

absl::Status Utf8(const std::string& s, const char* what) {
  if (IsValidUtf8(s)) return absl::OkStatus();
  return Invalid(absl::StrCat(what, " is not valid UTF-8"));
}

}  // namespace

absl::Status ValidateIdentity(const WorkerIdentity& who, int world_size) {
  if (who.host.empty() || who.host.size() > kMaxHostBytes) {
    return Invalid(absl::StrCat("host name must have 1..", kMaxHostBytes, " bytes"));
  }
  if (who.local_world_size < 1 || who.local_world_size > world_size) {
    return Invalid(absl::StrCat("local_world_size ", who.local_world_size,
                                " is outside 1..world size ", world_size));
  }
  if (who.local_rank < 0 || who.local_rank >= who.local_world_size) {
    return Invalid(
        absl::StrCat("local_rank ", who.local_rank, " is outside 0..", who.local_world_size - 1));
  }
  if (who.node_rank < 0 || who.node_rank >= world_size) {
    return Invalid(absl::StrCat("node_rank ", who.node_rank, " is outside 0..", world_size - 1));
  }
  if (who.pid < 0) return Invalid("pid must be >= 0");
  if (who.nonce.size() > 256) return Invalid("nonce too long");
  if (who.node_name.size() > kMaxHostBytes) {
    return Invalid(absl::StrCat("node name must have 0..", kMaxHostBytes, " bytes"));
  }
  for (const char c : who.node_name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return Invalid("node name may hold only letters, digits, '.', '_' and '-'");
    }
  }
  if (absl::Status st = Utf8(who.host, "host name"); !st.ok()) return st;
  return Utf8(who.nonce, "nonce");
}

absl::Status ValidateSpare(const SpareReport& spare, int world_size) {
  WorkerIdentity as_worker;
  as_worker.host = spare.host;
  as_worker.local_world_size = spare.local_world_size;
  as_worker.pid = spare.pid;
  as_worker.nonce = spare.nonce;
  if (absl::Status st = ValidateIdentity(as_worker, world_size); !st.ok()) return st;
  if (spare.node_rank < 0 || spare.node_rank >= kMaxWorldSize) {
    return Invalid(
        absl::StrCat("node_rank ", spare.node_rank, " is outside 0..", kMaxWorldSize - 1));
  }
  return absl::OkStatus();
}

absl::Status ValidateLiveWorkers(int node_rank, const std::vector<LiveWorker>& live) {
  if (node_rank < 0 || node_rank >= kMaxWorldSize) {
    return Invalid(absl::StrCat("node_rank ", node_rank, " is outside 0..", kMaxWorldSize - 1));
  }
  if (live.size() > static_cast<size_t>(kMaxLocalWorkers)) {
    return Invalid(absl::StrCat(live.size(), " workers on one node; at most ", kMaxLocalWorkers));
  }
  for (const LiveWorker& w : live) {
    if (w.local_rank < 0 || w.local_rank >= kMaxLocalWorkers || w.pid <= 0) {
      return Invalid(absl::StrCat("worker (local rank ", w.local_rank, ", pid ", w.pid,
                                  "): local rank must be in 0..", kMaxLocalWorkers - 1,
                                  " and pid positive"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return Invalid(absl::StrCat("store key must have 1..", kMaxKeyBytes, " bytes"));
  }
  return Utf8(key, "store key");
}

absl::Status ValidateKeys(const std::vector<std::string>& keys) {
  if (keys.empty() || keys.size() > kMaxKeysPerCall) {
    return Invalid(absl::StrCat("a store call takes 1..", kMaxKeysPerCall, " keys"));
  }
  size_t bytes = 0;
  for (const std::string& k : keys) {
    absl::Status st = ValidateKey(k);
    if (!st.ok()) return st;
    bytes += k.size();
  }
  if (bytes > kMaxKeyBytesPerCall) {
    return Invalid(absl::StrCat("a store call takes at most ", kMaxKeyBytesPerCall,
                                " bytes of keys (this one has ", bytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(const std::string& value) {
  if (value.size() > kMaxValueBytes) {
    return Invalid(
        absl::StrCat("store value of ", value.size(), " bytes exceeds ", kMaxValueBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateTimeoutMs(int64_t timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > kMaxStoreTimeoutMs) {
    return Invalid(absl::StrCat("timeout_ms ", timeout_ms, " is outside 0..", kMaxStoreTimeoutMs));
  }
  return absl::OkStatus();
}

absl::Status ValidateShardRequest(const ShardRequest& r) {
  if (r.epoch < 0 || r.epoch > 1000000000) return Invalid("epoch must be in 0..1e9");
  if (r.dataset_size <= 0 || r.dataset_size > kMaxDatasetSize) {
    return Invalid(absl::StrCat("dataset_size ", r.dataset_size, " is outside 1..2^40"));
  }
  if (r.resume_consumed < 0) return Invalid("resume_consumed must be >= 0");
  if (r.resume_consumed > 0 && (r.resume_world_size < 1 || r.resume_world_size > kMaxWorldSize)) {
    return Invalid(absl::StrCat("resume_world_size must be in 1..", kMaxWorldSize,
                                " when resume_consumed > 0"));
  }
  return absl::OkStatus();
}

absl::Status ValidateProgress(const ProgressReport& p) {
  if (p.epoch < 0 || p.epochs < 0 || p.step < 0 || p.steps_per_epoch < 0) {
    return Invalid("progress counters must be >= 0");
  }
  for (double v : {p.samples_per_second, p.data_wait_share, p.forward_ms, p.backward_ms,
                   p.comm_wait_ms, p.optimizer_ms, p.overlap_share}) {
    if (std::isnan(v) || v < 0) return Invalid("progress rates must be finite and >= 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateCheckpoint(const CommittedCheckpoint& c) {
  if (c.epoch < 0 || c.step < 0 || c.consumed < 0) {
    return Invalid("checkpoint epoch, step and consumed must be >= 0");
  }
  if (c.path.size() > kMaxPathBytes) return Invalid("checkpoint path too long");
  return Utf8(c.path, "checkpoint path");
}

std::string ClampReason(const std::string& reason) {
  std::string valid = IsValidUtf8(reason) ? reason : ToValidUtf8(reason);
  if (valid.size() <= kMaxReasonBytes) return valid;
  return absl::StrCat(TruncateUtf8(valid, kMaxReasonBytes - 3), "...");
}

absl::Status ClampOutcome(const absl::Status& outcome) {
  if (outcome.ok()) return outcome;
  return absl::Status(outcome.code(), ClampReason(std::string(outcome.message())));
}

}  // namespace ddp
