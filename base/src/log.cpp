#include "ramp/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>

namespace ramp {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

// The sink and tag change rarely and are read on every message: a shared_ptr swapped under
// a mutex lets a message format outside the lock and call the sink it saw.
struct LogConfig {
  std::mutex mu;
  std::shared_ptr<const LogSink> sink;  // null: default stderr sink
  std::string tag;
  std::mutex stderr_mu;  // one line at a time on stderr
};

LogConfig& Config() {
  static LogConfig* config = new LogConfig();  // never destroyed: logging works during exit
  return *config;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

std::string DefaultTag() {
  std::string tag = "ramp[";
  tag += std::to_string(getpid());
  tag += ']';
  return tag;
}

void WriteDefault(LogLevel level, const std::string& line, const std::string& tag) {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char when[96];  // room for any int the format could print
  snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           static_cast<int>(tv.tv_usec / 1000));
  LogConfig& c = Config();
  std::lock_guard<std::mutex> lock(c.stderr_mu);
  fprintf(stderr, "%s %s %s: %s\n", when, tag.empty() ? DefaultTag().c_str() : tag.c_str(),
          LevelName(level), line.c_str());
  fflush(stderr);
}

}  // namespace

void SetLogLevel(LogLevel level) {
  g_level.store(static_cast<int>(level));
}
LogLevel GetLogLevel() {
  return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed));
}

bool ParseLogLevel(const std::string& name, LogLevel* out) {
  if (name == "debug")
    *out = LogLevel::kDebug;
  else if (name == "info")
    *out = LogLevel::kInfo;
  else if (name == "warning" || name == "warn")
    *out = LogLevel::kWarning;
  else if (name == "error")
    *out = LogLevel::kError;
  else
    return false;
  return true;
}

void SetLogSink(LogSink sink) {
  LogConfig& c = Config();
  std::shared_ptr<const LogSink> s;
  if (sink) s = std::make_shared<const LogSink>(std::move(sink));
  std::lock_guard<std::mutex> lock(c.mu);
  c.sink = std::move(s);
}

void SetLogTag(const std::string& tag) {
  LogConfig& c = Config();
  std::lock_guard<std::mutex> lock(c.mu);
  c.tag = tag;
}

void LogMessage(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::string line;
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    line.resize(static_cast<size_t>(n) + 1);
    vsnprintf(line.data(), line.size(), fmt, ap2);
    line.resize(static_cast<size_t>(n));
  }
  va_end(ap2);

  LogConfig& c = Config();
  std::shared_ptr<const LogSink> sink;
  std::string tag;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    sink = c.sink;
    tag = c.tag;
  }
  if (sink) {
    (*sink)(level, line);
  } else {
    WriteDefault(level, line, tag);
  }
}

}  // namespace ramp
