// The --store URL's TLS forms (rediss://, rediss-sentinel://, rediss-cluster://); the plain
// forms are tested in link_test.cc. No Redis needed.
#include "redis/store_url.h"

#include <string>

#include <gtest/gtest.h>

namespace stalkd::redis {
namespace {

TEST(StoreUrlTls, EachShapeHasATlsScheme) {
  StoreUrl u;
  std::string error;
  ASSERT_TRUE(ParseStoreUrl("rediss://127.0.0.1:6380/3", &u, &error)) << error;
  EXPECT_EQ(u.kind, StoreUrl::Kind::kRedis);
  EXPECT_TRUE(u.tls);
  ASSERT_EQ(u.endpoints.size(), 1u);
  EXPECT_EQ(u.endpoints[0].port, 6380);
  EXPECT_EQ(u.db, 3);
  ASSERT_TRUE(ParseStoreUrl("rediss-sentinel://10.0.0.1,localhost:26380/jobs", &u, &error))
      << error;
  EXPECT_EQ(u.kind, StoreUrl::Kind::kSentinel);
  EXPECT_TRUE(u.tls);
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.endpoints[0].port, 26379);
  EXPECT_EQ(u.endpoints[1].host, "127.0.0.1");
  EXPECT_EQ(u.endpoints[1].port, 26380);
  EXPECT_EQ(u.master_name, "jobs");
  ASSERT_TRUE(ParseStoreUrl("rediss-cluster://10.0.0.1:7000,10.0.0.2", &u, &error)) << error;
  EXPECT_EQ(u.kind, StoreUrl::Kind::kCluster);
  EXPECT_TRUE(u.tls);
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.endpoints[1].port, 6379);
}

TEST(StoreUrlTls, PlainSchemesAreNotTls) {
  StoreUrl u;
  std::string error;
  for (const char* url :
       {"redis://127.0.0.1", "redis-sentinel://127.0.0.1/m", "redis-cluster://127.0.0.1:7000"}) {
    u.tls = true;
    ASSERT_TRUE(ParseStoreUrl(url, &u, &error)) << url << ": " << error;
    EXPECT_FALSE(u.tls) << url;
  }
}

TEST(StoreUrlTls, CredentialsWorkTheSame) {
  StoreUrl u;
  std::string error;
  ASSERT_TRUE(ParseStoreUrl("rediss://app:s%40cret@localhost:6390", &u, &error)) << error;
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.auth.user, "app");
  EXPECT_EQ(u.auth.password, "s@cret");
  EXPECT_EQ(u.endpoints[0].port, 6390);
  EXPECT_EQ(RedactStoreUrl("rediss://app:s%40cret@localhost:6390"),
            "rediss://app:***@localhost:6390");
  EXPECT_FALSE(ParseStoreUrl("rediss://app:hunter2@10.0.0.1:1,10.0.0.2:2", &u, &error));
  EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
}

TEST(StoreUrlTls, MalformedTlsUrlsAreRefusedWithAReason) {
  StoreUrl u;
  std::string error;
  EXPECT_FALSE(ParseStoreUrl("redisss://127.0.0.1", &u, &error));
  EXPECT_NE(error.find("rediss: TLS"), std::string::npos) << error;
  EXPECT_FALSE(ParseStoreUrl("rediss-cluster://127.0.0.1:7000/1", &u, &error));
  EXPECT_NE(error.find("database 0 only"), std::string::npos) << error;
  EXPECT_FALSE(ParseStoreUrl("rediss-sentinel://127.0.0.1", &u, &error));
  EXPECT_NE(error.find("names no master"), std::string::npos) << error;
  EXPECT_FALSE(ParseStoreUrl("rediss://redis.example:6379", &u, &error));
  EXPECT_NE(error.find("not a numeric IPv4"), std::string::npos) << error;
  EXPECT_FALSE(ParseStoreUrl("rediss://127.0.0.1:6379?tls=1", &u, &error));
  EXPECT_NE(error.find("options"), std::string::npos) << error;
  EXPECT_FALSE(ParseStoreUrl("rediss://", &u, &error));
  EXPECT_NE(error.find("names no host"), std::string::npos) << error;
}

}  // namespace
}  // namespace stalkd::redis
