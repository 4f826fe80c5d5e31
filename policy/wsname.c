#include "wsname.h"

#include <stdio.h>
#include <string.h>

bool ipb_workspace_is_name(const char *v) { return !strchr(v, '/'); }

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

int ipb_workspace_name_check(const char *what, const char *name, ipb_error **err) {
    size_t n = strlen(name);
    if (n == 0)
        return ipb_error_set(err, 0, "%s: empty; give a name (letters, digits, '.', '_', '-') or an absolute path",
                             what);
    if (n > IPB_WS_NAME_MAX)
        return ipb_error_set(err, 0, "%s '%.*s...': a workspace name has at most %d characters", what, 32, name,
                             IPB_WS_NAME_MAX);
    if (name[0] == '.' || name[0] == '-')
        return ipb_error_set(err, 0,
                             "%s '%s': a workspace name must not start with '%c' (a host directory is "
                             "named by an absolute path)",
                             what, name, name[0]);
    for (size_t i = 0; i < n; i++)
        if (!name_char(name[i]))
            return ipb_error_set(err, 0,
                                 "%s '%s': a workspace name has only letters, digits, '.', '_' and '-' (a "
                                 "host directory is named by an absolute path)",
                                 what, name);
    return 0;
}

int ipb_workspace_unnamed_name(time_t t, const char *id, char *buf, size_t size) {
    struct tm tm;
    if (strlen(id) != 16 || !gmtime_r(&t, &tm))
        return -1;
    int n = snprintf(buf, size, "%04d-%02d-%02dT%02d%02d%02dZ-%s", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, id);
    return n == IPB_WS_UNNAMED_LEN && (size_t)n < size ? 0 : -1;
}

static bool is_hex16(const char *s) {
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[16] == '\0';
}

/* Digits at s[0..n): their value, or -1. */
static int digits(const char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

bool ipb_workspace_unnamed_id(const char *name, char id[17], time_t *made) {
    if (made)
        *made = 0;
    size_t n = strlen(name);
    if (n == 16 && is_hex16(name)) {
        memcpy(id, name, 17);
        return true;
    }
    /* 0123456789012345678 */
    /* YYYY-MM-DDTHHMMSSZ- */
    if (n != IPB_WS_UNNAMED_LEN || name[4] != '-' || name[7] != '-' || name[10] != 'T' || name[17] != 'Z' ||
        name[18] != '-' || !is_hex16(name + 19))
        return false;
    int y = digits(name, 4), mo = digits(name + 5, 2), d = digits(name + 8, 2), h = digits(name + 11, 2),
        mi = digits(name + 13, 2), s = digits(name + 15, 2);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60)
        return false;
    memcpy(id, name + 19, 17);
    if (made) {
        struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = s};
        *made = timegm(&tm);
    }
    return true;
}
