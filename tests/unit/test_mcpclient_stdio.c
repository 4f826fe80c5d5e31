/* Unit tests for mcpclient/: the stdio client against small fake servers (/bin/sh and
 * /usr/bin/python3 -c scripts): handshake, pagination, requests of the server answered, a
 * server that exits, hangs or sends too much, exec failures, and no process left behind. The
 * params check, ${VAR} and the event-stream parser: test_mcpclient.c. */

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

/* ---- the stdio client against fake servers ---- */

/* A fake MCP server. argv: MODE [PIDFILE]. Tools: echo (arguments back as text), env (its
 * environment as structuredContent), ask (sends a notification and two requests of its own,
 * then returns our answers), exit (exits 3), hang, huge (a 2 MiB line), huge_nonl (2 MiB without
 * a line end), garbage (malformed lines, then the answer), error (a JSON-RPC error), notobject
 * (a result that is not an object), spawn (starts a child that sleeps for a minute, without our
 * pipes, and writes its pid to PIDFILE.child), flood (200 malformed lines, no answer). */
static const char FAKE_SERVER[] =
    "import json, os, subprocess, sys, time\n"
    "mode = sys.argv[1]\n"
    "pidfile = sys.argv[2] if len(sys.argv) > 2 else None\n"
    "if pidfile:\n"
    "    open(pidfile, 'w').write(str(os.getpid()))\n"
    "def send(m):\n"
    "    sys.stdout.write(json.dumps(m) + '\\n'); sys.stdout.flush()\n"
    "def raw(s):\n"
    "    sys.stdout.write(s); sys.stdout.flush()\n"
    "def read():\n"
    "    line = sys.stdin.readline()\n"
    "    if not line: sys.exit(0)\n"
    "    return json.loads(line)\n"
    "def result(mid, r): send({'jsonrpc': '2.0', 'id': mid, 'result': r})\n"
    "if mode == 'exit_at_start': sys.exit(4)\n"
    "while True:\n"
    "    m = read()\n"
    "    meth, mid, params = m.get('method'), m.get('id'), m.get('params') or {}\n"
    "    if meth == 'initialize':\n"
    "        if mode == 'hang_init': time.sleep(3600)\n"
    "        v = os.environ.get('FAKE_VERSION', params.get('protocolVersion'))\n"
    "        result(mid, {'protocolVersion': v, 'capabilities': {'tools': {}},\n"
    "                     'serverInfo': {'name': 'fake-' + mode, 'version': '1'},\n"
    "                     'seen': params})\n"
    "    elif meth == 'notifications/initialized':\n"
    "        pass\n"
    "    elif meth == 'tools/list':\n"
    "        page = int(params.get('cursor') or 0)\n"
    "        r = {'tools': [{'name': 't%d_%d' % (page, i), 'inputSchema': {'type': 'object'}} for i in range(2)]}\n"
    "        if page < 2: r['nextCursor'] = str(page + 1)\n"
    "        result(mid, r)\n"
    "    elif meth == 'tools/call':\n"
    "        name, args = params['name'], params.get('arguments')\n"
    "        if name == 'echo':\n"
    "            result(mid, {'content': [{'type': 'text', 'text': json.dumps(args)}]})\n"
    "        elif name == 'env':\n"
    "            result(mid, {'content': [], 'structuredContent': dict(os.environ), 'cwd': os.getcwd()})\n"
    "        elif name == 'ask':\n"
    "            send({'jsonrpc': '2.0', 'method': 'notifications/message', 'params': {'level': 'info', 'data': 1}})\n"
    "            send({'jsonrpc': '2.0', 'id': 's1', 'method': 'ping'})\n"
    "            send({'jsonrpc': '2.0', 'id': 7, 'method': 'sampling/createMessage', 'params': {}})\n"
    "            got = [read(), read()]\n"
    "            result(mid, {'content': [], 'structuredContent': {'answers': got}})\n"
    "        elif name == 'exit':\n"
    "            sys.exit(3)\n"
    "        elif name == 'hang':\n"
    "            time.sleep(3600)\n"
    "        elif name == 'huge':\n"
    "            raw('{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"x\":\"' % mid + 'a' * (2 << 20) + '\"}}\\n')\n"
    "            time.sleep(3600)\n"
    "        elif name == 'huge_nonl':\n"
    "            raw('x' * (2 << 20))\n"
    "            time.sleep(3600)\n"
    "        elif name == 'garbage':\n"
    "            raw('not json\\n[]\\n{\"jsonrpc\":\"1.0\",\"id\":1}\\n\\n\\r\\n42\\n{\"id\":%d}\\n' % mid)\n"
    "            result(mid + 1000, {'stale': True})\n"
    "            raw('[' + json.dumps({'jsonrpc': '2.0', 'method': 'notifications/x'}) + ','\n"
    "                + json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {'ok': True}}) + ']\\r\\n')\n"
    "        elif name == 'error':\n"
    "            send({'jsonrpc': '2.0', 'id': mid, 'error': {'code': -32000, 'message': 'boom'}})\n"
    "        elif name == 'notobject':\n"
    "            result(mid, 5)\n"
    "        elif name == 'spawn':\n"
    "            child = subprocess.Popen(['/bin/sleep', '60'], stdin=subprocess.DEVNULL,\n"
    "                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "            open(pidfile + '.child', 'w').write(str(child.pid))\n"
    "            result(mid, {'content': []})\n"
    "        elif name == 'flood':\n"
    "            for i in range(200): raw('garbage %d\\n' % i)\n"
    "        else:\n"
    "            send({'jsonrpc': '2.0', 'id': mid, 'error': {'code': -32602, 'message': 'no tool ' + name}})\n"
    "    elif mid is not None:\n"
    "        send({'jsonrpc': '2.0', 'id': mid, 'error': {'code': -32601, 'message': 'no'}})\n";

