/* Unit tests for supervisor/jsonrpc: message classification, line framing over pipes (with
 * the 16 MiB cap) and the response builders.
 * Tests named fixed_bug_* are regression tests for bugs these suites found. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_suite.h"
#include "fdio.h"
#include "jsonrpc.h"

/* ---- parse ---- */

static void parse(const char *line, jrpc_msg *m) { jrpc_parse(line, strlen(line), m); }

static void expect_invalid(const char *line, int code) {
    jrpc_msg m;
    parse(line, &m);
    ck_assert_msg(m.kind == JRPC_INVALID, "'%s' was accepted as kind %d", line, m.kind);
    ck_assert_msg(m.error_code == code, "'%s' gave error %d, expected %d", line, m.error_code, code);
    ck_assert_msg(m.error_msg && *m.error_msg, "'%s': no error message", line);
    jrpc_msg_free(&m);
}

START_TEST(parse_request) {
    jrpc_msg m;
    parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}", &m);
    ck_assert_int_eq(m.kind, JRPC_REQUEST);
    ck_assert(json_is_integer(m.id));
    ck_assert_int_eq(json_integer_value(m.id), 1);
    ck_assert_str_eq(m.method, "tools/call");
    ck_assert(json_is_object(m.params));
    ck_assert_str_eq(json_string_value(json_object_get(m.params, "name")), "x");
    jrpc_msg_free(&m);
    ck_assert_ptr_null(m.root);

    parse("{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"ping\"}", &m);
    ck_assert_int_eq(m.kind, JRPC_REQUEST);
    ck_assert_str_eq(json_string_value(m.id), "abc");
    ck_assert_ptr_null(m.params);
    jrpc_msg_free(&m);

    parse("  {\"method\":\"m\",\"params\":[1,2],\"id\":-7,\"jsonrpc\":\"2.0\"}\r\n", &m);
    ck_assert_int_eq(m.kind, JRPC_REQUEST);
    ck_assert_int_eq(json_integer_value(m.id), -7);
    ck_assert(json_is_array(m.params));
    jrpc_msg_free(&m);
}
END_TEST

START_TEST(parse_notification) {
    jrpc_msg m;
    parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m);
    ck_assert_int_eq(m.kind, JRPC_NOTIFICATION);
    ck_assert_ptr_null(m.id);
    ck_assert_str_eq(m.method, "notifications/initialized");
    jrpc_msg_free(&m);
    parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}", &m);
    ck_assert_int_eq(m.kind, JRPC_NOTIFICATION);
    ck_assert(json_is_object(m.params));
    jrpc_msg_free(&m);
}
END_TEST

START_TEST(parse_response) {
    jrpc_msg m;
    parse("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}", &m);
    ck_assert_int_eq(m.kind, JRPC_RESPONSE);
    ck_assert_int_eq(json_integer_value(m.id), 5);
    ck_assert_ptr_null(m.method);
    jrpc_msg_free(&m);
    parse("{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"error\":{\"code\":-1,\"message\":\"no\"}}", &m);
    ck_assert_int_eq(m.kind, JRPC_RESPONSE);
    jrpc_msg_free(&m);
    /* neither method nor result/error */
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":5}", JRPC_INVALID_REQUEST);
}
END_TEST

START_TEST(parse_invalid_json) {
    static const char *const bad[] = {"",
                                      " ",
                                      "{",
                                      "{\"jsonrpc\":\"2.0\",}",
                                      "nul",
                                      "{}x",
                                      "{\"a\":1}{\"b\":2}",
                                      "{'jsonrpc':'2.0'}",
                                      "{\"a\":1,\"a\":2}" /* duplicate keys */};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        jrpc_msg m;
        parse(bad[i], &m);
        ck_assert_msg(m.kind == JRPC_INVALID && m.error_code == JRPC_PARSE_ERROR, "'%s': kind %d code %d", bad[i],
                      m.kind, m.error_code);
        ck_assert_int_eq(m.error_code, -32700);
        ck_assert_ptr_null(m.root);
        ck_assert_ptr_null(m.id);
        jrpc_msg_free(&m);
    }
}
END_TEST

