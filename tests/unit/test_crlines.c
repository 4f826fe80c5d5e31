/* Unit tests for supervisor/crlines: carriage returns collapsed as a terminal shows them,
 * whole or in pieces cut anywhere (inside characters too), against a plain model. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crlines.h"
#include "run_suite.h"

/* Feeds text in pieces of `piece` bytes (0: whole) and finishes; returns the output. */
static char *collapse(const char *text, size_t len, size_t piece) {
    ipb_crlines c = {0};
    ipb_buf out = {0};
    if (!piece)
        piece = len ? len : 1;
    for (size_t off = 0; off < len; off += piece)
        ck_assert_int_eq(ipb_crlines_feed(&c, text + off, off + piece <= len ? piece : len - off, &out), 0);
    ck_assert_int_eq(ipb_crlines_finish(&c, &out), 0);
    ipb_crlines_free(&c);
    char *s = strndup(out.data ? out.data : "", out.len);
    ck_assert_uint_eq(strlen(s), out.len);
    ipb_buf_free(&out);
    return s;
}

static void expect(const char *in, const char *want) {
    for (size_t piece = 0; piece <= strlen(in); piece++) {
        char *got = collapse(in, strlen(in), piece);
        ck_assert_msg(!strcmp(got, want), "%s (pieces of %zu): got \"%s\", want \"%s\"", in, piece, got, want);
        free(got);
    }
}

START_TEST(plain_text_unchanged) {
    expect("", "");
    expect("hello\nworld\n", "hello\nworld\n");
    expect("no newline at the end", "no newline at the end");
}
END_TEST

START_TEST(carriage_return_overwrites) {
    expect("\r0\r1\r2", "2");
    expect("abcdef\rXY\n", "XYcdef\n"); /* a terminal keeps what is not overwritten */
    expect("50%\r100%\ndone\n", "100%\ndone\n");
    expect("a\rb\nc\rd\n", "b\nd\n");
}
END_TEST

START_TEST(crlf_is_newline) {
    expect("one\r\ntwo\r\n", "one\ntwo\n");
    expect("progress 100%\r\n", "progress 100%\n");
}
END_TEST

START_TEST(trailing_carriage_return_keeps_line) {
    expect("abc\r", "abc");
    expect("abc\r\r\r", "abc");
    expect("\r\r\n\r", "\n");
}
END_TEST

START_TEST(multibyte_characters_by_column) {
    /* é is two bytes, 😀 four: columns count characters. */
    expect("\xc3\xa9\xc3\xa9\xc3\xa9\rx\n", "x\xc3\xa9\xc3\xa9\n");
    expect("abc\r\xf0\x9f\x98\x80\n", "\xf0\x9f\x98\x80"
                                      "bc\n");
}
END_TEST

START_TEST(invalid_bytes_pass_through) {
    expect("\xff\xfe\n", "\xff\xfe\n");
    expect("\xc3x\n", "\xc3x\n");
    expect("ab\xe2\x82", "ab\xe2\x82"); /* cut short at the end */
    expect("\xe2\x82\rZ\n", "Z\x82\n"); /* each stray byte is a column */
    expect("ab\r\xc3", "\xc3"
                       "b"); /* cut short by the end: written at the cursor */
}
END_TEST

START_TEST(tqdm_like_2000_updates) {
    ipb_buf in = {0};
    for (int i = 0; i < 2000; i++)
        ipb_buf_appendf(&in, "\r%d", i);
    ipb_buf_append(&in, "\n", 1);
    char *got = collapse(in.data, in.len, 0);
    ck_assert_str_eq(got, "1999\n");
    free(got);
    got = collapse(in.data, in.len, 7);
    ck_assert_str_eq(got, "1999\n");
    free(got);
    ipb_buf_free(&in);
}
END_TEST

START_TEST(plain_prefix_only_whole_plain_lines) {
    ipb_crlines c = {0};
    ipb_buf out = {0};
    ck_assert_uint_eq(ipb_crlines_plain_prefix(&c, "a\nb\nc", 5), 4);
    ck_assert_uint_eq(ipb_crlines_plain_prefix(&c, "a\nb\rc\n", 6), 2);
    ck_assert_uint_eq(ipb_crlines_plain_prefix(&c, "\ra\n", 3), 0);
    ck_assert_uint_eq(ipb_crlines_plain_prefix(&c, "abc", 3), 0);
    ck_assert_int_eq(ipb_crlines_feed(&c, "held", 4, &out), 0);
    ck_assert_uint_eq(out.len, 0);
    ck_assert_uint_eq(ipb_crlines_plain_prefix(&c, "a\n", 2), 0); /* a line is held */
    ck_assert_int_eq(ipb_crlines_feed(&c, "\n", 1, &out), 0);
    ck_assert_uint_eq(ipb_crlines_plain_prefix(&c, "a\n", 2), 2);
    ipb_crlines_free(&c);
    ipb_buf_free(&out);
}
END_TEST

