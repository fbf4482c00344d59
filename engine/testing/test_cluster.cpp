#include "test_cluster.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace ramp::testing {

const char* RampdPath() {
  return RAMPD_PATH;
}

namespace {

// A port nobody listens on right now (the kernel's choice for an ephemeral bind).
Status FreePort(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int e = errno;
    close(fd);
    return Status::FromErrno("bind", e);
  }
  *port = ntohs(a.sin_port);
  close(fd);
  return Status::OK();
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) return Status::IOError("cannot write " + path);
  return Status::OK();
}

}  // namespace

Status TestCluster::Start(const TestClusterOptions& options, std::unique_ptr<TestCluster>* out) {
  // FreePort's port can be taken (by another test's outgoing connection, under ctest -j2)
  // before rampd binds it: the node then exits with "Address already in use". Start again
  // on new ports; any other failure is the test's.
  Status s;
  for (int attempt = 0; attempt < 4; attempt++) {
    s = StartOnce(options, out);
    if (s.ok() || s.message().find("Address already in use") == std::string::npos) return s;
  }
  return s;
}

Status TestCluster::StartOnce(const TestClusterOptions& options,
                              std::unique_ptr<TestCluster>* out) {
  std::unique_ptr<TestCluster> c(new TestCluster());
  c->options_ = options;
  char tmpl[] = "/tmp/ramp-itest-XXXXXX";
  if (!mkdtemp(tmpl)) return Status::FromErrno("mkdtemp", errno);
  c->dir_ = tmpl;
  if (std::getenv("RAMP_KEEP_TEST_DIRS") != nullptr) {
    std::fprintf(stderr, "test cluster directory (kept): %s\n", c->dir_.c_str());
  }
  c->token_file_ = c->dir_ + "/token";
  RAMP_RETURN_IF_ERROR(WriteFile(c->token_file_, options.token + "\n"));
  std::string cluster = "# written by TestCluster\n";
  cluster += "homes " + std::to_string(options.nodes) + "\n";
  for (int i = 0; i < options.nodes; i++) {
    NodeProc n;
    uint16_t port = 0;
    RAMP_RETURN_IF_ERROR(FreePort(&port));
    n.tcp.provider = transport::Provider::kTcp;
    n.tcp.host = "127.0.0.1";
    n.tcp.port = port;
    n.shm.provider = transport::Provider::kShm;
    n.shm.path = c->dir_ + "/node" + std::to_string(i) + ".sock";
    if (options.data) n.data_dir = c->dir_ + "/data" + std::to_string(i);
    if (options.page_files) n.page_dir = c->dir_ + "/pages" + std::to_string(i);
    cluster += "node " + n.tcp.ToString() + (options.shm ? " " + n.shm.ToString() : "") + "\n";
    c->nodes_.push_back(n);
  }
  c->cluster_file_ = c->dir_ + "/cluster.conf";
  RAMP_RETURN_IF_ERROR(WriteFile(c->cluster_file_, cluster));
  for (int i = 0; i < options.nodes; i++) RAMP_RETURN_IF_ERROR(c->Launch(i));
  for (int i = 0; i < options.nodes; i++) RAMP_RETURN_IF_ERROR(c->WaitReady(i, 15000));
  *out = std::move(c);
  return Status::OK();
}

std::string TestCluster::ClusterFileText() const {
  std::string text = "# written by TestCluster\nhomes " + std::to_string(options_.nodes) + "\n";
  for (const NodeProc& n : nodes_) {
    text += "node " + (n.advertised.empty() ? n.tcp.ToString() : n.advertised) +
            (options_.shm ? " " + n.shm.ToString() : "") + "\n";
  }
  return text;
}

