#include "coordinator/kv_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

const absl::Time kFar = absl::InfiniteFuture();

TEST(KvStoreTest, SetGetCheckDeleteNumKeys) {
  KvStore s;
  s.Set("a", "1");
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
  s.Set("k", "v");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "v");
  EXPECT_EQ(s.NumWaiters(), 0u);
}

TEST(KvStoreTest, WaitNeedsEveryKeyAndTimesOutNamingTheMissingOnes) {
  KvStore s;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  absl::Status done = absl::UnknownError("pending");
  s.Wait({"x", "y"}, t0 + absl::Seconds(1), [&](absl::Status st) { done = st; });
  s.Set("x", "1");
  EXPECT_EQ(done.code(), absl::StatusCode::kUnknown);
  s.ExpireWaiters(t0);
  EXPECT_EQ(done.code(), absl::StatusCode::kUnknown);
  s.ExpireWaiters(t0 + absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(done)) << done;
  EXPECT_NE(done.message().find("y"), absl::string_view::npos);
  EXPECT_EQ(done.message().find("x,"), absl::string_view::npos);

  absl::Status ok = absl::UnknownError("pending");
  s.Wait({"x", "z"}, kFar, [&](absl::Status st) { ok = st; });
  s.Set("z", "");
  EXPECT_TRUE(ok.ok());
}

TEST(KvStoreTest, AddCreatesAndSumsAndRejectsNonIntegers) {
  KvStore s;
  EXPECT_EQ(*s.Add("n", 5), 5);
  EXPECT_EQ(*s.Add("n", -2), 3);
  s.Set("text", "abc");
  EXPECT_TRUE(absl::IsInvalidArgument(s.Add("text", 1).status()));
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
  EXPECT_EQ(s.CompareSet("k", "x", "y"), "x");  // absent + non-empty expected: unchanged
  EXPECT_FALSE(s.Check({"k"}));
  EXPECT_EQ(s.CompareSet("k", "", "first"), "first");  // absent + empty expected: set
  EXPECT_EQ(s.CompareSet("k", "wrong", "z"), "first");
  EXPECT_EQ(s.CompareSet("k", "first", "second"), "second");
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

}  // namespace
}  // namespace ddp
