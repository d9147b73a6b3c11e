// .npy decoding and encoding: numpy's own bytes decode; every dtype round
// trips; malformed files (every truncation and byte flip of a valid one,
// wrong dtypes, orders, shapes that promise more data than there is) are
// InvalidArgument naming the file, never a crash or a huge allocation.
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/npy.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

// numpy.save(f, numpy.arange(6, dtype="<f4").reshape(2, 3)), numpy 2.4.
const std::string& NumpyBytes() {
  static const std::string* b = new std::string(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x34"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x33\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40"
    "\x00\x00\x80\x40\x00\x00\xa0\x40"
,
      152);
  return *b;
}

TEST(NpyTest, DecodesNumpysBytes) {
  auto t = DecodeNpy(NumpyBytes(), "a.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DT_FLOAT);
  EXPECT_EQ(t->shape(), TensorShape({2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data<float>()[i], static_cast<float>(i));
}

TEST(NpyTest, EveryDtypeRoundTrips) {
  for (DataType dt : {DT_HALF, DT_FLOAT, DT_DOUBLE, DT_INT8, DT_INT16, DT_INT32, DT_INT64, DT_UINT8, DT_UINT16,
                      DT_UINT32, DT_UINT64, DT_BOOL}) {
    for (const TensorShape& shape : {TensorShape({}), TensorShape({5}), TensorShape({2, 0, 3}), TensorShape({3, 4, 2})}) {
      Tensor t(dt, shape);
      unsigned char* p = static_cast<unsigned char*>(t.raw_data());
      for (size_t i = 0; i < t.TotalBytes(); ++i) p[i] = dt == DT_BOOL ? (i % 3 == 0) : static_cast<unsigned char>(i * 7);
      auto bytes = EncodeNpy(t);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      EXPECT_EQ((bytes->size() - t.TotalBytes()) % 64, 0u) << "data is 64-byte aligned";
      auto back = DecodeNpy(*bytes, "x.npy");
      ASSERT_TRUE(back.ok()) << DataTypeString(dt) << " " << shape.DebugString() << ": " << back.status();
      EXPECT_EQ(back->dtype(), dt);
      EXPECT_EQ(back->shape(), shape);
      EXPECT_EQ(std::memcmp(back->raw_data(), t.raw_data(), t.TotalBytes()), 0);
    }
  }
  EXPECT_FALSE(EncodeNpy(Tensor(DT_BFLOAT16, TensorShape({2}))).ok());
}

TEST(NpyTest, MalformedFilesAreErrorsNamingTheFile) {
  const std::string good = NumpyBytes();
  for (size_t n = 0; n < good.size(); ++n) {
    auto t = DecodeNpy(good.substr(0, n), "cut.npy");
    ASSERT_FALSE(t.ok()) << "truncated to " << n;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr("cut.npy"));
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char bit : {0x01, 0x20, 0x80}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ bit);
      auto t = DecodeNpy(bad, "flip.npy");  // decodes (a data byte) or names the file
      if (!t.ok()) {
        EXPECT_THAT(t.status().message(), HasSubstr("flip.npy"));
      }
    }
  }
  auto with_header = [](const std::string& dict) {
    std::string h = dict + "\n";
    std::string b = std::string("\x93NUMPY\x01\x00", 8);
    b.push_back(static_cast<char>(h.size()));
    b.push_back(0);
    return b + h + std::string(24, '\0');
  };
  EXPECT_TRUE(DecodeNpy(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"), "ok.npy").ok());
  EXPECT_THAT(DecodeNpy(with_header("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }"), "be.npy").status().message(),
              HasSubstr("dtype '>f8'"));
  EXPECT_THAT(DecodeNpy(with_header("{'descr': '<f8', 'fortran_order': True, 'shape': (3,), }"), "f.npy").status().message(),
              HasSubstr("fortran_order"));
  EXPECT_THAT(DecodeNpy(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4000000000, 4000000000, 4000000000), }"),
                        "huge.npy")
                  .status()
                  .message(),
              HasSubstr("needs more data"));
  EXPECT_THAT(DecodeNpy(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2, -1), }"), "neg.npy").status().message(),
              HasSubstr("bad dim"));
  EXPECT_THAT(DecodeNpy(with_header("{'descr': 'O', 'fortran_order': False, 'shape': (3,), }"), "obj.npy").status().message(),
              HasSubstr("dtype"));
  EXPECT_THAT(DecodeNpy(with_header("{'fortran_order': False, 'shape': (3,), }"), "nodescr.npy").status().message(),
              HasSubstr("no 'descr'"));
}

}  // namespace
}  // namespace strata
