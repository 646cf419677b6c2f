// Minimal leveled logging to stderr; one line per call, prefixed with a UTC timestamp.
#pragma once

#include <string_view>

namespace beam {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

void log_line(LogLevel level, std::string_view message);
inline void log_info(std::string_view m) { log_line(LogLevel::kInfo, m); }
inline void log_warning(std::string_view m) { log_line(LogLevel::kWarning, m); }
inline void log_error(std::string_view m) { log_line(LogLevel::kError, m); }

}  // namespace beam
