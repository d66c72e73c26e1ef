// Fuzzes ddpctl's text views of a job status (client/ddpctl/status_view.h): FormatStatus,
// FormatLine, ProgressBar and FormatDuration, on statuses with arbitrary strings and numbers, and
// decided fields (flag, behind_by, final, exit_code) as decided or arbitrary.
// Invariants: no undefined behaviour (UBSan: overflow in the step arithmetic), and what reaches
// the operator's terminal is valid UTF-8 without control characters (no escape sequences from a
// job id, host name or stop reason), one line for FormatLine; a progress bar is exactly
// width + 2 characters.
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/ddpctl/status_view.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/status_input.h"

namespace {

// True when `text` has no C0 or C1 control character and no DEL, other than `allowed`.
bool NoControls(const std::string& text, char allowed) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != static_cast<unsigned char>(allowed)) || c == 0x7f) return false;
    // U+0080..U+009F are encoded C2 80..C2 9F.
    if (c == 0xc2 && i + 1 < text.size()) {
      const unsigned char next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::fuzz::ByteReader in(data, size);
  ddp::ViewOptions options;
  options.max_ranks = static_cast<int>(static_cast<int8_t>(in.Byte()));
  options.events = static_cast<int>(static_cast<int8_t>(in.Byte()));
  const int width = in.Byte() % 120;
  const double fraction = in.Double();
  const double duration = in.Double();
  ddp::JobStatus status = ddp::fuzz::ReadJobStatus(in);
  ddp::fuzz::ReadDecided(in, &status);

  const std::string view = ddp::FormatStatus(status, options);
  FUZZ_CHECK(ddp::fuzz::IsStrictUtf8(view), view);
  FUZZ_CHECK(NoControls(view, '\n'), view);
  const std::string line = ddp::FormatLine(status);
  FUZZ_CHECK(ddp::fuzz::IsStrictUtf8(line), line);
  FUZZ_CHECK(NoControls(line, ' '), line);
  const std::string bar = ddp::ProgressBar(fraction, width);
  FUZZ_CHECK(bar.size() == static_cast<size_t>(width) + 2, bar);
  const std::string d = ddp::FormatDuration(duration);
  FUZZ_CHECK(!d.empty() && NoControls(d, ' '), d);
  return 0;
}