static char tmpdir[64];

static void tmp_setup(void) {
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-mcpc.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmp_teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static json_t *fake_params(const char *mode, const char *pidfile) {
    json_t *args = json_pack("[s, s, s]", "-c", FAKE_SERVER, mode);
    if (pidfile)
        json_array_append_new(args, json_string(pidfile));
    return json_pack("{s:s, s:o}", "command", "/usr/bin/python3", "args", args);
}

static ipb_mcpc *connect_fake(const char *mode, const char *pidfile, const ipb_mcp_limits *limits) {
    json_t *p = fake_params(mode, pidfile);
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("fake", p, limits, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "connect: %s", ipb_error_msg(err));
    return c;
}

static pid_t read_pid(const char *path) {
    char buf[32] = "";
    for (int i = 0; i < 500 && !buf[0]; i++) {
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(buf, sizeof(buf), f))
                buf[0] = '\0';
            fclose(f);
        }
        if (!buf[0])
            usleep(10000);
    }
    ck_assert_msg(buf[0], "no pid in %s", path);
    return (pid_t)atoi(buf);
}

/* Gone and reaped: no such process (a zombie still answers kill 0). */
static bool process_gone(pid_t pid) { return kill(pid, 0) < 0 && errno == ESRCH; }

static void pidfile_path(char *out, size_t size) { snprintf(out, size, "%s/server.pid", tmpdir); }

START_TEST(stdio_handshake_sh) {
    /* A /bin/sh server with fixed answers; it answers MCP 2024-11-05, which is accepted. */
    const char *script = "read l; printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":"
                         "\"2024-11-05\",\"capabilities\":{},\"serverInfo\":{\"name\":\"sh-server\"}}}'; "
                         "read l; case \"$l\" in *notifications/initialized*) ;; *) exit 9;; esac; "
                         "read l; printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":"
                         "\"a\"}]}}'; read l";
    json_t *p = json_pack("{s:s, s:[s, s]}", "command", "sh", "args", "-c", script);
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("sh", p, NULL, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    ck_assert_str_eq(ipb_mcpc_server_name(c), "sh-server");
    ck_assert_str_eq(ipb_mcpc_protocol_version(c), "2024-11-05");
    json_t *tools = ipb_mcpc_list_tools(c, &err);
    ck_assert_msg(tools != NULL, "%s", ipb_error_msg(err));
    ck_assert_int_eq(json_array_size(tools), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 0), "name")), "a");
    json_decref(tools);
    ck_assert(ipb_mcpc_alive(c));
    long t0 = ipb_now_ms();
    ipb_mcpc_close(c);
    ck_assert_int_lt(ipb_now_ms() - t0, 1500); /* it exits at EOF on its stdin */
}
END_TEST

