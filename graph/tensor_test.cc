#include "graph/tensor.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(TensorShapeTest, CountsElementsAndRejectsBadDims) {
  auto s = TensorShape::FromDims({2, 3, 4});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_elements(), 24);
  EXPECT_EQ(s->DebugString(), "[2,3,4]");
  EXPECT_EQ(TensorShape().num_elements(), 1);  // scalar
  EXPECT_EQ(TensorShape::FromDims({5, 0, 7})->num_elements(), 0);

  auto neg = TensorShape::FromDims({2, -3});
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(neg.status().message().find("negative"), std::string::npos);

  const int64_t big = int64_t{1} << 40;
  auto overflow = TensorShape::FromDims({big, big});
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(overflow.status().message().find("2^63-1"), std::string::npos);
  // Zero anywhere makes a huge product fine.
  EXPECT_TRUE(TensorShape::FromDims({0, big, big}).ok());
}

TEST(TensorShapeTest, ProtoRoundTripAndValidation) {
  TensorShape s{4, 5};
  tensorflow::TensorShapeProto p;
  s.AsProto(&p);
  EXPECT_EQ(*TensorShape::FromProto(p), s);
  p.add_dim()->set_size(-1);
  EXPECT_FALSE(TensorShape::FromProto(p).ok());
  auto partial = PartialTensorShape::FromProto(p);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->DebugString(), "[4,5,?]");
  EXPECT_FALSE(partial->IsFullyDefined());
  p.mutable_dim(2)->set_size(-7);
  EXPECT_FALSE(PartialTensorShape::FromProto(p).ok());
}

TEST(PartialTensorShapeTest, CompatibilityAndMerge) {
  PartialTensorShape a({-1, 3}), b({2, -1}), c({2, 4});
  EXPECT_TRUE(a.IsCompatibleWith(b));
  EXPECT_FALSE(a.IsCompatibleWith(c));
  EXPECT_EQ(a.Merge(b)->DebugString(), "[2,3]");
  EXPECT_FALSE(a.Merge(c).ok());
  EXPECT_TRUE(PartialTensorShape::UnknownRank().IsCompatibleWith(c));
}

TEST(TensorTest, CopiesShareBufferAndReshapeKeepsIt) {
  Tensor t(DT_FLOAT, TensorShape{2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = i;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u);
  Tensor u = t;
  EXPECT_TRUE(u.SharesBufferWith(t));
  EXPECT_FALSE(t.RefCountIsOne());
  auto r = t.Reshaped(TensorShape{3, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->SharesBufferWith(t));
  EXPECT_FALSE(t.Reshaped(TensorShape{4}).ok());
  Tensor d = t.DeepCopy();
  EXPECT_FALSE(d.SharesBufferWith(t));
  EXPECT_EQ(d.data<float>()[5], 5.f);
}

TEST(TensorTest, AllocationFailureIsResourceExhausted) {
  TrackingCpuAllocator small("small", /*bytes_limit=*/1024);
  auto ok = Tensor::Allocate(&small, DT_FLOAT, TensorShape{16});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(small.GetStats().bytes_in_use, 64);
  auto too_big = Tensor::Allocate(&small, DT_FLOAT, TensorShape{1024});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("[1024]"), std::string::npos);
  *ok = Tensor();
  EXPECT_EQ(small.GetStats().bytes_in_use, 0);
  EXPECT_EQ(small.GetStats().peak_bytes_in_use, 64);
}

TEST(AllocatorTest, LargeBuffersAreRecycledBySize) {
  TrackingCpuAllocator a("recycling");
  const size_t big = 1 << 20;
  void* p = a.AllocateRaw(kTensorAlignment, big);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  a.DeallocateRaw(p, big);
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
  // The same size comes back from the cache; another size does not.
  void* q = a.AllocateRaw(kTensorAlignment, big);
  EXPECT_EQ(q, p);
  void* r = a.AllocateRaw(kTensorAlignment, 2 * big);
  EXPECT_NE(r, p);
  EXPECT_EQ(a.GetStats().bytes_in_use, static_cast<int64_t>(3 * big));
  a.DeallocateRaw(q, big);
  a.DeallocateRaw(r, 2 * big);
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
}

// The VmFlags line of the mapping holding `p` in /proc/self/smaps ("" if none).
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(AllocatorTest, LargeBuffersAskForHugePages) {
  TrackingCpuAllocator a("huge");
  const size_t bytes = TrackingCpuAllocator::kHugePageBytes * 2 + 4096;
  void* p = a.AllocateRaw(kTensorAlignment, bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % TrackingCpuAllocator::kHugePageBytes, 0u);
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  if (mode.find("[never]") == std::string::npos && !mode.empty()) {
    // "hg": the range was advised MADV_HUGEPAGE.
    EXPECT_NE(VmFlagsOf(p).find(" hg"), std::string::npos) << VmFlagsOf(p);
  }
  a.DeallocateRaw(p, bytes);
}

TEST(TensorTest, ProtoRoundTripsBothEncodings) {
  Tensor t = Tensor::FromVector<int32_t>({1, -2, 3, 4}, TensorShape{2, 2});
  for (bool typed : {false, true}) {
    tensorflow::TensorProto p;
    t.AsProto(&p, typed);
    auto back = Tensor::FromProto(p);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->shape(), t.shape());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(back->data<int32_t>()[i], t.data<int32_t>()[i]);
  }
}

