#include "base/sha256.h"

#include <string>

#include <gtest/gtest.h>

namespace stalkd {
namespace {

std::string Hex(const std::array<unsigned char, 32>& h) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : h) {
    s.push_back(kDigits[c >> 4]);
    s.push_back(kDigits[c & 15]);
  }
  return s;
}

// FIPS 180-4's examples, then lengths around the padding's edges (one block or two),
// checked against Python's hashlib.
TEST(Sha256Test, KnownDigests) {
  struct Case {
    std::string data;
    const char* hex;
  } cases[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
      {std::string(55, 'x'), "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {std::string(56, 'x'), "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {std::string(63, 'x'), "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {std::string(64, 'x'), "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {std::string(119, 'x'), "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
      {"default\ntok", "2f1950402fc68594e152ace2c09d0e3456e40dc3758b6a7c3ba769c8dd2a587f"},
  };
  for (const Case& c : cases) EXPECT_EQ(Hex(Sha256(c.data)), c.hex) << c.data.size();
}

}  // namespace
}  // namespace stalkd
