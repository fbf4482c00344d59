// libFuzzer target: every decoder of bytes a peer can send — the message header and each
// op's body, records read one-sided, transaction metadata. None may read outside its input
// or crash; what decodes must re-encode to something that decodes the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/record.h"
#include "protocol/messages.h"
#include "protocol/page_messages.h"

using namespace ramp;
using namespace ramp::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const uint32_t count = size > 2 ? data[1] : 0;
  std::string out;
  switch (selector % 21) {
    case 0: {
      Header h;
      (void)DecodeHeader(body, &h);
      break;
    }
    case 1: {
      GetRequest m;
      if (Decode(body.substr(body.empty() ? 0 : 1), count, &m).ok()) {
        Encode(m, &out);
        GetRequest again;
        if (!Decode(out, static_cast<uint32_t>(m.items.size()), &again).ok()) __builtin_trap();
      }
      break;
    }
    case 2: {
      GetReply m;
      (void)Decode(body, count, &m);
      break;
    }
    case 3: {
      PrepareRequest m;
      if (Decode(body, count, &m).ok()) {
        Encode(m, &out);
        PrepareRequest again;
        if (!Decode(out, static_cast<uint32_t>(m.items.size()), &again).ok()) __builtin_trap();
      }
      break;
    }
    case 4: {
      Decision m;
      (void)Decode(body, count, &m);
      CommitAddressesReply r;
      if (Decode(body, count, &r).ok()) {
        Encode(r, &out);
        CommitAddressesReply again;
        if (!Decode(out, static_cast<uint32_t>(r.items.size()), &again).ok()) __builtin_trap();
      }
      break;
    }
    case 5: {
      LookupRequest m;
      (void)Decode(body, count, &m);
      LookupReply r;
      (void)Decode(body, count, &r);
      PlacementPush push;
      if (Decode(body, count, &push).ok()) {
        std::string out;
        Encode(push, &out);
        PlacementPush again;
        if (!Decode(out, static_cast<uint32_t>(push.entries.size()), &again).ok() ||
            again.entries != push.entries) {
          __builtin_trap();
        }
      }
      break;
    }
    case 6: {
      LockRequest m;
      (void)Decode(body, count, &m);
      break;
    }
    case 7: {
      Hello h;
      (void)Decode(body, &h);
      HelloReply r;
      (void)Decode(body, &r);
      break;
    }
    case 8: {
      GetGroupRequest m;
      (void)Decode(body, &m);
      GetGroupReply r;
      (void)Decode(body, count, &r);
      break;
    }
    case 9: {
      TxnStateRequest m;
      (void)Decode(body, count, &m);
      TxnStateReply r;
      (void)Decode(body, count, &r);
      break;
    }
    case 10: {
      StatusReply s;
      (void)Decode(body, &s);
      std::vector<PartitionInfo> p;
      (void)Decode(body, count, &p);
      DropKeyspaceRequest d;
      (void)Decode(body, &d);
      break;
    }
    case 11: {
      PrepareError e;
      std::string msg;
      (void)Decode(body, &e, &msg);
      break;
    }
    case 12: {
      record::RecordView v;
      (void)record::DecodeRecord(reinterpret_cast<const uint8_t*>(body.data()), body.size(), &v);
      break;
    }
    case 13: {
      record::Metadata m;
      if (record::DecodeMetadata(body, &m).ok()) {
        record::EncodeMetadata(m, &out);
        record::Metadata again;
        if (!record::DecodeMetadata(out, &again).ok() || !(again == m)) __builtin_trap();
      }
      break;
    }
    case 14: {
      record::PageHeader h;
      (void)record::ReadPageHeader(reinterpret_cast<const uint8_t*>(body.data()), body.size(), &h);
      break;
    }
    case 16: {
      // READ_PAGES request: what decodes re-encodes to something that decodes the same.
      ReadPagesRequest m;
      if (Decode(body.substr(body.empty() ? 0 : 1), count, &m).ok()) {
        Encode(m, &out);
        ReadPagesRequest again;
        if (!Decode(out, static_cast<uint32_t>(m.items.size()), &again).ok() ||
            again.items.size() != m.items.size() || !(again.dest == m.dest)) {
          __builtin_trap();
        }
      }
      break;
    }
    case 17: {
      ReadPagesReply m;
      if (Decode(body.substr(body.empty() ? 0 : 1), count, &m).ok()) {
        Encode(m, &out);
        ReadPagesReply again;
        if (!Decode(out, static_cast<uint32_t>(m.results.size()), &again).ok()) __builtin_trap();
      }
      break;
    }
    case 18: {
      ScanOpenRequest m;
      (void)Decode(body.substr(body.empty() ? 0 : 1), count, &m);
      ScanOpenReply r;
      (void)Decode(body.substr(body.empty() ? 0 : 1), count, &r);
      break;
    }
    case 19: {
      // Write intents: every decoder, and what decodes re-encodes to the same.
      IntentRequest m;
      if (Decode(body, &m).ok()) {
        Encode(m, &out);
        IntentRequest again;
        if (!Decode(out, &again).ok() || again.key != m.key) __builtin_trap();
      }
      IntentReply r;
      (void)Decode(body, count, &r);
      IntentReleaseRequest rel;
      (void)Decode(body, &rel);
      WaitsForRequest w;
      (void)Decode(body, count, &w);
      WaitsForReply wr;
      (void)Decode(body, count, &wr);
      IntentForward f;
      if (Decode(body, count, &f).ok()) {
        std::string again_bytes;
        Encode(f, &again_bytes);
        IntentForward again;
        if (!Decode(again_bytes, static_cast<uint32_t>(f.released.size()), &again).ok() ||
            again.released != f.released) {
          __builtin_trap();
        }
      }
      break;
    }
    case 20: {
      // Migration messages; a MIGRATE_CTL reply that decodes must survive a round trip.
      MigrateRequest mr;
      (void)Decode(body, &mr);
      MigrateCtl c;
      if (Decode(body, &c).ok()) {  // with the intents that move with the partition
        std::string again_bytes;
        Encode(c, &again_bytes);
        MigrateCtl again;
        if (!Decode(again_bytes, &again).ok() || again.intents != c.intents) __builtin_trap();
      }
      std::vector<MigrationInfo> infos;
      (void)Decode(body, count, &infos);
      LoadReport lr;
      (void)Decode(body, count, &lr);
      ProbeRequest pr;
      (void)Decode(body, count, &pr);
      std::vector<ProbeResult> probes;
      if (Decode(body, count, &probes).ok()) {
        std::string again_bytes;
        Encode(probes, &again_bytes);
        std::vector<ProbeResult> again;
        if (!Decode(again_bytes, count, &again).ok() || again.size() != probes.size() ||
            (!again.empty() && again[0].error != probes[0].error)) {
          __builtin_trap();
        }
      }
      MigrateCtlReply r;
      if (Decode(body, &r).ok()) {
        Encode(r, &out);
        MigrateCtlReply again;
        if (!Decode(out, &again).ok() || again.error != r.error || again.intents != r.intents) {
          __builtin_trap();
        }
      }
      break;
    }
    default:
      break;
  }
  return 0;
}
