// Einsum against a reference that loops over every assignment of every
// label (the definition: a sum of products), on the equations Keras emits
// and on others (ellipsis broadcasting, implicit outputs, summed labels,
// empty dims); the errors; the shape function.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/einsum.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

Tensor Random(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<double>()[i] = u(*rng);
  return t;
}

// The sum over all label values of the product of the operands' entries.
Tensor Reference(const std::string& equation, const std::vector<Tensor>& in) {
  std::vector<int> ranks;
  std::vector<PartialTensorShape> shapes;
  for (const Tensor& t : in) {
    ranks.push_back(t.dims());
    shapes.push_back(PartialTensorShape(t.shape().dim_sizes()));
  }
  const EinsumSpec spec = *ParseEinsum(equation, ranks);
  std::vector<int64_t> size;
  const TensorShape out_shape = *EinsumOutputShape(equation, spec, shapes, &size)->AsTensorShape();
  Tensor out(DT_DOUBLE, out_shape);
  for (int64_t i = 0; i < out.NumElements(); ++i) out.data<double>()[i] = 0;
  std::vector<int64_t> value(size.size(), 0);
  int64_t total = 1;
  for (int64_t s : size) total *= s;
  for (int64_t a = 0; a < total; ++a) {
    int64_t rem = a;
    for (int l = static_cast<int>(size.size()) - 1; l >= 0; --l) {
      value[l] = rem % size[l];
      rem /= size[l];
    }
    double p = 1;
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t flat = 0;
      for (size_t d = 0; d < spec.inputs[k].size(); ++d) {
        const int64_t dim = in[k].dim_size(static_cast<int>(d));
        flat = flat * dim + (dim == 1 ? 0 : value[spec.inputs[k][d]]);
      }
      p *= in[k].data<double>()[flat];
    }
    int64_t o = 0;
    for (size_t d = 0; d < spec.output.size(); ++d) o = o * out_shape.dim_size(static_cast<int>(d)) + value[spec.output[d]];
    out.data<double>()[o] += p;
  }
  return out;
}

absl::StatusOr<Tensor> RunEinsum(const std::string& equation, const std::vector<Tensor>& in) {
  static StandaloneCpuDevice dev(2);  // outlives the tensors it allocates
  auto out = RunKernel(&dev, "Einsum", in,
                       {{"equation", MakeAttr(equation)}, {"N", MakeAttr(static_cast<int64_t>(in.size()))}});
  if (!out.ok()) return out.status();
  return (*out)[0];
}

TEST(EinsumTest, MatchesTheDefinition) {
  struct Case {
    std::string equation;
    std::vector<TensorShape> shapes;
  };
  const std::vector<Case> cases = {
      // Keras MultiHeadAttention and EinsumDense.
      {"abc,cde->abde", {{2, 3, 4}, {4, 2, 5}}},
      {"aecd,abcd->acbe", {{2, 3, 2, 4}, {2, 5, 2, 4}}},
      {"acbe,aecd->abcd", {{2, 2, 5, 3}, {2, 3, 2, 4}}},
      {"abcd,cde->abe", {{2, 3, 2, 4}, {2, 4, 5}}},
      {"...b,bc->...c", {{2, 3, 4}, {4, 5}}},
      {"ab,bc->ac", {{3, 4}, {4, 5}}},
      {"ij,kj", {{3, 4}, {5, 4}}},                   // implicit output "ik"
      {"ij->ji", {{3, 4}}},
      {"ijk->j", {{2, 3, 4}}},
      {"ijk", {{2, 3, 4}}},                          // implicit: unchanged
      {"ab,bc->a", {{3, 4}, {4, 5}}},                // c summed in B alone
      {"ab,cd->abcd", {{2, 3}, {4, 2}}},              // outer product
      {"b...,...c->b...c", {{2, 3, 1}, {4, 5}}},     // ellipsis broadcast (1 vs 4)
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 2}}},
      {"ab,ab->", {{3, 4}, {3, 4}}},                  // full contraction
      {"ab,b->a", {{0, 4}, {4}}},                     // empty
      {"ab,bc->ac", {{3, 0}, {0, 5}}},                // empty contraction: zeros
      {"...b,...c->bc", {{2, 3, 4}, {1, 5}}},          // ellipsis summed, one side broadcast
      {"...b,...c->bc", {{1, 4}, {2, 3, 5}}},
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    std::vector<Tensor> in;
    for (const TensorShape& s : c.shapes) in.push_back(Random(s, &rng));
    auto got = RunEinsum(c.equation, in);
    ASSERT_TRUE(got.ok()) << got.status();
    const Tensor want = Reference(c.equation, in);
    ASSERT_EQ(got->shape(), want.shape());
    for (int64_t i = 0; i < want.NumElements(); ++i) {
      EXPECT_NEAR(got->data<double>()[i], want.data<double>()[i], 1e-12) << i;
    }
  }
  // float too.
  Tensor a(DT_FLOAT, TensorShape{2, 3}), b(DT_FLOAT, TensorShape{3, 2});
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = b.data<float>()[i] = static_cast<float>(i);
  auto f = RunEinsum("ij,jk->ik", {a, b});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->data<float>()[0], 0 * 0 + 1 * 2 + 2 * 4);
}

