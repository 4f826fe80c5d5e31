/* The user's configuration of a sandbox, from command-line options (shared by `ipybox run`
 * and `ipybox mcp`), checked and typed. Pure: no I/O beyond reading an env file. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress.h"
#include "error.h"

typedef struct ipb_strv {
    char **v;
    size_t n;
} ipb_strv;

typedef struct ipb_bind {
    char *host; /* absolute host path */
    char *rel;  /* path below /app */
} ipb_bind;

typedef struct ipb_options {
    ipb_strv allowed_dirs;    /* canonical at use time; default: $HOME and /tmp */
    ipb_strv allowed_domains; /* --allowed-domain entries as given (for messages) */
    ipb_egress_policy egress; /* the same entries parsed, plus --resolve pins */
    ipb_strv env;             /* KEY=VALUE for the kernel, in order; later wins */
    ipb_strv env_files;       /* --container-env-file paths as given (read again at start) */
    struct ipb_env_span {     /* for each of them: the entries of env it gave when parsed */
        size_t start, n;
    } * env_spans;
    ipb_bind *binds;
    size_t n_binds;
    char *rootfs;             /* NULL: the host's /usr etc. */
    char *container_tag;      /* ipybox's Docker image option: accepted, ignored, warned about */
    char *workspace;          /* NULL: a fresh unnamed one; a name (wsname.h) or an absolute path */
    char *python;             /* interpreter path inside the sandbox */
    uint64_t tmp_size;        /* bytes, /tmp tmpfs */
    uint64_t shm_size;        /* bytes, /dev/shm tmpfs */
    long max_output_chars;    /* default cap on a cell's text output */
    unsigned max_connections; /* egress connections per sandbox; 0: the proxy's default */
    uint64_t memory_max;      /* system service limits; 0: the service's default */
    unsigned pids_max;
    unsigned cpu_weight;
    char *mcp_config;         /* --mcp-config: {"mcpServers": {name: params}} registered at start */
    ipb_strv approve_tools;   /* --approve-tools SERVER[/TOOL] globs: calls approved without asking */
    unsigned mcp_timeout;     /* --mcp-timeout: seconds for one tool call of an MCP server; 0: 120 */
    bool sandbox_mcp_servers; /* --sandbox-mcp-servers: stdio servers without "sandbox" get the default */
    /* `ipybox run` only (refused elsewhere; set run_only_ok before parsing): */
    bool run_only_ok;
    char *home_dir;            /* --home DIR: host directory behind /home/appuser, kept */
    char *cwd;                 /* --cwd DIR: the command's working directory inside (default /app) */
    size_t n_host_dirs;        /* --host-dir DIR: binds[] entries whose rel is the absolute host path,
                              * bound read-write at that same path (the last n_host_dirs binds) */
    bool approve_shell;        /* --approve-shell: !cmd, %%bash... asked first as ipybox/shell(_magic) */
    bool require_shell_escape; /* --require-shell-escape: subprocess, os.system... refused in Python */
    bool zygote;               /* --zygote (default) / --no-zygote: kernels forked from a zygote */
    bool standby;              /* --standby / --no-standby (default): a standby kernel beside the
                                * running one (needs the zygote) */
    int verbose;
    bool help;
} ipb_options;

#define IPB_DEFAULT_PYTHON "/usr/bin/python3"
#define IPB_DEFAULT_TMP_SIZE (512ull << 20)
#define IPB_DEFAULT_SHM_SIZE (64ull << 20)
#define IPB_DEFAULT_MAX_OUTPUT 50000L

void ipb_options_init(ipb_options *o);
void ipb_options_free(ipb_options *o);
/* Parses argv[0..argc) (options only, no program name). Stops at "--" or at the first
 * non-option word and stores its index in *ret_next. Reads --container-env-file files. */
int ipb_options_parse(ipb_options *o, int argc, char **argv, int *ret_next, ipb_error **err);
/* Fills defaults that depend on the environment (allowed dirs from $HOME). */
/* Whether --approve-tools approves a call of tool on server without asking (fnmatch globs;
 * "SERVER" alone means every tool of SERVER). */
bool ipb_options_auto_approved(const ipb_options *o, const char *server, const char *tool);
int ipb_options_finish(ipb_options *o, const char *home, ipb_error **err);
/* The help text for the shared options. */
const char *ipb_options_help(void);

int ipb_strv_push(ipb_strv *s, const char *v);
void ipb_strv_free(ipb_strv *s);

/* "512M", "1G", "4096", "64k" -> bytes. */
int ipb_parse_size(const char *s, uint64_t *ret);
/* Checks a KEY=VALUE assignment: KEY is [A-Za-z_][A-Za-z0-9_]*, not reserved. */
int ipb_check_env_assignment(const char *kv, ipb_error **err);
/* Parses an env file (KEY=VALUE lines, '#' comments, optional `export `, optional single or
 * double quotes around the value) and appends to env. `name` is used in messages. */
int ipb_parse_env_file(const char *text, size_t len, const char *name, ipb_strv *env, ipb_error **err);

/* The sandboxed program's whole environment: fixed defaults, then the user's variables
 * (later entries override earlier ones). Nothing comes from the host's environment. */
int ipb_sandbox_env(const ipb_options *o, bool kernel, ipb_strv *ret, ipb_error **err);
