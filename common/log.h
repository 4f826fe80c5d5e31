/* Logging for programs (library code returns errors instead). Everything goes to stderr:
 * stdout of `ipybox mcp` belongs to JSON-RPC. */
#pragma once

enum ipb_log_level { IPB_LOG_ERROR, IPB_LOG_WARN, IPB_LOG_INFO, IPB_LOG_DEBUG };
void ipb_log_init(const char *prog, enum ipb_log_level level);
void ipb_log(enum ipb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_error(...) ipb_log(IPB_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) ipb_log(IPB_LOG_WARN, __VA_ARGS__)
#define log_info(...) ipb_log(IPB_LOG_INFO, __VA_ARGS__)
#define log_debug(...) ipb_log(IPB_LOG_DEBUG, __VA_ARGS__)
