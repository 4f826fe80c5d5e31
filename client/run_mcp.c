/* `ipybox run` as a sandboxed MCP server (started by a supervisor, IPB_MCP_SANDBOX_RUN_ENV
 * set): when the sandbox cannot be made, the MCP client that started it learns why in its
 * own protocol, as the error answer to its first request (initialize), instead of only an
 * exit status, while the sentence goes to stderr (the session's log) as always. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "fdio.h"
#include "mcp_sandbox.h"

#define FIRST_LINE_MAX 65536
#define FIRST_LINE_MS 10000

void cli_run_mcp_refuse(const char *why) {
    if (!getenv(IPB_MCP_SANDBOX_RUN_ENV))
        return;
    static char buf[FIRST_LINE_MAX];
    size_t n = 0;
    long deadline = ipb_now_ms() + FIRST_LINE_MS;
    char *nl = NULL;
    while (!nl && n < sizeof(buf)) {
        long left = deadline - ipb_now_ms();
        struct pollfd p = {0, POLLIN, 0};
        int r = poll(&p, 1, left > 0 ? (int)left : 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        ssize_t got = read(0, buf + n, sizeof(buf) - n);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return;
        nl = memchr(buf + n, '\n', (size_t)got);
        n += (size_t)got;
    }
    if (!nl)
        return;
    json_t *req = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
    json_t *id = json_object_get(req, "id");
    if (!json_is_string(json_object_get(req, "method")) || !(json_is_integer(id) || json_is_string(id))) {
        json_decref(req);
        return;
    }
    json_t *ans = json_pack("{s:s, s:O, s:{s:i, s:s+}}", "jsonrpc", "2.0", "id", id, "error", "code", -32603, "message",
                            "its sandbox could not be made: ", why ? why : "");
    char *line = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
    if (line && ipb_write_all(1, line, strlen(line)) == 0)
        (void)ipb_write_all(1, "\n", 1);
    free(line);
    json_decref(ans);
    json_decref(req);
}
