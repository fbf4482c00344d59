#include "ramp/transport/endpoint.h"

#include <gtest/gtest.h>

namespace ramp::transport {
namespace {

Status Parse(const char* uri, Endpoint* e) {
  return Endpoint::Parse(uri, e);
}

std::string ErrorOf(const char* uri) {
  Endpoint e;
  Status s = Endpoint::Parse(uri, &e);
  EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument)) << uri << ": " << s.ToString();
  return s.message();
}

TEST(Endpoint, ParsesEachProvider) {
  Endpoint e;
  ASSERT_TRUE(Parse("tcp://10.0.0.5:7400", &e).ok());
  EXPECT_EQ(e.provider, Provider::kTcp);
  EXPECT_EQ(e.host, "10.0.0.5");
  EXPECT_EQ(e.port, 7400);
  EXPECT_EQ(e.ToString(), "tcp://10.0.0.5:7400");

  ASSERT_TRUE(Parse("shm:///tmp/ramp.sock", &e).ok());
  EXPECT_EQ(e.provider, Provider::kShm);
  EXPECT_EQ(e.path, "/tmp/ramp.sock");
  EXPECT_EQ(e.ToString(), "shm:///tmp/ramp.sock");

  ASSERT_TRUE(Parse("verbs://node-1:0", &e).ok());
  EXPECT_EQ(e.provider, Provider::kVerbs);
  EXPECT_EQ(e.host, "node-1");
  EXPECT_EQ(e.port, 0);

  ASSERT_TRUE(Parse(" tcp://[::1]:65535 ", &e).ok());
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 65535);
  EXPECT_EQ(e.ToString(), "tcp://[::1]:65535");

  Endpoint again;
  ASSERT_TRUE(Endpoint::Parse(e.ToString(), &again).ok());
  EXPECT_EQ(again, e);
}

TEST(Endpoint, ErrorsSayWhatIsWrong) {
  EXPECT_NE(ErrorOf("tcp://h").find("missing port in 'tcp://h'"), std::string::npos);
  EXPECT_NE(ErrorOf("tcp://:80").find("missing host"), std::string::npos);
  EXPECT_NE(ErrorOf("tcp://h:").find("missing port"), std::string::npos);
  EXPECT_NE(ErrorOf("tcp://h:70000").find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("tcp://h:8x").find("not a number"), std::string::npos);
  EXPECT_NE(ErrorOf("tcp://::1:80").find("brackets"), std::string::npos);
  EXPECT_NE(ErrorOf("tcp://[::1]80").find("expected ':'"), std::string::npos);
  EXPECT_NE(ErrorOf("tcp://h:80/x").find("unexpected path"), std::string::npos);
  EXPECT_NE(ErrorOf("udp://h:1").find("unknown transport 'udp'"), std::string::npos);
  EXPECT_NE(ErrorOf("h:80").find("missing '<transport>://'"), std::string::npos);
  EXPECT_NE(ErrorOf("shm://relative").find("absolute"), std::string::npos);
  EXPECT_NE(ErrorOf("shm:///dir/").find("directory"), std::string::npos);
  EXPECT_NE(ErrorOf(("shm:///" + std::string(200, 'x')).c_str()).find("longer than"),
            std::string::npos);
  EXPECT_NE(ErrorOf("").find("empty"), std::string::npos);
}

TEST(Endpoint, Lists) {
  std::vector<Endpoint> v;
  ASSERT_TRUE(ParseEndpointList("tcp://a:1, shm:///s ,verbs://b:2", &v).ok());
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].host, "a");
  EXPECT_EQ(v[1].path, "/s");
  EXPECT_EQ(v[2].port, 2);
  Status s = ParseEndpointList("tcp://a:1,,tcp://b:2", &v);
  EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument));
  EXPECT_NE(s.message().find("empty entry 2"), std::string::npos) << s.ToString();
  s = ParseEndpointList("tcp://a:1,tcp://b", &v);
  EXPECT_NE(s.message().find("endpoint 2"), std::string::npos) << s.ToString();
  EXPECT_FALSE(ParseEndpointList("  ", &v).ok());
  Provider p;
  EXPECT_TRUE(ParseProvider("shm", &p).ok());
  EXPECT_EQ(p, Provider::kShm);
  EXPECT_STREQ(ProviderName(Provider::kVerbs), "verbs");
}

}  // namespace
}  // namespace ramp::transport
