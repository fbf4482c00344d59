// Logging to stderr with levels; a process may install its own sink (rampd's log file,
// a PostgreSQL backend's server log). Thread-safe.
#pragma once

#include <cstdarg>
#include <functional>
#include <string>

namespace ramp {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Messages below the threshold are dropped before formatting.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warning", "error"; false if unknown.
bool ParseLogLevel(const std::string& name, LogLevel* out);

// Replaces the sink (default: one line to stderr with time, level and a process tag).
// Pass nullptr to restore the default.
using LogSink = std::function<void(LogLevel, const std::string& line)>;
void SetLogSink(LogSink sink);
// Tag printed in each default line, e.g. "rampd[7400]".
void SetLogTag(const std::string& tag);

void LogMessage(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace ramp

#define RAMP_LOG(level, ...)                                                  \
  do {                                                                        \
    if (static_cast<int>(level) >= static_cast<int>(::ramp::GetLogLevel())) \
      ::ramp::LogMessage(level, __VA_ARGS__);                                 \
  } while (0)
#define RAMP_DEBUG(...) RAMP_LOG(::ramp::LogLevel::kDebug, __VA_ARGS__)
#define RAMP_INFO(...) RAMP_LOG(::ramp::LogLevel::kInfo, __VA_ARGS__)
#define RAMP_WARN(...) RAMP_LOG(::ramp::LogLevel::kWarning, __VA_ARGS__)
#define RAMP_ERROR(...) RAMP_LOG(::ramp::LogLevel::kError, __VA_ARGS__)
