#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "fdio.h"
#include "mountplan.h"
#include "pathrules.h"
#include "wsname.h"

int ipb_strv_push(ipb_strv *s, const char *v) {
    char **n = realloc(s->v, (s->n + 2) * sizeof(char *));
    if (!n)
        return -ENOMEM;
    s->v = n;
    if (!(s->v[s->n] = strdup(v)))
        return -ENOMEM;
    s->n++;
    s->v[s->n] = NULL;
    return 0;
}

void ipb_strv_free(ipb_strv *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

void ipb_options_init(ipb_options *o) {
    memset(o, 0, sizeof(*o));
    o->tmp_size = IPB_DEFAULT_TMP_SIZE;
    o->shm_size = IPB_DEFAULT_SHM_SIZE;
    o->max_output_chars = IPB_DEFAULT_MAX_OUTPUT;
    o->zygote = true;
}

void ipb_options_free(ipb_options *o) {
    ipb_strv_free(&o->allowed_dirs);
    ipb_strv_free(&o->allowed_domains);
    ipb_egress_free(&o->egress);
    ipb_strv_free(&o->env);
    ipb_strv_free(&o->env_files);
    free(o->env_spans);
    for (size_t i = 0; i < o->n_binds; i++) {
        free(o->binds[i].host);
        free(o->binds[i].rel);
    }
    free(o->binds);
    free(o->rootfs);
    free(o->container_tag);
    free(o->workspace);
    free(o->python);
    free(o->mcp_config);
    free(o->home_dir);
    free(o->cwd);
    ipb_strv_free(&o->approve_tools);
    memset(o, 0, sizeof(*o));
}

int ipb_parse_size(const char *s, uint64_t *ret) {
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        return -EINVAL;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end += (*end == 'i' && (end[1] == 'B' || end[1] == 'b')) ? 2 : 1;
    if (*end)
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *ret = (uint64_t)v << shift;
    return 0;
}

static bool env_key_ok(const char *k, size_t len) {
    if (len == 0 || !(isalpha((unsigned char)k[0]) || k[0] == '_'))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!(isalnum((unsigned char)k[i]) || k[i] == '_'))
            return false;
    return true;
}

int ipb_check_env_assignment(const char *kv, ipb_error **err) {
    const char *eq = strchr(kv, '=');
    if (!eq)
        return ipb_error_set(err, 0, "'%s' is not KEY=VALUE", kv);
    size_t klen = (size_t)(eq - kv);
    if (!env_key_ok(kv, klen))
        return ipb_error_set(err, 0,
                             "'%.*s' is not a valid variable name (letters, digits, '_', not starting with a digit)",
                             (int)klen, kv);
    /* ipykernel exits at start when JPY_PARENT_PID names a parent it cannot see. */
    if (klen == strlen("JPY_PARENT_PID") && !strncmp(kv, "JPY_PARENT_PID", klen))
        return ipb_error_set(err, 0, "JPY_PARENT_PID is reserved by the sandbox");
    return 0;
}

int ipb_parse_env_file(const char *text, size_t len, const char *name, ipb_strv *env, ipb_error **err) {
    size_t pos = 0;
    int lineno = 0;
    while (pos < len) {
        lineno++;
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t llen = nl ? (size_t)(nl - line) : len - pos;
        pos += llen + (nl ? 1 : 0);
        if (memchr(line, '\0', llen))
            return ipb_error_set(err, 0, "%s:%d: contains a NUL byte", name, lineno);
        while (llen && (line[llen - 1] == '\r' || isspace((unsigned char)line[llen - 1])))
            llen--;
        while (llen && isspace((unsigned char)*line)) {
            line++;
            llen--;
        }
        if (llen == 0 || line[0] == '#')
            continue;
        if (llen > 7 && !strncmp(line, "export", 6) && isspace((unsigned char)line[6])) {
            line += 7;
            llen -= 7;
            while (llen && isspace((unsigned char)*line)) {
                line++;
                llen--;
            }
        }
        const char *eq = memchr(line, '=', llen);
        if (!eq)
            return ipb_error_set(err, 0, "%s:%d: expected KEY=VALUE", name, lineno);
        size_t klen = (size_t)(eq - line);
        while (klen && isspace((unsigned char)line[klen - 1]))
            klen--;
        const char *val = eq + 1;
        size_t vlen = llen - (size_t)(val - line);
        while (vlen && isspace((unsigned char)*val)) {
            val++;
            vlen--;
        }
        if (vlen >= 2 && (val[0] == '"' || val[0] == '\'') && val[vlen - 1] == val[0]) {
            val++;
            vlen -= 2;
        }
        cleanup_free char *kv = NULL;
        if (asprintf(&kv, "%.*s=%.*s", (int)klen, line, (int)vlen, val) < 0)
            return ipb_error_set(err, ENOMEM, "%s", name);
        ipb_error *e = NULL;
        if (ipb_check_env_assignment(kv, &e) < 0) {
            ipb_error_set(err, 0, "%s:%d: %s", name, lineno, ipb_error_msg(e));
            ipb_error_free(e);
            return -1;
        }
        if (ipb_strv_push(env, kv) < 0)
            return ipb_error_set(err, ENOMEM, "%s", name);
    }
    return 0;
}