START_TEST(stdio_initialize_and_pages) {
    ipb_mcpc *c = connect_fake("normal", NULL, NULL);
    ck_assert_str_eq(ipb_mcpc_server_name(c), "fake-normal");
    ck_assert_str_eq(ipb_mcpc_protocol_version(c), "2025-06-18");
    ipb_error *err = NULL;
    json_t *tools = ipb_mcpc_list_tools(c, &err);
    ck_assert_msg(tools != NULL, "%s", ipb_error_msg(err));
    ck_assert_int_eq(json_array_size(tools), 6); /* 3 pages of 2 */
    const char *want[] = {"t0_0", "t0_1", "t1_0", "t1_1", "t2_0", "t2_1"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, i), "name")), want[i]);
    json_decref(tools);
    /* what initialize sent, as the server saw it (echoed back in its answer is not possible:
     * check through a call instead) */
    json_t *args = json_pack("{s:s, s:i}", "message", "h\xc3\xa9llo", "n", 3);
    json_t *r = ipb_mcpc_call_tool(c, "echo", args, &err);
    json_decref(args);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    const char *text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    json_t *back = json_loads(text, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(back, "message")), "h\xc3\xa9llo");
    ck_assert_int_eq(json_integer_value(json_object_get(back, "n")), 3);
    json_decref(back);
    json_decref(r);
    /* no arguments: {} */
    r = ipb_mcpc_call_tool(c, "echo", NULL, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    ck_assert_str_eq(text, "{}");
    json_decref(r);
    ck_assert_uint_eq(ipb_mcpc_malformed(c), 0);
    ipb_mcpc_close(c);
}
END_TEST

START_TEST(stdio_version_refused) {
    json_t *p = fake_params("normal", NULL);
    json_object_set_new(p, "env", json_pack("{s:s}", "FAKE_VERSION", "1999-01-01"));
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("old", p, NULL, &err);
    json_decref(p);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err->errnum, EPROTONOSUPPORT);
    ck_assert_msg(strstr(ipb_error_msg(err), "1999-01-01") && strstr(ipb_error_msg(err), "'old'"), "%s",
                  ipb_error_msg(err));
    ipb_error_free(err);
    /* the versions this client knows are accepted as the server answers them */
    static const char *const ok[] = {"2025-11-25", "2025-03-26"};
    for (int i = 0; i < 2; i++) {
        p = fake_params("normal", NULL);
        json_object_set_new(p, "env", json_pack("{s:s}", "FAKE_VERSION", ok[i]));
        ipb_mcpc *k = ipb_mcpc_connect("new", p, NULL, &err);
        json_decref(p);
        ck_assert_msg(k != NULL, "%s", ipb_error_msg(err));
        ck_assert_str_eq(ipb_mcpc_protocol_version(k), ok[i]);
        ipb_mcpc_close(k);
    }
}
END_TEST

START_TEST(stdio_server_requests_answered) {
    ipb_mcpc *c = connect_fake("normal", NULL, NULL);
    ipb_error *err = NULL;
    json_t *r = ipb_mcpc_call_tool(c, "ask", NULL, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    json_t *answers = json_object_get(json_object_get(r, "structuredContent"), "answers");
    ck_assert_int_eq(json_array_size(answers), 2);
    json_t *a = json_array_get(answers, 0), *b = json_array_get(answers, 1);
    ck_assert_str_eq(json_string_value(json_object_get(a, "jsonrpc")), "2.0");
    ck_assert_str_eq(json_string_value(json_object_get(a, "id")), "s1");
    ck_assert(json_is_object(json_object_get(a, "result")));
    ck_assert_int_eq(json_object_size(json_object_get(a, "result")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(b, "id")), 7);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(b, "error"), "code")), -32601);
    ck_assert_ptr_null(json_object_get(b, "result"));
    json_decref(r);
    ck_assert(ipb_mcpc_alive(c));
    ipb_mcpc_close(c);
}
END_TEST

