#include "runtime/local_rendezvous.h"

#include <thread>

#include "graph/mutex.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(LocalRendezvousTest, SendThenRecv) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send("k", Tensor::Scalar<float>(2.5f)).ok());
  bool got = false;
  r.RecvAsync("k", [&](const absl::Status& s, const Tensor& t) {
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(*t.data<float>(), 2.5f);
    got = true;
  });
  EXPECT_TRUE(got);
}

TEST(LocalRendezvousTest, RecvWaitsForSendOnAnotherThread) {
  LocalRendezvous r;
  Notification n;
  int32_t value = 0;
  r.RecvAsync("k", [&](const absl::Status& s, const Tensor& t) {
    EXPECT_TRUE(s.ok());
    value = *t.data<int32_t>();
    n.Notify();
  });
  EXPECT_FALSE(n.HasBeenNotified());
  std::thread sender([&] { EXPECT_TRUE(r.Send("k", Tensor::Scalar<int32_t>(7)).ok()); });
  n.WaitForNotification();
  sender.join();
  EXPECT_EQ(value, 7);
}

TEST(LocalRendezvousTest, KeysAreIndependentAndSentOnce) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send("a", Tensor::Scalar<float>(1)).ok());
  ASSERT_TRUE(r.Send("b", Tensor::Scalar<float>(2)).ok());
  absl::Status dup = r.Send("a", Tensor::Scalar<float>(3));
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dup.message().find("'a'"), std::string::npos);
  float b = 0;
  r.RecvAsync("b", [&](const absl::Status& s, const Tensor& t) { b = *t.data<float>(); });
  EXPECT_EQ(b, 2);
  absl::Status second;
  r.RecvAsync("b", [&](const absl::Status& s, const Tensor&) { second = s; });
  EXPECT_EQ(second.code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalRendezvousTest, AbortFailsPendingAndLaterOperations) {
  LocalRendezvous r;
  absl::Status pending;
  r.RecvAsync("k", [&](const absl::Status& s, const Tensor&) { pending = s; });
  r.StartAbort(absl::AbortedError("worker 3 died"));
  EXPECT_EQ(pending.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(r.Send("x", Tensor::Scalar<float>(1)).code(), absl::StatusCode::kAborted);
  absl::Status later;
  r.RecvAsync("y", [&](const absl::Status& s, const Tensor&) { later = s; });
  EXPECT_EQ(later.message(), "worker 3 died");
}

TEST(LocalRendezvousTest, KeyFormat) {
  EXPECT_EQ(Rendezvous::CreateKey("/job:a/replica:0/task:0/device:CPU:0", 0x1f,
                                  "/job:a/replica:0/task:0/device:CPU:1", "x:0"),
            "/job:a/replica:0/task:0/device:CPU:0;1f;/job:a/replica:0/task:0/device:CPU:1;x:0");
}

}  // namespace
}  // namespace strata
