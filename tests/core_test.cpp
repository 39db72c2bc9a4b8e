// Core pieces without communication: f16/bf16 conversion, reduction semantics, parsing, block layouts.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// Every 16-bit pattern survives the trip through float; a NaN comes back as the canonical NaN.
TYPED_TEST(HalfConversion, EveryValueRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto h = TypeParam::from_bits(static_cast<std::uint16_t>(b));
    const TypeParam back(static_cast<float>(h));
    if (is_nan_bits<TypeParam>(h.bits)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(h)));
      EXPECT_EQ(back.bits, 0x7FFFu) << std::hex << b;
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

// NaN: every float op and every conversion to f16/bf16 gives the one canonical NaN (reduce_op.hpp),
// whatever NaN payloads and signs went in, so host and CUDA results agree bit for bit.
template <class T>
struct Bits;
template <>
struct Bits<float> {
  using type = std::uint32_t;
  static constexpr type canonical = 0x7FFFFFFFu, inf = 0x7F800000u, one = 0x3F800000u, sign = 0x80000000u;
  // quiet, negative quiet, quiet with a payload, signalling, negative signalling with a full payload, canonical,
  // all ones
  static constexpr type nans[] = {0x7FC00000u, 0xFFC00000u, 0x7FC12345u, 0x7F800001u,
                                  0xFFBFFFFFu, 0x7FFFFFFFu, 0xFFFFFFFFu};
};
template <>
struct Bits<double> {
  using type = std::uint64_t;
  static constexpr type canonical = 0x7FFFFFFFFFFFFFFFull, inf = 0x7FF0000000000000ull, one = 0x3FF0000000000000ull,
                        sign = 0x8000000000000000ull;
  static constexpr type nans[] = {0x7FF8000000000000ull, 0xFFF8000000000000ull, 0x7FF8000012345678ull,
                                  0x7FF0000000000001ull, 0xFFF7FFFFFFFFFFFFull, 0x7FFFFFFFFFFFFFFFull,
                                  0xFFFFFFFFFFFFFFFFull};
};
template <>
struct Bits<f16> {
  using type = std::uint16_t;
  static constexpr type canonical = 0x7FFF, inf = 0x7C00, one = 0x3C00, sign = 0x8000;
  static constexpr type nans[] = {0x7E00, 0xFE00, 0x7E55, 0x7C01, 0xFDFF, 0x7FFF, 0xFFFF};
};
template <>
struct Bits<bf16> {
  using type = std::uint16_t;
  static constexpr type canonical = 0x7FFF, inf = 0x7F80, one = 0x3F80, sign = 0x8000;
  static constexpr type nans[] = {0x7FC0, 0xFFC0, 0x7FD5, 0x7F81, 0xFFBF, 0x7FFF, 0xFFFF};
};

template <class T>
T from_bits(typename Bits<T>::type b) {
  if constexpr (std::is_floating_point_v<T>) {
    T t;
    std::memcpy(&t, &b, sizeof t);
    return t;
  } else {
    return T::from_bits(b);
  }
}

template <class T>
typename Bits<T>::type bits_of(T t) {
  if constexpr (std::is_floating_point_v<T>) {
    typename Bits<T>::type b;
    std::memcpy(&b, &t, sizeof b);
    return b;
  } else {
    return t.bits;
  }
}

// a op b for one element pair, through host_reduce.
template <class T>
typename Bits<T>::type reduced(paro::ReduceOp op, typename Bits<T>::type a, typename Bits<T>::type b) {
  const T x = from_bits<T>(a), y = from_bits<T>(b);
  T out;
  paro::host_reduce(&out, &x, &y, 1, paro::data_type_v<T>, op);
  return bits_of(out);
}

template <class T>
typename Bits<T>::type divided(typename Bits<T>::type a, int divisor) {
  T x = from_bits<T>(a);
  paro::host_divide(&x, 1, paro::data_type_v<T>, divisor);
  return bits_of(x);
}

template <class T>
class CanonicalNaN : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double, f16, bf16>;
TYPED_TEST_SUITE(CanonicalNaN, FloatTypes);

TYPED_TEST(CanonicalNaN, EveryOpOnANaNInputOnEitherSide) {
  using B = Bits<TypeParam>;
  const typename B::type others[] = {0, B::sign, B::one, B::one | B::sign, B::inf, B::inf | B::sign, B::nans[1]};
  for (auto op : paro::all_reduce_ops)
    for (auto nan : B::nans)
      for (auto other : others) {
        EXPECT_EQ(reduced<TypeParam>(op, nan, other), B::canonical) << paro::name_of(op) << std::hex << " " << nan;
        EXPECT_EQ(reduced<TypeParam>(op, other, nan), B::canonical) << paro::name_of(op) << std::hex << " " << nan;
      }
}

TYPED_TEST(CanonicalNaN, NaNsMadeByArithmeticAndAvgDivide) {
  using B = Bits<TypeParam>;
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::sum, B::inf, B::inf | B::sign), B::canonical);  // inf - inf
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::avg, B::inf | B::sign, B::inf), B::canonical);
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::prod, B::inf, 0), B::canonical);  // inf * 0
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::prod, B::sign, B::inf | B::sign), B::canonical);
  for (int divisor : {1, 3, 8})
    for (auto nan : B::nans) EXPECT_EQ(divided<TypeParam>(nan, divisor), B::canonical) << std::hex << nan;
}

TYPED_TEST(CanonicalNaN, ResultsThatAreNotNaNKeepTheirBits) {
  using B = Bits<TypeParam>;
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::sum, B::inf, B::one), B::inf);
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::sum, B::sign, B::sign), B::sign);  // -0 + -0
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::prod, B::one | B::sign, B::inf), B::inf | B::sign);
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::min, B::inf | B::sign, B::one), B::inf | B::sign);
  EXPECT_EQ(reduced<TypeParam>(paro::ReduceOp::max, B::one, B::inf), B::inf);
  EXPECT_EQ(divided<TypeParam>(B::inf | B::sign, 3), B::inf | B::sign);
  EXPECT_EQ(divided<TypeParam>(B::sign, 3), B::sign);
}

TEST(CanonicalNaN, ConversionOfANaNFloatToHalfOrBfloat) {
  for (auto nan : Bits<float>::nans) {
    const float f = from_bits<float>(nan);
    EXPECT_EQ(f16(f).bits, Bits<f16>::canonical) << std::hex << nan;
    EXPECT_EQ(bf16(f).bits, Bits<bf16>::canonical) << std::hex << nan;
  }
  EXPECT_EQ(f16(-std::numeric_limits<float>::infinity()).bits, 0xFC00u);  // infinities are no NaN
  EXPECT_EQ(bf16(-std::numeric_limits<float>::infinity()).bits, 0xFF80u);
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
