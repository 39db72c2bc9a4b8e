// Core pieces without communication: f16/bf16 conversion, reduction semantics, parsing, block layouts.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "paro/algorithms/layout.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/env.hpp"
#include "paro/core/half.hpp"
#include "paro/core/reduce_op.hpp"

namespace {

using paro::bf16;
using paro::f16;

template <class H>
bool is_nan_bits(std::uint16_t b);
template <>
bool is_nan_bits<f16>(std::uint16_t b) {
  return (b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0;
}
template <>
bool is_nan_bits<bf16>(std::uint16_t b) {
  return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
}

template <class H>
class HalfConversion : public ::testing::Test {};
using HalfTypes = ::testing::Types<f16, bf16>;
TYPED_TEST_SUITE(HalfConversion, HalfTypes);

// Every 16-bit pattern survives the trip through float; NaNs stay NaN.
TYPED_TEST(HalfConversion, EveryValueRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto h = TypeParam::from_bits(static_cast<std::uint16_t>(b));
    const TypeParam back(static_cast<float>(h));
    if (is_nan_bits<TypeParam>(h.bits)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(h)));
      EXPECT_TRUE(is_nan_bits<TypeParam>(back.bits)) << std::hex << b;
    } else {
      ASSERT_EQ(back.bits, h.bits) << std::hex << b;
    }
  }
}

// Between every two neighbouring finite values: the midpoint goes to the even one, anything a float-ulp
// off the midpoint to the nearer one. Together these pin down round-to-nearest-even exactly.
TYPED_TEST(HalfConversion, RoundsToNearestEven) {
  for (std::uint32_t b = 0; b < 0x7FFFu; ++b) {
    const auto lo = TypeParam::from_bits(static_cast<std::uint16_t>(b));
    const auto hi = TypeParam::from_bits(static_cast<std::uint16_t>(b + 1));
    if (std::isinf(static_cast<float>(hi)) || std::isnan(static_cast<float>(hi))) break;
    const float a = static_cast<float>(lo), c = static_cast<float>(hi);
    const float mid = a + (c - a) / 2;  // exact: both have far fewer significant bits than float
    const std::uint16_t even = (b % 2 == 0) ? lo.bits : hi.bits;
    ASSERT_EQ(TypeParam(mid).bits, even) << std::hex << b;
    ASSERT_EQ(TypeParam(std::nextafter(mid, 0.0f)).bits, lo.bits) << std::hex << b;
    ASSERT_EQ(TypeParam(std::nextafter(mid, std::numeric_limits<float>::infinity())).bits, hi.bits) << std::hex << b;
    ASSERT_EQ(TypeParam(-mid).bits, static_cast<std::uint16_t>(even | 0x8000u)) << std::hex << b;
  }
}

TEST(HalfConversion, OverflowAndSpecialValues) {
  EXPECT_EQ(f16(65504.0f).bits, 0x7BFFu);
  EXPECT_EQ(f16(65519.0f).bits, 0x7BFFu);  // below the midpoint to 65536
  EXPECT_EQ(f16(65520.0f).bits, 0x7C00u);  // the midpoint rounds to even: infinity
  EXPECT_EQ(f16(-1e10f).bits, 0xFC00u);
  EXPECT_EQ(f16(std::numeric_limits<float>::infinity()).bits, 0x7C00u);
  EXPECT_EQ(f16(5.9604645e-8f).bits, 0x0001u);  // 2^-24, the smallest subnormal
  EXPECT_EQ(f16(2.9802322e-8f).bits, 0x0000u);  // 2^-25: a tie, to even zero
  EXPECT_TRUE(std::isnan(static_cast<float>(f16(std::nanf("")))));
  EXPECT_EQ(bf16(1.0f).bits, 0x3F80u);
  EXPECT_EQ(bf16(3.4028235e38f).bits, 0x7F80u);  // FLT_MAX rounds up to infinity in bfloat16
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(std::nanf("")))));
}

TEST(Reduce, IntegersWrapAndOpsBehave) {
  std::int8_t a[] = {100, -128, 5, 7}, b[] = {100, -1, -6, 7}, out[4];
  paro::host_reduce(out, a, b, 4, paro::DataType::i8, paro::ReduceOp::sum);
  EXPECT_EQ(out[0], -56);
  EXPECT_EQ(out[1], 127);
  EXPECT_EQ(out[2], -1);
  paro::host_reduce(out, a, b, 4, paro::DataType::i8, paro::ReduceOp::prod);
  EXPECT_EQ(out[0], 16);  // 10000 mod 256
  EXPECT_EQ(out[3], 49);
  paro::host_reduce(out, a, b, 4, paro::DataType::i8, paro::ReduceOp::min);
  EXPECT_EQ(out[1], -128);
  std::uint8_t u[] = {200}, v[] = {100}, w[1];
  paro::host_reduce(w, u, v, 1, paro::DataType::u8, paro::ReduceOp::sum);
  EXPECT_EQ(w[0], 44);
  paro::host_reduce(w, u, v, 1, paro::DataType::u8, paro::ReduceOp::max);
  EXPECT_EQ(w[0], 200);
}

TEST(Reduce, HalfPrecisionRoundsEachStep) {
  // 2048 + 1 is not representable in f16 (11 significant bits): the sum rounds to even, 2048.
  f16 a(2048.0f), b(1.0f), out;
  paro::host_reduce(&out, &a, &b, 1, paro::DataType::f16, paro::ReduceOp::sum);
  EXPECT_EQ(static_cast<float>(out), 2048.0f);
  bf16 x(1.5f), y(-3.0f), z;
  paro::host_reduce(&z, &x, &y, 1, paro::DataType::bf16, paro::ReduceOp::prod);
  EXPECT_EQ(static_cast<float>(z), -4.5f);
}

