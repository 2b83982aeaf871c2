#include "base/base64.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace stalkd::base64 {
namespace {

// RFC 4648's test vectors, both ways.
TEST(Base64Test, Rfc4648Vectors) {
  const std::pair<const char*, const char*> cases[] = {{"", ""},
                                                       {"f", "Zg=="},
                                                       {"fo", "Zm8="},
                                                       {"foo", "Zm9v"},
                                                       {"foob", "Zm9vYg=="},
                                                       {"fooba", "Zm9vYmE="},
                                                       {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : cases) {
    std::string out = "prefix:";
    Append(plain, &out);
    EXPECT_EQ(out, std::string("prefix:") + encoded);
    std::string back = "left over";
    ASSERT_TRUE(DecodePadded(encoded, &back)) << encoded;
    EXPECT_EQ(back, plain);
  }
}

TEST(Base64Test, EveryByteAndLengthRoundTrips) {
  std::mt19937 rng(7);
  for (size_t n = 0; n < 300; n++) {
    std::string data(n, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    std::string enc, dec;
    Append(data, &enc);
    EXPECT_EQ(enc.size(), 4 * ((n + 2) / 3));
    ASSERT_TRUE(DecodePadded(enc, &dec));
    EXPECT_EQ(dec, data);
  }
}

TEST(Base64Test, MalformedTextIsRefused) {
  for (const char* bad :
       {"Zg=", "Z===", "====", "=Zg=", "Zm9vYg==Zm9v", "Zm9!", "Zm 9v", "Zg\n="}) {
    std::string out;
    EXPECT_FALSE(DecodePadded(bad, &out)) << bad;
  }
}

}  // namespace
}  // namespace stalkd::base64
