/* Approval questions: a worker asks (elicitation/create) the client whose call runs the cell;
 * each question goes out under an id of ours and its answer back under the worker's. Several
 * may be open at once, each answered or withdrawn alone. */
#include <stdlib.h>

#include "daemon_int.h"
#include "mcp_server.h"

/* Unlinks and frees the question at *pp. */
static void ask_drop(struct ipbd_ask **pp) {
    struct ipbd_ask *a = *pp;
    *pp = a->next;
    json_decref(a->wid);
    json_decref(a->cid);
    free(a);
}

void ipbd_asks_clear(struct ipbd_session *s) {
    while (s->asks)
        ask_drop(&s->asks);
}

/* The question whose id is `id` on the worker's side (wid) or towards the client (cid). */
static struct ipbd_ask **ask_find(struct ipbd_session *s, json_t *id, bool cid) {
    for (struct ipbd_ask **pp = &s->asks; *pp; pp = &(*pp)->next)
        if (id && json_equal(id, cid ? (*pp)->cid : (*pp)->wid))
            return pp;
    return NULL;
}

/* Answers the worker's question ourselves: the client cannot be asked (the worker then applies
 * --approve-tools alone) or went away. */
void ipbd_ask_refuse(struct ipbd *d, struct ipbd_session *s, json_t *wid, int code, const char *why) {
    bool ok;
    ipbd_worker_send(d, s, jrpc_error(wid, code, why), &ok);
}

void ipbd_ask_client(struct ipbd *d, struct ipbd_session *s, json_t *m) {
    json_t *wid = json_object_get(m, "id");
    json_t *meta = json_object_get(json_object_get(m, "params"), "_meta");
    json_t *call = json_object_get(meta, IPB_META_CALL_ID);
    struct ipbd_pending *p = json_is_integer(call) ? ipbd_pending_find(s, (uint64_t)json_integer_value(call)) : NULL;
    struct ipbd_client *c = p && p->kind == P_CALL ? ipbd_client_find(d, p->client_id) : NULL;
    if (!c || c->dead || !c->elicitation) {
        ipbd_ask_refuse(d, s, wid, JRPC_METHOD_NOT_FOUND,
                        c ? "the client did not declare the elicitation capability"
                          : "no client is waiting on this call");
        return;
    }
    /* Several questions may be open at once (calls run concurrently); each is answered or
     * withdrawn alone. A repeated worker id replaces the older question. */
    struct ipbd_ask **old = ask_find(s, wid, false);
    if (old)
        ask_drop(old);
    struct ipbd_ask *a = calloc(1, sizeof(*a));
    if (!a) {
        ipbd_ask_refuse(d, s, wid, -32000, "out of memory");
        return;
    }
    json_object_del(meta, IPB_META_CALL_ID);
    a->wid = json_incref(wid);
    a->cid = json_sprintf("ipyboxd-ask-%llu", (unsigned long long)++d->next_ask);
    a->client = c->id;
    a->next = s->asks;
    s->asks = a;
    json_object_set(m, "id", a->cid);
    ipbd_client_send(d, c, json_incref(m));
}

/* The worker withdrew its question (the cell ended or was interrupted): the client asked is
 * told, under our id for it. */
void ipbd_ask_withdrawn(struct ipbd *d, struct ipbd_session *s, json_t *m) {
    json_t *params = json_object_get(m, "params");
    struct ipbd_ask **pp = ask_find(s, json_object_get(params, "requestId"), false);
    struct ipbd_client *c = pp ? ipbd_client_find(d, (*pp)->client) : NULL;
    if (c) {
        json_object_set(params, "requestId", (*pp)->cid);
        ipbd_client_send(d, c, json_incref(m));
    }
    if (pp)
        ask_drop(pp);
}

/* The questions put to c in s are answered for it: it left the session. */
void ipbd_asks_cancel_client(struct ipbd *d, struct ipbd_session *s, struct ipbd_client *c) {
    for (struct ipbd_ask **pp = &s->asks; *pp;) {
        if ((*pp)->client != c->id) {
            pp = &(*pp)->next;
            continue;
        }
        ipbd_ask_refuse(d, s, (*pp)->wid, -32000, "the client that was asked left the session");
        ask_drop(pp);
    }
}

void ipbd_session_answer(struct ipbd *d, struct ipbd_client *c, json_t *msg) {
    struct ipbd_session *s = c->session;
    json_t *id = json_object_get(msg, "id");
    struct ipbd_ask **pp = s ? ask_find(s, id, true) : NULL;
    if (!pp || (*pp)->client != c->id)
        return; /* not ours, or too late */
    json_object_set(msg, "id", (*pp)->wid);
    ask_drop(pp);
    bool ok;
    ipbd_worker_send(d, s, json_incref(msg), &ok);
}