static int parse_bind(ipb_options *o, const char *spec, ipb_error **err) {
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1])
        return ipb_error_set(err, 0, "--container-bind '%s': expected HOST_PATH:RELATIVE_PATH", spec);
    cleanup_free char *host = strndup(spec, (size_t)(colon - spec));
    const char *rel = colon + 1;
    if (!host)
        return ipb_error_set(err, ENOMEM, "--container-bind");
    if (host[0] != '/')
        return ipb_error_set(err, 0, "--container-bind '%s': the host path must be absolute", spec);
    ipb_error *e = NULL;
    if (ipb_check_relpath(rel, strlen(rel), &e) < 0) {
        ipb_error_set(err, 0, "--container-bind '%s': %s", spec, ipb_error_msg(e));
        ipb_error_free(e);
        return -1;
    }
    ipb_bind *n = realloc(o->binds, (o->n_binds + 1) * sizeof(*n));
    if (!n)
        return ipb_error_set(err, ENOMEM, "--container-bind");
    o->binds = n;
    n[o->n_binds].host = steal_ptr(host);
    n[o->n_binds].rel = strdup(rel);
    o->n_binds++;
    return 0;
}

static int set_str(char **slot, const char *opt, const char *v, ipb_error **err) {
    if (!*v)
        return ipb_error_set(err, 0, "%s needs a non-empty value", opt);
    free(*slot);
    *slot = strdup(v);
    return *slot ? 0 : ipb_error_set(err, ENOMEM, "%s", opt);
}

enum opt_id {
    OPT_ALLOWED_DIR,
    OPT_ALLOWED_DOMAIN,
    OPT_RESOLVE,
    OPT_ENV_VAR,
    OPT_ENV_FILE,
    OPT_BIND,
    OPT_ROOTFS,
    OPT_WORKSPACE,
    OPT_PYTHON,
    OPT_TMP_SIZE,
    OPT_SHM_SIZE,
    OPT_MAX_OUTPUT,
    OPT_MAX_CONNS,
    OPT_VERBOSE,
    OPT_HELP,
    OPT_MEMORY,
    OPT_MAX_PROCS,
    OPT_CPU_WEIGHT,
    OPT_MCP_CONFIG,
    OPT_APPROVE_TOOLS,
    OPT_MCP_TIMEOUT,
    OPT_SANDBOX_MCP,
    OPT_HOME,
    OPT_CWD,
    OPT_HOST_DIR,
    OPT_ENV_FROM,
    OPT_APPROVE_SHELL,
    OPT_REQUIRE_SHELL_ESCAPE,
    OPT_ZYGOTE,
    OPT_NO_ZYGOTE,
    OPT_STANDBY,
    OPT_NO_STANDBY,
};
static const struct {
    const char *name;
    enum opt_id id;
    bool has_arg;
} option_table[] = {
    {"--allowed-dir", OPT_ALLOWED_DIR, true},
    {"--allowed-domain", OPT_ALLOWED_DOMAIN, true},
    {"--resolve", OPT_RESOLVE, true},
    {"--container-env-var", OPT_ENV_VAR, true},
    {"--container-env-file", OPT_ENV_FILE, true},
    {"--container-bind", OPT_BIND, true},
    {"--rootfs", OPT_ROOTFS, true},
    {"--container-tag", OPT_ROOTFS, true},
    {"--workspace", OPT_WORKSPACE, true},
    {"--python", OPT_PYTHON, true},
    {"--tmp-size", OPT_TMP_SIZE, true},
    {"--shm-size", OPT_SHM_SIZE, true},
    {"--max-output-chars", OPT_MAX_OUTPUT, true},
    {"--max-connections", OPT_MAX_CONNS, true},
    {"--memory", OPT_MEMORY, true},
    {"--max-processes", OPT_MAX_PROCS, true},
    {"--cpu-weight", OPT_CPU_WEIGHT, true},
    {"--mcp-config", OPT_MCP_CONFIG, true},
    {"--approve-tools", OPT_APPROVE_TOOLS, true},
    {"--mcp-timeout", OPT_MCP_TIMEOUT, true},
    {"--sandbox-mcp-servers", OPT_SANDBOX_MCP, false},
    {"--home", OPT_HOME, true},
    {"--cwd", OPT_CWD, true},
    {"--host-dir", OPT_HOST_DIR, true},
    {"--container-env-from", OPT_ENV_FROM, true},
    {"--approve-shell", OPT_APPROVE_SHELL, false},
    {"--require-shell-escape", OPT_REQUIRE_SHELL_ESCAPE, false},
    {"--zygote", OPT_ZYGOTE, false},
    {"--no-zygote", OPT_NO_ZYGOTE, false},
    {"--standby", OPT_STANDBY, false},
    {"--no-standby", OPT_NO_STANDBY, false},
    {"--verbose", OPT_VERBOSE, false},
    {"-v", OPT_VERBOSE, false},
    {"--help", OPT_HELP, false},
    {"-h", OPT_HELP, false},
};

