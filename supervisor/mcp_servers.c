#include "mcp_servers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "hostpath.h"
#include "log.h"
#include "mcp_sandbox.h"
#include "strbuf.h"
#include "toolgen.h"

#define CONFIG_MAX (4u << 20)

int ipb_mcp_servers_init(ipb_mcp_servers *s, const char *dir, ipb_error **err) {
    memset(s, 0, sizeof(*s));
    /* A sandboxed server started here gets its sandbox from our monitor, when we have one. */
    ipb_mcpc_set_stdio_hook(ipb_mcp_sandbox_start_hook);
    s->limits = (ipb_mcp_limits){.connect_ms = 30000, .call_ms = 120000, .max_message = 16u << 20};
    s->exit_ep = epoll_create1(EPOLL_CLOEXEC);
    if (s->exit_ep < 0)
        return ipb_error_set(err, errno, "preparing the MCP servers: epoll_create1");
    s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s->dir_fd < 0) {
        ipb_error_set(err, errno, "opening %s", dir);
        close(s->exit_ep);
        s->exit_ep = -1;
        return -1;
    }
    if (ipb_toolgen_write_runtime(s->dir_fd, err) < 0)
        goto fail;
    if (!(s->run = ipb_toolrun_start(err)))
        goto fail;
    return 0;
fail:
    close(s->dir_fd);
    close(s->exit_ep);
    s->dir_fd = s->exit_ep = -1;
    return ipb_error_wrap(err, "preparing the MCP tool package");
}

static void entry_free(ipb_mcp_server_entry *e) {
    if (!e)
        return;
    ipb_mcpc_close(e->client);
    free(e->name);
    json_decref(e->params);
    json_decref(e->tools);
    json_decref(e->modules);
    free(e);
}

ipb_mcp_server_entry *ipb_mcp_servers_get(ipb_mcp_servers *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i]->name, name))
            return s->v[i];
    return NULL;
}

char *ipb_mcp_servers_names(const ipb_mcp_servers *s) {
    ipb_buf b = {0};
    for (size_t i = 0; i < s->n; i++)
        ipb_buf_appendf(&b, "%s%s", i ? ", " : "", s->v[i]->name);
    if (!s->n)
        ipb_buf_appendf(&b, "none");
    return (char *)ipb_buf_cstr(&b);
}

static void watch_exits(ipb_mcp_servers *s);

/* Registration, on the tool thread: connect and list. */
typedef struct reg_job {
    const char *name;
    json_t *params;
    const ipb_mcp_limits *limits;
    ipb_mcpc *client;
    json_t *tools;
    ipb_error *err;
} reg_job;

static void reg_job_run(void *p) {
    reg_job *j = p;
    j->client = ipb_mcpc_connect(j->name, j->params, j->limits, &j->err);
    if (j->client && !(j->tools = ipb_mcpc_list_tools(j->client, &j->err))) {
        ipb_mcpc_close(j->client);
        j->client = NULL;
    }
}

/* Ends whatever the tool thread is doing (a call left running by a cell that ended): its
 * outcome has nobody waiting for it any more, so it is cancelled, and the wait is short (a
 * connection being made still takes up to its limit). */
static void drain_thread(ipb_mcp_servers *s) {
    if (!ipb_toolrun_busy(s->run))
        return;
    ipb_toolrun_cancel(s->run);
    ipb_tool_job *left = ipb_toolrun_wait(s->run, -1);
    if (left && s->job_done)
        s->job_done(s->job_done_ud, left);
    else if (left)
        ipb_tool_job_free(left);
}