START_TEST(stdio_errors_and_bad_results) {
    ipb_mcpc *c = connect_fake("normal", NULL, NULL);
    ipb_error *err = NULL;
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "error", NULL, &err));
    ck_assert_int_eq(err->errnum, EREMOTEIO);
    ck_assert_msg(strstr(ipb_error_msg(err), "-32000") && strstr(ipb_error_msg(err), "boom") &&
                      strstr(ipb_error_msg(err), "tools/call error"),
                  "%s", ipb_error_msg(err));
    ipb_error_free(err);
    err = NULL;
    ck_assert(ipb_mcpc_alive(c)); /* an error answer leaves the connection as it was */
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "notobject", NULL, &err));
    ck_assert_int_eq(err->errnum, EPROTO);
    ck_assert_msg(strstr(ipb_error_msg(err), "not an object"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    err = NULL;
    json_t *notobj = json_string("x");
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "echo", notobj, &err));
    json_decref(notobj);
    ck_assert_int_eq(err->errnum, EINVAL);
    ipb_error_free(err);
    err = NULL;
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "", NULL, &err));
    ipb_error_free(err);
    err = NULL;
    /* malformed lines are skipped and counted; the response after them is found */
    json_t *r = ipb_mcpc_call_tool(c, "garbage", NULL, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    ck_assert(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    ck_assert_uint_eq(ipb_mcpc_malformed(c), 5); /* not json, [], jsonrpc 1.0, 42, {"id"} */
    r = ipb_mcpc_call_tool(c, "echo", NULL, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    json_decref(r);
    ipb_mcpc_close(c);
}
END_TEST

START_TEST(stdio_flood_of_garbage) {
    ipb_mcp_limits lim = {0, 5000, 0};
    ipb_mcpc *c = connect_fake("normal", NULL, &lim);
    ipb_error *err = NULL;
    long t0 = ipb_now_ms();
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "flood", NULL, &err));
    ck_assert_int_lt(ipb_now_ms() - t0, 3000); /* not the deadline */
    ck_assert_int_eq(err->errnum, EPROTO);
    ck_assert_msg(strstr(ipb_error_msg(err), "malformed"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    ck_assert(!ipb_mcpc_alive(c));
    ipb_mcpc_close(c);
}
END_TEST

START_TEST(stdio_server_exits_mid_call) {
    char pidfile[128];
    pidfile_path(pidfile, sizeof(pidfile));
    ipb_mcpc *c = connect_fake("normal", pidfile, NULL);
    pid_t pid = read_pid(pidfile);
    ipb_error *err = NULL;
    long t0 = ipb_now_ms();
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "exit", NULL, &err));
    ck_assert_int_lt(ipb_now_ms() - t0, 2000);
    ck_assert_int_eq(err->errnum, EPIPE);
    ck_assert_msg(strstr(ipb_error_msg(err), "exited with status 3") && strstr(ipb_error_msg(err), "'fake'") &&
                      strstr(ipb_error_msg(err), "tools/call exit"),
                  "%s", ipb_error_msg(err));
    ipb_error_free(err);
    err = NULL;
    ck_assert(!ipb_mcpc_alive(c));
    /* reaped already, and later calls fail at once */
    ck_assert(process_gone(pid));
    ck_assert_ptr_null(ipb_mcpc_list_tools(c, &err));
    ck_assert_int_eq(err->errnum, EPIPE);
    ck_assert_msg(strstr(ipb_error_msg(err), "closed"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    ipb_mcpc_close(c);
}
END_TEST

START_TEST(stdio_server_exits_at_start) {
    json_t *p = fake_params("exit_at_start", NULL);
    ipb_error *err = NULL;
    ck_assert_ptr_null(ipb_mcpc_connect("early", p, NULL, &err));
    json_decref(p);
    ck_assert_int_eq(err->errnum, EPIPE);
    ck_assert_msg(strstr(ipb_error_msg(err), "exited with status 4") && strstr(ipb_error_msg(err), "initialize"), "%s",
                  ipb_error_msg(err));
    ipb_error_free(err);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1); /* no zombie */
    ck_assert_int_eq(errno, ECHILD);
}
END_TEST

START_TEST(stdio_hang_times_out) {
    char pidfile[128];
    pidfile_path(pidfile, sizeof(pidfile));
    ipb_mcp_limits lim = {5000, 400, 0};
    ipb_mcpc *c = connect_fake("normal", pidfile, &lim);
    pid_t pid = read_pid(pidfile);
    ipb_error *err = NULL;
    long t0 = ipb_now_ms();
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "hang", NULL, &err));
    long took = ipb_now_ms() - t0;
    ck_assert_msg(took >= 390 && took < 1000, "timed out after %ld ms, the limit is 400", took);
    ck_assert_int_eq(err->errnum, ETIMEDOUT);
    ck_assert_msg(strstr(ipb_error_msg(err), "no answer within 400 ms"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    /* ipb_mcpc_call_tool (one call at a time): after a timeout the client is no longer alive
     * (ipb_mcpc_call keeps it: test_mcpc_concurrent); the call is cancelled at the server. */
    ck_assert(!ipb_mcpc_alive(c));
    ck_assert_uint_eq(ipb_mcpc_cancelled(c), 1);
    ck_assert(!process_gone(pid));
    /* close: stdin closed, 2 s, SIGTERM (python dies of it) */
    t0 = ipb_now_ms();
    ipb_mcpc_close(c);
    took = ipb_now_ms() - t0;
    ck_assert_msg(took >= 1900 && took < 3500, "close took %ld ms", took);
    ck_assert(process_gone(pid));
}
END_TEST

START_TEST(stdio_hang_at_initialize) {
    ipb_mcp_limits lim = {500, 0, 0};
    json_t *p = fake_params("hang_init", NULL);
    ipb_error *err = NULL;
    long t0 = ipb_now_ms();
    ck_assert_ptr_null(ipb_mcpc_connect("slow", p, &lim, &err));
    long took = ipb_now_ms() - t0;
    json_decref(p);
    ck_assert_msg(took >= 490 && took < 1500, "took %ld ms, the connect limit is 500", took);
    ck_assert_int_eq(err->errnum, ETIMEDOUT);
    ck_assert_msg(strstr(ipb_error_msg(err), "initialize") && strstr(ipb_error_msg(err), "500 ms"), "%s",
                  ipb_error_msg(err));
    ipb_error_free(err);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1); /* killed and reaped at once */
}
END_TEST

