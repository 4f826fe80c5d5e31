#include "pyenv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

/* An absolute path without '.', '..' or empty components, nor control characters. */
static bool plain_abs(const char *p, size_t n) {
    if (n == 0 || p[0] != '/' || n >= 4096)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return false;
    for (size_t i = 1; i < n;) {
        size_t e = i;
        while (e < n && p[e] != '/')
            e++;
        size_t c = e - i;
        if ((c == 0 && e < n) || (c == 1 && p[i] == '.') || (c == 2 && p[i] == '.' && p[i + 1] == '.'))
            return false;
        i = e + 1;
    }
    return true;
}

int ipb_pyvenv_home(const char *text, size_t len, const char *path, char **ret_home, ipb_error **err) {
    if (len > IPB_PYVENV_MAX)
        return ipb_error_set(err, 0, "%s: over %u bytes, not a venv's pyvenv.cfg", path, IPB_PYVENV_MAX);
    if (memchr(text, '\0', len))
        return ipb_error_set(err, 0, "%s: holds a NUL byte, not a venv's pyvenv.cfg", path);
    for (size_t at = 0; at < len;) {
        const char *line = text + at;
        const char *nl = memchr(line, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - line) : len - at;
        at += ll + 1;
        const char *eq = memchr(line, '=', ll);
        if (!eq)
            continue;
        const char *k = line, *ke = eq;
        while (k < ke && blank(*k))
            k++;
        while (ke > k && blank(ke[-1]))
            ke--;
        if (ke - k != 4 || strncasecmp(k, "home", 4))
            continue;
        const char *v = eq + 1, *ve = line + ll;
        while (v < ve && blank(*v))
            v++;
        while (ve > v && blank(ve[-1]))
            ve--;
        size_t vl = (size_t)(ve - v);
        /* A trailing '/' aside, as Python takes the directory either way. */
        while (vl > 1 && v[vl - 1] == '/')
            vl--;
        if (!plain_abs(v, vl))
            return ipb_error_set(err, 0, "%s: home = '%.*s' is not an absolute path (without '.', '..' or '//')", path,
                                 (int)(vl > 200 ? 200 : vl), v);
        char *h = strndup(v, vl);
        if (!h)
            return ipb_error_set(err, ENOMEM, "%s", path);
        *ret_home = h;
        return 0;
    }
    return ipb_error_set(err, 0,
                         "%s has no 'home = DIR' line (the base interpreter's directory): not a venv made by "
                         "`python -m venv`, virtualenv or uv",
                         path);
}

char *ipb_python_prefix_of(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n >= 4 && !strncmp(dir + n - 4, "/bin", 4))
        return strndup(dir, n == 4 ? 1 : n - 4);
    return strndup(dir, n);
}

bool ipb_path_within_tree(const char *p, const char *tree) {
    size_t n = strlen(tree);
    while (n > 1 && tree[n - 1] == '/')
        n--;
    if (n == 1 && tree[0] == '/')
        return p[0] == '/';
    return !strncmp(p, tree, n) && (p[n] == '\0' || p[n] == '/');
}

bool ipb_python_in_system_dirs(const char *p) {
    static const char *const sys_dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL};
    for (const char *const *s = sys_dirs; *s; s++)
        if (ipb_path_within_tree(p, *s))
            return true;
    return false;
}

const char *ipb_python_place_conflict(const char *prefix, bool *ret_inside) {
    static const char *const own[] = {"/etc",        "/proc",         "/dev", "/sys",     "/run", "/app",
                                      "/opt/ipybox", "/home/appuser", "/tmp", "/var/tmp", NULL};
    if (!strcmp(prefix, "/")) {
        *ret_inside = false;
        return "/";
    }
    for (const char *const *p = own; *p; p++) {
        if (ipb_path_within_tree(prefix, *p)) {
            *ret_inside = true;
            return *p;
        }
        if (ipb_path_within_tree(*p, prefix)) {
            *ret_inside = false;
            return *p;
        }
    }
    return NULL;
}
