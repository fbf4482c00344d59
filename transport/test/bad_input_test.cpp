// Bad input: forged handles, out-of-range accesses, read-only memory, wrong tokens,
// malformed frames and garbage on the wire. Each is refused with a clear status and harms
// nothing else: the listener keeps serving.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/control_channel.h"
#include "core/handshake.h"
#include "core/ring_connection.h"
#include "core/wire.h"
#include "ramp/log.h"
#include "ramp/transport/ring.h"
#include "test_pair.h"

namespace ramp::transport::testing {
namespace {

class BadInputTest : public ::testing::TestWithParam<ProviderCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ProviderAvailable(GetParam().provider, &why)) GTEST_SKIP() << why;
    opts_ = TestOptions(GetParam());
    Status s = MakePair(GetParam(), dir_, opts_, opts_, &p_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(p_.server_memory->Allocate(4096, kAccessReadWrite, &rw_base_).ok());
    ASSERT_TRUE(p_.server_memory->Allocate(4096, kAccessRead, &ro_base_).ok());
    FillPattern(rw_base_, 4096, 1);
    FillPattern(ro_base_, 4096, 2);
    ASSERT_TRUE(p_.server_memory->Register(rw_base_, 4096, kAccessReadWrite, &rw_).ok());
    ASSERT_TRUE(p_.server_memory->Register(ro_base_, 4096, kAccessRead, &ro_).ok());
    ASSERT_TRUE(p_.server->Expose(rw_).ok());
    ASSERT_TRUE(p_.server->Expose(ro_).ok());
    ASSERT_TRUE(p_.client_memory->Allocate(4096, kAccessReadWrite, &local_).ok());
  }
  Status ReadStatus(const RemoteRegion& r, uint64_t offset, uint64_t len) {
    std::memset(local_, 0xee, 4096);
    Status s = p_.client->PostRead(local_, r, offset, len, 42);
    if (!s.ok()) return s;
    Completion c = NextCompletion(p_.client.get(), {p_.server.get()});
    EXPECT_EQ(c.wr_id, 42u);
    return c.status;
  }
  Status WriteStatus(const RemoteRegion& r, uint64_t offset, uint64_t len) {
    FillPattern(local_, 4096, 77);
    Status s = p_.client->PostWrite(local_, r, offset, len, 43);
    if (!s.ok()) return s;
    return NextCompletion(p_.client.get(), {p_.server.get()}).status;
  }
  bool LocalUntouched() {
    for (int i = 0; i < 4096; i++) {
      if (local_[i] != 0xee) return false;
    }
    return true;
  }
  // The connection still works after a refused access.
  void ExpectStillServing() {
    ASSERT_TRUE(ReadStatus(rw_, 0, 64).ok());
    EXPECT_EQ(std::memcmp(local_, rw_base_, 64), 0);
  }

  TempDir dir_;
  TransportOptions opts_;
  Pair p_;
  uint8_t* rw_base_ = nullptr;
  uint8_t* ro_base_ = nullptr;
  uint8_t* local_ = nullptr;
  RemoteRegion rw_, ro_;
};

TEST_P(BadInputTest, ForgedKeyIsRefusedWithoutMemory) {
  RemoteRegion forged = rw_;
  forged.key ^= 0x5555;
  Status s = ReadStatus(forged, 0, 64);
  EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
  EXPECT_NE(s.message().find("wrong key"), std::string::npos) << s.ToString();
  EXPECT_TRUE(LocalUntouched());
  s = WriteStatus(forged, 0, 64);
  EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
  uint8_t expect[4096];
  FillPattern(expect, 4096, 1);
  EXPECT_EQ(std::memcmp(rw_base_, expect, 4096), 0);
  ExpectStillServing();
}

TEST_P(BadInputTest, UnknownRegionIsNotFound) {
  RemoteRegion unknown = rw_;
  unknown.id = 123456;
  Status s = ReadStatus(unknown, 0, 64);
  EXPECT_TRUE(s.Is(Status::Code::kNotFound)) << s.ToString();
  EXPECT_TRUE(LocalUntouched());
  ExpectStillServing();
}

