// The main() of every GoogleTest binary (cmake/DdpTesting.cmake links it instead of
// gtest_main): a test that calls GTEST_SKIP did not run, so the binary must not count as a pass.
// When no test failed but some were skipped, it prints one "SKIPPED <test>: <reason>" line per
// skipped test and exits 77, which CTest reports as "Skipped" (SKIP_RETURN_CODE) and
// scripts/run-tests.sh lists in its summary. A failure still exits 1 and wins over any skip.
//
// Thread safety: runs on the main thread only.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

constexpr int kSkippedExitCode = 77;  // CTest's SKIP_RETURN_CODE for our tests

// Records every skipped test and the message GTEST_SKIP gave.
class SkipRecorder : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* result = info.result();
    if (result == nullptr || !result->Skipped()) return;
    std::string reason;
    for (int i = 0; i < result->total_part_count(); ++i) {
      const ::testing::TestPartResult& part = result->GetTestPartResult(i);
      if (part.skipped() && part.message() != nullptr) reason = part.message();
    }
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
    skipped_.push_back(std::string(info.test_suite_name()) + "." + info.name() + ": " +
                       (reason.empty() ? "(no reason given)" : reason));
  }
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::vector<std::string> skipped_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto* recorder = new SkipRecorder();  // owned by the listener list
  ::testing::UnitTest::GetInstance()->listeners().Append(recorder);
  const int failed = RUN_ALL_TESTS();
  if (failed != 0) return failed;
  if (recorder->skipped().empty()) return 0;
  const int ran = ::testing::UnitTest::GetInstance()->successful_test_count();
  std::fprintf(stderr, "%zu test(s) SKIPPED (did not run; %d passed):\n",
               recorder->skipped().size(), ran);
  for (const std::string& line : recorder->skipped()) {
    std::fprintf(stderr, "SKIPPED %s\n", line.c_str());
  }
  return kSkippedExitCode;
}