START_TEST(stdio_oversized_message) {
    char pidfile[128];
    pidfile_path(pidfile, sizeof(pidfile));
    ipb_mcp_limits lim = {0, 10000, 1 << 20};
    ipb_mcpc *c = connect_fake("normal", pidfile, &lim);
    pid_t pid = read_pid(pidfile);
    ipb_error *err = NULL;
    long t0 = ipb_now_ms();
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "huge", NULL, &err));
    ck_assert_int_lt(ipb_now_ms() - t0, 5000);
    ck_assert_int_eq(err->errnum, EMSGSIZE);
    ck_assert_msg(strstr(ipb_error_msg(err), "1048576"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    ck_assert(!ipb_mcpc_alive(c));
    ck_assert(process_gone(pid)); /* killed right away */
    t0 = ipb_now_ms();
    ipb_mcpc_close(c);
    ck_assert_int_lt(ipb_now_ms() - t0, 500);
}
END_TEST

/* A long line without its end yet is stopped at the limit too (not buffered until it ends). */
START_TEST(stdio_oversized_unterminated) {
    ipb_mcp_limits lim = {0, 10000, 1 << 20};
    ipb_mcpc *c = connect_fake("normal", NULL, &lim);
    ipb_error *err = NULL;
    long t0 = ipb_now_ms();
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "huge_nonl", NULL, &err));
    ck_assert_int_lt(ipb_now_ms() - t0, 5000);
    ck_assert_int_eq(err->errnum, EMSGSIZE);
    ipb_error_free(err);
    ipb_mcpc_close(c);
}
END_TEST