TEST_P(BadInputTest, OutOfRangeOffsetIsInvalidArgument) {
  for (auto [offset, len] :
       {std::pair<uint64_t, uint64_t>{4000, 100}, {4097, 0}, {~uint64_t{0} - 10, 64}, {8, 4096}}) {
    Status s = ReadStatus(rw_, offset, len);
    EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument))
        << offset << "+" << len << ": " << s.ToString();
    EXPECT_TRUE(LocalUntouched());
  }
  Status s = WriteStatus(rw_, 4090, 64);
  EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument)) << s.ToString();
  ExpectStillServing();
}

TEST_P(BadInputTest, WriteToReadOnlyRegionIsRefused) {
  Status s = WriteStatus(ro_, 0, 64);
  EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
  EXPECT_NE(s.message().find("does not grant write"), std::string::npos) << s.ToString();
  uint8_t expect[4096];
  FillPattern(expect, 4096, 2);
  EXPECT_EQ(std::memcmp(ro_base_, expect, 4096), 0);
  ASSERT_TRUE(ReadStatus(ro_, 0, 4096).ok());  // reading it is fine
  EXPECT_EQ(std::memcmp(local_, expect, 4096), 0);
}

TEST_P(BadInputTest, ExposeOfAForeignHandleIsRefused) {
  RemoteRegion forged = rw_;
  forged.key += 1;
  EXPECT_TRUE(p_.server->Expose(forged).Is(Status::Code::kInvalidArgument));
  RemoteRegion unknown = rw_;
  unknown.id = 999;
  EXPECT_TRUE(p_.server->Expose(unknown).Is(Status::Code::kNotFound));
}

// Garbage written into the receive ring: the receiver closes the connection with the reason
// and the listener keeps serving.
void CorruptRing(Connection* receiver, const std::function<void(uint8_t*)>& scribble) {
  auto* rc = dynamic_cast<detail::RingConnection*>(receiver);
  ASSERT_NE(rc, nullptr);
  scribble(rc->receive_ring_for_testing());
}

void ExpectClosedWithCorruption(Connection* c, const std::string& needle) {
  MessageView m;
  EXPECT_FALSE(c->Receive(&m));
  EXPECT_TRUE(c->closed());
  Status why = c->close_status();
  EXPECT_TRUE(why.Is(Status::Code::kCorruption)) << why.ToString();
  EXPECT_NE(why.message().find(needle), std::string::npos) << why.ToString();
  EXPECT_FALSE(c->Receive(&m));
  EXPECT_TRUE(c->Send("x", 1).Is(Status::Code::kUnavailable));
}

TEST_P(BadInputTest, RingHeaderClaimingMoreThanTheRingHolds) {
  CorruptRing(p_.server.get(), [](uint8_t* ring) {
    ring::EncodeSize(ring, 1ull << 40);
    ring[ring::kLeadOffset] = ring::kIndicator;
  });
  ExpectClosedWithCorruption(p_.server.get(), "more than a");
}

TEST_P(BadInputTest, LeadSetButTrailMissing) {
  CorruptRing(p_.server.get(), [](uint8_t* ring) {
    ring::EncodeSize(ring, 100);
    ring[ring::kLeadOffset] = ring::kIndicator;
  });
  ExpectClosedWithCorruption(p_.server.get(), "no trailing indicator");
}