START_TEST(parse_non_objects) {
    expect_invalid("[]", JRPC_INVALID_REQUEST);
    expect_invalid("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", JRPC_INVALID_REQUEST);
    expect_invalid("1", JRPC_INVALID_REQUEST);
    expect_invalid("\"str\"", JRPC_INVALID_REQUEST);
    expect_invalid("null", JRPC_INVALID_REQUEST);
    expect_invalid("true", JRPC_INVALID_REQUEST);
}
END_TEST

START_TEST(parse_bad_version) {
    expect_invalid("{\"id\":1,\"method\":\"ping\"}", JRPC_INVALID_REQUEST);
    expect_invalid("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", JRPC_INVALID_REQUEST);
    expect_invalid("{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}", JRPC_INVALID_REQUEST);
    expect_invalid("{\"jsonrpc\":\"2.0 \",\"id\":1,\"method\":\"ping\"}", JRPC_INVALID_REQUEST);
    /* the id survives, so the error response can carry it */
    jrpc_msg m;
    parse("{\"jsonrpc\":\"1.0\",\"id\":9,\"method\":\"ping\"}", &m);
    ck_assert_int_eq(m.kind, JRPC_INVALID);
    ck_assert_ptr_nonnull(m.id);
    ck_assert_int_eq(json_integer_value(m.id), 9);
    jrpc_msg_free(&m);
}
END_TEST

START_TEST(parse_bad_ids) {
    static const char *const ids[] = {"1.5", "true", "false", "{}", "[]", "[1]", "1e3"};
    for (size_t i = 0; i < sizeof(ids) / sizeof(*ids); i++) {
        char line[128];
        snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", ids[i]);
        jrpc_msg m;
        parse(line, &m);
        ck_assert_msg(m.kind == JRPC_INVALID && m.error_code == JRPC_INVALID_REQUEST, "id %s accepted", ids[i]);
        ck_assert_ptr_null(m.id); /* a bad id is not echoed back */
        jrpc_msg_free(&m);
    }
}
END_TEST

START_TEST(parse_bad_method_and_params) {
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", JRPC_INVALID_REQUEST);
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":null}", JRPC_INVALID_REQUEST);
    static const char *const params[] = {"\"s\"", "1", "true", "null", "2.5"};
    for (size_t i = 0; i < sizeof(params) / sizeof(*params); i++) {
        char line[128];
        snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":%s}", params[i]);
        expect_invalid(line, JRPC_INVALID_REQUEST);
    }
}
END_TEST

START_TEST(parse_respects_length) {
    const char *line = "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}GARBAGE";
    jrpc_msg m;
    jrpc_parse(line, strlen(line) - 7, &m);
    ck_assert_int_eq(m.kind, JRPC_NOTIFICATION);
    jrpc_msg_free(&m);
    jrpc_parse(line, strlen(line), &m);
    ck_assert_int_eq(m.error_code, JRPC_PARSE_ERROR);
    jrpc_msg_free(&m);
}
END_TEST

/* ---- builders ---- */

START_TEST(builders) {
    json_t *id = json_integer(42);
    json_t *res = jrpc_result(id, json_pack("{s:s}", "k", "line1\nline2"));
    size_t len = 0;
    char *s = jrpc_dump(res, &len);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"k\":\"line1\\nline2\"}}\n");
    ck_assert_uint_eq(len, strlen(s));
    ck_assert_ptr_eq(memchr(s, '\n', len), s + len - 1); /* one line */
    free(s);
    json_decref(res);
    ck_assert_int_eq(id->refcount, 1); /* the id was borrowed */

    json_t *err = jrpc_error(id, JRPC_METHOD_NOT_FOUND, "Method not found: 'x'");
    s = jrpc_dump(err, &len);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"id\":42,\"error\":{\"code\":-32601,\"message\":\"Method not found: "
                        "'x'\"}}\n");
    free(s);
    json_decref(err);
    json_decref(id);

    err = jrpc_error(NULL, JRPC_PARSE_ERROR, "Parse error");
    ck_assert(json_is_null(json_object_get(err, "id")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(err, "error"), "code")), -32700);
    json_decref(err);

    res = jrpc_result(NULL, json_object());
    ck_assert(json_is_null(json_object_get(res, "id")));
    json_decref(res);

    json_t *n = jrpc_notification("notifications/progress", json_pack("{s:i}", "progress", 3));
    s = jrpc_dump(n, &len);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":3}}\n");
    free(s);
    json_decref(n);
}
END_TEST

