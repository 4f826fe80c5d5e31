/* Unit tests for the filter of a dead kernel's stderr (supervisor/stderrnote.c): the known
 * noise of a kernel's start is left out, what may explain a death is kept, in order, and only
 * the last lines; and for the notes a kernel's start writes there (IPB_START_NOTE_MARK). */
#include <check.h>
#include <string.h>

#include "run_suite.h"
#include "stderrnote.h"

static char out[4096];

static const char *filter(const char *tail, int max_lines) {
    size_t n = ipb_stderr_relevant(tail, strlen(tail), max_lines, out, sizeof(out));
    ck_assert_uint_eq(n, strlen(out));
    return out;
}

START_TEST(drops_ipykernel_noise) {
    ck_assert_str_eq(filter("[IPKernelApp] WARNING | debugpy_stream undefined, debugging will not be enabled\n", 8),
                     "");
    ck_assert_str_eq(
        filter("/usr/lib/python3/dist-packages/traitlets/traitlets.py:1385: DeprecationWarning: Passing unrecognized "
               "arguments to super(Foo).__init__\n  warn(\n"
               "/usr/lib/python3/dist-packages/ipykernel/iostream.py:12: UserWarning: something\n"
               "    import x\n"
               "0.00s - Debugger warning: It seems that frozen modules are being used, which may\n"
               "0.00s - make the debugger miss breakpoints. Please pass -Xfrozen_modules=off\n"
               "\n",
               8),
        "");
}
END_TEST

START_TEST(keeps_what_explains) {
    const char *tail = "[IPKernelApp] WARNING | debugpy_stream undefined, debugging will not be enabled\n"
                       "Traceback (most recent call last):\n"
                       "  File \"/app/x.py\", line 1, in <module>\n"
                       "MemoryError\n"
                       "Fatal Python error: Segmentation fault\n"
                       "Killed\n";
    ck_assert_str_eq(filter(tail, 8), "Traceback (most recent call last):\n"
                                      "  File \"/app/x.py\", line 1, in <module>\n"
                                      "MemoryError\n"
                                      "Fatal Python error: Segmentation fault\n"
                                      "Killed\n");
    /* A warning of the user's own code, of a kind that may matter, is kept with its line. */
    ck_assert_str_eq(filter("/app/m.py:3: RuntimeWarning: overflow encountered\n  y = x * 1e308\n", 8),
                     "/app/m.py:3: RuntimeWarning: overflow encountered\n  y = x * 1e308\n");
}
END_TEST

START_TEST(keeps_last_lines_only) {
    ck_assert_str_eq(filter("a\nb\nc\nd\n", 2), "c\nd\n");
    ck_assert_str_eq(filter("a\n\n\nb\r\nc", 8), "a\nb\nc\n"); /* no final newline, CR and blanks */
    ck_assert_str_eq(filter("", 8), "");
    /* An indented line not under a dropped warning is kept (part of a traceback). */
    ck_assert_str_eq(filter("x.py:1: DeprecationWarning: d\n  src\nError: boom\n  detail\n", 8),
                     "Error: boom\n  detail\n");
}
END_TEST

START_TEST(kept_lines_are_text) {
    /* A NUL and bytes that are not UTF-8 become '?': the report goes into JSON. */
    const char tail[] = "Error: a\0b \xff\xfe caf\xc3\xa9\n";
    size_t n = ipb_stderr_relevant(tail, sizeof(tail) - 1, 8, out, sizeof(out));
    ck_assert_uint_eq(n, strlen(out));
    ck_assert_str_eq(out, "Error: a?b ?? caf\xc3\xa9\n");
}
END_TEST

START_TEST(bounded_output) {
    char small[8];
    size_t n = ipb_stderr_relevant("abcdef\nxyz\n", 11, 8, small, sizeof(small));
    ck_assert_uint_lt(n, sizeof(small));
    ck_assert_uint_eq(n, strlen(small));
    ck_assert_str_eq(small, "abcdef\n");
}
END_TEST

static const char *notes(const char *tail, int max_notes, size_t size) {
    static char small[64];
    char *o = size <= sizeof(small) ? small : out;
    size_t n = ipb_stderr_start_notes(tail, strlen(tail), max_notes, o, size);
    ck_assert_uint_eq(n, strlen(o));
    ck_assert_uint_lt(n, size);
    return o;
}

START_TEST(start_notes_are_the_marked_lines) {
    const char *tail = "[IPKernelApp] WARNING | debugpy_stream undefined\n"
                       "ipybox: note: /app could not be entered (Permission denied).\r\n"
                       "  ipybox: note: indented, not a note\n"
                       "x ipybox: note: not at the start\n"
                       "ipybox: note:    \n"
                       "ipybox: note: a second\tone \n"
                       "ipybox: note: a third\x1b[31m\n"
                       "ipybox: note: a fourth";
    ck_assert_str_eq(notes(tail, 3, sizeof(out)),
                     "/app could not be entered (Permission denied). a second?one a third?[31m");
    ck_assert_str_eq(notes(tail, 9, sizeof(out)),
                     "/app could not be entered (Permission denied). a second?one a third?[31m a fourth");
    ck_assert_str_eq(notes(tail, 0, sizeof(out)), "");
    ck_assert_str_eq(notes("no note\nipybox: note:\n", 3, sizeof(out)), "");
    ck_assert_str_eq(notes("", 3, sizeof(out)), "");
    /* Bytes of UTF-8 text are kept as they are; bytes that are not (a lone continuation, a cut
     * character, an overlong form, a surrogate) become '?', one each. */
    ck_assert_str_eq(notes("ipybox: note: caf\xc3\xa9\n", 3, sizeof(out)), "caf\xc3\xa9");
    ck_assert_str_eq(notes("ipybox: note: a\x80"
                           "b\xc3 \xc0\xaf \xed\xa0\x80 \xf0\x9f\x98\x80\n",
                           3, sizeof(out)),
                     "a?b? ?? ??? \xf0\x9f\x98\x80");
}
END_TEST

START_TEST(start_notes_bounded_whole) {
    /* A note that does not fit is left out whole, with those after it. */
    ck_assert_str_eq(notes("ipybox: note: first\nipybox: note: second\nipybox: note: x\n", 3, 12), "first");
    ck_assert_str_eq(notes("ipybox: note: 0123456789abc\n", 3, 12), "");
    ck_assert_str_eq(notes("ipybox: note: 0123456789a\n", 3, 12), "0123456789a");
    char one[1] = {'x'};
    ck_assert_uint_eq(ipb_stderr_start_notes("ipybox: note: a\n", 16, 3, one, sizeof(one)), 0);
    ck_assert_int_eq(one[0], '\0');
}
END_TEST

int main(void) {
    Suite *s = suite_create("stderrnote");
    TCase *tc = tcase_create("filter");
    tcase_add_test(tc, drops_ipykernel_noise);
    tcase_add_test(tc, keeps_what_explains);
    tcase_add_test(tc, keeps_last_lines_only);
    tcase_add_test(tc, bounded_output);
    tcase_add_test(tc, kept_lines_are_text);
    tcase_add_test(tc, start_notes_are_the_marked_lines);
    tcase_add_test(tc, start_notes_bounded_whole);
    suite_add_tcase(s, tc);
    return ipb_run_suite(s);
}
