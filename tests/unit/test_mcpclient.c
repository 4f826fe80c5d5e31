/* Unit tests for mcpclient/: the params check, ${VAR} expansion and the text/event-stream
 * parser. The stdio client against fake servers: test_mcpclient_stdio.c. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "mcp_client.h"
#include "run_suite.h"
#include "sse.h"

/* ---- params check ---- */

static int check_text(const char *text, ipb_error **err) {
    json_error_t jerr;
    json_t *p = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    ck_assert_msg(p != NULL, "bad test JSON %s: %s", text, jerr.text);
    int r = ipb_mcp_params_check(p, err);
    json_decref(p);
    return r;
}

static void expect_transport(const char *text, int want) {
    ipb_error *err = NULL;
    int r = check_text(text, &err);
    ck_assert_msg(r == want, "%s: got %d, want %d (%s)", text, r, want, err ? ipb_error_msg(err) : "no error");
    ck_assert_ptr_null(err);
}

/* Refused, with a sentence that contains `word`. */
static void expect_refused(const char *text, const char *word) {
    ipb_error *err = NULL;
    int r = check_text(text, &err);
    ck_assert_msg(r == -1, "%s was accepted as %d", text, r);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(err->errnum, EINVAL);
    ck_assert_msg(strstr(ipb_error_msg(err), word), "%s: '%s' does not mention '%s'", text, ipb_error_msg(err), word);
    ipb_error_free(err);
}

START_TEST(params_transport_inference) {
    expect_transport("{\"command\":\"npx\"}", IPB_MCP_STDIO);
    expect_transport("{\"command\":\"npx\",\"args\":[\"-y\",\"x\"],\"env\":{\"A\":\"1\",\"B\":\"\"},\"cwd\":\"/tmp\"}",
                     IPB_MCP_STDIO);
    expect_transport("{\"type\":\"stdio\",\"command\":\"x\"}", IPB_MCP_STDIO);
    expect_transport("{\"url\":\"http://127.0.0.1:3001/mcp\"}", IPB_MCP_HTTP);
    expect_transport("{\"url\":\"https://example.test/\"}", IPB_MCP_HTTP);
    expect_transport("{\"url\":\"HTTPS://example.test\"}", IPB_MCP_HTTP);
    expect_transport("{\"url\":\"http://127.0.0.1:3001/sse\"}", IPB_MCP_SSE);
    expect_transport("{\"url\":\"http://h/v1/sse/stream?x=1\"}", IPB_MCP_SSE);
    /* "/sse" in the query or the host is not the path */
    expect_transport("{\"url\":\"http://h/mcp?next=/sse\"}", IPB_MCP_HTTP);
    expect_transport("{\"url\":\"http://h/mcp#/sse\"}", IPB_MCP_HTTP);
    /* "type" wins over the URL */
    expect_transport("{\"type\":\"sse\",\"url\":\"http://h/mcp\"}", IPB_MCP_SSE);
    expect_transport("{\"type\":\"streamable_http\",\"url\":\"http://h/sse\",\"headers\":{\"Authorization\":\"B x\"}}",
                     IPB_MCP_HTTP);
    /* placeholders are checked later, when filled */
    expect_transport("{\"url\":\"https://${HOST}/mcp?key=${KEY}\",\"headers\":{\"X-Key\":\"${KEY}\"}}", IPB_MCP_HTTP);
    expect_transport("{\"command\":\"${TOOL}\",\"env\":{\"T\":\"${TOKEN}\"}}", IPB_MCP_STDIO);
}
END_TEST

START_TEST(params_transport_rules) {
    expect_refused("[]", "object");
    expect_refused("\"npx\"", "object");
    expect_refused("{}", "'command'");
    expect_refused("{\"args\":[]}", "'command'");
    expect_refused("{\"command\":\"x\",\"url\":\"http://h/mcp\"}", "'url' is for HTTP");
    expect_refused("{\"command\":\"x\",\"headers\":{}}", "'headers' is for HTTP");
    expect_refused("{\"url\":\"http://h/mcp\",\"env\":{}}", "'env' is for stdio");
    expect_refused("{\"url\":\"http://h/mcp\",\"args\":[]}", "'args' is for stdio");
    expect_refused("{\"type\":\"stdio\",\"url\":\"http://h/mcp\"}", "'url' is for HTTP");
    expect_refused("{\"type\":\"sse\",\"command\":\"x\"}", "'command' is for stdio");
    expect_refused("{\"type\":\"streamable_http\"}", "needs 'url'");
    expect_refused("{\"type\":\"stdio\"}", "needs 'command'");
    expect_refused("{\"type\":\"http\",\"url\":\"http://h/mcp\"}", "'type'");
    expect_refused("{\"type\":\"websocket\",\"url\":\"http://h/mcp\"}", "\"websocket\"");
    expect_refused("{\"type\":3,\"command\":\"x\"}", "'type' must be a string");
}
END_TEST

