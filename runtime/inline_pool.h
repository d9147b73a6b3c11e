// An inter-op "pool" that runs what it is given at once on the calling
// thread (SessionOptions::inter_op_pool): with it the executor runs one op
// at a time, so the intra-op threads are the whole thread budget of a step,
// and a one-device step pays no thread hand-offs.
//
//   InlinePool inline_pool;              // must outlive the session
//   options.inter_op_pool = &inline_pool;
//
// Thread-safety: stateless. Ownership: none.
#ifndef STRATA_RUNTIME_INLINE_POOL_H_
#define STRATA_RUNTIME_INLINE_POOL_H_

#include <functional>

#include "unsupported/Eigen/CXX11/ThreadPool"

namespace strata {

class InlinePool : public Eigen::ThreadPoolInterface {
 public:
  void Schedule(std::function<void()> fn) override { fn(); }
  void Cancel() override {}
  int NumThreads() const override { return 1; }
  int CurrentThreadId() const override { return 0; }
};

}  // namespace strata

#endif  // STRATA_RUNTIME_INLINE_POOL_H_
