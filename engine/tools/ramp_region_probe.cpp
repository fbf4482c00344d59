// ramp_region_probe: checks from a peer's side that a rampd refuses one-sided access outside
// what it registered (DESIGN §4, §9). It connects like a client (token handshake, HELLO),
// learns the page memory (arena) a client may read one-sided, then posts one-sided
// operations and prints how each completed:
//   inside          a read of the arena's first 64 bytes (must succeed: the control)
//   past-end        a read running 32 bytes past the arena's end
//   far-offset      a read at offset 2^63 (an offset that overflows when added)
//   write           a write into the arena (clients may only read it)
//   forged-key      a read with the arena's key changed
// Exit 0 when the control succeeds and every other is refused, 1 otherwise, 2 on errors.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "client/node_channel.h"
#include "flags.h"
#include "ramp/log.h"
#include "ramp/transport/auth.h"

namespace {

const char* kUsage = R"(usage: ramp_region_probe --node URI [--token-file FILE] [--timeout-ms N]
)";

int Fail(const ramp::Status& s) {
  std::fprintf(stderr, "ramp_region_probe: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ramp;
  SetLogLevel(LogLevel::kWarning);
  tools::Flags flags({"node", "token-file", "timeout-ms"}, {"help"});
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) return Fail(st);
  if (flags.Has("help") || !flags.Has("node")) {
    std::fputs(kUsage, flags.Has("help") ? stdout : stderr);
    return flags.Has("help") ? 0 : 2;
  }
  std::vector<transport::Endpoint> eps;
  st = transport::ParseEndpointList(flags.Get("node"), &eps);
  if (!st.ok() || eps.size() != 1)
    return Fail(st.ok() ? Status::InvalidArgument("one --node") : st);
  long timeout = 0;
  if (!(st = flags.GetInt("timeout-ms", 5000, 1, 600000, &timeout)).ok()) return Fail(st);

  ChannelContext context;
  if (flags.Has("token-file")) {
    st = transport::ReadTokenFile(flags.Get("token-file"), &context.options.token);
    if (!st.ok()) return Fail(st);
  }
  context.options.timeout_ms = static_cast<int>(timeout);
  context.options.connect_timeout_ms = static_cast<int>(timeout);
  context.options.ring_bytes = 64u << 10;
  context.memory = transport::Memory::Create();
  context.client_id = transport::RandomU64() | 1;
  DoorbellSet doorbells;
  NodeChannel ch;
  ch.Setup(&context, &doorbells, NodeChannel::kAnyNode, "the server at " + eps[0].ToString());
  ch.SetEndpoint(eps[0]);
  if (!(st = doorbells.Init()).ok() || !(st = ch.Open()).ok()) return Fail(st);
  const transport::RemoteRegion arena = ch.hello().arena;
  std::printf("node %u: arena of %llu bytes\n", ch.hello().node,
              static_cast<unsigned long long>(arena.length));
  if (arena.length < 64) return Fail(Status::Internal("arena too small to probe"));

  uint8_t* buf = nullptr;
  if (!(st = context.memory->Allocate(4096, transport::kAccessReadWrite, &buf)).ok()) {
    return Fail(st);
  }
  transport::RemoteRegion forged = arena;
  forged.key ^= 0x5a5a5a5a5a5a5a5aull;
  struct Op {
    const char* name;
    bool write;
    transport::RemoteRegion region;
    uint64_t offset;
    bool should_succeed;
  };
  const Op ops[] = {
      {"inside", false, arena, 0, true},
      {"past-end", false, arena, arena.length - 32, false},
      {"far-offset", false, arena, uint64_t{1} << 63, false},
      {"write", true, arena, 0, false},
      {"forged-key", false, forged, 0, false},
  };
  int wrong = 0;
  for (const Op& op : ops) {
    Status posted = op.write ? ch.conn()->PostWrite(buf, op.region, op.offset, 64, 1)
                             : ch.conn()->PostRead(buf, op.region, op.offset, 64, 1);
    Status result = posted;
    if (posted.ok()) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
      transport::Completion c;
      for (;;) {
        if (ch.conn()->Poll(&c, 1) > 0) {
          result = c.status;
          break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
          result = Status::Timeout("no completion");
          break;
        }
        (void)doorbells.Sleep(1);
      }
    }
    const bool ok = result.ok();
    std::printf("%-11s %s%s%s\n", op.name, ok ? "completed" : "refused", ok ? "" : ": ",
                ok ? "" : result.ToString().c_str());
    if (ok != op.should_succeed) wrong++;
    if (ch.conn()->closed()) {
      // A provider may close the connection on a bad access: reconnect for the next one.
      if (!(st = ch.Open()).ok()) return Fail(st);
    }
  }
  std::printf("%s\n", wrong == 0 ? "ok: only the registered region is accessible"
                                 : "WRONG: an access outside the registered region completed");
  return wrong == 0 ? 0 : 1;
}