START_TEST(params_unknown_keys_and_types) {
    expect_refused("{\"command\":\"x\",\"timeout\":5}", "unknown key 'timeout'");
    expect_refused("{\"url\":\"http://h/mcp\",\"Headers\":{}}", "unknown key 'Headers'");
    expect_refused("{\"command\":7}", "'command' must be a string");
    expect_refused("{\"command\":\"\"}", "'command' is empty");
    expect_refused("{\"command\":\"x\",\"args\":\"-y\"}", "'args' must be an array");
    expect_refused("{\"command\":\"x\",\"args\":[\"a\",1]}", "'args'[1] must be a string");
    expect_refused("{\"command\":\"x\",\"args\":[null]}", "'args'[0]");
    expect_refused("{\"command\":\"x\",\"env\":[]}", "'env' must be an object");
    expect_refused("{\"command\":\"x\",\"env\":{\"A\":1}}", "'env' A must be a string");
    expect_refused("{\"command\":\"x\",\"env\":{\"A=B\":\"1\"}}", "'='");
    expect_refused("{\"command\":\"x\",\"env\":{\"\":\"1\"}}", "empty name");
    expect_refused("{\"command\":\"x\",\"cwd\":false}", "'cwd' must be a string");
    expect_refused("{\"command\":\"x\",\"cwd\":\"\"}", "'cwd' is empty");
    expect_refused("{\"url\":5}", "'url' must be a string");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":[]}", "'headers' must be an object");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":{\"X\":true}}", "'headers' X must be a string");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":{\"Bad Name\":\"v\"}}", "not a valid HTTP header name");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":{\"X:Y\":\"v\"}}", "not a valid HTTP header name");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":{\"X\":\"a\\r\\nEvil: 1\"}}", "line break");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":{\"content-type\":\"text/plain\"}}", "set by the MCP client");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":{\"Mcp-Session-Id\":\"x\"}}", "set by the MCP client");
}
END_TEST

START_TEST(params_nul_bytes) {
    expect_refused("{\"command\":\"np\\u0000x\"}", "NUL");
    expect_refused("{\"command\":\"x\",\"args\":[\"a\\u0000b\"]}", "NUL");
    expect_refused("{\"command\":\"x\",\"env\":{\"A\":\"1\\u00002\"}}", "NUL");
    expect_refused("{\"command\":\"x\",\"cwd\":\"/tmp\\u0000/x\"}", "NUL");
    expect_refused("{\"url\":\"http://h/\\u0000mcp\"}", "NUL");
    expect_refused("{\"url\":\"http://h/mcp\",\"headers\":{\"X\":\"a\\u0000\"}}", "NUL");
    /* keys with NUL bytes (jansson does not load them, but they can be made) */
    static const char *const where[] = {"params", "env", "headers"};
    for (int i = 0; i < 3; i++) {
        json_t *p = i == 2 ? json_pack("{s:s}", "url", "http://h/mcp") : json_pack("{s:s}", "command", "x");
        json_t *map = json_object();
        json_object_setn_new(i == 0 ? p : map, "A\0B", 3, json_string("1"));
        if (i > 0)
            json_object_set_new(p, where[i], map);
        else
            json_decref(map);
        ipb_error *err = NULL;
        ck_assert_int_eq(ipb_mcp_params_check(p, &err), -1);
        ck_assert_msg(strstr(ipb_error_msg(err), "NUL"), "%s: %s", where[i], ipb_error_msg(err));
        ipb_error_free(err);
        json_decref(p);
    }
}
END_TEST