/* An absolute path without ".", ".." or empty components (a trailing '/' aside). */
static bool plain_abs_path(const char *p) {
    if (p[0] != '/' || strlen(p) >= 4096)
        return false;
    for (const char *c = p + 1; *c;) {
        size_t n = strcspn(c, "/");
        if ((n == 0 && c[n]) || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        c += n;
        if (*c)
            c++;
    }
    return true;
}

/* --host-dir: bound at its own path, so it must not be (or hold) a place of the sandbox's own. */
static int add_host_dir(ipb_options *o, const char *v, ipb_error **err) {
    static const char *const own[] = {"/usr",          "/bin",        "/sbin",         "/lib", "/lib32",   "/lib64",
                                      "/libx32",       "/etc",        "/proc",         "/dev", "/sys",     "/run",
                                      IPB_SANDBOX_APP, "/opt/ipybox", "/home/appuser", "/tmp", "/var/tmp", NULL};
    if (!plain_abs_path(v) || !strcmp(v, "/"))
        return ipb_error_set(err, 0, "--host-dir '%s': must be an absolute path other than / (no '.', '..' or '//')",
                             v);
    size_t vl = strlen(v);
    while (vl > 1 && v[vl - 1] == '/')
        vl--;
    for (const char *const *p = own; *p; p++) {
        size_t pl = strlen(*p);
        bool inside = vl >= pl && !strncmp(v, *p, pl) && (v[pl] == '/' || pl == vl);
        bool holds = pl > vl && !strncmp(v, *p, vl) && (*p)[vl] == '/';
        if (inside || holds)
            return ipb_error_set(err, 0, "--host-dir '%s': %s the sandbox's own %s", v,
                                 inside ? "is inside" : "would cover", *p);
    }
    ipb_bind *n = realloc(o->binds, (o->n_binds + 1) * sizeof(*n));
    if (!n)
        return ipb_error_set(err, ENOMEM, "--host-dir");
    o->binds = n;
    n[o->n_binds].host = strndup(v, vl);
    n[o->n_binds].rel = strndup(v, vl);
    if (!n[o->n_binds].host || !n[o->n_binds].rel) {
        free(n[o->n_binds].host);
        free(n[o->n_binds].rel);
        return ipb_error_set(err, ENOMEM, "--host-dir");
    }
    o->n_binds++;
    o->n_host_dirs++;
    return 0;
}

static int apply_option(ipb_options *o, const char *name, enum opt_id id, const char *v, ipb_error **err) {
    uint64_t size;
    if ((id == OPT_HOME || id == OPT_CWD || id == OPT_HOST_DIR || id == OPT_ENV_FROM) && !o->run_only_ok)
        return ipb_error_set(err, 0, "%s is an option of `ipybox run` only", name);
    /* --host-dir entries stay the last binds (mountplan.c binds them after /tmp). */
    if (id == OPT_BIND && o->n_host_dirs)
        return ipb_error_set(err, 0, "--container-bind must come before --host-dir");
    switch (id) {
    case OPT_SANDBOX_MCP:
        o->sandbox_mcp_servers = true;
        return 0;
    case OPT_HOME:
        if (!plain_abs_path(v))
            return ipb_error_set(err, 0, "--home '%s': must be an absolute path (no '.', '..' or '//')", v);
        return set_str(&o->home_dir, name, v, err);
    case OPT_CWD:
        if (!plain_abs_path(v))
            return ipb_error_set(err, 0, "--cwd '%s': must be an absolute path inside the sandbox", v);
        return set_str(&o->cwd, name, v, err);
    case OPT_HOST_DIR:
        return add_host_dir(o, v, err);
    case OPT_ENV_FROM: {
        /* NAME=VAR: the sandbox's NAME gets the value of VAR in this process's environment (so
         * that a secret is not on a command line). */
        const char *eq = strchr(v, '=');
        const char *val = eq && eq[1] ? getenv(eq + 1) : NULL;
        if (!eq || !eq[1])
            return ipb_error_set(err, 0, "--container-env-from '%s': expected NAME=VARIABLE", v);
        if (!val)
            return ipb_error_set(err, 0, "--container-env-from '%s': %s is not set", v, eq + 1);
        cleanup_free char *kv = NULL;
        if (asprintf(&kv, "%.*s=%s", (int)(eq - v), v, val) < 0)
            return ipb_error_set(err, ENOMEM, "%s", name);
        if (ipb_check_env_assignment(kv, err) < 0)
            return ipb_error_wrap(err, "--container-env-from");
        return ipb_strv_push(&o->env, kv) < 0 ? ipb_error_set(err, ENOMEM, "%s", name) : 0;
    }
    case OPT_ALLOWED_DIR:
        if (v[0] != '/')
            return ipb_error_set(err, 0, "--allowed-dir '%s': must be an absolute path", v);
        return ipb_strv_push(&o->allowed_dirs, v) < 0 ? ipb_error_set(err, ENOMEM, "%s", name) : 0;
    case OPT_ALLOWED_DOMAIN:
        if (ipb_egress_add_rule(&o->egress, v, err) < 0)
            return -1;
        return ipb_strv_push(&o->allowed_domains, v) < 0 ? ipb_error_set(err, ENOMEM, "%s", name) : 0;
    case OPT_RESOLVE:
        return ipb_egress_add_pin(&o->egress, v, err);
    case OPT_MCP_TIMEOUT:
    case OPT_MAX_CONNS:
    case OPT_MAX_PROCS:
    case OPT_CPU_WEIGHT: {
        unsigned long lo = id == OPT_MAX_PROCS ? 16 : 1, hi = id == OPT_MAX_PROCS     ? 1ul << 22
                                                              : id == OPT_CPU_WEIGHT  ? 10000
                                                              : id == OPT_MCP_TIMEOUT ? 86400
                                                                                      : 100000;
        char *end;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        if (errno || end == v || *end || n < lo || n > hi || v[0] == '-')
            return ipb_error_set(err, 0, "%s '%s': must be a number from %lu to %lu", name, v, lo, hi);
        *(id == OPT_MAX_CONNS     ? &o->max_connections
          : id == OPT_MAX_PROCS   ? &o->pids_max
          : id == OPT_MCP_TIMEOUT ? &o->mcp_timeout
                                  : &o->cpu_weight) = (unsigned)n;
        return 0;
    }
    case OPT_MEMORY:
        if (ipb_parse_size(v, &size) < 0 || size < (16ull << 20))
            return ipb_error_set(err, 0, "--memory '%s': expected a size of at least 16M, like 512M or 2G", v);
        o->memory_max = size;
        return 0;
    case OPT_ENV_VAR:
        if (ipb_check_env_assignment(v, err) < 0)
            return ipb_error_wrap(err, "--container-env-var");
        return ipb_strv_push(&o->env, v) < 0 ? ipb_error_set(err, ENOMEM, "%s", name) : 0;
    case OPT_ENV_FILE: {
        cleanup_free char *text = NULL;
        size_t len = 0;
        int r = ipb_read_file(v, 1 << 20, &text, &len);
        if (r < 0)
            return ipb_error_set(err, -r, "--container-env-file: cannot read '%s'", v);
        struct ipb_env_span *sp = realloc(o->env_spans, (o->env_files.n + 1) * sizeof(*sp));
        if (!sp)
            return ipb_error_set(err, ENOMEM, "%s", name);
        o->env_spans = sp;
        if (ipb_strv_push(&o->env_files, v) < 0)
            return ipb_error_set(err, ENOMEM, "%s", name);
        size_t start = o->env.n;
        if (ipb_parse_env_file(text, len, v, &o->env, err) < 0)
            return ipb_error_wrap(err, "--container-env-file");
        /* The supervisor reads the file again, through fds, for what the sandbox gets
         * (statedir.c): this read is for early syntax errors. */
        sp[o->env_files.n - 1] = (struct ipb_env_span){start, o->env.n - start};
        return 0;
    }
    case OPT_BIND:
        return parse_bind(o, v, err);
    case OPT_ROOTFS:
        if (!strcmp(name, "--container-tag"))
            return set_str(&o->container_tag, name, v, err);
        if (v[0] != '/')
            return ipb_error_set(err, 0, "--rootfs '%s': must be an absolute path", v);
        return set_str(&o->rootfs, name, v, err);
    case OPT_WORKSPACE:
        /* A bare name: a workspace under the state directory (wsname.h); else a host path. */
        if (ipb_workspace_is_name(v) && ipb_workspace_name_check("--workspace", v, err) < 0)
            return -1;
        if (!ipb_workspace_is_name(v) && v[0] != '/')
            return ipb_error_set(err, 0,
                                 "--workspace '%s': a host directory must be an absolute path (a bare name, "
                                 "without '/', names a workspace under ~/.local/state/ipybox/workspaces)",
                                 v);
        return set_str(&o->workspace, name, v, err);
    case OPT_PYTHON:
        if (v[0] != '/')
            return ipb_error_set(err, 0,
                                 "--python '%s': must be an absolute path (the interpreter on this host, "
                                 "such as /usr/bin/python3 or /home/me/venv/bin/python)",
                                 v);
        return set_str(&o->python, name, v, err);
    case OPT_TMP_SIZE:
    case OPT_SHM_SIZE:
        if (ipb_parse_size(v, &size) < 0 || size < (1u << 20))
            return ipb_error_set(err, 0, "%s '%s': expected a size of at least 1M, such as 512M or 2G", name, v);
        *(id == OPT_TMP_SIZE ? &o->tmp_size : &o->shm_size) = size;
        return 0;
    case OPT_MAX_OUTPUT: {
        char *end = NULL;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || !*v || *end || n < 100 || n > 10000000)
            return ipb_error_set(err, 0, "%s '%s': expected a number between 100 and 10000000", name, v);
        o->max_output_chars = n;
        return 0;
    }
    case OPT_MCP_CONFIG:
        if (!*v)
            return ipb_error_set(err, 0, "--mcp-config needs a file name");
        return set_str(&o->mcp_config, name, v, err);
    case OPT_APPROVE_TOOLS: {
        /* SERVER or SERVER/TOOL, each a glob; no spaces or control characters. */
        const char *slash = strchr(v, '/');
        bool ok = *v && *v != '/' && (!slash || (slash[1] && !strchr(slash + 1, '/')));
        for (const char *c = v; ok && *c; c++)
            ok = (unsigned char)*c > ' ' && *c != 0x7f;
        if (!ok)
            return ipb_error_set(err, 0,
                                 "--approve-tools '%s': expected SERVER or SERVER/TOOL (globs such as "
                                 "'github/*' or '*')",
                                 v);
        return ipb_strv_push(&o->approve_tools, v) < 0 ? ipb_error_set(err, ENOMEM, "%s", name) : 0;
    }
    case OPT_APPROVE_SHELL:
        o->approve_shell = true;
        return 0;
    case OPT_REQUIRE_SHELL_ESCAPE:
        o->require_shell_escape = true;
        return 0;
    case OPT_ZYGOTE:
        o->zygote = true;
        return 0;
    case OPT_NO_ZYGOTE:
        /* A later --no-zygote turns the standby off too: a session's own --no-zygote under a
         * service that gives every session --standby. --standby after it is still an error. */
        o->zygote = o->standby = false;
        return 0;
    case OPT_STANDBY:
    case OPT_NO_STANDBY:
        o->standby = id == OPT_STANDBY;
        return 0;
    case OPT_VERBOSE:
        o->verbose++;
        return 0;
    case OPT_HELP:
        o->help = true;
        return 0;
    }
    return ipb_error_set(err, 0, "internal error: unhandled option %s", name);
}

