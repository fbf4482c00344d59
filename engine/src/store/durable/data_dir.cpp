#include "store/durable/data_dir.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "common/record.h"

namespace ramp::store {
namespace {

constexpr const char* kIdentityFile = "RAMP_DATA";
constexpr const char* kIdentityTitle = "pg_ramp rampd data directory";

std::string Encode(const DataDirIdentity& id) {
  char body[256];
  std::snprintf(body, sizeof(body), "%s\nformat %u\ncluster %016" PRIx64 "\nnode %u\n",
                kIdentityTitle, id.format, id.cluster, id.node);
  char crc[32];
  std::snprintf(crc, sizeof(crc), "crc %08x\n", record::Crc32c(body, std::strlen(body)));
  return std::string(body) + crc;
}

Status Decode(const std::string& path, const std::string& text, DataDirIdentity* out) {
  const size_t crc_at = text.rfind("crc ");
  unsigned crc = 0;
  if (text.rfind(kIdentityTitle, 0) != 0 || crc_at == std::string::npos ||
      std::sscanf(text.c_str() + crc_at, "crc %x", &crc) != 1) {
    return Status::Corruption(path + " is not a rampd identity file");
  }
  if (record::Crc32c(text.data(), crc_at) != crc) {
    return Status::Corruption(path + ": checksum mismatch (the file is damaged)");
  }
  std::istringstream in(text.substr(0, crc_at));
  std::string line, word;
  std::getline(in, line);  // the title
  bool format = false, cluster = false, node = false;
  while (in >> word) {
    if (word == "format")
      format = static_cast<bool>(in >> out->format);
    else if (word == "cluster")
      cluster = static_cast<bool>(in >> std::hex >> out->cluster >> std::dec);
    else if (word == "node")
      node = static_cast<bool>(in >> out->node);
    else
      return Status::Corruption(path + ": unknown entry '" + word + "'");
  }
  if (!format || !cluster || !node) return Status::Corruption(path + ": incomplete");
  return Status::OK();
}

}  // namespace

uint64_t ClusterIdOf(const std::string& token) {
  // FNV-1a: stable across builds and machines (std::hash is neither promised).
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : token) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

Status OpenDataDir(Env* env, const std::string& dir, const DataDirIdentity& want) {
  RAMP_RETURN_IF_ERROR(env->CreateDir(dir).Annotate("data directory"));
  const std::string path = dir + "/" + kIdentityFile;
  // A probe write first: a read-only directory fails here, at start-up, with its reason,
  // rather than on the first PREPARE.
  {
    const std::string probe = dir + "/.write-probe";
    std::unique_ptr<File> f;
    Status s = env->Open(probe, true, &f);
    if (s.ok()) s = f->Write(0, "x", 1);
    if (s.ok()) s = f->Sync();
    f.reset();
    if (s.ok()) s = env->Remove(probe);
    if (!s.ok()) return s.Annotate("data directory " + dir + " is not writable");
  }
  if (!env->Exists(path)) {
    std::vector<std::string> names;
    RAMP_RETURN_IF_ERROR(env->List(dir, &names));
    for (const auto& n : names) {
      PartitionId id;
      if (ParsePartitionDirName(n, &id)) {
        return Status::Corruption("data directory " + dir + " holds partition logs but no " +
                                  kIdentityFile + " file: refusing to guess whose they are");
      }
    }
    return env->WriteFileAtomic(path, Encode(want)).Annotate("data directory " + dir);
  }
  std::string text;
  RAMP_RETURN_IF_ERROR(env->ReadFile(path, &text));
  DataDirIdentity have;
  RAMP_RETURN_IF_ERROR(Decode(path, text, &have));
  if (have.format != want.format) {
    return Status::NotSupported("data directory " + dir + " has format version " +
                                std::to_string(have.format) + "; this rampd reads version " +
                                std::to_string(want.format));
  }
  if (have.cluster != want.cluster) {
    char buf[128];
    std::snprintf(buf, sizeof(buf),
                  "cluster %016" PRIx64 ", but this server's token says %016" PRIx64, have.cluster,
                  want.cluster);
    return Status::InvalidArgument("data directory " + dir + " belongs to another cluster (" + buf +
                                   ")");
  }
  if (have.node != want.node) {
    return Status::InvalidArgument("data directory " + dir + " belongs to node " +
                                   std::to_string(have.node) + ", this server is node " +
                                   std::to_string(want.node));
  }
  return Status::OK();
}

std::string PartitionDirName(const PartitionId& id) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "p-%016" PRIx64 "-%u", static_cast<uint64_t>(id.keyspace),
                id.bucket);
  return buf;
}

bool ParsePartitionDirName(const std::string& name, PartitionId* out) {
  uint64_t ks = 0;
  unsigned bucket = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "p-%16" SCNx64 "-%u%n", &ks, &bucket, &used) != 2 ||
      static_cast<size_t>(used) != name.size()) {
    return false;
  }
  out->keyspace = ks;
  out->bucket = bucket;
  return true;
}

std::string SegmentFileName(uint32_t first_page) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%010u.seg", first_page);
  return buf;
}

bool ParseSegmentFileName(const std::string& name, uint32_t* first_page) {
  unsigned v = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "%10u.seg%n", &v, &used) != 1 ||
      static_cast<size_t>(used) != name.size()) {
    return false;
  }
  *first_page = v;
  return true;
}

}  // namespace ramp::store