TEST_P(BadInputTest, RandomGarbageInTheRing) {
  // Messages first so the read position is somewhere in the middle.
  for (int i = 0; i < 10; i++) ASSERT_TRUE(SendString(p_.client.get(), Pattern(333, i), {}).ok());
  for (int i = 0; i < 10; i++) {
    std::string in;
    ASSERT_TRUE(ReceiveString(p_.server.get(), &in, {p_.client.get()}));
  }
  CorruptRing(p_.server.get(), [&](uint8_t* ring) {
    FillPattern(ring, opts_.ring_bytes, 1234);
    for (size_t i = ring::kLeadOffset; i < opts_.ring_bytes; i += ring::kAlign) {
      ring[i] = ring::kIndicator;  // every slot looks written
    }
  });
  ExpectClosedWithCorruption(p_.server.get(), "malformed frame");
  // The client learns that the server hung up; other connections are unaffected.
  ASSERT_TRUE(DriveUntil([&] { return p_.client->closed(); }, {p_.client.get()}));
  std::unique_ptr<Connection> c2, s2;
  Status s = ConnectAccepted(p_.listener.get(), opts_, p_.client_memory, &c2, &s2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(SendString(c2.get(), "still here", {s2.get()}).ok());
  std::string in;
  ASSERT_TRUE(ReceiveString(s2.get(), &in, {c2.get()}));
  EXPECT_EQ(in, "still here");
}

INSTANTIATE_TEST_SUITE_P(Providers, BadInputTest, ::testing::ValuesIn(AllProviders()),
                         [](const ::testing::TestParamInfo<ProviderCase>& i) {
                           return CaseName(i.param);
                         });

// ---- authentication --------------------------------------------------------------------------

class AuthTest : public ::testing::TestWithParam<ProviderCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ProviderAvailable(GetParam().provider, &why)) GTEST_SKIP() << why;
  }
  TempDir dir_;
};

TEST_P(AuthTest, WrongTokenDeniedOnBothSidesAndListenerKeepsServing) {
  std::mutex mu;
  std::vector<std::string> logged;
  SetLogSink([&](LogLevel, const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    logged.push_back(line);
  });
  TransportOptions server = TestOptions(GetParam());
  TransportOptions wrong = server;
  wrong.token = "not-the-cluster-token";
  Pair p;
  Status s = MakePair(GetParam(), dir_, server, wrong, &p);
  // MakePair returns the client's status first: PermissionDenied.
  EXPECT_TRUE(s.Is(Status::Code::kPermissionDenied)) << s.ToString();
  EXPECT_NE(s.message().find("cluster token mismatch"), std::string::npos) << s.ToString();
  EXPECT_EQ(p.client, nullptr);
  EXPECT_EQ(p.server, nullptr);

  // The server side separately: Accept says PermissionDenied too.
  std::unique_ptr<Connection> c, sv;
  Status accepted;
  std::thread t([&] { accepted = p.listener->Accept(30000, &sv); });
  Status connected = Connect(p.listener->endpoint(), wrong, p.client_memory, &c);
  t.join();
  EXPECT_TRUE(connected.Is(Status::Code::kPermissionDenied)) << connected.ToString();
  EXPECT_TRUE(accepted.Is(Status::Code::kPermissionDenied)) << accepted.ToString();
  EXPECT_NE(accepted.message().find("rejected: cluster token mismatch"), std::string::npos)
      << accepted.ToString();
  SetLogSink(nullptr);
  bool found = false;
  for (const auto& l : logged)
    found |= l.find("rejected: cluster token mismatch") != std::string::npos;
  EXPECT_TRUE(found) << "the server logs the rejection";

  // A peer with the token still gets in.
  s = ConnectAccepted(p.listener.get(), server, p.client_memory, &c, &sv);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(SendString(c.get(), "ok", {sv.get()}).ok());
  std::string in;
  ASSERT_TRUE(ReceiveString(sv.get(), &in, {c.get()}));
  EXPECT_EQ(in, "ok");
}

TEST_P(AuthTest, EmptyTokenIsRefusedLocally) {
  TransportOptions o = TestOptions(GetParam());
  o.token.clear();
  std::unique_ptr<Listener> l;
  Status s = Listen(ListenEndpoint(GetParam(), dir_), o, Memory::Create(), &l);
  EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument)) << s.ToString();
}

