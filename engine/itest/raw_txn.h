// A RAMP transaction written by hand, one request at a time, for the termination and fault
// tests (durability_itest, fault_itest): a test can stop it anywhere, as a client process
// that died would.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "client/client_impl.h"
#include "common/record.h"
#include "protocol/messages.h"
#include "ramp/client.h"

namespace ramp::testing {

class RawTxn {
 public:
  // ts: the transaction's timestamp (zero: a new one of this client), to look at another
  // client's transaction.
  RawTxn(Client& c, KeyspaceId ks, std::vector<std::string> keys, Timestamp ts = Timestamp())
      : c_(*c.impl()), ks_(ks), ts_(ts) {
    keys_ = std::move(keys);
    if (ts_ == Timestamp()) ts_ = Timestamp{c_.clock.Now(), c_.client_id};
    for (const auto& k : keys_) parts_.push_back(c_.PartitionOf(ks_, k));
    EXPECT_TRUE(c_.ResolveOwners(parts_).ok());
  }
  const Timestamp& ts() const { return ts_; }
  uint32_t node_of(size_t i) const { return c_.OwnerOf(parts_[i]); }

  // PREPARE of key i alone (with the metadata naming all the others).
  Status Prepare(size_t i, const std::string& value) {
    record::Metadata m;
    m.mode = record::Metadata::Mode::kKeys;
    for (size_t k = 0; k < keys_.size(); ++k) {
      if (k != i) m.keys.push_back({ks_, parts_[k].bucket, keys_[k]});
    }
    std::string meta;
    record::EncodeMetadata(m, &meta);
    protocol::PrepareRequest req;
    req.ts = ts_;
    req.items.push_back(protocol::PrepareItem{parts_[i], keys_[i], value, 0, {}, meta});
    std::string body;
    protocol::Encode(req, &body);
    PendingCall reply;
    return c_.CallAndWait(node_of(i), ChannelKind::kRpc, protocol::Op::kPrepare, 1, body, &reply);
  }
  // What the partition of key i knows of the transaction (a query that fences nothing).
  Status State(size_t i, protocol::TxnState* out) {
    protocol::TxnStateRequest req;
    req.ts = ts_;
    req.partitions = {parts_[i]};
    req.fence = 0;
    std::string body;
    protocol::Encode(req, &body);
    PendingCall reply;
    RAMP_RETURN_IF_ERROR(
        c_.CallAndWait(node_of(i), ChannelKind::kRpc, protocol::Op::kTxnState, 1, body, &reply));
    protocol::TxnStateReply r;
    RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &r));
    *out = r.states.at(0);
    return Status::OK();
  }
  Status Commit(size_t i) {
    protocol::Decision d{ts_, {parts_[i]}};
    std::string body;
    protocol::Encode(d, &body);
    PendingCall reply;
    return c_.CallAndWait(node_of(i), ChannelKind::kRpc, protocol::Op::kCommit, 1, body, &reply);
  }

 private:
  Client::Impl& c_;
  KeyspaceId ks_;
  std::vector<std::string> keys_;
  std::vector<PartitionId> parts_;
  Timestamp ts_;
};

}  // namespace ramp::testing
