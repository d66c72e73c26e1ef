// Limits and sanity checks for everything a client can send (one-line INVALID_ARGUMENT errors),
// applied by the service before a request reaches the job. The protocol's limits are documented
// in proto/coordinator.proto. Strings must be valid UTF-8 (the protobuf parser already refuses
// invalid UTF-8 in a string field; these checks hold for callers that skip the wire, too), and
// free text is cut only at a code point boundary.
//
// Thread safety: pure functions; safe from any thread.
#ifndef SLURM_DDP_COORDINATOR_RPC_VALIDATION_H_
#define SLURM_DDP_COORDINATOR_RPC_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/coordinator_api.h"
#include "coordinator/kv_store.h"

namespace ddp {

// Replies (a large job's status) may be this large; requests are bounded by kMaxRequestBytes.
inline constexpr int kMaxMessageBytes = 16 * 1024 * 1024;
inline constexpr size_t kMaxKeyBytes = KvLimits{}.max_key_bytes;
inline constexpr size_t kMaxValueBytes = KvLimits{}.max_value_bytes;
// The server's receive limit: the largest store value and its key, with room to spare.
inline constexpr size_t kMaxRequestBytes = kMaxValueBytes + 64 * 1024;
inline constexpr size_t kMaxKeysPerCall = 4096;
inline constexpr size_t kMaxKeyBytesPerCall = size_t{1} << 20;
inline constexpr size_t kMaxHostBytes = 255;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxReasonBytes = 4096;
inline constexpr int64_t kMaxDatasetSize = int64_t{1} << 40;
inline constexpr int64_t kMaxStoreTimeoutMs = int64_t{24} * 3600 * 1000;

absl::Status ValidateIdentity(const WorkerIdentity& who, int world_size);
// A spare's StandBy: like an identity, but its node id is any node's (0..kMaxWorldSize - 1).
absl::Status ValidateSpare(const SpareReport& spare, int world_size);
// A node task's Fences: its node id (0..kMaxWorldSize - 1) and at most kMaxLocalWorkers
// workers, each with a local rank in 0..kMaxLocalWorkers - 1 and a positive pid.
inline constexpr int kMaxLocalWorkers = 1024;
absl::Status ValidateLiveWorkers(int node_rank, const std::vector<LiveWorker>& live);
absl::Status ValidateKey(const std::string& key);
absl::Status ValidateKeys(const std::vector<std::string>& keys);
absl::Status ValidateValue(const std::string& value);
absl::Status ValidateTimeoutMs(int64_t timeout_ms);
absl::Status ValidateShardRequest(const ShardRequest& request);
absl::Status ValidateProgress(const ProgressReport& progress);
absl::Status ValidateCheckpoint(const CommittedCheckpoint& checkpoint);
// An operator's or worker's message made safe for status: invalid UTF-8 replaced (U+FFFD), then
// cut at a code point boundary to at most kMaxReasonBytes (marked with "...").
std::string ClampReason(const std::string& reason);
// The same status with its message clamped (ClampReason).
absl::Status ClampOutcome(const absl::Status& outcome);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_VALIDATION_H_