int ipb_options_parse(ipb_options *o, int argc, char **argv, int *ret_next, ipb_error **err) {
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (a[1] == 'v' && a[2] == 'v' && !a[strspn(a + 1, "v") + 1]) { /* -vv, -vvv: as many -v */
            o->verbose += (int)strlen(a) - 1;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        size_t k;
        for (k = 0; k < sizeof(option_table) / sizeof(option_table[0]); k++)
            if (strlen(option_table[k].name) == nlen && !strncmp(option_table[k].name, a, nlen))
                break;
        if (k == sizeof(option_table) / sizeof(option_table[0]))
            return ipb_error_set(err, 0, "unknown option '%.*s' (see --help)", (int)nlen, a);
        const char *v = NULL;
        if (option_table[k].has_arg) {
            if (eq)
                v = eq + 1;
            else if (i + 1 < argc)
                v = argv[++i];
            else
                return ipb_error_set(err, 0, "%s needs a value (see --help)", option_table[k].name);
        } else if (eq) {
            return ipb_error_set(err, 0, "%s takes no value", option_table[k].name);
        }
        if (apply_option(o, option_table[k].name, option_table[k].id, v, err) < 0)
            return -1;
    }
    if (ret_next)
        *ret_next = i;
    return 0;
}

bool ipb_options_auto_approved(const ipb_options *o, const char *server, const char *tool) {
    for (size_t i = 0; i < o->approve_tools.n; i++) {
        const char *pat = o->approve_tools.v[i];
        const char *slash = strchr(pat, '/');
        size_t slen = slash ? (size_t)(slash - pat) : strlen(pat);
        char spat[256];
        if (slen >= sizeof(spat))
            continue;
        memcpy(spat, pat, slen);
        spat[slen] = 0;
        if (fnmatch(spat, server, 0) == 0 && (!slash || fnmatch(slash + 1, tool, 0) == 0))
            return true;
    }
    return false;
}