TEST(EinsumTest, UnsupportedOrBadEquationsNameTheEquation) {
  std::mt19937 rng(4);
  const Tensor m = Random(TensorShape{3, 3}, &rng), v = Random(TensorShape{3}, &rng);
  EXPECT_THAT(RunEinsum("ii->i", {m}).status().message(), HasSubstr("repeats label 'i'"));
  EXPECT_THAT(RunEinsum("ij,j->k", {m, v}).status().message(), HasSubstr("output label 'k' is in no input"));
  EXPECT_THAT(RunEinsum("ij->", {v}).status().message(), HasSubstr("names 2 dims of a rank-1 operand"));
  EXPECT_THAT(RunEinsum("ij,jk->ik", {m, Random(TensorShape{4, 2}, &rng)}).status().message(),
              HasSubstr("Einsum equation 'ij,jk->ik'"));
  EXPECT_THAT(RunEinsum("i.j->ij", {m}).status().message(), HasSubstr("not a letter"));
  EXPECT_THAT(RunEinsum("i,i,i->i", {v, v, v}).status().message(), HasSubstr("one or two operands"));
  EXPECT_THAT(RunEinsum("i->i", {v, v}).status().message(), HasSubstr("1 input terms for 2 inputs"));
}

TEST(EinsumTest, ShapeFunction) {
  Scope s = Scope::NewRootScope();
  Output q = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, 10, 4, 8}));
  Output k = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, 12, 4, 8}));
  EXPECT_EQ(ops::Einsum(s, {k, q}, "aecd,abcd->acbe").shape(), PartialTensorShape({-1, 4, 10, 12}));
  Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, -1, 16}));
  Output w = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({16, 32}));
  EXPECT_EQ(ops::Einsum(s, {x, w}, "...b,bc->...c").shape(), PartialTensorShape({-1, -1, 32}));
  Output unknown = ops::Placeholder(s, DT_FLOAT);
  EXPECT_EQ(ops::Einsum(s, {unknown, w}, "ab,bc->ac").shape(), PartialTensorShape({-1, -1}));
  EXPECT_TRUE(ops::Einsum(s, {unknown, w}, "...b,bc->...c").shape().unknown_rank());
  EXPECT_TRUE(s.ok()) << s.status();
  ops::Einsum(s.WithOpName("bad_einsum"), {x, w}, "abc,dc->abd");
  EXPECT_THAT(s.status().message(), HasSubstr("bad_einsum"));
  EXPECT_THAT(s.status().message(), HasSubstr("32"));
}

}  // namespace
}  // namespace strata