START_TEST(long_line_let_out_at_the_cap) {
    size_t n = IPB_CRLINES_HOLD_MAX + 10;
    char *text = malloc(n);
    memset(text, 'x', n);
    ipb_crlines c = {0};
    ipb_buf out = {0};
    ck_assert_int_eq(ipb_crlines_feed(&c, text, n, &out), 0);
    ck_assert_uint_eq(out.len, IPB_CRLINES_HOLD_MAX); /* bounded: the rest is held */
    ck_assert_int_eq(ipb_crlines_feed(&c, "\rAB\n", 4, &out), 0);
    ck_assert_uint_eq(out.len, IPB_CRLINES_HOLD_MAX + 11);
    ck_assert(!memcmp(out.data + IPB_CRLINES_HOLD_MAX, "ABxxxxxxxx\n", 11));
    ipb_crlines_free(&c);
    ipb_buf_free(&out);
    free(text);
}
END_TEST

/* The model: a terminal's lines, one character (its bytes) per column, quadratic and plain. */
#define MODEL_MAX 512
static size_t model(const char *const *toks, size_t n, char *out) {
    const char *line[MODEL_MAX];
    size_t len = 0, col = 0, o = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *t = i < n ? toks[i] : NULL;
        if (!t || !strcmp(t, "\n")) {
            for (size_t k = 0; k < len; k++) {
                strcpy(out + o, line[k]);
                o += strlen(line[k]);
            }
            if (t)
                out[o++] = '\n';
            len = col = 0;
        } else if (!strcmp(t, "\r")) {
            col = 0;
        } else {
            line[col] = t;
            if (col == len)
                len++;
            col++;
        }
    }
    out[o] = '\0';
    return o;
}

START_TEST(random_pieces_match_the_model) {
    /* Stray bytes too: none of these starts with a continuation byte, so a lone lead byte
     * stays one column, as the model counts it. */
    static const char *const alphabet[] = {"a",  "b",  "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                           "\r", "\n", " ",        "\xff",         "\xc3"};
    uint32_t rng = 12345;
    for (int round = 0; round < 3000; round++) {
        const char *toks[300];
        char text[300 * 4 + 1];
        size_t n = 0, tl = 0;
        rng = rng * 1103515245u + 12345u;
        size_t count = (rng >> 16) % 300;
        for (; n < count; n++) {
            rng = rng * 1103515245u + 12345u;
            toks[n] = alphabet[(rng >> 16) % 10];
            strcpy(text + tl, toks[n]);
            tl += strlen(toks[n]);
        }
        char want[300 * 4 + 1];
        model(toks, n, want);
        /* Pieces of random sizes, cut anywhere (inside characters too). */
        ipb_crlines c = {0};
        ipb_buf out = {0};
        for (size_t off = 0; off < tl;) {
            rng = rng * 1103515245u + 12345u;
            size_t p = 1 + (rng >> 16) % 9;
            if (off + p > tl)
                p = tl - off;
            ck_assert_int_eq(ipb_crlines_feed(&c, text + off, p, &out), 0);
            off += p;
        }
        ck_assert_int_eq(ipb_crlines_finish(&c, &out), 0);
        ck_assert_msg(out.len == strlen(want) && !memcmp(out.data ? out.data : "", want, out.len),
                      "round %d: output differs from the model", round);
        ipb_crlines_free(&c);
        ipb_buf_free(&out);
    }
}
END_TEST

static Suite *crlines_suite(void) {
    Suite *s = suite_create("crlines");
    TCase *t = tcase_create("collapse");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, plain_text_unchanged);
    tcase_add_test(t, carriage_return_overwrites);
    tcase_add_test(t, crlf_is_newline);
    tcase_add_test(t, trailing_carriage_return_keeps_line);
    tcase_add_test(t, multibyte_characters_by_column);
    tcase_add_test(t, invalid_bytes_pass_through);
    tcase_add_test(t, tqdm_like_2000_updates);
    tcase_add_test(t, plain_prefix_only_whole_plain_lines);
    tcase_add_test(t, long_line_let_out_at_the_cap);
    tcase_add_test(t, random_pieces_match_the_model);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(crlines_suite()); }