START_TEST(params_urls) {
    expect_refused("{\"url\":\"ftp://h/mcp\"}", "http:// or https://");
    expect_refused("{\"url\":\"file:///etc/passwd\"}", "http:// or https://");
    expect_refused("{\"url\":\"javascript:alert(1)\"}", "http:// or https://");
    expect_refused("{\"url\":\"127.0.0.1:3001/mcp\"}", "http:// or https://");
    expect_refused("{\"url\":\"//h/mcp\"}", "http:// or https://");
    expect_refused("{\"url\":\"http:/h/mcp\"}", "http:// or https://");
    expect_refused("{\"url\":\"http://\"}", "no host");
    expect_refused("{\"url\":\"http:///mcp\"}", "no host");
    expect_refused("{\"url\":\"http://h/a b\"}", "space or a control character");
    expect_refused("{\"url\":\"http://h/a\\tb\"}", "space or a control character");
    expect_refused("{\"url\":\"http://h:99999/mcp\"}", "not a valid URL");
    expect_refused("{\"url\":\"http://[::1/mcp\"}", "not a valid URL");
    expect_transport("{\"url\":\"http://[::1]:8080/mcp\"}", IPB_MCP_HTTP);
    expect_transport("{\"url\":\"http://user:pw@h:1/mcp\"}", IPB_MCP_HTTP);
}
END_TEST

/* ---- ${VAR} ---- */

static void expect_expand(const char *in, const char *want) {
    ipb_error *err = NULL;
    char *out = ipb_mcp_expand(in, &err);
    ck_assert_msg(out != NULL, "'%s': %s", in, ipb_error_msg(err));
    ck_assert_str_eq(out, want);
    free(out);
}

static void expect_expand_error(const char *in, int errnum, const char *word) {
    ipb_error *err = NULL;
    char *out = ipb_mcp_expand(in, &err);
    ck_assert_msg(out == NULL, "'%s' expanded to '%s'", in, out ? out : "");
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(err->errnum, errnum);
    ck_assert_msg(strstr(ipb_error_msg(err), word), "'%s': '%s' does not mention '%s'", in, ipb_error_msg(err), word);
    ipb_error_free(err);
}

START_TEST(expand_placeholders) {
    setenv("MCPC_T_A", "alpha", 1);
    setenv("MCPC_T_B", "${MCPC_T_A}", 1);
    setenv("MCPC_T_EMPTY", "", 1);
    unsetenv("MCPC_T_UNSET");
    expect_expand("", "");
    expect_expand("plain", "plain");
    expect_expand("${MCPC_T_A}", "alpha");
    expect_expand("x${MCPC_T_A}y", "xalphay");
    expect_expand("${MCPC_T_A}${MCPC_T_A}", "alphaalpha"); /* adjacent */
    expect_expand("Bearer ${MCPC_T_A}", "Bearer alpha");
    expect_expand("${MCPC_T_B}", "${MCPC_T_A}"); /* values are not expanded again */
    expect_expand("[${MCPC_T_EMPTY}]", "[]");
    expect_expand("$", "$"); /* "$" not followed by "{" stays */
    expect_expand("cost $5 and $HOME", "cost $5 and $HOME");
    expect_expand("$$", "$$");
    expect_expand("a$", "a$");
    expect_expand("$${MCPC_T_A}", "$alpha");
    expect_expand("{MCPC_T_A}", "{MCPC_T_A}");
    expect_expand("}", "}");
    expect_expand_error("${MCPC_T_UNSET}", ENOENT, "MCPC_T_UNSET");
    expect_expand_error("a${MCPC_T_A}b${MCPC_T_UNSET}", ENOENT, "MCPC_T_UNSET is not set");
    expect_expand_error("${", EINVAL, "unterminated");
    expect_expand_error("x${MCPC_T_A", EINVAL, "unterminated");
    expect_expand_error("${}", EINVAL, "invalid placeholder");
    expect_expand_error("${1A}", EINVAL, "invalid placeholder");
    expect_expand_error("${A-B}", EINVAL, "invalid placeholder");
    expect_expand_error("${ A}", EINVAL, "invalid placeholder");
}
END_TEST

/* ---- the event-stream parser ---- */

#define MAX_EVENTS 64
typedef struct collected {
    int n;
    char type[MAX_EVENTS][32];
    char data[MAX_EVENTS][256];
    size_t data_len[MAX_EVENTS];
    char id[MAX_EVENTS][32];
    int stop_at; /* the callback fails at this event (1-based), 0: never */
} collected;

