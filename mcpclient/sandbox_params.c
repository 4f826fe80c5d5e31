/* The "sandbox" member of stdio server params: checked at registration (mcp_sandbox.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
#include "mcp_sandbox_check.h"
#include "mcpc_internal.h"

#define MAX_ENTRIES 256
#define MAX_DIR 4096

/* The sandbox's own places: an allowed dir may be neither in nor over one of them. */
static const char *const own_places[] = {"/usr",    "/bin",        "/sbin",         "/lib", "/lib32",   "/lib64",
                                         "/libx32", "/etc",        "/proc",         "/dev", "/sys",     "/run",
                                         "/app",    "/opt/ipybox", "/home/appuser", "/tmp", "/var/tmp", NULL};

bool ipb_mcp_sandbox_on(json_t *sandbox, bool by_default) {
    if (!sandbox)
        return by_default;
    return !json_is_false(sandbox);
}

#define fail(err, ...) mcpc_fail(err, EINVAL, __VA_ARGS__)

/* A string of a list, without NUL bytes and placeholders; shown (excerpted) in *shown. */
static int list_string(json_t *v, const char *what, size_t i, char shown[72], ipb_error **err) {
    if (!json_is_string(v))
        return fail(err, "'sandbox'.'%s'[%zu] must be a string", what, i);
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        return fail(err, "'sandbox'.'%s'[%zu] contains a NUL byte", what, i);
    mcpc_excerpt(s, strlen(s), shown, 60);
    if (strstr(s, "${"))
        return fail(err, "'sandbox'.'%s'[%zu] '%s': ${VAR} is not filled here (only in 'env' values)", what, i, shown);
    return 0;
}

static int check_list(json_t *list, const char *what, ipb_error **err) {
    if (!json_is_array(list))
        return fail(err, "'sandbox'.'%s' must be an array of strings", what);
    if (json_array_size(list) == 0)
        return fail(err, "'sandbox'.'%s' is empty (leave it out instead%s)", what,
                    strcmp(what, "allowed_domains") ? "" : "; without it every public destination is allowed");
    if (json_array_size(list) > MAX_ENTRIES)
        return fail(err, "'sandbox'.'%s' has more than %d entries", what, MAX_ENTRIES);
    return 0;
}

static int check_domains(json_t *list, ipb_error **err) {
    if (check_list(list, "allowed_domains", err) < 0)
        return -1;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        char shown[72];
        if (list_string(v, "allowed_domains", i, shown, err) < 0)
            return -1;
        ipb_egress_policy p = {0};
        ipb_error *e = NULL;
        int r = ipb_egress_add_rule(&p, json_string_value(v), &e);
        ipb_egress_free(&p);
        if (r < 0) {
            fail(err, "'sandbox'.'allowed_domains'[%zu]: %s", i, ipb_error_msg(e));
            ipb_error_free(e);
            return -1;
        }
    }
    return 0;
}

/* Absolute, no ".", ".." or empty component, not "/", no trailing '/'. */
static const char *dir_problem(const char *d) {
    if (d[0] != '/')
        return "is not an absolute path";
    if (!d[1])
        return "is the whole filesystem";
    if (strlen(d) >= MAX_DIR)
        return "is too long";
    for (const char *c = d + 1;;) {
        size_t n = strcspn(c, "/");
        if (n == 0)
            return "has an empty component ('//' or a trailing '/')";
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return "contains '.' or '..'";
        c += n;
        if (!*c)
            break;
        c++;
    }
    return NULL;
}

static bool within(const char *p, const char *tree) {
    size_t n = strlen(tree);
    return !strncmp(p, tree, n) && (p[n] == '/' || !p[n]);
}

