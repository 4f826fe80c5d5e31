/* The check of a tool's name before it is shown to a person (toolname.h). */
#include "toolname.h"

#include <stdint.h>

/* The next code point of s (n bytes left), its length in *adv; -1 when not UTF-8. */
static int32_t next_cp(const unsigned char *s, size_t n, size_t *adv) {
    unsigned char c = s[0];
    size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!need || need > n)
        return -1;
    int32_t cp = need == 1 ? c : need == 2 ? (c & 0x1f) : need == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return -1;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const int32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[need] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return -1;
    *adv = need;
    return cp;
}

/* Format characters that reorder or hide text (Unicode category Cf among them, the bidi
 * controls above all), and the separators that break a line. */
static bool hides(int32_t cp) {
    return cp == 0xad || cp == 0x61c || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff ||
           (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe007f);
}

const char *ipb_tool_name_problem(const char *name, size_t len) {
    if (len == 0)
        return "is empty";
    if (len > IPB_TOOL_NAME_MAX)
        return "is longer than 256 bytes";
    const unsigned char *s = (const unsigned char *)name;
    for (size_t i = 0, adv = 0; i < len; i += adv) {
        int32_t cp = next_cp(s + i, len - i, &adv);
        if (cp < 0)
            return "is not UTF-8";
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
            return "contains a control character (a line break, a terminal escape, ...)";
        if (hides(cp))
            return "contains a character that reorders or hides text (a direction mark or override, an invisible "
                   "format character, a line separator)";
        if (cp == '\'' || cp == '"' || cp == '`')
            return "contains a quote";
    }
    return NULL;
}
