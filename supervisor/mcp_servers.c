#include "mcp_servers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "hostpath.h"
#include "log.h"
#include "mcp_sandbox.h"
#include "shellgate.h"
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
    if (!(s->pool = ipb_callpool_new(err)))
        goto fail;
    return 0;
fail:
    close(s->dir_fd);
    close(s->exit_ep);
    s->dir_fd = s->exit_ep = -1;
    return ipb_error_wrap(err, "preparing the MCP tool package");
}

/* Its keeper thread and lock (registered servers). */
static int entry_setup(ipb_mcp_server_entry *e, ipb_error **err) {
    if (!(e->keeper = ipb_toolrun_start(err)))
        return -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->synced = true;
    return 0;
}

/* Runs fn(arg) on the server's keeper and waits for it. Only one at a time: the caller holds
 * e->connecting, or no call of e is active. */
static void on_keeper(ipb_mcp_server_entry *e, void (*fn)(void *), void *arg) {
    if (ipb_toolrun_submit(e->keeper, fn, arg))
        (void)ipb_toolrun_wait(e->keeper, -1);
    else
        log_error("MCP server '%s': its thread is busy (a bug); not run", e->name);
}

static void close_job(void *p) {
    ipb_mcp_server_entry *e = p;
    if (e->abandoned)
        ipb_mcpc_abort(e->client);
    else
        ipb_mcpc_close(e->client);
    e->client = NULL;
    e->abandoned = e->stale = false;
}

static void close_client_job(void *p) { ipb_mcpc_close(p); }

