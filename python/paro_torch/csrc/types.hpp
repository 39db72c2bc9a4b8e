#pragma once
// Tensors and options: torch's names to paro's (scalar types, one table for the backend and for SEPARATE;
// reduce ops) and the checks of the tensors a collective is given, with the allowed values in every error.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <optional>

#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"

namespace paro::torch_backend {

// paro's type for t; none where paro has no such type (bool, complex, float8, ...).
inline std::optional<DataType> paro_type_of(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DataType::f32;
    case at::kDouble: return DataType::f64;
    case at::kHalf: return DataType::f16;
    case at::kBFloat16: return DataType::bf16;
    case at::kChar: return DataType::i8;
    case at::kInt: return DataType::i32;
    case at::kLong: return DataType::i64;
    case at::kByte: return DataType::u8;
    default: return std::nullopt;
  }
}

inline DataType data_type_of(const at::Tensor& t) {
  const std::optional<DataType> dt = paro_type_of(t.scalar_type());
  TORCH_CHECK_TYPE(dt, "paro backend: tensors of type ", t.scalar_type(),
                   " are not supported; allowed: float32 float64 float16 bfloat16 int8 int32 int64 uint8");
  return *dt;
}

inline const char* name_of(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// PREMUL_SUM (FSDP2's gradient divide factor) is a sum of inputs each multiplied by the op's factor first:
// the caller multiplies a buffer the collective owns (premultiply) and paro sums.
inline ReduceOp reduce_op_of(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PREMUL_SUM: return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::prod;
    case c10d::ReduceOp::MIN: return ReduceOp::min;
    case c10d::ReduceOp::MAX: return ReduceOp::max;
    case c10d::ReduceOp::AVG: return ReduceOp::avg;
    default:
      TORCH_CHECK_VALUE(false, "paro backend: reduce op ", name_of(op.op_),
                        " is not supported; allowed: SUM AVG PRODUCT MIN MAX PREMUL_SUM");
  }
}

inline bool premultiplies(const c10d::ReduceOp& op) { return op.op_ == c10d::ReduceOp::PREMUL_SUM; }

// For PREMUL_SUM, t *= the op's factor (a number or a one-element tensor); nothing for the other ops. t must
// be a buffer the collective owns (staged, flattened or copied), never a caller's input.
inline void premultiply(at::Tensor& t, const c10d::ReduceOp& op) {
  if (!premultiplies(op)) return;
  const auto* factor = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK_VALUE(factor, "paro backend: a PREMUL_SUM op without its factor; make it with ",
                    "torch.distributed._make_nccl_premul_sum(factor)");
  if (factor->tensor_factor.defined())
    t.mul_(factor->tensor_factor.to(t.device(), t.scalar_type()));
  else
    t.mul_(factor->double_factor);
}

#ifdef PARO_HAVE_CUDA
constexpr bool built_with_cuda = true;
#else
constexpr bool built_with_cuda = false;
#endif

// A dense tensor on a device this build handles, or a ValueError that says what was given.
inline void check_dense(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.defined(), "paro backend ", what, ": an undefined tensor");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "paro backend ", what, ": only dense (strided) tensors, not ",
                    t.layout());
  TORCH_CHECK_VALUE(t.device().is_cpu() || (built_with_cuda && t.device().is_cuda()), "paro backend ", what,
                    ": a tensor on ", t.device(), "; allowed: ",
                    built_with_cuda ? "cpu, cuda" : "cpu (this build has no CUDA: PARO_TORCH_CUDA=1 at install)");
}

// Tensors that one collective moves between: the same type, on the same device.
inline void check_alike(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), "paro backend ", what, ": tensors of types ", a.scalar_type(),
                   " and ", b.scalar_type(), "; all must have the same type");
  TORCH_CHECK_VALUE(a.device() == b.device(), "paro backend ", what, ": tensors on ", a.device(), " and ", b.device(),
                    "; all must be on the same device");
}

inline std::size_t count_of(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()); }

}  // namespace paro::torch_backend
