/* mcpc_cli: drives mcpclient/ from the command line, for the integration tests.
 *
 *   mcpc_cli [OPTIONS] PARAMS_JSON list
 *   mcpc_cli [OPTIONS] PARAMS_JSON call TOOL [ARGS_JSON]
 *
 * Options: --name NAME, --connect-ms N, --call-ms N, --max-message BYTES, --repeat N (call N
 * times; round-trip times on stderr), --concurrent N (each time, N calls at once from N threads
 * on the one client; the times are of the whole round), --meta (print {"server",
 * "protocolVersion", "malformed", "alive", "maxrss_kb", "result"} instead of the bare result),
 * --debug (the library's debug log).
 *
 * Prints the result as one line of JSON on stdout. On failure, stderr gets
 *   mcpc_cli: elapsed: <ms> ms      (of the connect, or of the call that failed)
 *   mcpc_cli: alive: true|false     (after a failed call)
 *   mcpc_cli: maxrss: <n> kB        (the most memory this process had)
 *   mcpc_cli: error: <sentence>
 *   mcpc_cli: errno: <ENAME>
 * and the exit status says what kind of failure it was (see exit_for()). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "error.h"
#include "log.h"
#include "mcp_client.h"

enum {
    EXIT_USAGE = 2,     /* bad command line or params JSON */
    EXIT_CONNECT = 3,   /* connect/initialize failed (other than below) */
    EXIT_REQUEST = 4,   /* a request failed (other than below) */
    EXIT_TIMEOUT = 5,   /* ETIMEDOUT */
    EXIT_TOO_BIG = 6,   /* EMSGSIZE */
    EXIT_RPC_ERROR = 7, /* the server answered with a JSON-RPC error (EREMOTEIO) */
    EXIT_GONE = 8,      /* EPIPE, ECONNRESET, ECONNREFUSED: the server or connection is gone */
};

static int exit_for(const ipb_error *e, int otherwise) {
    switch (e ? e->errnum : 0) {
    case ETIMEDOUT:
        return EXIT_TIMEOUT;
    case EMSGSIZE:
        return EXIT_TOO_BIG;
    case EREMOTEIO:
        return EXIT_RPC_ERROR;
    case EPIPE:
    case ECONNRESET:
    case ECONNREFUSED:
        return EXIT_GONE;
    default:
        return otherwise;
    }
}

/* The most memory this program had, in kB: VmHWM of its own address space. (getrusage's
 * ru_maxrss is kept across execve, so it would report a large parent's size.) */
static long maxrss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static int fail(ipb_error *e, int otherwise) {
    fprintf(stderr, "mcpc_cli: maxrss: %ld kB\n", maxrss_kb());
    fprintf(stderr, "mcpc_cli: error: %s\n", ipb_error_msg(e));
    const char *name = e && e->errnum ? strerrorname_np(e->errnum) : NULL;
    fprintf(stderr, "mcpc_cli: errno: %s\n", name ? name : "0");
    int code = exit_for(e, otherwise);
    ipb_error_free(e);
    return code;
}

static int usage(void) {
    fprintf(stderr, "usage: mcpc_cli [--name N] [--connect-ms N] [--call-ms N] [--max-message B] [--repeat N] "
                    "[--concurrent N] [--meta] [--debug] PARAMS_JSON (list | call TOOL [ARGS_JSON])\n");
    return EXIT_USAGE;
}

/* One of the calls of a --concurrent round. */
typedef struct one_call {
    ipb_mcpc *c;
    const char *tool;
    json_t *args;
    json_t *result;
    ipb_error *err;
} one_call;

static void *one_call_main(void *p) {
    one_call *k = p;
    k->result = ipb_mcpc_call(k->c, k->tool, k->args, -1, 0, &k->err);
    return NULL;
}

/* n calls at once; the first one's result, or the first error. */
static json_t *call_round(ipb_mcpc *c, const char *tool, json_t *args, long n, ipb_error **err) {
    one_call *k = calloc((size_t)n, sizeof(*k));
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    long started = 0;
    for (long i = 0; k && th && i < n; i++, started++) {
        k[i] = (one_call){c, tool, args, NULL, NULL};
        if (pthread_create(&th[i], NULL, one_call_main, &k[i]) != 0)
            break;
    }
    json_t *result = NULL;
    for (long i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (k[i].err && !*err) {
            *err = k[i].err;
            k[i].err = NULL;
        }
        if (i == 0)
            result = k[i].result;
        else
            json_decref(k[i].result);
        ipb_error_free(k[i].err);
    }
    if (started < n && !*err)
        ipb_error_set(err, ENOMEM, "cannot start %ld threads", n);
    if (*err) {
        json_decref(result);
        result = NULL;
    }
    free(k);
    free(th);
    return result;
}