static int collect(void *ctx, const ipb_sse_event *ev) {
    collected *c = ctx;
    ck_assert_int_lt(c->n, MAX_EVENTS);
    ck_assert_uint_lt(ev->data_len, sizeof(c->data[0]));
    snprintf(c->type[c->n], sizeof(c->type[0]), "%s", ev->type);
    memcpy(c->data[c->n], ev->data, ev->data_len + 1);
    c->data_len[c->n] = ev->data_len;
    snprintf(c->id[c->n], sizeof(c->id[0]), "%s", ev->id);
    c->n++;
    return c->stop_at && c->n == c->stop_at ? -ECANCELED : 0;
}

/* Parses s in chunks at the given cut points; returns the last feed's result. */
static int parse_cuts(const char *s, size_t len, const size_t *cuts, int ncuts, collected *out, size_t max,
                      ipb_sse *keep) {
    ipb_sse p;
    ipb_sse_init(&p, max);
    memset(out, 0, sizeof(*out));
    size_t at = 0;
    int r = 0;
    for (int i = 0; i <= ncuts && r == 0; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        r = ipb_sse_feed(&p, s + at, end - at, collect, out);
        at = end;
    }
    if (keep)
        *keep = p;
    else
        ipb_sse_free(&p);
    return r;
}

static int parse_whole(const char *s, collected *out) { return parse_cuts(s, strlen(s), NULL, 0, out, 0, NULL); }

static void same_events(const collected *a, const collected *b, const char *ctx) {
    ck_assert_msg(a->n == b->n, "%s: %d events, not %d", ctx, b->n, a->n);
    for (int i = 0; i < a->n; i++) {
        ck_assert_msg(strcmp(a->type[i], b->type[i]) == 0, "%s: event %d type", ctx, i);
        ck_assert_msg(a->data_len[i] == b->data_len[i] && memcmp(a->data[i], b->data[i], a->data_len[i]) == 0,
                      "%s: event %d data '%s' vs '%s'", ctx, i, a->data[i], b->data[i]);
        ck_assert_msg(strcmp(a->id[i], b->id[i]) == 0, "%s: event %d id", ctx, i);
    }
}

