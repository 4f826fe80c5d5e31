/* `ipybox workspaces [--json]` and `ipybox workspaces prune [--older-than DAYS] [NAME...]`
 * (supervisor/workspaces.h). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "log.h"
#include "workspaces.h"
#include "wsname.h"

static void usage(FILE *f) {
    fprintf(f, "Usage: ipybox workspaces [--json]\n"
               "       ipybox workspaces prune [--older-than DAYS] [NAME...]\n\n"
               "The workspaces (the host directories behind /app) under ~/.local/state/ipybox/workspaces\n"
               "($XDG_STATE_HOME/ipybox/workspaces when that is set).\n\n"
               "  `--workspace NAME` (ipybox mcp, ipybox run, an ipyboxd session, the SDK's workspace=)\n"
               "  uses the workspace NAME, made if missing and kept, so that a later session can come back\n"
               "  to it. A session without --workspace gets an unnamed one, named when (UTC) and by which\n"
               "  session it was made (2026-11-26T130512Z-<session id>); it is removed at the session's end\n"
               "  when it is empty, else kept until pruned.\n\n"
               "Without a subcommand: lists them, one a line: name, kind (named or unnamed), size (disk\n"
               "usage; '+' when the walk stopped at its bounds), last used (the newest change inside it, or\n"
               "the end of the last session that used it), and 'in use' while a session holds it.\n"
               "  --json              the same as a JSON array of {name, unnamed, bytes, partial, lastUsed\n"
               "                      (seconds since the epoch), inUse, path}.\n\n"
               "prune: removes the unnamed workspaces, or those NAMEd (named or not), except any that a\n"
               "running session uses (it says so and keeps them). Symlinks inside are removed, never\n"
               "followed.\n"
               "  --older-than DAYS   only those last used at least DAYS days ago (a whole number; 0: any).\n\n"
               "Exit status: 0; 1 when a workspace could not be listed or removed (in use is not a\n"
               "failure); 2 on a usage error.\n");
}

static void human(uint64_t b, bool partial, char *out, size_t n) {
    const char *units = "BKMGTP";
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%" PRIu64 "%s", b, partial ? "+" : "");
    else
        snprintf(out, n, "%.1f%c%s", v, units[u], partial ? "+" : "");
}

static void when(time_t t, char *out, size_t n) {
    struct tm tm;
    if (t <= 0 || !localtime_r(&t, &tm) || !strftime(out, n, "%Y-%m-%d %H:%M", &tm))
        snprintf(out, n, "-");
}

static int list(bool as_json) {
    ipb_ws_list l;
    ipb_error *err = NULL;
    if (ipb_workspaces_list(&l, &err) < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
        return 1;
    }
    if (as_json) {
        json_t *a = json_array();
        for (size_t i = 0; i < l.n; i++) {
            const ipb_ws_entry *e = &l.v[i];
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", l.root, e->name);
            json_array_append_new(a, json_pack("{s:s, s:b, s:I, s:b, s:I, s:b, s:s}", "name", e->name, "unnamed",
                                               e->unnamed, "bytes", (json_int_t)e->usage.bytes, "partial",
                                               e->usage.partial, "lastUsed", (json_int_t)e->usage.newest, "inUse",
                                               e->in_use, "path", path));
        }
        char *s = json_dumps(a, JSON_INDENT(2));
        if (s)
            printf("%s\n", s);
        free(s);
        json_decref(a);
    } else if (!l.n) {
        printf("No workspaces in %s.\n", l.root);
    } else {
        size_t w = 4;
        for (size_t i = 0; i < l.n; i++)
            if (strlen(l.v[i].name) > w)
                w = strlen(l.v[i].name);
        printf("%-*s  %-7s  %9s  %-16s\n", (int)w, "NAME", "KIND", "SIZE", "LAST USED");
        for (size_t i = 0; i < l.n; i++) {
            const ipb_ws_entry *e = &l.v[i];
            char size[32], last[32];
            human(e->usage.bytes, e->usage.partial, size, sizeof(size));
            when(e->usage.newest, last, sizeof(last));
            printf("%-*s  %-7s  %9s  %-16s%s\n", (int)w, e->name, e->unnamed ? "unnamed" : "named", size, last,
                   e->in_use ? "  in use" : "");
        }
        printf("(in %s)\n", l.root);
    }
    ipb_ws_list_free(&l);
    return 0;
}

struct prune_counts {
    int removed, kept;
};

static void report(void *ctx, const char *name, enum ipb_prune_outcome outcome, const ipb_tree_usage *u,
                   const char *why) {
    struct prune_counts *c = ctx;
    char size[32];
    human(u->bytes, u->partial, size, sizeof(size));
    switch (outcome) {
    case IPB_PRUNE_REMOVED:
        printf("removed %s (%s)\n", name, size);
        c->removed++;
        break;
    case IPB_PRUNE_IN_USE:
        printf("kept %s: in use by a running session\n", name);
        c->kept++;
        break;
    case IPB_PRUNE_RECENT:
        c->kept++;
        break;
    case IPB_PRUNE_FAILED:
        log_error("%s: %s", name, why);
        break;
    }
}

static int prune(int argc, char **argv) {
    long days = 0;
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strncmp(a, "--older-than=", 13))
            v = a + 13;
        else if (!strcmp(a, "--older-than")) {
            if (i + 1 >= argc) {
                log_error("--older-than needs a number of days");
                return 2;
            }
            v = argv[++i];
        } else if (a[0] == '-') {
            log_error("workspaces prune: unknown option '%s'", a);
            usage(stderr);
            return 2;
        } else {
            break;
        }
        char *end;
        errno = 0;
        days = strtol(v, &end, 10);
        if (errno || end == v || *end || days < 0 || days > 365000) {
            log_error("--older-than '%s': expected a whole number of days (0 or more)", v);
            return 2;
        }
    }
    for (int k = i; k < argc; k++) {
        ipb_error *err = NULL;
        if (ipb_workspace_name_check("workspaces prune", argv[k], &err) < 0) {
            log_error("%s", ipb_error_msg(err));
            ipb_error_free(err);
            return 2;
        }
    }
    struct prune_counts c = {0};
    ipb_error *err = NULL;
    int failed = ipb_workspaces_prune(days * 86400L, i < argc ? argv + i : NULL, (size_t)(argc - i), report, &c, &err);
    if (failed < 0) {
        log_error("%s", ipb_error_msg(err));
        ipb_error_free(err);
        return 1;
    }
    if (!c.removed && !failed)
        printf("nothing removed%s\n", c.kept ? "" : ": no unnamed workspaces");
    return failed ? 1 : 0;
}

int cmd_workspaces(int argc, char **argv) {
    ipb_log_init("ipybox workspaces", IPB_LOG_WARN);
    bool as_json = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "prune"))
            return i == 0 ? prune(argc - 1, argv + 1) : (log_error("put 'prune' first"), 2);
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            as_json = true;
            continue;
        }
        log_error("workspaces: unknown argument '%s'", argv[i]);
        usage(stderr);
        return 2;
    }
    return list(as_json);
}