static long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000L;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'n'},
        {"connect-ms", required_argument, NULL, 'c'},
        {"call-ms", required_argument, NULL, 't'},
        {"max-message", required_argument, NULL, 'm'},
        {"repeat", required_argument, NULL, 'r'},
        {"meta", no_argument, NULL, 'M'},
        {"debug", no_argument, NULL, 'd'},
        {"concurrent", required_argument, NULL, 'C'},
        {NULL, 0, NULL, 0},
    };
    ipb_mcp_limits limits = {0, 0, 0};
    const char *name = "test";
    long repeat = 1, concurrent = 1;
    int meta = 0, debug = 0, o;
    while ((o = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (o) {
        case 'n':
            name = optarg;
            break;
        case 'c':
            limits.connect_ms = atoi(optarg);
            break;
        case 't':
            limits.call_ms = atoi(optarg);
            break;
        case 'm':
            limits.max_message = strtoull(optarg, NULL, 10);
            break;
        case 'r':
            repeat = atol(optarg);
            break;
        case 'C':
            concurrent = atol(optarg);
            break;
        case 'M':
            meta = 1;
            break;
        case 'd':
            debug = 1;
            break;
        default:
            return usage();
        }
    }
    ipb_log_init("mcpc_cli", debug ? IPB_LOG_DEBUG : IPB_LOG_WARN);
    if (argc - optind < 2 || repeat < 1 || concurrent < 1 || concurrent > 10000)
        return usage();
    const char *cmd = argv[optind + 1];
    bool is_call = strcmp(cmd, "call") == 0;
    if (!(strcmp(cmd, "list") == 0 && argc - optind == 2) && !(is_call && argc - optind >= 3 && argc - optind <= 4))
        return usage();
    json_error_t jerr;
    json_t *params = json_loads(argv[optind], 0, &jerr);
    if (!params) {
        fprintf(stderr, "mcpc_cli: PARAMS_JSON: %s\n", jerr.text);
        return EXIT_USAGE;
    }
    json_t *args = NULL;
    if (is_call && argc - optind == 4 && !(args = json_loads(argv[optind + 3], 0, &jerr))) {
        fprintf(stderr, "mcpc_cli: ARGS_JSON: %s\n", jerr.text);
        return EXIT_USAGE;
    }

    ipb_error *err = NULL;
    long t0 = now_us();
    ipb_mcpc *c = ipb_mcpc_connect(name, params, &limits, &err);
    json_decref(params);
    if (!c) {
        fprintf(stderr, "mcpc_cli: elapsed: %.1f ms\n", (double)(now_us() - t0) / 1000.0);
        return fail(err, EXIT_CONNECT);
    }
    long connected = now_us();
    json_t *result = NULL;
    long *times = calloc((size_t)repeat, sizeof(long));
    for (long i = 0; i < repeat; i++) {
        json_decref(result);
        long s = now_us();
        if (is_call && concurrent > 1)
            result = call_round(c, argv[optind + 2], args, concurrent, &err);
        else
            result = is_call ? ipb_mcpc_call_tool(c, argv[optind + 2], args, &err) : ipb_mcpc_list_tools(c, &err);
        if (times)
            times[i] = now_us() - s;
        if (!result) {
            fprintf(stderr, "mcpc_cli: elapsed: %.1f ms\n", (double)(now_us() - s) / 1000.0);
            break;
        }
    }
    json_decref(args);
    if (!result) {
        fprintf(stderr, "mcpc_cli: alive: %s\n", ipb_mcpc_alive(c) ? "true" : "false");
        int code = fail(err, EXIT_REQUEST);
        ipb_mcpc_close(c);
        free(times);
        return code;
    }
    if ((repeat > 1 || concurrent > 1) && times) {
        qsort(times, (size_t)repeat, sizeof(long), cmp_long);
        char what[64] = "calls";
        if (concurrent > 1)
            snprintf(what, sizeof(what), "rounds of %ld concurrent calls", concurrent);
        fprintf(stderr, "mcpc_cli: connect %.1f ms; %ld %s: min %.3f ms, median %.3f ms, max %.3f ms\n",
                (double)(connected - t0) / 1000.0, repeat, what, (double)times[0] / 1000.0,
                (double)times[repeat / 2] / 1000.0, (double)times[repeat - 1] / 1000.0);
    }
    free(times);
    json_t *out = result;
    if (meta)
        out = json_pack("{s:s?, s:s?, s:I, s:b, s:I, s:O}", "server", ipb_mcpc_server_name(c), "protocolVersion",
                        ipb_mcpc_protocol_version(c), "malformed", (json_int_t)ipb_mcpc_malformed(c), "alive",
                        ipb_mcpc_alive(c), "maxrss_kb", (json_int_t)maxrss_kb(), "result", result);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    if (out != result)
        json_decref(out);
    json_decref(result);
    ipb_mcpc_close(c);
    if (!text) {
        fprintf(stderr, "mcpc_cli: out of memory\n");
        return EXIT_REQUEST;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}