json_t *ipb_mcp_servers_register(ipb_mcp_servers *s, const char *name, json_t *params, ipb_error **err) {
    if (!ipb_toolgen_server_name_ok(name, err) || ipb_mcp_params_check(params, err) < 0) {
        ipb_error_wrap(err, "registering MCP server '%.100s'", name);
        return NULL;
    }
    ipb_mcp_server_entry *old = ipb_mcp_servers_get(s, name);
    if (!old && s->n >= IPB_MCP_MAX_SERVERS) {
        ipb_error_set(err, 0, "registering MCP server '%s': %d servers are registered already, the most a session "
                              "takes", name, IPB_MCP_MAX_SERVERS);
        return NULL;
    }
    /* A sandboxed server: what the client starts is `ipybox run ... -- COMMAND ARGS`. */
    json_t *eff = ipb_mcp_sandbox_wrap(name, params, s->sandbox_default, err);
    if (!eff) {
        ipb_error_wrap(err, "registering MCP server '%.100s'", name);
        return NULL;
    }
    drain_thread(s);
    reg_job j = {.name = name, .params = eff, .limits = &s->limits};
    if (!ipb_toolrun_submit(s->run, reg_job_run, &j) || !ipb_toolrun_wait(s->run, -1)) {
        ipb_error_set(err, EBUSY, "registering MCP server '%s': the tool thread is busy", name);
        json_decref(eff);
        return NULL;
    }
    if (!j.client) {
        *err = j.err;
        ipb_error_wrap(err, "registering MCP server '%s'", name);
        json_decref(eff);
        return NULL;
    }
    ipb_toolgen_pkg pkg = {0};
    json_t *tools = json_object();
    if (ipb_toolgen_build(name, j.tools, &pkg, err) < 0 || ipb_toolgen_write(s->dir_fd, name, &pkg, err) < 0) {
        ipb_error_wrap(err, "registering MCP server '%s': generating its package", name);
        goto fail;
    }
    size_t i;
    json_t *t;
    json_array_foreach(j.tools, i, t) {
        const char *tn = json_string_value(json_object_get(t, "name"));
        if (tn && strlen(tn) == json_string_length(json_object_get(t, "name")))
            json_object_set(tools, tn, t);
    }
    ipb_mcp_server_entry *e = old;
    if (!e) {
        ipb_mcp_server_entry **nv = realloc(s->v, (s->n + 1) * sizeof(*nv));
        if (!nv || !(e = calloc(1, sizeof(*e))) || !(e->name = strdup(name))) {
            if (nv)
                s->v = nv;
            free(e);
            ipb_error_set(err, ENOMEM, "registering MCP server '%s'", name);
            goto fail;
        }
        s->v = nv;
        s->v[s->n++] = e;
    } else {
        ipb_mcpc_close(e->client);
        json_decref(e->params);
        json_decref(e->tools);
        json_decref(e->modules);
    }
    e->client = j.client;
    e->params = eff;
    e->tools = tools;
    e->modules = json_incref(pkg.modules);
    json_t *ret = json_pack("{s:s, s:O, s:O}", "server", name, "modules", pkg.modules, "skipped", pkg.skipped);
    log_info("MCP server '%s' registered: %zu tools (%s, %s)", name, json_array_size(pkg.modules),
             ipb_mcpc_server_name(j.client) ? ipb_mcpc_server_name(j.client) : "unnamed",
             ipb_mcpc_protocol_version(j.client));
    ipb_toolgen_pkg_free(&pkg);
    json_decref(j.tools);
    watch_exits(s);
    return ret;
fail:
    json_decref(eff);
    ipb_toolgen_pkg_free(&pkg);
    json_decref(tools);
    json_decref(j.tools);
    ipb_mcpc_close(j.client);
    return NULL;
}

int ipb_mcp_servers_load_config(ipb_mcp_servers *s, const char *path, ipb_error **err) {
    cleanup_free char *text = NULL;
    size_t len = 0;
    /* Resolved from "/" on fds, read through the fd: no symlink a sandbox could have planted
     * (and swapped in since) is followed. */
    if (ipb_host_named_read("--mcp-config", path, CONFIG_MAX, &text, &len, err) < 0)
        return -1;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ipb_error_set(err, 0, "--mcp-config %s: line %d: %s", path, jerr.line, jerr.text);
    json_t *servers = json_object_get(root, "mcpServers");
    if (!json_is_object(servers)) {
        json_decref(root);
        return ipb_error_set(err, 0, "--mcp-config %s: expected {\"mcpServers\": {NAME: PARAMS, ...}}", path);
    }
    const char *name;
    json_t *params;
    /* Everything is checked before anything starts. */
    json_object_foreach(servers, name, params) {
        if (!ipb_toolgen_server_name_ok(name, err) || ipb_mcp_params_check(params, err) < 0) {
            json_decref(root);
            return ipb_error_wrap(err, "--mcp-config %s: server '%.100s'", path, name);
        }
        if (s->sandbox_default && json_object_get(params, "command") && json_is_false(json_object_get(params, "sandbox"))) {
            json_decref(root);
            return ipb_error_set(err, EINVAL, "--mcp-config %s: server '%.100s': \"sandbox\": false is refused with "
                                              "--sandbox-mcp-servers", path, name);
        }
    }
    json_object_foreach(servers, name, params) {
        ipb_error *e = NULL;
        json_t *res = ipb_mcp_servers_register(s, name, params, &e);
        if (!res)
            log_warn("--mcp-config: %s; left out (register_mcp_server can add it later)", ipb_error_msg(e));
        json_decref(res);
        ipb_error_free(e);
    }
    json_decref(root);
    return 0;
}

static void disconnect_job(void *p) {
    ipb_mcp_servers *s = p;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i]->abandoned)
            ipb_mcpc_abort(s->v[i]->client);
        else
            ipb_mcpc_close(s->v[i]->client);
        s->v[i]->client = NULL;
        s->v[i]->abandoned = false;
    }
}

/* Watches the pidfd of every stdio server (again: one-shot, disarmed once reported). A closed
 * pidfd left the set by itself. */
