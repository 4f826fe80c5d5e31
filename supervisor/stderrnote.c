/* The filter of a dead kernel's stderr tail (stderrnote.h). */
#include "stderrnote.h"

#include "jsonfast.h"

#include <stdbool.h>
#include <string.h>

static bool starts(const char *s, size_t n, const char *prefix) {
    size_t pl = strlen(prefix);
    return n >= pl && !memcmp(s, prefix, pl);
}

/* Copies s[0..n) to out as text a JSON string can hold whole: a byte that starts no valid UTF-8
 * character, a NUL, and (ctl) any control character become '?'. Writes n bytes. */
static void copy_text(char *out, const char *s, size_t n, bool ctl) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = u[i] < 0x80 ? 1 : ipb_utf8_seq(u + i, u + n);
        if (l == 0 || u[i] == 0 || (ctl && l == 1 && (u[i] < 0x20 || u[i] == 0x7f))) {
            out[i++] = '?';
            continue;
        }
        memcpy(out + i, s + i, l);
        i += l;
    }
}

static bool contains(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

/* "PATH:LINE: CATEGORY: message", as warnings.formatwarning writes it; *noisy when it is of
 * a kind or from a package that never explains a death. */
static bool python_warning(const char *s, size_t n, bool *noisy) {
    static const char *const kinds[] = {
        ": DeprecationWarning: ", ": PendingDeprecationWarning: ", ": FutureWarning: ", NULL};
    static const char *const pkgs[] = {"/ipykernel/", "/traitlets/", "/jupyter_client/", "/jupyter_core/",     "/zmq/",
                                       "/debugpy/",   "/tornado/",   "/IPython/",        "ipykernel_launcher", NULL};
    const char *w = memmem(s, n, "Warning: ", 9);
    if (!w || s[0] == ' ')
        return false;
    /* ":LINE: CATEGORY" before it */
    const char *colon = memchr(s, ':', (size_t)(w - s));
    if (!colon || colon[1] < '0' || colon[1] > '9')
        return false;
    *noisy = false;
    for (const char *const *k = kinds; *k; k++)
        *noisy |= contains(s, n, *k);
    for (const char *const *p = pkgs; *p; p++)
        *noisy |= contains(s, (size_t)(w - s), *p);
    return true;
}

static bool noise(const char *s, size_t n) {
    if (contains(s, n, "] WARNING | debugpy_stream undefined"))
        return true;
    /* pydevd: "0.00s - Debugger warning: It seems that frozen modules are being used, ..." */
    size_t d = 0;
    while (d < n && s[d] >= '0' && s[d] <= '9')
        d++;
    if (d && starts(s + d, n - d, ".") && contains(s, n, "s - ") &&
        (contains(s, n, "Debugger warning") || contains(s, n, "frozen modules") ||
         contains(s, n, "PYDEVD_DISABLE_FILE_VALIDATION") || contains(s, n, "-Xfrozen_modules") ||
         contains(s, n, "-X frozen_modules")))
        return true;
    return false;
}

size_t ipb_stderr_relevant(const char *tail, size_t len, int max_lines, char *out, size_t size) {
    if (!size)
        return 0;
    /* Marks of the kept lines, front to back, then the last max_lines of them copied. */
    enum { MAXL = 512 };
    size_t start[MAXL], llen[MAXL];
    int kept = 0;
    bool in_noisy_warning = false;
    for (size_t pos = 0; pos < len;) {
        const char *s = tail + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        size_t t = n;
        while (t && (s[t - 1] == '\r' || s[t - 1] == ' ' || s[t - 1] == '\t'))
            t--;
        if (t == 0)
            continue;
        bool noisy = false;
        if (python_warning(s, t, &noisy)) {
            in_noisy_warning = noisy;
            if (noisy)
                continue;
        } else if (in_noisy_warning && s[0] == ' ') {
            continue; /* the source line under a dropped warning */
        } else {
            in_noisy_warning = false;
            if (noise(s, t))
                continue;
        }
        if (kept == MAXL) {
            memmove(start, start + 1, (MAXL - 1) * sizeof(*start));
            memmove(llen, llen + 1, (MAXL - 1) * sizeof(*llen));
            kept--;
        }
        start[kept] = (size_t)(s - tail);
        llen[kept] = t;
        kept++;
    }
    size_t w = 0;
    for (int i = kept > max_lines ? kept - max_lines : 0; i < kept; i++) {
        size_t n = llen[i];
        if (w + n + 2 > size)
            break;
        copy_text(out + w, tail + start[i], n, false);
        w += n;
        out[w++] = '\n';
    }
    out[w] = '\0';
    return w;
}

size_t ipb_stderr_start_notes(const char *tail, size_t len, int max_notes, char *out, size_t size) {
    if (!size)
        return 0;
    static const char mark[] = IPB_START_NOTE_MARK;
    size_t w = 0;
    int taken = 0;
    for (size_t pos = 0; pos < len && taken < max_notes;) {
        const char *s = tail + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        if (!starts(s, n, mark))
            continue;
        s += sizeof(mark) - 1;
        n -= sizeof(mark) - 1;
        while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        if (!n)
            continue;
        size_t sep = w ? 1 : 0;
        if (w + sep + n + 1 > size)
            break;
        if (sep)
            out[w++] = ' ';
        copy_text(out + w, s, n, true);
        w += n;
        taken++;
    }
    out[w] = '\0';
    return w;
}