TEST_P(AuthTest, SilentPeerTimesOutAndListenerKeepsServing) {
  TransportOptions server = TestOptions(GetParam());
  server.handshake_timeout_ms = 200;
  Pair p;
  p.server_memory = Memory::Create();
  ASSERT_TRUE(Listen(ListenEndpoint(GetParam(), dir_), server, p.server_memory, &p.listener).ok());
  // A raw socket that connects and says nothing, then one that speaks HTTP.
  const Endpoint& e = p.listener->endpoint();
  auto raw_connect = [&]() {
    int fd;
    if (e.provider == Provider::kShm) {
      fd = socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::strncpy(a.sun_path, e.path.c_str(), sizeof(a.sun_path) - 1);
      EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    } else {
      fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(e.port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    }
    return fd;
  };
  int silent = raw_connect();
  std::unique_ptr<Connection> sv;
  Status s = p.listener->Accept(10000, &sv);
  EXPECT_TRUE(s.Is(Status::Code::kTimeout)) << s.ToString();
  close(silent);
  int http = raw_connect();
  ASSERT_EQ(send(http, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  s = p.listener->Accept(10000, &sv);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption)) << s.ToString();
  close(http);
  server.handshake_timeout_ms = 10000;
  std::unique_ptr<Connection> c;
  s = ConnectAccepted(p.listener.get(), server, Memory::Create(), &c, &sv);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(Providers, AuthTest, ::testing::ValuesIn(AllProviders()),
                         [](const ::testing::TestParamInfo<ProviderCase>& i) {
                           return CaseName(i.param);
                         });

// ---- tcp wire: a raw peer that authenticates and then misbehaves ----------------------------

class RawTcpPeer {
 public:
  // Connects, authenticates with the token, exchanges SETUP with a real ring block.
  Status Open(const Endpoint& e, const std::string& token) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(e.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      return Status::FromErrno("connect", errno);
    }
    RAMP_RETURN_IF_ERROR(detail::SetNonBlocking(fd_));
    channel_ = detail::ControlChannel(fd_, "raw-server");
    detail::HandshakeParams params{Provider::kTcp, token, detail::Deadline::After(10000), nullptr};
    RAMP_RETURN_IF_ERROR(detail::ClientHandshake(&channel_, params));
    memory_ = Memory::Create();
    RAMP_RETURN_IF_ERROR(memory_->Allocate(65536 + 128, kAccessReadWrite, &block_));
    wire::Setup mine;
    mine.ring_bytes = 65536;
    mine.max_message_bytes = 1 << 20;
    RAMP_RETURN_IF_ERROR(memory_->Register(block_, 65536 + 128, kAccessReadWrite, &mine.block));
    return detail::ExchangeSetup(&channel_, mine, nullptr, 0, 0, params, &theirs_, nullptr);
  }
  ~RawTcpPeer() {
    if (fd_ >= 0) close(fd_);
  }
  void SendRaw(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  Status Next(detail::ControlMessage* m) {
    return channel_.Receive(m, detail::Deadline::After(10000), nullptr, "a response");
  }
  const wire::Setup& theirs() const { return theirs_; }

 private:
  int fd_ = -1;
  detail::ControlChannel channel_;
  std::shared_ptr<Memory> memory_;
  uint8_t* block_ = nullptr;
  wire::Setup theirs_;
};

class TcpWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_ = TestOptions({"tcp", Provider::kTcp, true});
    memory_ = Memory::Create();
    ASSERT_TRUE(
        Listen(ListenEndpoint({"tcp", Provider::kTcp, true}, dir_), opts_, memory_, &listener_)
            .ok());
    ASSERT_TRUE(memory_->Allocate(4096, kAccessReadWrite, &secret_).ok());
    std::memcpy(secret_, "secret bytes", 12);
    ASSERT_TRUE(memory_->Register(secret_, 4096, kAccessRead, &region_).ok());
  }
  // Accepts the raw peer on a thread while it connects.
  void OpenRaw(RawTcpPeer* raw) {
    Status accepted;
    std::thread t([&] { accepted = listener_->Accept(30000, &server_); });
    Status s = raw->Open(listener_->endpoint(), opts_.token);
    t.join();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(accepted.ok()) << accepted.ToString();
  }
  TempDir dir_;
  TransportOptions opts_;
  std::shared_ptr<Memory> memory_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<Connection> server_;
  uint8_t* secret_ = nullptr;
  RemoteRegion region_;
};