/* ---- reader ---- */

static int pfd[2] = {-1, -1};
static jrpc_reader rd;

static void pipe_setup(void) {
    ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
    ck_assert_int_eq(ipb_set_nonblock(pfd[0], 1), 0);
    memset(&rd, 0, sizeof(rd));
}

static void pipe_teardown(void) {
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    pfd[0] = pfd[1] = -1;
    jrpc_reader_free(&rd);
}

static void feed(const char *s, size_t len) {
    ck_assert_int_eq(ipb_write_all(pfd[1], s, len), 0);
    ck_assert_int_eq(jrpc_reader_fill(&rd, pfd[0]), 0);
}
#define FEED(lit) feed(lit, sizeof(lit) - 1)

static void close_writer(void) {
    close(pfd[1]);
    pfd[1] = -1;
    ck_assert_int_eq(jrpc_reader_fill(&rd, pfd[0]), 0);
    ck_assert(rd.eof);
}

static void expect_line(const char *expect, size_t expect_len) {
    char *line = NULL;
    size_t len = 0;
    int r = jrpc_reader_next(&rd, &line, &len);
    ck_assert_msg(r == 1, "expected the line '%s', got %d", expect, r);
    ck_assert_uint_eq(len, expect_len);
    ck_assert_int_eq(memcmp(line, expect, len), 0);
    ck_assert_int_eq(line[len], '\0');
}
#define EXPECT_LINE(lit) expect_line(lit, sizeof(lit) - 1)

static void expect_none(void) {
    char *line = NULL;
    size_t len = 0;
    int r = jrpc_reader_next(&rd, &line, &len);
    ck_assert_msg(r == 0, "expected no complete line, got %d", r);
}

START_TEST(reader_several_lines_per_read) {
    FEED("{\"a\":1}\n{\"b\":2}\n\n{\"c\":3}\n");
    EXPECT_LINE("{\"a\":1}");
    EXPECT_LINE("{\"b\":2}");
    EXPECT_LINE(""); /* empty lines are reported; the server skips them */
    EXPECT_LINE("{\"c\":3}");
    expect_none();
    ck_assert(!rd.eof);
}
END_TEST

START_TEST(reader_line_split_across_reads) {
    FEED("{\"method\":");
    expect_none();
    FEED("\"ping\"");
    expect_none();
    FEED("}\n{\"next\"");
    EXPECT_LINE("{\"method\":\"ping\"}");
    expect_none();
    FEED(":1}\n");
    EXPECT_LINE("{\"next\":1}");
    expect_none();
}
END_TEST

START_TEST(reader_crlf_and_nul) {
    FEED("one\r\ntwo\r\n\r\nthree\rx\n");
    EXPECT_LINE("one");
    EXPECT_LINE("two");
    EXPECT_LINE("");
    EXPECT_LINE("three\rx"); /* only a CR right before the LF goes */
    FEED("nul\0inside\n");
    EXPECT_LINE("nul\0inside");
}
END_TEST

START_TEST(reader_last_line_without_newline) {
    FEED("first\nlast");
    EXPECT_LINE("first");
    expect_none(); /* could still grow */
    close_writer();
    EXPECT_LINE("last");
    expect_none();
    expect_none();
}
END_TEST

START_TEST(reader_eof_on_empty) {
    close_writer();
    expect_none();
    ck_assert(rd.eof);
}
END_TEST

START_TEST(reader_nothing_available) {
    /* non-blocking fd with nothing to read: fill returns at once */
    ck_assert_int_eq(jrpc_reader_fill(&rd, pfd[0]), 0);
    ck_assert(!rd.eof);
    expect_none();
    ck_assert_int_lt(jrpc_reader_fill(&rd, -1), 0);
}
END_TEST

/* Drains complete lines: counts -E2BIG results and remembers the last good line. */
static void drain(int *e2big, int *good, char *last, size_t last_size) {
    for (;;) {
        char *line;
        size_t len;
        int r = jrpc_reader_next(&rd, &line, &len);
        if (r == 0)
            return;
        if (r == -E2BIG) {
            (*e2big)++;
            continue;
        }
        ck_assert_int_eq(r, 1);
        ck_assert_msg(len < last_size, "a %zu-byte line came through", len);
        memcpy(last, line, len + 1);
        (*good)++;
    }
}

