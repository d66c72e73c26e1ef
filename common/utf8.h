// UTF-8 helpers for strings that reach people and parsers (status views, JSON, the wire):
// validity, a valid copy of arbitrary bytes, and cutting at a code point boundary.
// Strict RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_COMMON_UTF8_H_
#define SLURM_DDP_COMMON_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ddp {

bool IsValidUtf8(absl::string_view s);

// `s` with every byte that does not start a valid sequence replaced by U+FFFD.
std::string ToValidUtf8(absl::string_view s);

// The longest prefix of `s` of at most `max_bytes` bytes that does not end inside a code point.
absl::string_view TruncateUtf8(absl::string_view s, size_t max_bytes);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_UTF8_H_
