#include "ir/Reference/ReferenceEvaluator.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/Tfm/TfmDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

namespace kvjit::reference {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

class NoWeights : public WeightProvider {
 public:
  absl::StatusOr<const RefTensor*> Load(absl::string_view name) override {
    return absl::NotFoundError(name);
  }
};

// A context made without RegisterKvjitDialects: the evaluator attaches the
// ops' reference evaluations itself.
class ReferenceEvaluatorTest : public ::testing::Test {
 protected:
  ReferenceEvaluatorTest() {
    context_.loadDialect<tfm::TfmDialect, mlir::func::FuncDialect>();
    context_.allowUnregisteredDialects();
  }

  absl::StatusOr<std::vector<RefTensor>> Run(const char* source, std::vector<RefTensor> args) {
    module_ = mlir::parseSourceString<mlir::ModuleOp>(source, &context_);
    if (!module_) return absl::InvalidArgumentError("does not parse");
    ReferenceEvaluator evaluator(*module_, weights_);
    return evaluator.Run("f", std::move(args));
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  NoWeights weights_;
};

TEST_F(ReferenceEvaluatorTest, EvaluatesOpsThroughTheirInterface) {
  absl::StatusOr<std::vector<RefTensor>> results = Run(R"mlir(
    func.func @f(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
      %s = tfm.scale %x, 2.0 : tensor<?x2xf32>
      %y = tfm.add %s, %x : tensor<?x2xf32>
      return %y : tensor<?x2xf32>
    }
  )mlir", {RefTensor::Float({1, 2}, {1, -3})});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  EXPECT_THAT((*results)[0].values, ElementsAre(FloatEq(3), FloatEq(-9)));
}

// tfm.tanh's math is written in its reference model (TfmReference.cpp).
TEST_F(ReferenceEvaluatorTest, TanhIsOddAndBounded) {
  absl::StatusOr<std::vector<RefTensor>> results = Run(R"mlir(
    func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %y = tfm.tanh %x : tensor<?x4xf32>
      return %y : tensor<?x4xf32>
    }
  )mlir", {RefTensor::Float({1, 4}, {0, 1, -1, 30})});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  EXPECT_THAT((*results)[0].values,
              Pointwise(FloatNear(1e-6), {0.0f, 0.7615942f, -0.7615942f, 1.0f}));
}

TEST_F(ReferenceEvaluatorTest, AnOpWithoutTheInterfaceIsAnErrorNamingIt) {
  absl::StatusOr<std::vector<RefTensor>> results = Run(R"mlir(
    func.func @f(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
      %y = "test.mystery"(%x) : (tensor<?x2xf32>) -> tensor<?x2xf32>
      return %y : tensor<?x2xf32>
    }
  )mlir", {RefTensor::Float({1, 2}, {1, 2})});
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(results.status().message(),
              HasSubstr("no semantics for test.mystery: it implements no "
                        "ReferenceEvaluableOpInterface"));
}

}  // namespace
}  // namespace kvjit::reference