TEST_F(TcpWireTest, ForgedHandlesGetErrorRepliesNeverMemory) {
  RawTcpPeer raw;
  OpenRaw(&raw);
  RemoteRegion forged = region_;
  forged.key ^= 1;
  std::vector<uint8_t> out;
  wire::AppendRead(1, forged, 0, 12, &out);      // wrong key
  wire::AppendRead(2, region_, 4090, 12, &out);  // out of range
  RemoteRegion unknown = region_;
  unknown.id = 77777;
  wire::AppendRead(3, unknown, 0, 12, &out);        // unknown id
  wire::AppendWriteHeader(4, region_, 0, 3, &out);  // read-only region
  out.insert(out.end(), {'b', 'a', 'd'});
  wire::AppendRead(5, region_, 0, 12, &out);  // legitimate
  raw.SendRaw(out);
  const Status::Code expect[] = {Status::Code::kPermissionDenied, Status::Code::kInvalidArgument,
                                 Status::Code::kNotFound, Status::Code::kPermissionDenied};
  for (int i = 0; i < 5; i++) {
    detail::ControlMessage m;
    ASSERT_TRUE(raw.Next(&m).ok());
    wire::Op op;
    ASSERT_TRUE(wire::DecodeOp(m.type, m.payload.data(), m.payload.size(), &op).ok());
    EXPECT_EQ(op.request_id, static_cast<uint64_t>(i + 1));
    if (i < 4) {
      EXPECT_EQ(op.code, expect[i]) << i << ": " << op.reason;
      EXPECT_EQ(op.data_length, 0u);
    } else {
      ASSERT_EQ(op.code, Status::Code::kOk);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(op.data), op.data_length),
                "secret bytes");
    }
  }
  EXPECT_EQ(std::memcmp(secret_, "secret", 6), 0);
  EXPECT_FALSE(server_->closed());
}

TEST_F(TcpWireTest, GarbageOnTheDataPathClosesThatConnectionOnly) {
  RawTcpPeer raw;
  OpenRaw(&raw);
  raw.SendRaw({4, 0, 0, 0, 99, 1, 2, 3, 4});  // a message of unknown type 99
  ASSERT_TRUE(DriveUntil([&] { return server_->closed(); }, {server_.get()}));
  EXPECT_TRUE(server_->close_status().Is(Status::Code::kCorruption))
      << server_->close_status().ToString();
  EXPECT_NE(server_->close_status().message().find("unknown message type 99"), std::string::npos);

  RawTcpPeer raw2;
  OpenRaw(&raw2);
  // A length prefix far beyond any limit.
  raw2.SendRaw({0xff, 0xff, 0xff, 0xff, 33});
  ASSERT_TRUE(DriveUntil([&] { return server_->closed(); }, {server_.get()}));
  EXPECT_NE(server_->close_status().message().find("exceeds the limit"), std::string::npos)
      << server_->close_status().ToString();

  RawTcpPeer raw3;
  OpenRaw(&raw3);
  // A ring frame aimed outside the ring block.
  std::vector<uint8_t> out;
  wire::AppendFrameHeader(raw3.theirs().block, raw3.theirs().block.length - 4, 16, &out);
  out.resize(out.size() + 16, 1);
  raw3.SendRaw(out);
  ASSERT_TRUE(DriveUntil([&] { return server_->closed(); }, {server_.get()}));
  EXPECT_NE(server_->close_status().message().find("ring frame refused"), std::string::npos)
      << server_->close_status().ToString();
}

TEST_F(TcpWireTest, VersionMismatchIsRefusedWithAReason) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(listener_->endpoint().port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_TRUE(detail::SetNonBlocking(fd).ok());
  detail::ControlChannel ch(fd, "server");
  wire::Hello h;
  h.version = 9;
  h.provider = static_cast<uint8_t>(Provider::kTcp);
  std::vector<uint8_t> payload;
  wire::EncodeHello(h, &payload);
  ASSERT_TRUE(ch.Send(wire::Type::kHello, payload, detail::Deadline::After(5000), nullptr).ok());
  std::unique_ptr<Connection> sv;
  Status s = listener_->Accept(10000, &sv);
  EXPECT_TRUE(s.Is(Status::Code::kNotSupported)) << s.ToString();
  detail::ControlMessage m;
  ASSERT_TRUE(ch.Receive(&m, detail::Deadline::After(5000), nullptr, "error").ok());
  ASSERT_EQ(m.type, static_cast<uint8_t>(wire::Type::kError));
  Status::Code code;
  std::string reason;
  ASSERT_TRUE(wire::DecodeReason(m.payload.data(), m.payload.size(), &code, &reason).ok());
  EXPECT_EQ(code, Status::Code::kNotSupported);
  EXPECT_NE(reason.find("version 9 not supported"), std::string::npos) << reason;
  close(fd);
}

