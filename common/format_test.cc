#include "common/format.h"

#include "gtest/gtest.h"

namespace waste {
namespace {

TEST(ParseByteSizeTest, UnitsAndErrors) {
  EXPECT_EQ(*ParseByteSize("1024"), 1024);
  EXPECT_EQ(*ParseByteSize("8GiB"), 8LL << 30);
  EXPECT_EQ(*ParseByteSize("8G"), 8LL << 30);
  EXPECT_EQ(*ParseByteSize("1.5 GB"), 1500000000LL);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512LL << 20);
  EXPECT_FALSE(ParseByteSize("lots").ok());
  EXPECT_FALSE(ParseByteSize("8 parsecs").ok());
  EXPECT_FALSE(ParseByteSize("").ok());
}

TEST(FormatBytesTest, PowersOf1024) {
  EXPECT_EQ(FormatBytes(123), "123 B");
  EXPECT_EQ(FormatBytes(1185376), "1.13 MiB");
  EXPECT_EQ(FormatBytes(8LL << 30), "8.00 GiB");
}

TEST(FormatCountTest, PowersOf1000) {
  EXPECT_EQ(FormatCount(512), "512");
  EXPECT_EQ(FormatCount(260100), "260.1K");
  EXPECT_EQ(FormatCount(852559872), "852.6M");
  EXPECT_EQ(FormatCount(1020000000), "1.02B");
}

}  // namespace
}  // namespace waste