TEST(Reduce, AverageDividesOnceAndTruncatesIntegers) {
  std::int32_t i[] = {-7, 7};
  paro::host_divide(i, 2, paro::DataType::i32, 2);
  EXPECT_EQ(i[0], -3);
  EXPECT_EQ(i[1], 3);
  std::int8_t s[] = {120};
  paro::host_divide(s, 1, paro::DataType::i8, 200);  // divisor beyond int8's range
  EXPECT_EQ(s[0], 0);
  double d[] = {1.0};
  paro::host_divide(d, 1, paro::DataType::f64, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
}

TEST(Parse, DataTypesAndOps) {
  EXPECT_EQ(paro::parse_data_type("bf16"), paro::DataType::bf16);
  EXPECT_EQ(paro::parse_data_type("half"), paro::DataType::f16);
  EXPECT_EQ(paro::parse_data_type("float"), paro::DataType::f32);
  EXPECT_EQ(paro::parse_reduce_op("avg"), paro::ReduceOp::avg);
  EXPECT_THROW(paro::parse_data_type("f128"), paro::Error);
  try {
    paro::parse_reduce_op("mean");
    FAIL();
  } catch (const paro::Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: sum prod min max avg"), std::string::npos) << e.what();
  }
  for (auto dt : paro::all_data_types) EXPECT_EQ(paro::parse_data_type(paro::name_of(dt)), dt);
}

TEST(Parse, Bytes) {
  EXPECT_EQ(paro::env::parse_bytes("4096", "x"), 4096u);
  EXPECT_EQ(paro::env::parse_bytes("64K", "x"), 65536u);
  EXPECT_EQ(paro::env::parse_bytes("16m", "x"), 16u << 20);
  EXPECT_EQ(paro::env::parse_bytes("1G", "x"), 1u << 30);
  for (const char* bad : {"", "K", "12X", "-1", "1KB", "1.5M", "99999999999999999999", "20000000000G"})
    EXPECT_THROW(paro::env::parse_bytes(bad, "x"), paro::Error) << bad;
}

TEST(Parse, TimeoutsMustBeFiniteSeconds) {
  EXPECT_EQ(paro::env::parse_seconds("2.5", "PARO_TIMEOUT"), 2.5);
  for (const char* bad : {"inf", "nan", "0", "-1", "1e10", "soon"})
    EXPECT_THROW(paro::env::parse_seconds(bad, "PARO_TIMEOUT"), paro::Error) << bad;
}

TEST(Reduce, MinAndMaxKeepNaNWhicheverSideItIsOn) {
  const float nan = std::nanf("");
  float a[] = {nan, 1.0f}, b[] = {1.0f, nan}, out[2];
  for (auto op : {paro::ReduceOp::min, paro::ReduceOp::max}) {
    paro::host_reduce(out, a, b, 2, paro::DataType::f32, op);
    EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1])) << paro::name_of(op);
  }
}

TEST(Parse, AlgorithmOverrides) {
  auto all = paro::AlgorithmOverrides::parse("ring");
  EXPECT_EQ(all[paro::Collective::all_gather], paro::Algorithm::ring);
  EXPECT_EQ(all[paro::Collective::all_reduce], paro::Algorithm::ring);
  auto some = paro::AlgorithmOverrides::parse("allreduce:tree; all_gather:native");
  EXPECT_EQ(some[paro::Collective::all_reduce], paro::Algorithm::tree);
  EXPECT_EQ(some[paro::Collective::all_gather], paro::Algorithm::native);
  EXPECT_EQ(some[paro::Collective::reduce_scatter], paro::Algorithm::automatic);
  try {
    paro::AlgorithmOverrides::parse("allreduce:fast");
    FAIL();
  } catch (const paro::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("PARO_ALGO"), std::string::npos) << what;
    EXPECT_NE(what.find("allowed: automatic ring tree mics_hcs paro_seq paro_cc native"), std::string::npos) << what;
  }
  EXPECT_THROW(paro::AlgorithmOverrides::parse("broadcast:ring"), paro::Error);
  auto hierarchical = paro::AlgorithmOverrides::parse("allgather:paro_cc;reducescatter:PARO-SEQ;allreduce:mics_hcs");
  EXPECT_EQ(hierarchical[paro::Collective::all_gather], paro::Algorithm::paro_cc);
  EXPECT_EQ(hierarchical[paro::Collective::reduce_scatter], paro::Algorithm::paro_seq);
  EXPECT_EQ(hierarchical[paro::Collective::all_reduce], paro::Algorithm::mics_hcs);
}

TEST(Layout, BalancedBlocksCoverTheBufferExactly) {
  for (int n = 1; n <= 16; ++n) {
    for (std::size_t total : {0u, 1u, 7u, 1000u}) {
      auto layout = paro::algorithms::BlockLayout::balanced(n, total);
      std::size_t next = 0;
      for (int b = 0; b < n; ++b) {
        EXPECT_EQ(layout.offset(b), next);
        EXPECT_LE(layout.count(b), layout.max_count());
        next += layout.count(b);
      }
      EXPECT_EQ(next, total);
      EXPECT_EQ(layout.offset(n), total);
    }
  }
}

}  // namespace