START_TEST(sse_line_ends) {
    static const char *const streams[] = {
        "data: a\n\ndata: b\n\n", "data: a\r\n\r\ndata: b\r\n\r\n", "data: a\r\rdata: b\r\r",
        "data: a\n\r\ndata: b\r\r\n", /* mixed */
    };
    for (size_t i = 0; i < sizeof(streams) / sizeof(*streams); i++) {
        collected c;
        ck_assert_int_eq(parse_whole(streams[i], &c), 0);
        ck_assert_msg(c.n == 2, "stream %zu: %d events", i, c.n);
        ck_assert_str_eq(c.data[0], "a");
        ck_assert_str_eq(c.data[1], "b");
        ck_assert_str_eq(c.type[0], "message");
    }
    /* A CR ending one chunk and the LF starting the next are one line end, not two. */
    collected c;
    const char *s = "data: a\r\ndata: b\r\n\r\n";
    size_t cut = 8; /* right after the first CR */
    ck_assert_int_eq(parse_cuts(s, strlen(s), &cut, 1, &c, 0, NULL), 0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_str_eq(c.data[0], "a\nb");
    /* A lone CR at a chunk's end followed by more text is a line end too. */
    s = "data: a\rdata: b\r\r";
    ck_assert_int_eq(parse_cuts(s, strlen(s), &cut, 1, &c, 0, NULL), 0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_str_eq(c.data[0], "a\nb");
}
END_TEST

START_TEST(sse_fields) {
    collected c;
    ck_assert_int_eq(parse_whole(": a comment\n"
                                 ":\n"
                                 "event: endpoint\n"
                                 "data: /message?sessionId=1\n"
                                 "\n"
                                 "data\n"       /* no colon: an empty data line */
                                 "data:x\n"     /* no space after the colon */
                                 "data:  two\n" /* only one space is dropped */
                                 "unknown: y\n" /* ignored */
                                 "Data: z\n"    /* field names are case-sensitive */
                                 "\n"
                                 "event: first\n"
                                 "\n" /* no data: nothing dispatched, and the type is forgotten */
                                 "data: {\"jsonrpc\":\"2.0\"}\n"
                                 "\n",
                                 &c),
                     0);
    ck_assert_int_eq(c.n, 3);
    ck_assert_str_eq(c.type[0], "endpoint");
    ck_assert_str_eq(c.data[0], "/message?sessionId=1");
    ck_assert_str_eq(c.type[1], "message");
    ck_assert_str_eq(c.data[1], "\nx\n two");
    ck_assert_str_eq(c.type[2], "message");
    ck_assert_str_eq(c.data[2], "{\"jsonrpc\":\"2.0\"}");
    /* "data:" alone makes an event with empty data; an event without its blank line is not sent */
    ck_assert_int_eq(parse_whole("data:\n\ndata: cut off", &c), 0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_int_eq(c.data_len[0], 0);
}
END_TEST

START_TEST(sse_id_and_retry) {
    ipb_sse p;
    collected c;
    static const char s[] =
        "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\nretry: 1500\nretry: 15x\nid: a\0b\ndata: d\n\n";
    size_t len = sizeof(s) - 1; /* through the NUL inside the last id, to the end */
    ck_assert_int_eq(parse_cuts(s, len, NULL, 0, &c, 0, &p), 0);
    ck_assert_int_eq(c.n, 4);
    ck_assert_str_eq(c.id[0], "7");
    ck_assert_str_eq(c.id[1], "7"); /* the last event id stays */
    ck_assert_str_eq(c.id[2], "");  /* "id" with no value clears it */
    ck_assert_str_eq(c.id[3], "");  /* an id with a NUL is ignored */
    ck_assert_str_eq(c.data[3], "d");
    ck_assert_int_eq(p.retry, 1500); /* a retry that is not all digits is ignored */
    ipb_sse_free(&p);
}
END_TEST

START_TEST(sse_bom) {
    collected c;
    ck_assert_int_eq(parse_whole("\xef\xbb\xbf"
                                 "data: a\n\n",
                                 &c),
                     0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_str_eq(c.data[0], "a");
    /* split across chunks */
    const char *s = "\xef\xbb\xbf"
                    "data: a\n\n";
    for (size_t cut = 1; cut <= 3; cut++) {
        ck_assert_int_eq(parse_cuts(s, strlen(s), &cut, 1, &c, 0, NULL), 0);
        ck_assert_msg(c.n == 1 && strcmp(c.data[0], "a") == 0, "cut %zu", cut);
    }
    size_t cuts[2] = {1, 2};
    ck_assert_int_eq(parse_cuts(s, strlen(s), cuts, 2, &c, 0, NULL), 0);
    ck_assert_int_eq(c.n, 1);
    /* only one: a second BOM is part of the first field's name, which is then unknown */
    ck_assert_int_eq(parse_whole("\xef\xbb\xbf\xef\xbb\xbf"
                                 "data: a\n\ndata: b\n\n",
                                 &c),
                     0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_str_eq(c.data[0], "b");
    /* bytes that start like a BOM but are not one are kept */
    ck_assert_int_eq(parse_whole("\xef\xbb"
                                 "data: a\n\ndata: b\n\n",
                                 &c),
                     0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_str_eq(c.data[0], "b");
    ck_assert_int_eq(parse_whole("\xef"
                                 ": x\ndata: a\n\n",
                                 &c),
                     0);
    ck_assert_int_eq(c.n, 1); /* "\xef: x" is a field named "\xef" */
}
END_TEST

/* Every cut of a sample stream into two chunks, and byte by byte, gives the same events. */
START_TEST(sse_chunk_boundaries) {
    const char *s = "\xef\xbb\xbf: hello\r\n"
                    "event: endpoint\r\n"
                    "data: /message?sessionId=abc\r\n"
                    "\r\n"
                    "id: 1\n"
                    "data: {\"jsonrpc\":\"2.0\",\n"
                    "data: \"id\":1}\n"
                    "\n"
                    "retry: 10\r"
                    "data: cr\r"
                    "\r"
                    "data\n"
                    "\n"
                    "event: x\r\n"
                    "data: last\r\n"
                    "\r\n"
                    "data: cut";
    size_t len = strlen(s);
    collected whole, part;
    ck_assert_int_eq(parse_whole(s, &whole), 0);
    ck_assert_int_eq(whole.n, 5);
    ck_assert_str_eq(whole.data[1], "{\"jsonrpc\":\"2.0\",\n\"id\":1}");
    ck_assert_str_eq(whole.id[1], "1");
    ck_assert_str_eq(whole.data[2], "cr");
    ck_assert_str_eq(whole.type[4], "x");
    for (size_t cut = 0; cut <= len; cut++) {
        ck_assert_int_eq(parse_cuts(s, len, &cut, 1, &part, 0, NULL), 0);
        char ctx[32];
        snprintf(ctx, sizeof(ctx), "cut at %zu", cut);
        same_events(&whole, &part, ctx);
        for (size_t cut2 = cut; cut2 <= len; cut2 += 7) {
            size_t cuts[2] = {cut, cut2};
            ck_assert_int_eq(parse_cuts(s, len, cuts, 2, &part, 0, NULL), 0);
            same_events(&whole, &part, ctx);
        }
    }
    size_t bytes[512];
    ck_assert_uint_lt(len, 512);
    for (size_t i = 0; i < len; i++)
        bytes[i] = i + 1;
    ck_assert_int_eq(parse_cuts(s, len, bytes, (int)len - 1, &part, 0, NULL), 0);
    same_events(&whole, &part, "byte by byte");
}
END_TEST

START_TEST(sse_event_cap) {
    collected c;
    ipb_sse p;
    /* 20 bytes allowed: a 13-byte data line fits, two of them do not */
    const char *ok = "data: 1234567\n\n";
    ck_assert_int_eq(parse_cuts(ok, strlen(ok), NULL, 0, &c, 20, NULL), 0);
    ck_assert_int_eq(c.n, 1);
    const char *two = "data: 1234567\ndata: 1234567\n\n";
    ck_assert_int_eq(parse_cuts(two, strlen(two), NULL, 0, &c, 20, &p), -EMSGSIZE);
    ck_assert_int_eq(c.n, 0);
    /* sticky: nothing more is parsed */
    ck_assert_int_eq(ipb_sse_feed(&p, "\ndata: x\n\n", 10, collect, &c), -EMSGSIZE);
    ck_assert_int_eq(c.n, 0);
    ipb_sse_free(&p);
    /* one long line, fed in small pieces, is stopped before it is all buffered */
    ipb_sse_init(&p, 100);
    char chunk[16];
    memset(chunk, 'a', sizeof(chunk));
    int r = 0, fed = 0;
    while (r == 0 && fed < 1000) {
        r = ipb_sse_feed(&p, chunk, sizeof(chunk), collect, &c);
        fed++;
    }
    ck_assert_int_eq(r, -EMSGSIZE);
    ck_assert_int_le(fed * (int)sizeof(chunk), 100 + (int)sizeof(chunk));
    ck_assert_uint_le(p.line.len, 100);
    ipb_sse_free(&p);
    /* a long comment counts too */
    ipb_sse_init(&p, 10);
    ck_assert_int_eq(ipb_sse_feed(&p, ": a long comment here\n", 22, collect, &c), -EMSGSIZE);
    ipb_sse_free(&p);
}
END_TEST

START_TEST(sse_callback_stops) {
    collected c;
    memset(&c, 0, sizeof(c));
    c.stop_at = 2;
    ipb_sse p;
    ipb_sse_init(&p, 0);
    const char *s = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
    ck_assert_int_eq(ipb_sse_feed(&p, s, strlen(s), collect, &c), -ECANCELED);
    ck_assert_int_eq(c.n, 2);
    ck_assert_int_eq(ipb_sse_feed(&p, s, strlen(s), collect, &c), -ECANCELED);
    ck_assert_int_eq(c.n, 2);
    ipb_sse_free(&p);
}
END_TEST

static Suite *mcpclient_suite(void) {
    Suite *s = suite_create("mcpclient");
    TCase *p = tcase_create("params");
    tcase_add_test(p, params_transport_inference);
    tcase_add_test(p, params_transport_rules);
    tcase_add_test(p, params_unknown_keys_and_types);
    tcase_add_test(p, params_nul_bytes);
    tcase_add_test(p, params_urls);
    tcase_add_test(p, expand_placeholders);
    suite_add_tcase(s, p);
    TCase *e = tcase_create("sse");
    tcase_set_timeout(e, 60);
    tcase_add_test(e, sse_line_ends);
    tcase_add_test(e, sse_fields);
    tcase_add_test(e, sse_id_and_retry);
    tcase_add_test(e, sse_bom);
    tcase_add_test(e, sse_chunk_boundaries);
    tcase_add_test(e, sse_event_cap);
    tcase_add_test(e, sse_callback_stops);
    suite_add_tcase(s, e);
    return s;
}

int main(void) { return ipb_run_suite(mcpclient_suite()); }