int ipb_options_finish(ipb_options *o, const char *home, ipb_error **err) {
    if (o->require_shell_escape && !o->approve_shell)
        return ipb_error_set(err, 0,
                             "--require-shell-escape needs --approve-shell (it makes the approved forms, "
                             "!cmd and %%%%bash..., the only ways to run a command)");
    if (o->standby && !o->zygote)
        return ipb_error_set(err, 0,
                             "--standby needs the zygote: the standby kernel is forked from it (drop "
                             "--no-zygote, or give it after --standby, which it then turns off)");
    /* Each one given must exist now: else every upload and download would fail later, each
     * saying less. (Resolved again, safely, at each use.) */
    for (size_t i = 0; i < o->allowed_dirs.n; i++) {
        struct stat st;
        if (stat(o->allowed_dirs.v[i], &st) < 0)
            return ipb_error_set(err, errno,
                                 "--allowed-dir %s: upload_file and download_file could not use it; "
                                 "create it first, or name a directory that exists",
                                 o->allowed_dirs.v[i]);
        if (!S_ISDIR(st.st_mode))
            return ipb_error_set(err, ENOTDIR, "--allowed-dir %s: upload_file and download_file need a directory",
                                 o->allowed_dirs.v[i]);
    }
    if (o->allowed_dirs.n == 0) {
        if (home && home[0] == '/' && ipb_strv_push(&o->allowed_dirs, home) < 0)
            return ipb_error_set(err, ENOMEM, "allowed directories");
        if (ipb_strv_push(&o->allowed_dirs, "/tmp") < 0)
            return ipb_error_set(err, ENOMEM, "allowed directories");
    }
    if (!o->python && set_str(&o->python, "--python", IPB_DEFAULT_PYTHON, err) < 0)
        return -1;
    return 0;
}

