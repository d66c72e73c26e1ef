#include "coordinator/kv_store.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

const absl::Time kFar = absl::InfiniteFuture();

TEST(KvStoreTest, SetGetCheckDeleteNumKeys) {
  KvStore s;
  ASSERT_TRUE(s.Set("a", "1").ok());
  std::string got;
  s.Get("a", kFar, [&](absl::StatusOr<std::string> v) { got = *v; });
  EXPECT_EQ(got, "1");
  EXPECT_TRUE(s.Check({"a"}));
  EXPECT_FALSE(s.Check({"a", "b"}));
  EXPECT_EQ(s.NumKeys(), 1);
  EXPECT_TRUE(s.Delete("a"));
  EXPECT_FALSE(s.Delete("a"));
  EXPECT_EQ(s.NumKeys(), 0);
}

TEST(KvStoreTest, GetWaitsUntilSet) {
  KvStore s;
  absl::StatusOr<std::string> got = absl::UnknownError("not yet");
  s.Get("k", kFar, [&](absl::StatusOr<std::string> v) { got = v; });
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(s.NumWaiters(), 1u);
  ASSERT_TRUE(s.Set("k", "v").ok());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "v");
  EXPECT_EQ(s.NumWaiters(), 0u);
}

TEST(KvStoreTest, WaitNeedsEveryKeyAndTimesOutNamingTheMissingOnes) {
  KvStore s;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  absl::Status done = absl::UnknownError("pending");
  s.Wait({"x", "y"}, t0 + absl::Seconds(1), [&](absl::Status st) { done = st; });
  ASSERT_TRUE(s.Set("x", "1").ok());
  EXPECT_EQ(done.code(), absl::StatusCode::kUnknown);
  s.ExpireWaiters(t0);
  EXPECT_EQ(done.code(), absl::StatusCode::kUnknown);
  s.ExpireWaiters(t0 + absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(done)) << done;
  EXPECT_NE(done.message().find("y"), absl::string_view::npos);
  EXPECT_EQ(done.message().find("x,"), absl::string_view::npos);

  absl::Status ok = absl::UnknownError("pending");
  s.Wait({"x", "z"}, kFar, [&](absl::Status st) { ok = st; });
  ASSERT_TRUE(s.Set("z", "").ok());
  EXPECT_TRUE(ok.ok());
}

TEST(KvStoreTest, AddCreatesAndSumsAndRejectsNonIntegers) {
  KvStore s;
  EXPECT_EQ(*s.Add("n", 5), 5);
  EXPECT_EQ(*s.Add("n", -2), 3);
  ASSERT_TRUE(s.Set("text", "abc").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s.Add("text", 1).status()));
  // Overflow is refused and changes nothing.
  ASSERT_TRUE(s.Set("big", absl::StrCat(INT64_MAX)).ok());
  absl::StatusOr<int64_t> over = s.Add("big", 1);
  EXPECT_TRUE(absl::IsInvalidArgument(over.status())) << over.status();
  EXPECT_EQ(*s.Add("big", 0), INT64_MAX);
  EXPECT_TRUE(absl::IsInvalidArgument(s.Add("big", 0, std::string(65, 'r')).status()));
}

TEST(KvStoreTest, AddWithTheSameRequestIdAddsOnce) {
  KvStore store;
  ASSERT_EQ(*store.Add("n", 1, "client-a:0"), 1);
  EXPECT_EQ(*store.Add("n", 1, "client-a:0"), 1);  // the retry of a call whose reply was lost
  EXPECT_EQ(*store.Add("n", 1, "client-a:1"), 2);
  EXPECT_EQ(*store.Add("n", 1, "client-b:0"), 3);
  EXPECT_EQ(*store.Add("n", 1), 4);  // no id: never deduplicated
  EXPECT_EQ(*store.Add("n", 1), 5);
  // Only the most recent kRememberedAdds ids are remembered.
  for (size_t i = 0; i < KvStore::kRememberedAdds; ++i) {
    ASSERT_TRUE(store.Add("other", 1, absl::StrCat("bulk:", i)).ok());
  }
  EXPECT_EQ(*store.Add("n", 1, "client-a:0"), 6);
  EXPECT_EQ(*store.Add("other", 0, absl::StrCat("bulk:", KvStore::kRememberedAdds - 1)),
            static_cast<int64_t>(KvStore::kRememberedAdds));
}

TEST(KvStoreTest, AddWakesWaiters) {
  KvStore s;
  bool woke = false;
  s.Wait({"n"}, kFar, [&](absl::Status st) { woke = st.ok(); });
  ASSERT_TRUE(s.Add("n", 1).ok());
  EXPECT_TRUE(woke);
}

TEST(KvStoreTest, CompareSetFollowsC10dSemantics) {
  KvStore s;
  EXPECT_EQ(*s.CompareSet("k", "x", "y"), "x");  // absent + non-empty expected: unchanged
  EXPECT_FALSE(s.Check({"k"}));
  EXPECT_EQ(*s.CompareSet("k", "", "first"), "first");  // absent + empty expected: set
  EXPECT_EQ(*s.CompareSet("k", "wrong", "z"), "first");
  EXPECT_EQ(*s.CompareSet("k", "first", "second"), "second");
}

