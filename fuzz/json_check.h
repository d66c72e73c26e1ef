// The JSON checker of the fuzz harnesses, on nlohmann/json's strict parser (RFC 8259): the
// whole text must be one value, strings valid UTF-8 with only legal escapes and no raw control
// characters, numbers in JSON's grammar (no NaN, no Inf). It also hands back every object key
// and string value, decoded, in document order, so a harness can compare them with what it put
// in.
//
// Thread safety: a plain function.
#ifndef SLURM_DDP_FUZZ_JSON_CHECK_H_
#define SLURM_DDP_FUZZ_JSON_CHECK_H_

#include <string>
#include <string_view>
#include <vector>

namespace ddp::fuzz {

// True when `text` is exactly one valid JSON value (surrounding whitespace allowed). On failure
// `*error` says where and why. `strings` (may be null) receives every decoded string.
bool CheckJson(std::string_view text, std::vector<std::string>* strings, std::string* error);

}  // namespace ddp::fuzz

#endif  // SLURM_DDP_FUZZ_JSON_CHECK_H_
