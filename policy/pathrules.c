#include "pathrules.h"

#include <string.h>

int ipb_check_relpath(const char *p, size_t len, ipb_error **err) {
    if (!p || len == 0)
        return ipb_error_set(err, 0, "the path is empty");
    if (memchr(p, '\0', len))
        return ipb_error_set(err, 0, "the path contains a NUL byte");
    if (len > IPB_RELPATH_MAX)
        return ipb_error_set(err, 0, "the path is longer than %d bytes", IPB_RELPATH_MAX);
    if (p[0] == '/')
        return ipb_error_set(err, 0, "'%.*s' is absolute; give a path relative to /app", (int)len, p);
    size_t real_components = 0;
    const char *s = p, *end = p + len;
    while (s < end) {
        const char *slash = memchr(s, '/', (size_t)(end - s));
        size_t clen = slash ? (size_t)(slash - s) : (size_t)(end - s);
        if (clen == 2 && s[0] == '.' && s[1] == '.')
            return ipb_error_set(err, 0, "'%.*s' contains '..'; paths must stay inside /app", (int)len, p);
        if (clen > 255)
            return ipb_error_set(err, 0, "'%.*s' has a name longer than 255 bytes", (int)len, p);
        if (clen > 0 && !(clen == 1 && s[0] == '.'))
            real_components++;
        s += clen + 1;
    }
    if (real_components == 0)
        return ipb_error_set(err, 0, "'%.*s' names /app itself, not a file in it", (int)len, p);
    return 0;
}

bool ipb_path_is_under(const char *path, const char *dir) {
    size_t dl = strlen(dir);
    if (dl == 1 && dir[0] == '/')
        return path[0] == '/';
    if (strncmp(path, dir, dl) != 0)
        return false;
    return path[dl] == '\0' || path[dl] == '/';
}