TEST(KvStoreTest, ConcurrentAddsAreAtomic) {
  KvStore s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(s.Add("counter", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*s.Add("counter", 0), 8000);
}

TEST(KvStoreTest, CancelAllFailsEveryWaiter) {
  KvStore s;
  int cancelled = 0;
  for (int i = 0; i < 5; ++i) {
    s.Get("never", kFar, [&](absl::StatusOr<std::string> v) {
      if (absl::IsUnavailable(v.status())) ++cancelled;
    });
  }
  s.CancelAll(absl::UnavailableError("bye"));
  EXPECT_EQ(cancelled, 5);
  EXPECT_EQ(s.NumWaiters(), 0u);
}

// Each limit, hit for real: the error names the limit and the store is unchanged.
TEST(KvStoreTest, LimitsRefuseWithErrorsNamingTheLimit) {
  KvLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.max_keys = 3;
  limits.max_total_bytes = 40;
  limits.max_waiters = 2;
  KvStore s(limits);
  struct Case {
    const char* what;
    absl::Status status;
    absl::StatusCode code;
    const char* names;
  };
  ASSERT_TRUE(s.Set("a", std::string(16, 'x')).ok());  // 17 bytes held
  ASSERT_TRUE(s.Set("b", std::string(16, 'x')).ok());  // 34
  const Case cases[] = {
      {"empty key", s.Set("", "v"), absl::StatusCode::kInvalidArgument, "max_key_bytes"},
      {"long key", s.Set("123456789", "v"), absl::StatusCode::kInvalidArgument, "max_key_bytes"},
      {"big value", s.Set("c", std::string(17, 'x')), absl::StatusCode::kInvalidArgument,
       "max_value_bytes"},
      {"total bytes", s.Set("c", std::string(6, 'x')), absl::StatusCode::kResourceExhausted,
       "max_total_bytes"},
      {"compare-set total", s.CompareSet("c", "", std::string(6, 'x')).status(),
       absl::StatusCode::kResourceExhausted, "max_total_bytes"},
      {"add long key", s.Add("123456789", 1).status(), absl::StatusCode::kInvalidArgument,
       "max_key_bytes"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.what << ": " << c.status;
    EXPECT_NE(c.status.message().find(c.names), absl::string_view::npos)
        << c.what << ": " << c.status;
  }
  EXPECT_EQ(s.NumKeys(), 2);
  EXPECT_EQ(s.TotalBytes(), 34u);
  // Replacing a value counts only the difference; a third key fits, a fourth does not.
  ASSERT_TRUE(s.Set("a", "").ok());   // 18 held
  ASSERT_TRUE(s.Set("c", "1").ok());  // 20
  absl::Status fourth = s.Set("d", "");
  EXPECT_TRUE(absl::IsResourceExhausted(fourth)) << fourth;
  EXPECT_NE(fourth.message().find("max_keys"), absl::string_view::npos) << fourth;
  EXPECT_TRUE(s.Delete("c"));
  EXPECT_EQ(s.TotalBytes(), 18u);
  ASSERT_TRUE(s.Set("d", "").ok());

  // Waiters: two park, the third is refused at once.
  absl::Status third = absl::UnknownError("pending");
  s.Get("never1", kFar, [](absl::StatusOr<std::string>) {});
  s.Wait({"never2"}, kFar, [](absl::Status) {});
  s.Wait({"never3"}, kFar, [&](absl::Status st) { third = st; });
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_NE(third.message().find("max_waiters"), absl::string_view::npos) << third;
  EXPECT_EQ(s.NumWaiters(), 2u);
  s.CancelAll(absl::CancelledError("done"));
}

// Waiters that time out leave no per-key bookkeeping behind (no growth under repeated polls).
TEST(KvStoreTest, ExpiredWaitersLeaveNothingBehind) {
  KvLimits limits;
  limits.max_waiters = 4;
  KvStore s(limits);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  for (int i = 0; i < 100; ++i) {
    absl::Status got = absl::UnknownError("pending");
    s.Wait({absl::StrCat("missing", i % 3), "other"}, t0, [&](absl::Status st) { got = st; });
    s.ExpireWaiters(t0);
    ASSERT_TRUE(absl::IsDeadlineExceeded(got)) << i << ": " << got;
  }
  EXPECT_EQ(s.NumWaiters(), 0u);
  // A later Set of a key many expired waiters once waited on wakes only the live one.
  int woke = 0;
  s.Get("missing1", kFar, [&](absl::StatusOr<std::string> v) { woke += v.ok() ? 1 : 0; });
  ASSERT_TRUE(s.Set("missing1", "v").ok());
  EXPECT_EQ(woke, 1);
}

}  // namespace
}  // namespace ddp
