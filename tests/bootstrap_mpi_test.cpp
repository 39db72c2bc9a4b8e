// MpiBootstrap under mpirun: contributions of different lengths (one rank's empty), several rounds.

#include <gtest/gtest.h>

#include "paro/bootstrap/mpi.hpp"

namespace {

paro::bootstrap::Bytes contribution(int rank, int round) {
  return paro::bootstrap::Bytes(static_cast<std::size_t>(rank * 3 + round), static_cast<std::uint8_t>(rank + round));
}

TEST(MpiBootstrap, AllGatherOfDifferentLengths) {
  paro::bootstrap::MpiBootstrap bootstrap(MPI_COMM_WORLD);
  for (int round = 0; round < 3; ++round) {
    const auto all = bootstrap.all_gather(contribution(bootstrap.rank(), round));
    ASSERT_EQ(all.size(), static_cast<std::size_t>(bootstrap.size()));
    for (int r = 0; r < bootstrap.size(); ++r)
      EXPECT_EQ(all[static_cast<std::size_t>(r)], contribution(r, round)) << "round " << round << " from " << r;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  MPI_Finalize();
  return failed;
}