Status TestCluster::ApplyClusterFile(const std::string& text) {
  std::vector<size_t> before;
  for (size_t i = 0; i < nodes_.size(); i++) before.push_back(ReadLog(static_cast<int>(i)).size());
  // Atomically: rampd also re-reads the file when it sees it change.
  RAMP_RETURN_IF_ERROR(WriteFile(cluster_file_ + ".new", text));
  if (rename((cluster_file_ + ".new").c_str(), cluster_file_.c_str()) != 0) {
    return Status::FromErrno("rename " + cluster_file_, errno);
  }
  for (size_t i = 0; i < nodes_.size(); i++) {
    if (nodes_[i].pid > 0) kill(nodes_[i].pid, SIGHUP);
  }
  // Each running node logs "cluster file ... applied (SIGHUP)" or "... not applied (SIGHUP)".
  for (size_t i = 0; i < nodes_.size(); i++) {
    if (nodes_[i].pid <= 0) continue;
    for (int waited = 0;; waited += 20) {
      const std::string log = ReadLog(static_cast<int>(i));
      if (log.size() > before[i] && log.find("(SIGHUP)", before[i]) != std::string::npos) break;
      if (waited > 10000) {
        return Status::Timeout("node " + std::to_string(i) + " did not read the cluster file");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return Status::OK();
}

Status TestCluster::AddNode(uint16_t advertise_port) {
  NodeProc n;
  uint16_t port = 0;
  RAMP_RETURN_IF_ERROR(FreePort(&port));
  const int i = static_cast<int>(nodes_.size());
  n.tcp.provider = transport::Provider::kTcp;
  n.tcp.host = "127.0.0.1";
  n.tcp.port = port;
  n.shm.provider = transport::Provider::kShm;
  n.shm.path = dir_ + "/node" + std::to_string(i) + ".sock";
  if (options_.data) n.data_dir = dir_ + "/data" + std::to_string(i);
  if (options_.page_files) n.page_dir = dir_ + "/pages" + std::to_string(i);
  if (advertise_port != 0) {
    transport::Endpoint adv = n.tcp;
    adv.port = advertise_port;
    n.advertised = adv.ToString();
  }
  nodes_.push_back(n);
  RAMP_RETURN_IF_ERROR(ApplyClusterFile(ClusterFileText()));
  RAMP_RETURN_IF_ERROR(Launch(i));
  return WaitReady(i, 15000);
}

std::string TestCluster::log_path(int node) const {
  return dir_ + "/node" + std::to_string(node) + ".log";
}

std::string TestCluster::ReadLog(int node) const {
  std::ifstream f(log_path(node));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Status TestCluster::Launch(int node) {
  NodeProc& n = nodes_[node];
  std::vector<std::string> args = {RampdPath(),
                                   "--listen",
                                   n.tcp.ToString(),
                                   "--cluster",
                                   cluster_file_,
                                   "--node",
                                   std::to_string(node),
                                   "--token-file",
                                   token_file_,
                                   "--memory-mb",
                                   std::to_string(options_.memory_mb),
                                   "--workers",
                                   std::to_string(options_.workers)};
  if (options_.shm) {
    args.push_back("--listen");
    args.push_back(n.shm.ToString());
  }
  if (!n.data_dir.empty()) {
    args.push_back("--data");
    args.push_back(n.data_dir);
  }
  if (!n.page_dir.empty()) {
    if (mkdir(n.page_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno("mkdir " + n.page_dir, errno);
    }
    args.push_back("--page-dir");
    args.push_back(n.page_dir);
  }
  for (const auto& a : options_.extra_args) args.push_back(a);
  for (const auto& a : n.args) args.push_back(a);
  // Each (re)start appends to the node's log; WaitReady counts "ready" lines.
  const std::string log = log_path(node);
  pid_t pid = fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "a");
    if (f) {
      dup2(fileno(f), 2);
      dup2(fileno(f), 1);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  n.pid = pid;
  return Status::OK();
}

Status TestCluster::WaitReady(int node, int timeout_ms) {
  NodeProc& n = nodes_[node];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const int want = n.restarts + 1;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = ReadLog(node);
    int ready = 0;
    for (size_t at = log.find(" INFO: ready\n"); at != std::string::npos;
         at = log.find(" INFO: ready\n", at + 1)) {
      ready++;
    }
    if (ready >= want) return Status::OK();
    int status = 0;
    if (waitpid(n.pid, &status, WNOHANG) == n.pid) {
      n.pid = -1;
      return Status::Unavailable("rampd node " + std::to_string(node) + " exited at start:\n" +
                                 log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Timeout("rampd node " + std::to_string(node) + " not ready in time:\n" +
                         ReadLog(node));
}

Status TestCluster::Kill(int node, int sig) {
  NodeProc& n = nodes_[node];
  if (n.pid <= 0) return Status::InvalidArgument("node not running");
  if (kill(n.pid, sig) != 0) return Status::FromErrno("kill", errno);
  int status = 0;
  waitpid(n.pid, &status, 0);
  n.pid = -1;
  return Status::OK();
}

bool TestCluster::Exited(int node) {
  NodeProc& n = nodes_[node];
  if (n.pid <= 0) return true;
  int status = 0;
  if (waitpid(n.pid, &status, WNOHANG) != n.pid) return false;
  n.pid = -1;
  return true;
}

Status TestCluster::Restart(int node) {
  NodeProc& n = nodes_[node];
  if (n.pid > 0) return Status::InvalidArgument("node still running");
  n.restarts++;
  RAMP_RETURN_IF_ERROR(Launch(node));
  return WaitReady(node, 30000);
}

ClientOptions TestCluster::ClientOptionsFor(transport::Provider provider, ReadPath read,
                                            WritePath write) const {
  ClientOptions o;
  for (const auto& n : nodes_) {
    o.seeds.push_back(provider == transport::Provider::kShm ? n.shm : n.tcp);
  }
  o.provider = provider;
  o.read_path = read;
  o.write_path = write;
  o.token = options_.token;
  o.timeout_ms = 10000;
  return o;
}

TestCluster::~TestCluster() {
  for (auto& n : nodes_) {
    if (n.pid > 0) kill(n.pid, SIGTERM);
  }
  for (auto& n : nodes_) {
    if (n.pid <= 0) continue;
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
      int status = 0;
      if (waitpid(n.pid, &status, WNOHANG) == n.pid)
        gone = true;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!gone) {
      kill(n.pid, SIGKILL);
      waitpid(n.pid, nullptr, 0);
    }
    n.pid = -1;
  }
  if (std::getenv("RAMP_KEEP_TEST_DIRS") == nullptr && !dir_.empty()) {
    std::string cmd = "rm -rf '" + dir_ + "'";
    [[maybe_unused]] int rc = std::system(cmd.c_str());
  }
}

}  // namespace ramp::testing
