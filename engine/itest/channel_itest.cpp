// NodeChannel against real rampd processes: HELLO over each provider, a server that is not
// the node the channel is for, and reconnecting after a server restart, for a bare channel,
// for the client's channels and for the page reader's own connections.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "client/client_impl.h"
#include "client/node_channel.h"
#include "itest_util.h"
#include "page_counts.h"
#include "protocol/page_messages.h"
#include "ramp/client.h"
#include "ramp/page_reader.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

class ChannelTest : public ::testing::TestWithParam<Provider> {
 protected:
  static void SetUpTestSuite() {
    TestClusterOptions o;
    o.nodes = 2;
    o.page_files = true;  // the page reader's test reads pages
    Status st = TestCluster::Start(o, &cluster_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  void SetUp() override {
    ctx_.options.token = cluster_->token();
    ctx_.options.timeout_ms = 5000;
    ctx_.memory = transport::Memory::Create();
    ctx_.client_id = 99;
  }
  transport::Endpoint EndpointOf(int node) const {
    return GetParam() == Provider::kShm ? cluster_->shm(node) : cluster_->tcp(node);
  }
  // Kills node 1 and starts it again (a new instance, nothing kept: no data directory).
  static void RestartNode1() {
    ASSERT_TRUE(cluster_->Kill(1, SIGKILL).ok());
    Status st = cluster_->Restart(1);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::unique_ptr<Client> OpenClient() {
    std::unique_ptr<Client> c;
    Status st = Client::Open(
        cluster_->ClientOptionsFor(GetParam(), ReadPath::kGetStar, WritePath::kPutPlus), &c);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return c;
  }

  static std::unique_ptr<TestCluster> cluster_;
  ChannelContext ctx_;
  DoorbellSet doorbells_;
};
std::unique_ptr<TestCluster> ChannelTest::cluster_;

TEST_P(ChannelTest, HelloNamesTheNodeAndTheCluster) {
  NodeChannel ch;
  ch.Setup(&ctx_, &doorbells_, 1, "node 1");
  ch.SetEndpoint(EndpointOf(1));
  Status st = ch.Open();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(ch.is_open());
  EXPECT_EQ(ch.hello().node, 1u);
  EXPECT_EQ(ch.hello().node_count, 2u);
  EXPECT_EQ(ch.hello().nodes.size(), 2u);
  EXPECT_NE(ch.hello().instance, 0u);
  EXPECT_EQ(ch.conn()->provider(), GetParam());
  EXPECT_EQ(doorbells_.size(), 1u);
  // A request and its reply over the open channel.
  ASSERT_TRUE(ch.Send(protocol::Op::kClock, 0, 5, {}).ok());
  transport::MessageView m;
  Waiter w(ctx_, &doorbells_);
  bool got = false;
  while (!got) {
    transport::Completion comps[4];
    ch.conn()->Poll(comps, 4);
    got = ch.conn()->Receive(&m);
    if (!got) {
      ASSERT_TRUE(w.Next(false, [] { return "no CLOCK reply"; }).ok());
    }
  }
  protocol::Header h;
  ASSERT_TRUE(protocol::DecodeHeader({reinterpret_cast<const char*>(m.data), m.size}, &h).ok());
  EXPECT_EQ(h.request_id, 5u);
  EXPECT_EQ(h.base_op(), protocol::Op::kClock);
  ch.conn()->Release();
  ch.Reset(Status::Cancelled("done"));
  EXPECT_EQ(doorbells_.size(), 0u);
}

TEST_P(ChannelTest, AServerThatIsAnotherNodeIsRefused) {
  NodeChannel ch;
  ch.Setup(&ctx_, &doorbells_, 0, "node 0");
  ch.SetEndpoint(EndpointOf(1));  // node 1 listens there
  Status st = ch.Open();
  EXPECT_TRUE(st.Is(Status::Code::kInvalidArgument)) << st.ToString();
  EXPECT_NE(st.message().find("says it is node 1, the cluster lists it as node 0"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(ch.is_open());
  EXPECT_EQ(doorbells_.size(), 0u);
}

TEST_P(ChannelTest, ReconnectsAfterTheServerRestarted) {
  NodeChannel ch;
  ch.Setup(&ctx_, &doorbells_, 1, "node 1");
  ch.SetEndpoint(EndpointOf(1));
  ASSERT_TRUE(ch.Open().ok());
  const uint64_t before = ch.hello().instance;
  RestartNode1();
  // The old connection notices the server's death.
  Waiter w(ctx_, &doorbells_);
  while (!ch.conn()->closed()) {
    transport::Completion comps[4];
    ch.conn()->Poll(comps, 4);
    transport::MessageView m;
    ASSERT_FALSE(ch.conn()->Receive(&m));
    ASSERT_TRUE(w.Next(false, [] { return "the connection did not notice the restart"; }).ok());
  }
  ch.Reset(ch.conn()->close_status());
  EXPECT_FALSE(ch.last_error().ok());
  Status st = ch.Open();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ch.hello().node, 1u);
  EXPECT_NE(ch.hello().instance, before) << "a restarted server is a new instance";
}

TEST_P(ChannelTest, ClientReconnectsAfterTheServerRestarted) {
  auto c = OpenClient();
  ASSERT_TRUE(c);
  const KeyspaceId ks = 0xC4A1;
  const std::string k1 = KeyOnNode(ks, 1, 2);
  auto t = c->Begin();
  ASSERT_TRUE(t->Put(ks, k1, "before").ok());
  ASSERT_TRUE(t->Commit().ok());
  RestartNode1();
  // The first request after the restart may fail (the client never re-sends silently:
  // the server lost what the transaction had left there); the next one reconnects.
  Status st;
  for (int attempt = 0; attempt < 2; attempt++) {
    auto w = c->Begin();
    st = w->Put(ks, k1, "after");
    if (st.ok()) st = w->Commit();
    if (st.ok()) break;
    EXPECT_TRUE(st.Is(Status::Code::kUnavailable)) << st.ToString();
    EXPECT_NE(st.message().find("node 1"), std::string::npos) << st.message();
  }
  ASSERT_TRUE(st.ok()) << st.ToString();
  ReadResult r;
  st = c->Begin()->Get(ks, k1, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.value, "after");
}

// Writes the keyspace's keys (retrying once: the first request after a restart may fail).
void Load(Client* c, KeyspaceId ks, const std::string& value) {
  Status st;
  for (int attempt = 0; attempt < 2; attempt++) {
    auto t = c->Begin();
    for (int i = 0; st.ok() && i < 1000; i++) st = t->Put(ks, "k" + std::to_string(i), value);
    if (st.ok()) st = t->Commit();
    if (st.ok()) return;
    st = Status::OK();
  }
  FAIL() << "cannot load the keyspace";
}

// Reads every page of the keyspace through the reader; the number of pages read.
size_t ReadEveryPage(Client* c, PageReader* reader, KeyspaceId ks) {
  auto counts = PageCounts(c, ks);
  std::vector<PageRef> refs;
  for (uint32_t b = 0; b < counts.size(); b++) {
    for (uint32_t p = 0; p < counts[b].page_count; p++) {
      refs.push_back({{ks, b}, p, counts[b].epoch, 8192});
    }
  }
  size_t ok = 0;
  Status st = reader->Read(refs, [&](size_t, const Status& s, const uint8_t*, uint32_t) {
    EXPECT_TRUE(s.ok()) << s.ToString();
    ok += s.ok();
    return Status::OK();
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ok, refs.size());
  return ok;
}

TEST_P(ChannelTest, PageReaderReconnectsAfterTheServerRestarted) {
  auto c = OpenClient();
  ASSERT_TRUE(c);
  const KeyspaceId ks = 0xC4A2;
  Load(c.get(), ks, std::string(600, 'a'));
  PageReaderOptions o;
  o.connections_per_node = 1;
  o.batch_pages = 2;
  std::unique_ptr<PageReader> reader;
  ASSERT_TRUE(PageReader::Open(c.get(), o, &reader).ok());
  EXPECT_GT(ReadEveryPage(c.get(), reader.get(), ks), 8u);
  RestartNode1();
  Load(c.get(), ks, std::string(600, 'b'));  // node 1 lost its pages: write them again
  // The same reader: its connection to node 1 died idle and is opened again.
  EXPECT_GT(ReadEveryPage(c.get(), reader.get(), ks), 8u);
}

INSTANTIATE_TEST_SUITE_P(Providers, ChannelTest, ::testing::Values(Provider::kShm, Provider::kTcp),
                         [](const auto& info) {
                           return std::string(info.param == Provider::kShm ? "shm" : "tcp");
                         });

}  // namespace
}  // namespace ramp::testing