static void watch_exits(ipb_mcp_servers *s) {
    for (size_t i = 0; i < s->n; i++) {
        int fd = ipb_mcpc_exit_fd(s->v[i]->client);
        if (fd < 0)
            continue;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.fd = fd};
        if (epoll_ctl(s->exit_ep, EPOLL_CTL_MOD, fd, &ev) < 0 &&
            (errno != ENOENT || epoll_ctl(s->exit_ep, EPOLL_CTL_ADD, fd, &ev) < 0))
            log_debug("MCP server '%s': cannot watch its process: %s", s->v[i]->name, strerror(errno));
    }
}

int ipb_mcp_servers_fd(const ipb_mcp_servers *s) { return s->exit_ep; }

void ipb_mcp_servers_reap(ipb_mcp_servers *s) {
    struct epoll_event evs[IPB_MCP_MAX_SERVERS];
    /* Taken (and so disarmed) even while the thread is busy: the loop does not spin on them. */
    while (epoll_wait(s->exit_ep, evs, IPB_MCP_MAX_SERVERS, 0) == IPB_MCP_MAX_SERVERS)
        ;
    if (!s->run || ipb_toolrun_busy(s->run))
        return;
    for (size_t i = 0; i < s->n; i++) {
        ipb_mcp_server_entry *e = s->v[i];
        if (ipb_mcpc_exit_fd(e->client) < 0 || ipb_mcpc_alive(e->client))
            continue;
        /* ipb_mcpc_alive reaped it; closing does not wait for a process that is gone (members
         * of its group still running are killed). */
        log_info("MCP server '%s': its process ended; it starts again on next use", e->name);
        ipb_mcpc_abort(e->client);
        e->client = NULL;
        e->abandoned = false;
    }
    watch_exits(s);
}


void ipb_mcp_servers_disconnect(ipb_mcp_servers *s) {
    if (!s->run)
        return;
    drain_thread(s);
    /* Closing waits for stdio servers to end (up to 4 s each): on the thread, like any other
     * wait on a server. */
    if (ipb_toolrun_submit(s->run, disconnect_job, s))
        (void)ipb_toolrun_wait(s->run, -1);
}

void ipb_mcp_servers_free(ipb_mcp_servers *s) {
    /* Closed on the thread that started them: a stdio server's parent-death signal follows
     * that thread, not the process. */
    ipb_mcp_servers_disconnect(s);
    ipb_toolrun_stop(s->run, (void (*)(void *))ipb_tool_job_free);
    s->run = NULL;
    for (size_t i = 0; i < s->n; i++)
        entry_free(s->v[i]);
    free(s->v);
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    if (s->exit_ep >= 0)
        close(s->exit_ep);
    memset(s, 0, sizeof(*s));
    s->dir_fd = s->exit_ep = -1;
}

void ipb_tool_job_run(void *p) {
    ipb_tool_job *j = p;
    ipb_mcp_server_entry *e = j->entry;
    if (e->local_call) {
        j->result = e->local_call(e, j->tool, j->args, &j->err);
        return;
    }
    if (e->client && !ipb_mcpc_alive(e->client)) {
        log_info("MCP server '%s': its connection ended; reconnecting", e->name);
        ipb_mcpc_close(e->client);
        e->client = NULL;
    } else if (e->client && e->abandoned) {
        /* Its last call was cancelled (the caller went away) and it never answered: a server
         * that serves one call at a time may still be busy with it, so it is stopped and a new
         * one (a new session over HTTP) takes this call. */
        log_info("MCP server '%s': its last call was cancelled without an answer; starting it again", e->name);
        ipb_mcpc_abort(e->client);
        e->client = NULL;
    }
    e->abandoned = false;
    if (!e->client) {
        struct pollfd cp = {j->cancel_fd, POLLIN, 0};
        if (j->cancel_fd >= 0 && poll(&cp, 1, 0) > 0) {
            ipb_error_set(&j->err, ECANCELED, "the call of '%s' was cancelled before it started", e->name);
            return;
        }
        ipb_error *cerr = NULL;
        if (!(e->client = ipb_mcpc_connect(e->name, e->params, j->limits, &cerr))) {
            /* The sentence can name the command, its directory or the URL with ${VAR} filled in:
             * it goes to the log, the kernel is told less. */
            log_warn("connecting to MCP server '%s': %s", e->name, ipb_error_msg(cerr));
            ipb_error_set(&j->err, cerr ? cerr->errnum : 0,
                          "connecting to MCP server '%s' failed (the supervisor's log says why)", e->name);
            ipb_error_free(cerr);
            return;
        }
    }
    ipb_mcpc_set_cancel_fd(e->client, j->cancel_fd);
    j->result = ipb_mcpc_call_tool(e->client, j->tool, j->args, &j->err);
    ipb_mcpc_set_cancel_fd(e->client, -1);
    if (j->err && j->err->errnum == ECANCELED)
        e->abandoned = true;
    else if (j->result)
        e->abandoned = false;
}

void ipb_tool_job_free(ipb_tool_job *j) {
    if (!j)
        return;
    free(j->tool);
    json_decref(j->args);
    json_decref(j->result);
    ipb_error_free(j->err);
    free(j);
}