START_TEST(reader_oversized_line_then_next_line) {
    /* The writer is this process, in steps: the reader sees the cap crossed before the
     * newline arrives, drops what it has, and discards the rest of the line. */
    ck_assert_int_eq(ipb_set_nonblock(pfd[1], 1), 0);
    (void)fcntl(pfd[1], F_SETPIPE_SZ, 1 << 20);
    static char chunk[1 << 16];
    memset(chunk, 'a', sizeof(chunk));
    size_t total = JRPC_MAX_LINE + 200000, written = 0;
    int e2big = 0, good = 0;
    char last[64] = "";
    while (written < total) {
        size_t want = total - written < sizeof(chunk) ? total - written : sizeof(chunk);
        ssize_t n = write(pfd[1], chunk, want);
        if (n > 0)
            written += (size_t)n;
        ck_assert_int_eq(jrpc_reader_fill(&rd, pfd[0]), 0);
        drain(&e2big, &good, last, sizeof(last));
        ck_assert_uint_le(rd.buf.len, JRPC_MAX_LINE + (1u << 20) + 1);
    }
    ck_assert_int_eq(e2big, 1);
    ck_assert(rd.discarding);
    FEED("tail of the long line\n{\"ok\":1}\n");
    drain(&e2big, &good, last, sizeof(last));
    ck_assert_int_eq(e2big, 1); /* once per line */
    ck_assert_int_eq(good, 1);
    ck_assert_str_eq(last, "{\"ok\":1}");
    FEED("{\"ok\":2}\n");
    EXPECT_LINE("{\"ok\":2}");
}
END_TEST

START_TEST(reader_oversized_line_streamed) {
    /* A child writes everything as fast as it can; however the reads fall, the result is one
     * -E2BIG and then the following lines. */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        char *big = malloc(JRPC_MAX_LINE + 2);
        memset(big, 'x', JRPC_MAX_LINE + 1);
        big[JRPC_MAX_LINE + 1] = '\n';
        int r = ipb_write_all(pfd[1], big, JRPC_MAX_LINE + 2);
        r = r || ipb_write_all(pfd[1], "{\"after\":1}\n{\"after\":2}", 23);
        free(big);
        _exit(r ? 1 : 0);
    }
    close(pfd[1]);
    pfd[1] = -1;
    ck_assert_int_eq(ipb_set_nonblock(pfd[0], 0), 0);
    int e2big = 0, good = 0;
    char last[64] = "";
    while (!rd.eof) {
        ck_assert_int_eq(jrpc_reader_fill(&rd, pfd[0]), 0);
        drain(&e2big, &good, last, sizeof(last));
    }
    drain(&e2big, &good, last, sizeof(last));
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(e2big, 1);
    ck_assert_int_eq(good, 2);
    ck_assert_str_eq(last, "{\"after\":2}");
}
END_TEST