START_TEST(stdio_environment_and_cwd) {
    setenv("MCPC_T_SECRET", "host-only", 1);
    setenv("MCPC_T_TOKEN", "tok123", 1);
    json_t *p = fake_params("normal", NULL);
    json_object_set_new(p, "env", json_pack("{s:s, s:s}", "TOKEN", "Bearer ${MCPC_T_TOKEN}", "PLAIN", "$x"));
    json_object_set_new(p, "cwd", json_string(tmpdir));
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("env", p, NULL, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    json_t *r = ipb_mcpc_call_tool(c, "env", NULL, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    json_t *env = json_object_get(r, "structuredContent");
    ck_assert_str_eq(json_string_value(json_object_get(env, "TOKEN")), "Bearer tok123");
    ck_assert_str_eq(json_string_value(json_object_get(env, "PLAIN")), "$x");
    ck_assert_ptr_null(json_object_get(env, "MCPC_T_SECRET"));
    ck_assert_ptr_null(json_object_get(env, "MCPC_T_TOKEN"));
    if (getenv("PATH"))
        ck_assert_str_eq(json_string_value(json_object_get(env, "PATH")), getenv("PATH"));
    if (getenv("HOME"))
        ck_assert_str_eq(json_string_value(json_object_get(env, "HOME")), getenv("HOME"));
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        static const char *const allowed[] = {"PATH", "HOME",  "USER",  "LOGNAME",  "SHELL", "TERM",
                                              "LANG", "TOKEN", "PLAIN", "LC_CTYPE", NULL};
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcmp(k, *a) == 0;
        ck_assert_msg(ok, "the server got %s from the host", k);
    }
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(tmpdir, real));
    ck_assert_str_eq(json_string_value(json_object_get(r, "cwd")), real);
    json_decref(r);
    ipb_mcpc_close(c);
    /* an unset variable: nothing starts, and the error names it */
    unsetenv("MCPC_T_TOKEN");
    p = fake_params("normal", NULL);
    json_object_set_new(p, "env", json_pack("{s:s}", "TOKEN", "${MCPC_T_TOKEN}"));
    ck_assert_ptr_null(ipb_mcpc_connect("env", p, NULL, &err));
    json_decref(p);
    ck_assert_msg(strstr(ipb_error_msg(err), "MCPC_T_TOKEN is not set") && strstr(ipb_error_msg(err), "'env' TOKEN"),
                  "%s", ipb_error_msg(err));
    ipb_error_free(err);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
}
END_TEST