// ---- shm specifics ---------------------------------------------------------------------------

int CountMemfdMappings(const char* perms) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) {
    if (line.find("memfd:ramp") != std::string::npos && line.find(perms) != std::string::npos) n++;
  }
  return n;
}

TEST(ShmTest, ReadOnlyRegionIsMappedReadOnlyByThePeer) {
  TempDir dir;
  ProviderCase shm{"shm", Provider::kShm, true};
  Pair p;
  TransportOptions o = TestOptions(shm);
  ASSERT_TRUE(MakePair(shm, dir, o, o, &p).ok());
  const int before = CountMemfdMappings(" r--s ");
  uint8_t* ro;
  ASSERT_TRUE(p.server_memory->Allocate(8192, kAccessRead, &ro).ok());
  RemoteRegion r;
  ASSERT_TRUE(p.server_memory->Register(ro, 8192, kAccessRead, &r).ok());
  ASSERT_TRUE(p.server->Expose(r).ok());
  uint8_t local[64];
  ASSERT_TRUE(p.client->PostRead(local, r, 0, 64, 1).ok());
  ASSERT_TRUE(NextCompletion(p.client.get()).status.ok());
  EXPECT_EQ(CountMemfdMappings(" r--s "), before + 1);
}

TEST(ShmTest, StaleSocketFileIsReplacedLiveOneIsNot) {
  TempDir dir;
  const std::string path = dir.path() + "/s.sock";
  {
    // A socket file whose listener died without unlinking it.
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    close(fd);
  }
  Endpoint e;
  ASSERT_TRUE(Endpoint::Parse("shm://" + path, &e).ok());
  TransportOptions o = TestOptions({"shm", Provider::kShm, true});
  std::unique_ptr<Listener> l1, l2;
  Status s = Listen(e, o, Memory::Create(), &l1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = Listen(e, o, Memory::Create(), &l2);
  EXPECT_TRUE(s.Is(Status::Code::kInvalidArgument)) << s.ToString();
  EXPECT_NE(s.message().find("in use"), std::string::npos);
  l1->Close();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "Close removes the socket file";

  std::ofstream(dir.path() + "/plain") << "not a socket";
  ASSERT_TRUE(Endpoint::Parse("shm://" + dir.path() + "/plain", &e).ok());
  s = Listen(e, o, Memory::Create(), &l2);
  EXPECT_NE(s.message().find("not a socket"), std::string::npos) << s.ToString();

  ASSERT_TRUE(Endpoint::Parse("shm://" + dir.path() + "/nobody.sock", &e).ok());
  std::unique_ptr<Connection> c;
  s = Connect(e, o, Memory::Create(), &c);
  EXPECT_TRUE(s.Is(Status::Code::kUnavailable)) << s.ToString();
}

TEST(VerbsTest, ReportsWhyItCannotRun) {
  std::string why;
  if (ProviderAvailable(Provider::kVerbs, &why)) GTEST_SKIP() << "an RDMA device is present";
  EXPECT_FALSE(why.empty());
  Endpoint e;
  ASSERT_TRUE(Endpoint::Parse("verbs://127.0.0.1:0", &e).ok());
  std::unique_ptr<Listener> l;
  TransportOptions o;
  o.token = "t";
  Status s = Listen(e, o, Memory::Create(), &l);
  EXPECT_TRUE(s.Is(Status::Code::kNotSupported)) << s.ToString();
  EXPECT_EQ(s.message(), why);
}

}  // namespace
}  // namespace ramp::transport::testing