/* A memfd holding `len` bytes of 'z', then `tail`; read in one fill, like a fast writer. */
static int memfd_with(size_t len, const char *tail) {
    int fd = memfd_create("jrpc", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    char *b = malloc(len);
    memset(b, 'z', len);
    ck_assert_int_eq(ipb_write_all(fd, b, len), 0);
    free(b);
    ck_assert_int_eq(ipb_write_all(fd, tail, strlen(tail)), 0);
    ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

START_TEST(reader_limit_boundary) {
    /* exactly JRPC_MAX_LINE bytes is allowed, one more is not */
    int fd = memfd_with(JRPC_MAX_LINE, "\n");
    ck_assert_int_eq(jrpc_reader_fill(&rd, fd), 0);
    char *line;
    size_t len;
    ck_assert_int_eq(jrpc_reader_next(&rd, &line, &len), 1);
    ck_assert_uint_eq(len, JRPC_MAX_LINE);
    close(fd);
    jrpc_reader_free(&rd);
    memset(&rd, 0, sizeof(rd));
    fd = memfd_with(JRPC_MAX_LINE + 1, "\n{\"ok\":3}\n");
    ck_assert_int_eq(jrpc_reader_fill(&rd, fd), 0);
    ck_assert_int_eq(jrpc_reader_next(&rd, &line, &len), -E2BIG); /* newline already in the buffer */
    EXPECT_LINE("{\"ok\":3}");
    expect_none();
    close(fd);
}
END_TEST

/* FIXED BUG (supervisor/jsonrpc.c:8-37, jrpc_reader_fill): jrpc_reader_fill() keeps reading and
 * appending while reads return full 64 KiB chunks, with no regard to JRPC_MAX_LINE; the cap is
 * applied only later by jrpc_reader_next(). A client that writes faster than the server reads
 * grows the buffer without bound in one call. Input: 48 MiB without a newline, available at once. */
START_TEST(fixed_bug_fill_buffers_past_the_cap) {
    int fd = memfd_with(3 * (size_t)JRPC_MAX_LINE, "");
    ck_assert_int_eq(jrpc_reader_fill(&rd, fd), 0);
    close(fd);
    ck_assert_msg(rd.buf.len <= JRPC_MAX_LINE + 65536, "one fill buffered %zu bytes (cap %u)", rd.buf.len,
                  JRPC_MAX_LINE);
}
END_TEST

/* fill_max stops after about limit bytes (whole 64 KiB reads) though more is there; the rest
 * comes with the next call. Input: a 1 MiB line, available at once. */
START_TEST(reader_fill_max_reads_at_most_about_the_limit) {
    size_t n = 1u << 20;
    int fd = memfd_with(n - 1, "\n");
    ck_assert_int_eq(jrpc_reader_fill_max(&rd, fd, 100000), 0);
    ck_assert_uint_eq(rd.buf.len, 2 * 65536);
    ck_assert(!rd.eof);
    while (!rd.eof)
        ck_assert_int_eq(jrpc_reader_fill_max(&rd, fd, 100000), 0);
    close(fd);
    ck_assert_uint_eq(rd.buf.len, n);
}
END_TEST

/* The id of a message cut short: the value text of jrpc_peek_id(), or "NULL". */
static char *peek(const char *s) {
    json_t *id = jrpc_peek_id(s, strlen(s));
    char *t = id ? json_dumps(id, JSON_ENCODE_ANY) : strdup("NULL");
    json_decref(id);
    return t;
}
#define EXPECT_PEEK(text, want)                                                                                        \
    do {                                                                                                               \
        char *got_ = peek(text);                                                                                       \
        ck_assert_msg(!strcmp(got_, want), "%s: got %s, want %s", text, got_, want);                                   \
        free(got_);                                                                                                    \
    } while (0)

START_TEST(peek_id_found_at_top_level) {
    EXPECT_PEEK("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"x\":\"aaaa", "7");
    EXPECT_PEEK(" { \"id\" : \"abc\" , \"params\": [1,2,{\"id\":3}", "\"abc\"");
    EXPECT_PEEK("{\"params\":{\"id\":1,\"a\":[\"}\\\"\"]},\"id\":-42,\"method\":\"x\"", "-42");
    EXPECT_PEEK("{\"\\u0069d\":5,\"params\":\"", "5"); /* an escaped key is the same key */
    EXPECT_PEEK("{\"method\":\"m\",\"id\":\"a\\\"b\"}", "\"a\\\"b\"");
}
END_TEST

START_TEST(peek_id_only_when_unambiguous) {
    EXPECT_PEEK("{\"params\":{\"x\":\"aaaa", "NULL");   /* not in the part at hand */
    EXPECT_PEEK("{\"id\":12", "NULL");                  /* the number may go on */
    EXPECT_PEEK("{\"id\":\"ab", "NULL");                /* the string is cut */
    EXPECT_PEEK("{\"id\":1,\"id\":2,\"p\":\"", "NULL"); /* two ids */
    EXPECT_PEEK("{\"id\":1.5,\"p\":\"", "NULL");        /* not an integer */
    EXPECT_PEEK("{\"id\":null,\"p\":\"", "NULL");
    EXPECT_PEEK("{\"id\":{\"a\":1},\"p\":\"", "NULL");
    EXPECT_PEEK("[{\"id\":1}", "NULL");                /* a batch */
    EXPECT_PEEK("{\"a\" 1,\"id\":1,\"p\":\"", "NULL"); /* malformed before it */
    EXPECT_PEEK("{\"a\":1}}\"id\":1,", "NULL");
    EXPECT_PEEK("{\"a\":1 \"id\":1,\"p\":\"", "NULL");
    EXPECT_PEEK("{\"a\":]\"id\":1,", "NULL");
    EXPECT_PEEK("{\"a\":\"x\ny\",\"id\":1,", "NULL"); /* a raw control character */
    EXPECT_PEEK("{\"id\":\"\xff\",\"p\":\"", "NULL"); /* not UTF-8 */
    EXPECT_PEEK("", "NULL");
    EXPECT_PEEK("{", "NULL");
    EXPECT_PEEK("{}", "NULL");
}
END_TEST

START_TEST(reader_keeps_the_id_of_a_dropped_line) {
    rd.max = 64;
    FEED("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"code\":\"");
    FEED("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}\n");
    char *line;
    size_t len;
    ck_assert_int_eq(jrpc_reader_next(&rd, &line, &len), -E2BIG);
    json_t *id = jrpc_reader_take_dropped_id(&rd);
    ck_assert(json_is_integer(id) && json_integer_value(id) == 7);
    json_decref(id);
    ck_assert_ptr_null(jrpc_reader_take_dropped_id(&rd)); /* taken once */
    FEED("{\"id\":\"x\"}\n");
    EXPECT_LINE("{\"id\":\"x\"}");
    /* The whole line came in one read: its id after the cap is at hand too. */
    FEED("{\"params\":{\"code\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"},\"id\":8}\n");
    ck_assert_int_eq(jrpc_reader_next(&rd, &line, &len), -E2BIG);
    id = jrpc_reader_take_dropped_id(&rd);
    ck_assert(json_is_integer(id) && json_integer_value(id) == 8);
    json_decref(id);
    /* Its start without the id, the rest not read yet: null. */
    FEED("{\"params\":{\"code\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    ck_assert_int_eq(jrpc_reader_next(&rd, &line, &len), -E2BIG);
    ck_assert_ptr_null(jrpc_reader_take_dropped_id(&rd));
    FEED("\"},\"id\":9}\n{}\n");
    EXPECT_LINE("{}");
}
END_TEST

static Suite *jsonrpc_suite(void) {
    Suite *s = suite_create("jsonrpc");
    TCase *p = tcase_create("parse");
    tcase_add_test(p, parse_request);
    tcase_add_test(p, parse_notification);
    tcase_add_test(p, parse_response);
    tcase_add_test(p, parse_invalid_json);
    tcase_add_test(p, parse_non_objects);
    tcase_add_test(p, parse_bad_version);
    tcase_add_test(p, parse_bad_ids);
    tcase_add_test(p, parse_bad_method_and_params);
    tcase_add_test(p, parse_respects_length);
    tcase_add_test(p, builders);
    suite_add_tcase(s, p);
    TCase *r = tcase_create("reader");
    tcase_add_checked_fixture(r, pipe_setup, pipe_teardown);
    tcase_set_timeout(r, 120);
    tcase_add_test(r, reader_several_lines_per_read);
    tcase_add_test(r, reader_line_split_across_reads);
    tcase_add_test(r, reader_crlf_and_nul);
    tcase_add_test(r, reader_last_line_without_newline);
    tcase_add_test(r, reader_eof_on_empty);
    tcase_add_test(r, reader_nothing_available);
    tcase_add_test(r, reader_oversized_line_then_next_line);
    tcase_add_test(r, reader_oversized_line_streamed);
    tcase_add_test(r, reader_limit_boundary);
    tcase_add_test(r, reader_fill_max_reads_at_most_about_the_limit);
    tcase_add_test(r, reader_keeps_the_id_of_a_dropped_line);
    tcase_add_test(r, peek_id_found_at_top_level);
    tcase_add_test(r, peek_id_only_when_unambiguous);
    suite_add_tcase(s, r);
    {
        TCase *k = tcase_create("fixed_bugs");
        tcase_add_checked_fixture(k, pipe_setup, pipe_teardown);
        tcase_set_timeout(k, 120);
        tcase_add_test(k, fixed_bug_fill_buffers_past_the_cap);
        suite_add_tcase(s, k);
    }
    return s;
}

int main(void) { return ipb_run_suite(jsonrpc_suite()); }