START_TEST(stdio_exec_failures) {
    ipb_error *err = NULL;
    json_t *p = json_pack("{s:s}", "command", "no-such-command-mcpc-test");
    ck_assert_ptr_null(ipb_mcpc_connect("missing", p, NULL, &err));
    json_decref(p);
    ck_assert_int_eq(err->errnum, ENOENT);
    ck_assert_msg(strstr(ipb_error_msg(err), "'no-such-command-mcpc-test' was not found on PATH") &&
                      strstr(ipb_error_msg(err), "MCP server 'missing'"),
                  "%s", ipb_error_msg(err));
    ipb_error_free(err);
    err = NULL;
    p = json_pack("{s:s}", "command", "/nonexistent/mcp-server");
    ck_assert_ptr_null(ipb_mcpc_connect("abs", p, NULL, &err));
    json_decref(p);
    ck_assert_int_eq(err->errnum, ENOENT);
    ck_assert_msg(strstr(ipb_error_msg(err), "'/nonexistent/mcp-server' does not exist"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    err = NULL;
    /* executable, but not a program: execve() fails in the child and says so through the pipe */
    char bad[128];
    snprintf(bad, sizeof(bad), "%s/not-a-program", tmpdir);
    int fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "\x7f\x45garbage", 9), 9);
    close(fd);
    p = json_pack("{s:s}", "command", bad);
    ck_assert_ptr_null(ipb_mcpc_connect("bad", p, NULL, &err));
    json_decref(p);
    ck_assert_int_eq(err->errnum, ENOEXEC);
    ck_assert_msg(strstr(ipb_error_msg(err), "cannot run") && strstr(ipb_error_msg(err), "Exec format error"), "%s",
                  ipb_error_msg(err));
    ipb_error_free(err);
    err = NULL;
    /* a directory to change to that is not there */
    p = json_pack("{s:s, s:s}", "command", "sh", "cwd", "/nonexistent-mcpc-dir");
    ck_assert_ptr_null(ipb_mcpc_connect("cwd", p, NULL, &err));
    json_decref(p);
    ck_assert_int_eq(err->errnum, ENOENT);
    ck_assert_msg(strstr(ipb_error_msg(err), "cannot change to directory '/nonexistent-mcpc-dir'"), "%s",
                  ipb_error_msg(err));
    ipb_error_free(err);
    err = NULL;
    /* a directory as the command */
    p = json_pack("{s:s}", "command", "/tmp");
    ck_assert_ptr_null(ipb_mcpc_connect("dir", p, NULL, &err));
    json_decref(p);
    ck_assert_msg(strstr(ipb_error_msg(err), "not an executable file"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
}
END_TEST

START_TEST(stdio_nothing_left_behind) {
    char pidfile[128], childfile[160];
    pidfile_path(pidfile, sizeof(pidfile));
    snprintf(childfile, sizeof(childfile), "%s.child", pidfile);
    ipb_mcpc *c = connect_fake("normal", pidfile, NULL);
    pid_t pid = read_pid(pidfile);
    ipb_error *err = NULL;
    json_t *r = ipb_mcpc_call_tool(c, "spawn", NULL, &err);
    ck_assert_msg(r != NULL, "%s", ipb_error_msg(err));
    json_decref(r);
    pid_t child = read_pid(childfile);
    ck_assert(!process_gone(child));
    /* the server exits at EOF; its child (in its process group) is killed with it */
    ipb_mcpc_close(c);
    ck_assert(process_gone(pid));
    /* the sleeping grandchild is not ours to reap: it is killed, then reaped by init */
    for (int i = 0; i < 200 && !process_gone(child); i++)
        usleep(10000);
    char stat_path[64], st[256] = "";
    snprintf(stat_path, sizeof(stat_path), "/proc/%d/stat", (int)child);
    FILE *f = fopen(stat_path, "r");
    if (f) {
        if (!fgets(st, sizeof(st), f))
            st[0] = '\0';
        fclose(f);
    }
    const char *state = strrchr(st, ')');
    ck_assert_msg(!f || (state && state[2] == 'Z'), "the server's child %d still runs: %s", (int)child, st);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
}
END_TEST

/* A /bin/sh server with fixed answers that first writes the signal state it passes on (that of
 * grep, its child: the shell itself blocks signals for a moment around each fork) and its process
 * group to the file in $OUT, then hangs in tools/call (ids 1 and 2 are initialize and the call). */
static const char SH_STATUS_SERVER[] =
    "grep -E '^Sig(Blk|Ign)' /proc/self/status > \"$OUT\"; echo \"pid $$ $(ps -o pgid= -p $$)\" >> \"$OUT\"; "
    "read l; printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-06-18\","
    "\"capabilities\":{},\"serverInfo\":{\"name\":\"sh\"}}}'; read l; read l; exec sleep 60";

/* The server's process group is its own, and the caller's signal mask and ignored signals do not
 * reach it. */
START_TEST(stdio_own_group_and_clean_signals) {
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    signal(SIGPIPE, SIG_IGN);
    char out[128];
    snprintf(out, sizeof(out), "%s/status", tmpdir);
    json_t *p =
        json_pack("{s:s, s:[s, s], s:{s:s}}", "command", "/bin/sh", "args", "-c", SH_STATUS_SERVER, "env", "OUT", out);
    ipb_mcp_limits lim = {5000, 300, 0};
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("sh", p, &lim, &err);
    json_decref(p);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    bool checked_blk = false, checked_ign = false;
    int pid = 0, pgid = -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "SigBlk:", 7) == 0) {
            ck_assert_msg(strtoull(line + 7, NULL, 16) == 0, "the server starts with signals blocked: %s", line);
            checked_blk = true;
        }
        if (strncmp(line, "SigIgn:", 7) == 0) {
            /* but for 32 and 33, which glibc keeps for itself (sigaction() refuses them; they are
             * ignored when whoever started this test ignored them) */
            unsigned long long ign = strtoull(line + 7, NULL, 16) & ~(3ULL << 31);
            ck_assert_msg(ign == 0, "the server starts with signals ignored: %s", line);
            checked_ign = true;
        }
        if (sscanf(line, "pid %d %d", &pid, &pgid) == 2)
            ck_assert_int_eq(pid, pgid);
    }
    fclose(f);
    ck_assert(checked_blk && checked_ign && pid > 0);
    ck_assert_int_ne(pgid, getpgid(0));
    /* a hung server still ends at close (SIGTERM is not blocked in it) */
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "x", NULL, &err));
    ck_assert_int_eq(err->errnum, ETIMEDOUT);
    ipb_error_free(err);
    ipb_mcpc_close(c);
    ck_assert(process_gone(pid));
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}
END_TEST

