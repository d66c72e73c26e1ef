// CRC-32C (Castagnoli, the checksum of iSCSI, ext4 and LevelDB's log): frames durable records
// (coordinator/job/journal.h) so that a torn or corrupt record is detected. A plain table-driven
// software implementation: records are small and written rarely.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_COMMON_CRC32C_H_
#define SLURM_DDP_COMMON_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace ddp {

// The CRC-32C of `data` continuing from `crc` (the CRC of the bytes before; 0 to start).
uint32_t Crc32cExtend(uint32_t crc, absl::string_view data);
inline uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data); }

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_CRC32C_H_