const char *ipb_options_help(void) {
    return "Sandbox options (accepted by `ipybox run` and `ipybox mcp`):\n"
           "  --allowed-dir DIR         Host directory that upload_file/download_file may read or write\n"
           "                            (repeatable; it must exist; default: your home directory and /tmp).\n"
           "  --allowed-domain X        Destination the sandbox may reach (repeatable): a domain\n"
           "                            (example.com), a wildcard for its subdomains (*.example.com),\n"
           "                            an IPv4/IPv6 address or a CIDR block (10.1.0.0/16). Private,\n"
           "                            loopback, link-local and metadata addresses need a block inside\n"
           "                            them; the host's own addresses need that exact address. No\n"
           "                            entry: every public destination. TCP goes through ipybox's\n"
           "                            proxy, DNS through its stub; nothing else leaves the sandbox.\n"
           "  --resolve NAME:ADDR       Pin NAME to ADDR for the egress proxy and DNS (repeatable; as\n"
           "                            curl's --resolve, without the port), e.g. for internal hosts.\n"
           "  --max-connections N       Concurrent outbound connections of the sandbox (default 256).\n"
           "  --container-env-var K=V   Environment variable for the kernel (repeatable). Nothing else\n"
           "                            from your environment reaches the sandbox.\n"
           "  --container-env-file PATH KEY=VALUE lines ('#' comments, optional quotes) for the kernel.\n"
           "  --container-bind HOST:REL Bind host path HOST read-write at /app/REL (created if missing).\n"
           "  --rootfs DIR              Use DIR's /usr, /bin, /lib* and /etc files instead of the host's\n"
           "                            (a debootstrap tree works). ipybox's --container-tag names a\n"
           "                            Docker image: it is accepted and ignored, with a warning.\n"
           "  --workspace NAME|DIR      What /app is: NAME (letters, digits, . _ -) is the workspace\n"
           "                            ~/.local/state/ipybox/workspaces/NAME, made if missing and kept\n"
           "                            (come back to it by its name); an absolute DIR is that host\n"
           "                            directory (its parent must exist). Default: a new unnamed one,\n"
           "                            removed at the end when empty. See `ipybox workspaces`.\n"
           "  --python PATH             The host's interpreter to run (default /usr/bin/python3): any\n"
           "                            absolute path, such as a venv's, pyenv's, conda's or uv's\n"
           "                            bin/python; its environment is shown read-only at the same path\n"
           "                            (nothing else of your home). It needs ipykernel for `ipybox mcp`.\n"
           "                            With --rootfs: a path inside that tree.\n"
           "  --tmp-size SIZE           Size limit of /tmp in the sandbox (default 512M).\n"
           "  --shm-size SIZE           Size limit of /dev/shm in the sandbox (default 64M).\n"
           "  --memory SIZE             Memory of the sandbox, no swap. An out-of-memory kill is reported\n"
           "                            and the kernel restarted. System service: default and bound from\n"
           "                            its configuration. User mode: none by default; a systemd user\n"
           "                            scope (cgroup v2) or a writable cgroup v1, else only an address\n"
           "                            space limit per process (RLIMIT_AS), said at start.\n"
           "  --max-processes N         Processes and threads of the sandbox (cgroup; in user mode without\n"
           "                            one, RLIMIT_NPROC in the sandbox's user namespace).\n"
           "  --cpu-weight N            CPU share of the sandbox, 1-10000, 100 is even (cgroups only).\n"
           "  --max-output-chars N      Default cap on a cell's text output (default 50000); the head and\n"
           "                            the tail are kept and the result says what was cut.\n"
           "  --mcp-config FILE         MCP servers whose tools the sandboxed code may call through the\n"
           "                            generated `mcptools` package: {\"mcpServers\": {NAME: PARAMS}}\n"
           "                            with PARAMS {command, args, env, cwd} (stdio, started on the host)\n"
           "                            or {url, headers, type} (Streamable HTTP or SSE); ${VAR} is filled\n"
           "                            from your environment when connecting, never shown to the kernel.\n"
           "  --approve-tools PATTERN   Tool calls approved without asking (repeatable): SERVER or\n"
           "                            SERVER/TOOL, globs ('github/get_*', '*'). Other calls are put to\n"
           "                            the MCP client when it supports elicitation, else refused.\n"
           "  --mcp-timeout SECONDS     Longest wait for one tool call of an MCP server (default 120;\n"
           "                            time waiting for approval is not counted).\n"
           "  --sandbox-mcp-servers     Run every stdio MCP server in a sandbox of its own (the default\n"
           "                            \"sandbox\" of its params; docs/tools.md, \"Sandboxed servers\").\n"
           "  --approve-shell           Shell commands of the kernel (!cmd, !!cmd, %sx, %system, %%bash,\n"
           "                            %%sh, %%script and other script magics, getoutput) are put to\n"
           "                            approval first, as tool 'shell' (line forms) or 'shell_magic' (cell\n"
           "                            magics) of server 'ipybox' with {\"cmd\": COMMAND after {var}\n"
           "                            expansion}; --approve-tools 'ipybox/shell' pre-approves. Python-\n"
           "                            level: code can still start processes other ways (docs/tools.md).\n"
           "  --require-shell-escape    With --approve-shell: subprocess, os.system, os.exec*, os.spawn*,\n"
           "                            os.posix_spawn* and pty.spawn raise RuntimeError outside an\n"
           "                            approved command (a Python-level guard, not a boundary).\n"
           "  --no-zygote, --zygote     Whether the kernel's sandbox keeps a zygote, a Python process that\n"
           "                            did the kernel's imports once and forks each new kernel: `reset`\n"
           "                            takes a fraction of the time, an idle session ~17 MiB more memory\n"
           "                            (default on; none when PYTHONPATH, PYTHONHOME, PYTHONUSERBASE,\n"
           "                            PYTHONPYCACHEPREFIX, PYTHONPLATLIBDIR, an LD_ variable, OPENSSL_CONF\n"
           "                            and kin, glibc's file variables or a TZ file path is set). Kernels only.\n"
           "  --standby, --no-standby   Whether a second kernel is kept prepared beside the running one, so\n"
           "                            that `reset` is faster (about half the time). Costs: ~11 MiB more\n"
           "                            memory per idle session (counted in --memory), one process of\n"
           "                            --max-processes (the kernel's own limit, never raised for it), and\n"
           "                            ~30 ms of CPU after each kernel start. Needs the zygote: a later\n"
           "                            --no-zygote turns it off, --standby after --no-zygote is an error.\n"
           "                            None while an IPython config file (.py or .json)\n"
           "                            exists. Default off. Kernels only.\n"
           "  -v, --verbose             More log lines on stderr (repeat, or -vv, for debug).\n"
           "  -h, --help                This help.\n";
}

