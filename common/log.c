#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static const char *log_prog = "ipybox";
static enum ipb_log_level log_level = IPB_LOG_INFO;

void ipb_log_init(const char *prog, enum ipb_log_level level) {
    log_prog = prog;
    log_level = level;
}

void ipb_log(enum ipb_log_level level, const char *fmt, ...) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    char line[4096];
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s%s%s\n", log_prog, level == IPB_LOG_INFO ? "" : names[level],
            level == IPB_LOG_INFO ? "" : ": ", line);
}
