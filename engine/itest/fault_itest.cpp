// Faults cost seconds, not the termination timeout (issue 15, item 3), with real rampd
// processes: a COMMIT that hits a paused (SIGSTOP) server returns Timeout within the client's
// timeout, its PREPAREs and the ABORTs after them sharing one deadline.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "itest_util.h"
#include "test_cluster.h"

namespace ramp::testing {
namespace {

using transport::Provider;

constexpr KeyspaceId kKeyspace = 0xFA;

std::unique_ptr<Client> OpenClient(const TestCluster& c, Provider provider, int timeout_ms) {
  ClientOptions o = c.ClientOptionsFor(provider, ReadPath::kRpc, WritePath::kRpc);
  o.timeout_ms = timeout_ms;
  std::unique_ptr<Client> client;
  Status st = Client::Open(o, &client);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return client;
}

Status PutAll(Client& c, const std::vector<std::string>& keys, const std::string& value) {
  auto txn = c.Begin();
  for (const auto& k : keys) RAMP_RETURN_IF_ERROR(txn->Put(kKeyspace, k, value));
  return txn->Commit();
}

// kill() returns before every thread of the target has stopped: a worker spinning on
// another CPU could still answer a request. Waits until each thread shows state T.
bool WaitStopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (int round = 0; round < 500; round++) {
    bool all = true;
    for (const auto& entry : std::filesystem::directory_iterator(tasks)) {
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const size_t paren = line.rfind(')');
      if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T') {
        all = false;
      }
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// A paused server must not hold a COMMIT for more than the client's timeout: before, the
// client waited timeout_ms for the PREPARE, then timeout_ms again for its ABORT to be
// acknowledged by the same paused server. The bound is the documented timeout plus slack
// for scheduling, well below twice the timeout.
class PausedServerTest : public ::testing::TestWithParam<Provider> {};

TEST_P(PausedServerTest, CommitToAPausedServerTimesOutWithinTheTimeout) {
  constexpr int kTimeoutMs = 4000;
  constexpr int kSlackMs = 2000;
  TestClusterOptions options;
  options.nodes = 3;
  options.shm = GetParam() == Provider::kShm;
  std::unique_ptr<TestCluster> cluster;
  Status st = TestCluster::Start(options, &cluster);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto client = OpenClient(*cluster, GetParam(), kTimeoutMs);
  ASSERT_NE(client, nullptr);
  // One key on every node: the transaction prepares on the paused node and on live ones.
  std::vector<std::string> keys;
  for (uint32_t n = 0; n < 3; n++) keys.push_back(KeyOnNode(kKeyspace, n, 3));
  // Connections to every node are open before the pause (a connect has its own timeout).
  st = PutAll(*client, keys, "before");
  ASSERT_TRUE(st.ok()) << st.ToString();

  ASSERT_EQ(kill(cluster->pid(1), SIGSTOP), 0);
  ASSERT_TRUE(WaitStopped(cluster->pid(1)));
  const auto start = std::chrono::steady_clock::now();
  st = PutAll(*client, keys, "during");
  const auto waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  ASSERT_EQ(kill(cluster->pid(1), SIGCONT), 0);
  EXPECT_TRUE(st.Is(Status::Code::kTimeout)) << st.ToString();
  EXPECT_GE(waited_ms, kTimeoutMs - 100);
  EXPECT_LE(waited_ms, kTimeoutMs + kSlackMs)
      << "the COMMIT waited past ramp's timeout (" << kTimeoutMs << " ms)";

  // The server is back: the aborted transaction left nothing behind that blocks a write.
  st = PutAll(*client, keys, "after");
  EXPECT_TRUE(st.ok()) << st.ToString();
}

INSTANTIATE_TEST_SUITE_P(Providers, PausedServerTest,
                         ::testing::Values(Provider::kTcp, Provider::kShm), [](const auto& info) {
                           return std::string(info.param == Provider::kTcp ? "tcp" : "shm");
                         });

}  // namespace
}  // namespace ramp::testing