static int env_set(ipb_strv *env, const char *kv) {
    size_t klen = (size_t)(strchr(kv, '=') - kv);
    for (size_t i = 0; i < env->n; i++) {
        if (!strncmp(env->v[i], kv, klen + 1)) {
            char *d = strdup(kv);
            if (!d)
                return -ENOMEM;
            free(env->v[i]);
            env->v[i] = d;
            return 0;
        }
    }
    return ipb_strv_push(env, kv);
}

int ipb_sandbox_env(const ipb_options *o, bool kernel, ipb_strv *ret, ipb_error **err) {
    static const char *const base[] = {
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "HOME=/home/appuser",
        "USER=appuser",
        "LOGNAME=appuser",
        "SHELL=/bin/sh",
        "LANG=C.UTF-8",
        /* `!pip install x` installs into ~/.local (persistent across reset), even on Debian's
         * externally managed Python. */
        "PIP_BREAK_SYSTEM_PACKAGES=1",
        "PIP_DISABLE_PIP_VERSION_CHECK=1",
        "PIP_NO_INPUT=1",
    };
    ipb_strv env = {0};
    for (size_t i = 0; i < sizeof(base) / sizeof(*base); i++)
        if (env_set(&env, base[i]) < 0)
            goto oom;
    /* pydevd (ipykernel's debugger) warns about frozen modules on every start otherwise. */
    /* MALLOC_ARENA_MAX: ipykernel's threads each grow a glibc arena and keep it after big
     * outputs (122 MiB against 83 MiB after three 20 MB cells). */
    if (kernel && (env_set(&env, "PYDEVD_DISABLE_FILE_VALIDATION=1") < 0 || env_set(&env, "PYTHONUNBUFFERED=1") < 0 ||
                   env_set(&env, "MALLOC_ARENA_MAX=2") < 0))
        goto oom;
    for (size_t i = 0; i < o->env.n; i++)
        if (env_set(&env, o->env.v[i]) < 0)
            goto oom;
    *ret = env;
    return 0;
oom:
    ipb_strv_free(&env);
    return ipb_error_set(err, ENOMEM, "building the sandbox environment");
}