/* Writing to a server that is gone does not kill us with SIGPIPE (not ignored here). */
START_TEST(stdio_write_to_dead_server) {
    signal(SIGPIPE, SIG_DFL);
    char pidfile[128];
    pidfile_path(pidfile, sizeof(pidfile));
    ipb_mcpc *c = connect_fake("normal", pidfile, NULL);
    pid_t pid = read_pid(pidfile);
    kill(pid, SIGKILL);
    usleep(100000);
    ipb_error *err = NULL;
    json_t *big = json_pack("{s:s}", "x", "y");
    ck_assert_ptr_null(ipb_mcpc_call_tool(c, "echo", big, &err));
    json_decref(big);
    ck_assert_int_eq(err->errnum, EPIPE);
    ck_assert_msg(strstr(ipb_error_msg(err), "killed by signal 9"), "%s", ipb_error_msg(err));
    ipb_error_free(err);
    ipb_mcpc_close(c);
}
END_TEST

/* The start hook: an fd given as the server's fd 3 and a variable that replaces the params'
 * one; or a refusal, and then nothing starts. */
static int hook_fd = -1;
static int test_hook(const char *name, const char *path, char *const *argv, ipb_mcpc_stdio_extra *extra,
                     ipb_error **err) {
    ck_assert_str_eq(name, "hooked");
    ck_assert_str_eq(argv[0], "sh");
    ck_assert_ptr_nonnull(strchr(path, '/'));
    if (hook_fd < 0)
        return ipb_error_set(err, EUSERS, "the hook refuses");
    extra->fd = hook_fd;
    snprintf(extra->env, sizeof(extra->env), "IPBT_HOOK=from-hook");
    return 0;
}

START_TEST(stdio_start_hook) {
    const char *script =
        "printf '%s' \"$IPBT_HOOK\" >&3; exec 3>&-; "
        "read l; printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":"
        "\"2024-11-05\",\"capabilities\":{},\"serverInfo\":{\"name\":\"sh-server\"}}}'; read l; read l";
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    hook_fd = p[1];
    ipb_mcpc_set_stdio_hook(test_hook);
    json_t *params =
        json_pack("{s:s, s:[s, s], s:{s:s}}", "command", "sh", "args", "-c", script, "env", "IPBT_HOOK", "from-params");
    ipb_error *err = NULL;
    ipb_mcpc *c = ipb_mcpc_connect("hooked", params, NULL, &err);
    ck_assert_msg(c != NULL, "%s", ipb_error_msg(err));
    ipb_mcpc_close(c);
    /* What the server wrote to its fd 3, then EOF: the client kept no copy of the fd. */
    char buf[64] = "";
    size_t got = 0;
    for (ssize_t n; (n = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0;)
        got += (size_t)n;
    buf[got] = '\0';
    ck_assert_str_eq(buf, "from-hook");
    close(p[0]);
    /* Refused: nothing starts, and the hook's sentence is the error. */
    hook_fd = -1;
    ck_assert_ptr_null(ipb_mcpc_connect("hooked", params, NULL, &err));
    ck_assert_msg(strstr(ipb_error_msg(err), "the hook refuses"), "%s", ipb_error_msg(err));
    ck_assert_int_eq(err->errnum, EUSERS);
    ipb_error_free(err);
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
    ipb_mcpc_set_stdio_hook(NULL);
    json_decref(params);
}
END_TEST

static Suite *mcpclient_stdio_suite(void) {
    Suite *s = suite_create("mcpclient_stdio");
    TCase *t = tcase_create("stdio");
    tcase_add_checked_fixture(t, tmp_setup, tmp_teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, stdio_handshake_sh);
    tcase_add_test(t, stdio_initialize_and_pages);
    tcase_add_test(t, stdio_version_refused);
    tcase_add_test(t, stdio_server_requests_answered);
    tcase_add_test(t, stdio_errors_and_bad_results);
    tcase_add_test(t, stdio_flood_of_garbage);
    tcase_add_test(t, stdio_server_exits_mid_call);
    tcase_add_test(t, stdio_server_exits_at_start);
    tcase_add_test(t, stdio_hang_times_out);
    tcase_add_test(t, stdio_hang_at_initialize);
    tcase_add_test(t, stdio_oversized_message);
    tcase_add_test(t, stdio_oversized_unterminated);
    tcase_add_test(t, stdio_environment_and_cwd);
    tcase_add_test(t, stdio_exec_failures);
    tcase_add_test(t, stdio_nothing_left_behind);
    tcase_add_test(t, stdio_own_group_and_clean_signals);
    tcase_add_test(t, stdio_write_to_dead_server);
    tcase_add_test(t, stdio_start_hook);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ipb_run_suite(mcpclient_stdio_suite()); }
