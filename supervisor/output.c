#include "output.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Characters, counting every byte that does not continue a UTF-8 sequence. */
static size_t utf8_count(const char *s, size_t len) {
    size_t cont = 0, i = 0;
    /* Eight bytes at a time: a continuation byte has bit 7 set and bit 6 clear. The marks
     * (one bit per byte, moved to bit 0) are summed by a multiplication into the top byte;
     * without -mpopcnt, __builtin_popcountll is a library call and was slower. */
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (!(w & 0x8080808080808080ULL))
            continue;
        uint64_t marks = (w & ~(w << 1) & 0x8080808080808080ULL) >> 7;
        cont += (size_t)((marks * 0x0101010101010101ULL) >> 56);
    }
    for (; i < len; i++)
        cont += ((unsigned char)s[i] & 0xC0) == 0x80;
    return len - cont;
}

void ipb_output_init(ipb_output *o, size_t limit) {
    memset(o, 0, sizeof(*o));
    o->limit = limit < 16 ? 16 : limit;
}

int ipb_output_append(ipb_output *o, const char *text, size_t len) {
    size_t head_cap = o->limit / 2;
    size_t tail_keep = o->limit - head_cap;
    o->total += len;
    o->total_chars += utf8_count(text, len);
    if (o->head.len < head_cap) {
        size_t take = head_cap - o->head.len;
        if (take > len)
            take = len;
        int r = ipb_buf_append(&o->head, text, take);
        if (r < 0)
            return r;
        text += take;
        len -= take;
    }
    if (len == 0)
        return 0;
    /* Of a large piece only its end can survive in the tail. */
    if (len > tail_keep) {
        ipb_buf_reset(&o->tail);
        text += len - tail_keep;
        len = tail_keep;
    }
    int r = ipb_buf_append(&o->tail, text, len);
    if (r < 0)
        return r;
    /* Amortised trimming: let the tail grow to twice what we keep. */
    if (o->tail.len > 2 * tail_keep + 4096)
        ipb_buf_consume(&o->tail, o->tail.len - tail_keep);
    return 0;
}

static size_t utf8_back(const char *s, size_t len) {
    /* Largest prefix length that ends on a character boundary. */
    size_t i = len;
    size_t back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0)
        return len;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return (back + 1 == need || need == 1) ? len : i - 1;
}

static size_t utf8_forward(const char *s, size_t len) {
    size_t i = 0;
    while (i < len && i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i++;
    return i;
}

char *ipb_output_finish(ipb_output *o) {
    ipb_buf out = {0};
    size_t tail_keep = o->limit - o->limit / 2;
    if (o->total <= o->limit) {
        ipb_buf_append(&out, o->head.data ? o->head.data : "", o->head.len);
        ipb_buf_append(&out, o->tail.data ? o->tail.data : "", o->tail.len);
    } else {
        size_t hl = utf8_back(o->head.data, o->head.len);
        const char *t = o->tail.data + (o->tail.len > tail_keep ? o->tail.len - tail_keep : 0);
        size_t tl = o->tail.len > tail_keep ? tail_keep : o->tail.len;
        size_t skip = utf8_forward(t, tl);
        t += skip;
        tl -= skip;
        size_t head_chars = utf8_count(o->head.data, hl), tail_chars = utf8_count(t, tl);
        size_t cut = o->total_chars - head_chars - tail_chars;
        ipb_buf_append(&out, o->head.data, hl);
        ipb_buf_appendf(&out,
                        "\n[... %zu characters of output cut: the output had %zu in all; "
                        "the first %zu and the last %zu are shown ...]\n",
                        cut, o->total_chars, head_chars, tail_chars);
        ipb_buf_append(&out, t, tl);
    }
    char *s = out.data ? out.data : strdup("");
    return s;
}

void ipb_output_free(ipb_output *o) {
    ipb_buf_free(&o->head);
    ipb_buf_free(&o->tail);
}

size_t ipb_strip_ansi(char *s, size_t len) {
    size_t r = 0, w = 0;
    while (r < len) {
        unsigned char c = (unsigned char)s[r];
        if (c != 0x1b) {
            s[w++] = s[r++];
            continue;
        }
        if (r + 1 >= len) {
            r++;
            break;
        }
        unsigned char n = (unsigned char)s[r + 1];
        if (n == '[') {
            /* CSI: parameters and intermediates, then one final byte in 0x40-0x7e */
            r += 2;
            while (r < len && !((unsigned char)s[r] >= 0x40 && (unsigned char)s[r] <= 0x7e))
                r++;
            if (r < len)
                r++;
        } else if (n == ']') {
            /* OSC: up to BEL or ESC \ */
            r += 2;
            while (r < len && s[r] != '\a' && !(s[r] == 0x1b && r + 1 < len && s[r + 1] == '\\'))
                r++;
            if (r < len)
                r += s[r] == '\a' ? 1 : 2;
        } else if (n >= 0x20 && n <= 0x2f) {
            /* nF escape (ECMA-48): intermediate bytes 0x20-0x2f, then one final byte, as in
             * "ESC ( B" that tput sgr0 and curses emit */
            r += 1;
            while (r < len && (unsigned char)s[r] >= 0x20 && (unsigned char)s[r] <= 0x2f)
                r++;
            if (r < len && (unsigned char)s[r] >= 0x30 && (unsigned char)s[r] <= 0x7e)
                r++;
        } else if (n >= 0x30 && n <= 0x7e) {
            /* two-byte escape: ESC and one final byte */
            r += 2;
        } else {
            /* a lone ESC: drop only it; what follows may be a control character or start a
             * UTF-8 character, and dropping a lead byte would leave invalid UTF-8 */
            r++;
        }
    }
    return w;
}