TEST(TensorTest, ProtoShortTypedFieldRepeatsLastValue) {
  tensorflow::TensorProto p;
  p.set_dtype(DT_FLOAT);
  p.mutable_tensor_shape()->add_dim()->set_size(3);
  p.add_float_val(7.f);
  auto t = Tensor::FromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data<float>()[2], 7.f);
}

TEST(TensorTest, BadProtosAreErrors) {
  tensorflow::TensorProto p;
  p.set_dtype(DT_FLOAT);
  p.mutable_tensor_shape()->add_dim()->set_size(2);
  p.set_tensor_content(std::string(7, 'x'));  // needs 8 bytes
  EXPECT_EQ(Tensor::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);

  tensorflow::TensorProto q;
  q.set_dtype(DT_FLOAT);
  q.mutable_tensor_shape()->add_dim()->set_size(1);
  q.add_float_val(1);
  q.add_float_val(2);  // more values than elements
  EXPECT_FALSE(Tensor::FromProto(q).ok());

  tensorflow::TensorProto s;
  s.set_dtype(DT_STRING);
  EXPECT_FALSE(Tensor::FromProto(s).ok());

  tensorflow::TensorProto huge;
  huge.set_dtype(DT_FLOAT);
  huge.mutable_tensor_shape()->add_dim()->set_size(int64_t{1} << 62);
  huge.mutable_tensor_shape()->add_dim()->set_size(4);
  EXPECT_FALSE(Tensor::FromProto(huge).ok());
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Found by tools/fuzz.sh (checkpoint_fuzz): a dtype number from a file of
// 2^31 - 1 recursed through "reference of a reference of ..." until the
// stack overflowed. Numbers from 200 on are no dtype, not references.
TEST(DataTypeTest, NamesOfReferenceAndUnknownDtypes) {
  EXPECT_EQ(DataTypeString(DT_FLOAT), "float");
  EXPECT_EQ(DataTypeString(static_cast<DataType>(101)), "float_ref");
  EXPECT_TRUE(IsRefType(static_cast<DataType>(101)));
  EXPECT_FALSE(IsRefType(static_cast<DataType>(200)));
  EXPECT_EQ(DataTypeString(static_cast<DataType>(201)), "unknown dtype 201");
  EXPECT_EQ(DataTypeString(static_cast<DataType>(2147483647)), "unknown dtype 2147483647");
  EXPECT_EQ(DataTypeString(static_cast<DataType>(-5)), "unknown dtype -5");
}

}  // namespace
}  // namespace strata