static int check_dirs(json_t *list, ipb_error **err) {
    if (check_list(list, "allowed_dirs", err) < 0)
        return -1;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        char shown[72];
        if (list_string(v, "allowed_dirs", i, shown, err) < 0)
            return -1;
        const char *d = json_string_value(v);
        const char *why = dir_problem(d);
        if (why)
            return fail(err, "'sandbox'.'allowed_dirs'[%zu] '%s' %s", i, shown, why);
        for (const char *const *p = own_places; *p; p++) {
            if (within(d, *p))
                return fail(err, "'sandbox'.'allowed_dirs'[%zu] '%s' is inside the sandbox's own %s", i, shown, *p);
            if (within(*p, d))
                return fail(err, "'sandbox'.'allowed_dirs'[%zu] '%s' would cover the sandbox's own %s", i, shown, *p);
        }
    }
    return 0;
}

/* Names as for --container-env-var; values strings without NUL bytes. */
static int check_env(json_t *env, const char *what, ipb_error **err) {
    if (!json_is_object(env))
        return fail(err, "'%s' must be an object of strings", what);
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        char shown[72];
        size_t klen = json_object_iter_key_len(json_object_key_to_iter(k));
        mcpc_excerpt(k, strlen(k), shown, 60);
        if (klen != strlen(k))
            return fail(err, "a name in '%s' contains a NUL byte", what);
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return fail(err, "'%s' '%s' must be a string without NUL bytes", what, shown);
        /* As --container-env-var takes them (policy/options.c). */
        bool ok = isalpha((unsigned char)k[0]) || k[0] == '_';
        for (const char *c = k + 1; ok && *c; c++)
            ok = isalnum((unsigned char)*c) || *c == '_';
        if (!ok)
            return fail(err,
                        "'%s' '%s' of a sandboxed server is not a variable name (letters, digits, '_', not "
                        "starting with a digit)",
                        what, shown);
        if (!strcmp(k, "JPY_PARENT_PID"))
            return fail(err, "'%s': JPY_PARENT_PID is reserved by the sandbox", what);
    }
    return 0;
}

int ipb_mcp_sandbox_check(json_t *params, json_t *sandbox, ipb_error **err) {
    static const char *const keys[] = {"allowed_domains", "allowed_dirs", "env", NULL};
    if (json_is_boolean(sandbox)) {
        if (json_is_false(sandbox))
            return 0;
    } else if (!json_is_object(sandbox)) {
        return fail(err, "'sandbox' must be true, false or an object");
    }
    const char *k;
    json_t *v;
    json_object_foreach(sandbox, k, v) {
        bool known = false;
        for (const char *const *p = keys; *p && !known; p++)
            known = !strcmp(k, *p) && strlen(k) == json_object_iter_key_len(json_object_key_to_iter(k));
        if (!known) {
            char shown[72];
            mcpc_excerpt(k, strlen(k), shown, 60);
            return fail(err, "unknown key '%s' in 'sandbox' (known: allowed_domains, allowed_dirs, env)", shown);
        }
    }
    json_t *domains = json_object_get(sandbox, "allowed_domains");
    json_t *dirs = json_object_get(sandbox, "allowed_dirs");
    json_t *senv = json_object_get(sandbox, "env");
    if ((domains && check_domains(domains, err) < 0) || (dirs && check_dirs(dirs, err) < 0) ||
        (senv && check_env(senv, "sandbox'.'env", err) < 0))
        return -1;
    json_t *env = json_object_get(params, "env");
    if (env && check_env(env, "env", err) < 0)
        return -1;
    json_t *cwd = json_object_get(params, "cwd");
    if (cwd && json_is_string(cwd)) {
        const char *c = json_string_value(cwd);
        char shown[72];
        mcpc_excerpt(c, strlen(c), shown, 60);
        const char *why = strstr(c, "${") ? "has a placeholder (not filled for a sandboxed server)" : dir_problem(c);
        if (why)
            return fail(err, "'cwd' '%s' of a sandboxed server %s", shown, why);
        bool inside = false;
        size_t i;
        json_array_foreach(dirs, i, v) inside = inside || within(c, json_string_value(v));
        if (!inside)
            return fail(err,
                        "'cwd' '%s' of a sandboxed server must be inside one of its 'sandbox'.'allowed_dirs' "
                        "(it starts in a fresh /app otherwise)",
                        shown);
    }
    return 0;
}