static void entry_free(ipb_mcp_server_entry *e) {
    if (!e)
        return;
    if (e->synced) {
        if (e->client)
            on_keeper(e, close_job, e);
        ipb_toolrun_stop(e->keeper, NULL);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
    } else {
        ipb_mcpc_close(e->client);
    }
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

/* Registration, on the server's keeper: connect and list. */
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

static bool job_of(void *arg, void *ud) { return ((ipb_tool_job *)arg)->entry == ud; }

/* Cancels the calls to e and waits until none is left running (their jobs wait in the pool to
 * be taken). A connection being made still takes up to its limit. */
static void settle(ipb_mcp_servers *s, ipb_mcp_server_entry *e) {
    if (!e->synced)
        return;
    ipb_callpool_cancel_if(s->pool, job_of, e);
    pthread_mutex_lock(&e->mu);
    while (e->active)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

json_t *ipb_mcp_servers_register(ipb_mcp_servers *s, const char *name, json_t *params, ipb_error **err) {
    if (!ipb_toolgen_server_name_ok(name, err) || ipb_shellgate_check_name(s, name, err) < 0 ||
        ipb_mcp_params_check(params, err) < 0) {
        ipb_error_wrap(err, "registering MCP server '%.100s'", name);
        return NULL;
    }
    ipb_mcp_server_entry *old = ipb_mcp_servers_get(s, name);
    if (old && !old->synced) {
        ipb_error_set(err, 0, "registering MCP server '%s': the name is taken by a server built into ipybox", name);
        return NULL;
    }
    if (!old && s->n >= IPB_MCP_MAX_SERVERS) {
        ipb_error_set(err, 0,
                      "registering MCP server '%s': %d servers are registered already, the most a session "
                      "takes",
                      name, IPB_MCP_MAX_SERVERS);
        return NULL;
    }
    /* A sandboxed server: what the client starts is `ipybox run ... -- COMMAND ARGS`. */
    json_t *eff = ipb_mcp_sandbox_wrap(name, params, s->sandbox_default, err);
    if (!eff) {
        ipb_error_wrap(err, "registering MCP server '%.100s'", name);
        return NULL;
    }
    ipb_mcp_server_entry *e = old;
    if (old) {
        settle(s, old);
    } else {
        ipb_mcp_server_entry **nv = realloc(s->v, (s->n + 1) * sizeof(*nv));
        if (nv)
            s->v = nv;
        if (!nv || !(e = calloc(1, sizeof(*e))) || !(e->name = strdup(name))) {
            free(e);
            ipb_error_set(err, ENOMEM, "registering MCP server '%s'", name);
            json_decref(eff);
            return NULL;
        }
        if (entry_setup(e, err) < 0) {
            entry_free(e);
            ipb_error_wrap(err, "registering MCP server '%s'", name);
            json_decref(eff);
            return NULL;
        }
    }
    reg_job j = {.name = name, .params = eff, .limits = &s->limits};
    on_keeper(e, reg_job_run, &j);
    ipb_toolgen_pkg pkg = {0};
    json_t *tools = json_object();
    if (!j.client) {
        *err = j.err;
        ipb_error_wrap(err, "registering MCP server '%s'", name);
        goto fail;
    }
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
    if (old) {
        if (old->client)
            on_keeper(old, close_job, old);
        json_decref(e->params);
        json_decref(e->tools);
        json_decref(e->modules);
    } else {
        s->v[s->n++] = e;
    }
    e->client = j.client;
    e->abandoned = e->stale = false;
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
    if (j.client) /* on the thread that started it, like every stdio server */
        on_keeper(e, close_client_job, j.client);
    if (!old)
        entry_free(e);
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
        if (!ipb_toolgen_server_name_ok(name, err) || ipb_shellgate_check_name(s, name, err) < 0 ||
            ipb_mcp_params_check(params, err) < 0) {
            json_decref(root);
            return ipb_error_wrap(err, "--mcp-config %s: server '%.100s'", path, name);
        }
        if (s->sandbox_default && json_object_get(params, "command") &&
            json_is_false(json_object_get(params, "sandbox"))) {
            json_decref(root);
            return ipb_error_set(err, EINVAL,
                                 "--mcp-config %s: server '%.100s': \"sandbox\": false is refused with "
                                 "--sandbox-mcp-servers",
                                 path, name);
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

/* Watches the pidfd of every stdio server (again: one-shot, disarmed once reported). A closed
 * pidfd left the set by itself. */
static void watch_exits(ipb_mcp_servers *s) {
    for (size_t i = 0; i < s->n; i++) {
        ipb_mcp_server_entry *e = s->v[i];
        if (!e->synced)
            continue;
        pthread_mutex_lock(&e->mu);
        int fd = ipb_mcpc_exit_fd(e->client);
        pthread_mutex_unlock(&e->mu);
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
    /* Taken (and so disarmed) at once: the loop does not spin on them. */
    while (epoll_wait(s->exit_ep, evs, IPB_MCP_MAX_SERVERS, 0) == IPB_MCP_MAX_SERVERS)
        ;
    for (size_t i = 0; i < s->n; i++) {
        ipb_mcp_server_entry *e = s->v[i];
        if (!e->synced)
            continue;
        ipb_mcpc *gone = NULL;
        pthread_mutex_lock(&e->mu);
        /* A client calls use is theirs: they fail, and the next call connects again. */
        if (!e->calls && !e->connecting && ipb_mcpc_exit_fd(e->client) >= 0 && !ipb_mcpc_alive(e->client)) {
            gone = e->client;
            e->client = NULL;
            e->abandoned = e->stale = false;
        }
        pthread_mutex_unlock(&e->mu);
        if (gone) {
            /* ipb_mcpc_alive reaped it; aborting does not wait for a process that is gone
             * (members of its group still running are killed). */
            log_info("MCP server '%s': its process ended; it starts again on next use", e->name);
            ipb_mcpc_abort(gone);
        }
    }
    watch_exits(s);
}

static void job_done(void *ud, void *arg) {
    ipb_mcp_servers *s = ud;
    if (s->job_done)
        s->job_done(s->job_done_ud, arg);
    else
        ipb_tool_job_free(arg);
}

void ipb_mcp_servers_disconnect(ipb_mcp_servers *s) {
    if (!s->pool)
        return;
    ipb_callpool_drain(s->pool, job_done, s);
    /* Closing waits for stdio servers to end (up to 4 s each): on their keepers, all at
     * once. */
    for (size_t i = 0; i < s->n; i++) {
        ipb_mcp_server_entry *e = s->v[i];
        if (e->synced && e->client && !ipb_toolrun_submit(e->keeper, close_job, e))
            log_error("MCP server '%s': its thread is busy (a bug); not stopped", e->name);
    }
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i]->synced)
            (void)ipb_toolrun_wait(s->v[i]->keeper, -1);
}

void ipb_mcp_servers_free(ipb_mcp_servers *s) {
    /* Closed on the threads that started them: a stdio server's parent-death signal follows
     * that thread, not the process. */
    ipb_mcp_servers_disconnect(s);
    ipb_callpool_free(s->pool, job_done, s);
    s->pool = NULL;
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

/* --- a call, on its own thread ------------------------------------------------------------ */

static bool cancelled(int cancel_fd) {
    struct pollfd p = {cancel_fd, POLLIN, 0};
    return cancel_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Waits on e->cv (held) a little; false once the call was cancelled. */
static bool wait_a_little(ipb_mcp_server_entry *e, int cancel_fd) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&e->cv, &e->mu, &until);
    return !cancelled(cancel_fd);
}

typedef struct connect_job {
    ipb_mcp_server_entry *e;
    const ipb_mcp_limits *limits;
    ipb_mcpc *client;
    ipb_error *err;
} connect_job;

static void connect_job_run(void *p) {
    connect_job *cj = p;
    cj->client = ipb_mcpc_connect(cj->e->name, cj->e->params, cj->limits, &cj->err);
}

/* With e->mu held: a live client for the call, connected by the keeper when there is none
 * (one connect at a time). NULL with j->err. */
static ipb_mcpc *client_for(ipb_tool_job *j, int cancel_fd) {
    ipb_mcp_server_entry *e = j->entry;
    for (;;) {
        if (cancelled(cancel_fd)) {
            ipb_error_set(&j->err, ECANCELED, "the call of '%s' was cancelled before it started", e->name);
            return NULL;
        }
        if (e->client && ipb_mcpc_alive(e->client) && e->stale && e->answered != e->stale_mark)
            e->stale = false; /* it answered since: it serves */
        if (e->client && ipb_mcpc_alive(e->client) && !(e->stale && !e->calls && !e->connecting))
            return e->client;
        if (e->client && e->stale && !e->calls && !e->connecting) {
            ipb_mcpc *busy = e->client;
            e->client = NULL;
            e->stale = e->abandoned = false;
            pthread_mutex_unlock(&e->mu);
            log_info("MCP server '%s': a call got no answer within its limit and nothing was answered since; "
                     "starting it again",
                     e->name);
            ipb_mcpc_abort(busy);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        if (e->client && !e->calls && !e->connecting) {
            ipb_mcpc *dead = e->client;
            e->client = NULL;
            e->abandoned = e->stale = false;
            pthread_mutex_unlock(&e->mu);
            log_info("MCP server '%s': its connection ended; reconnecting", e->name);
            ipb_mcpc_close(dead);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        if (e->client || e->connecting) { /* calls on a dead client still end, or a connect runs */
            wait_a_little(e, cancel_fd);
            continue;
        }
        e->connecting = true;
        pthread_mutex_unlock(&e->mu);
        connect_job cj = {.e = e, .limits = j->limits};
        on_keeper(e, connect_job_run, &cj);
        pthread_mutex_lock(&e->mu);
        e->connecting = false;
        pthread_cond_broadcast(&e->cv);
        if (!cj.client) {
            /* The sentence can name the command, its directory or the URL with ${VAR} filled in:
             * it goes to the log, the kernel is told less. */
            log_warn("connecting to MCP server '%s': %s", e->name, ipb_error_msg(cj.err));
            ipb_error_set(&j->err, cj.err ? cj.err->errnum : 0,
                          "connecting to MCP server '%s' failed (the supervisor's log says why)", e->name);
            ipb_error_free(cj.err);
            return NULL;
        }
        e->client = cj.client;
    }
}

static void job_run(void *p, int cancel_fd) {
    ipb_tool_job *j = p;
    ipb_mcp_server_entry *e = j->entry;
    pthread_mutex_lock(&e->mu);
    ipb_mcpc *c = client_for(j, cancel_fd);
    if (c)
        e->calls++;
    pthread_mutex_unlock(&e->mu);
    if (c)
        j->result = ipb_mcpc_call(c, j->tool, j->args, cancel_fd, j->timeout_ms, &j->err);
    pthread_mutex_lock(&e->mu);
    if (c) {
        e->calls--;
        /* Given up on (cancelled, or its own limit passed): the server was told, but may still
         * be busy with it. */
        if (j->err && (j->err->errnum == ECANCELED || j->err->errnum == ETIMEDOUT))
            e->abandoned = true;
        if (j->result || (j->err && j->err->errnum == EREMOTEIO))
            e->answered++;
        else if (j->err && j->err->errnum == ETIMEDOUT && c == e->client) {
            e->stale = true;
            e->stale_mark = e->answered;
        }
    }
    e->active--;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

int ipb_tool_job_start(ipb_mcp_servers *s, ipb_tool_job *j, ipb_error **err) {
    ipb_mcp_server_entry *e = j->entry;
    if (!e->synced)
        return ipb_error_set(err, EINVAL, "MCP server '%s' is built in: its calls are answered in-process", e->name);
    pthread_mutex_lock(&e->mu);
    bool full = e->active >= IPB_MCP_MAX_CALLS_PER_SERVER;
    if (!full)
        e->active++;
    pthread_mutex_unlock(&e->mu);
    if (full)
        return ipb_error_set(err, EBUSY, "MCP server '%s' runs %d calls already, the most one server takes at once",
                             e->name, IPB_MCP_MAX_CALLS_PER_SERVER);
    if (!(j->call = ipb_callpool_start(s->pool, job_run, j, err))) {
        pthread_mutex_lock(&e->mu);
        e->active--;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    return 0;
}

void ipb_tool_job_cancel(ipb_tool_job *j) { ipb_callpool_cancel(j->call); }

ipb_tool_job *ipb_mcp_servers_take(ipb_mcp_servers *s) { return ipb_callpool_take(s->pool); }

int ipb_mcp_servers_done_fd(const ipb_mcp_servers *s) { return ipb_callpool_fd(s->pool); }

void ipb_tool_job_free(ipb_tool_job *j) {
    if (!j)
        return;
    free(j->tool);
    json_decref(j->args);
    json_decref(j->result);
    ipb_error_free(j->err);
    free(j);
}
