/*
 * SwiftQueues — writing a recorded trace (trace.c records it): the rings
 * of one recording turned into Chrome's JSON trace event format. A track
 * per thread, named after its role; a slice per task named by its queue's
 * label with its function's name (looked up only now, trace_symbols.c);
 * waits with arrows from what released them; queues and sources described
 * once; arrows
 * from each submission to the run it led to, kept only when both ends are
 * in the trace; instants; counters for the pool and each queue's depth
 * (worked out from the submissions and runs, so recording counts
 * nothing). Runs after the recording stopped, under the registry lock.
 */
#include "trace_internal.h"
#include "event_internal.h"

#ifndef SQ_NO_TRACE

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* Slices nested deeper than this on one thread are left out. */
#define SQ_TRACE_MAX_DEPTH 256
/* Queue depth counters: one point per queue per this many ns at most
 * (plus every return to empty), so a million submissions do not make a
 * million counter points. */
#define SQ_TRACE_DEPTH_STEP_NS 20000u

/* ---- Writing: small hash maps ----------------------------------------------- */

/* What the writer knows of one flow id. */
#define SQ_FLOW_OUT 0x1u     /* a submission started it */
#define SQ_FLOW_IN 0x2u      /* a run ended it */
#define SQ_FLOW_STEP 0x4u    /* a timer passed it on */
#define SQ_FLOW_COUNTED 0x8u /* its submission queued work (depth) */

struct sq_flow_s {
	uint32_t id;        /* 0: empty slot */
	uint32_t flags;
	uint64_t out_t, in_t;
	uint64_t queue;     /* the submission's queue key */
	const struct sq_trace_buf_s *in_buf;
	uint64_t in_index;  /* the run that ends it (the earliest) */
};

struct sq_flows_s {
	struct sq_flow_s *slots;
	size_t cap; /* a power of two */
};

static struct sq_flow_s *
_sq_flow_get(struct sq_flows_s *m, uint32_t id)
{
	size_t i = (id * 2654435761u) & (m->cap - 1);
	while (m->slots[i].id != 0 && m->slots[i].id != id)
		i = (i + 1) & (m->cap - 1);
	m->slots[i].id = id;
	return &m->slots[i];
}

static struct sq_flow_s *
_sq_flow_find(const struct sq_flows_s *m, uint32_t id)
{
	size_t i = (id * 2654435761u) & (m->cap - 1);
	while (m->slots[i].id != 0) {
		if (m->slots[i].id == id)
			return &m->slots[i];
		i = (i + 1) & (m->cap - 1);
	}
	return NULL;
}

/* Function pointer -> name. */
struct sq_names_s {
	uintptr_t *keys;
	char **values;
	size_t cap, count;
	struct sq_module_s *modules;
};

static const char *
_sq_name_of(struct sq_names_s *m, uintptr_t addr)
{
	if (m->count * 2 >= m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		uintptr_t *keys = calloc(cap, sizeof(*keys));
		char **values = calloc(cap, sizeof(*values));
		if (keys == NULL || values == NULL) {
			free(keys);
			free(values);
			return "";
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (m->keys[i] == 0)
				continue;
			size_t j = (m->keys[i] * 11400714819323198485ull)
					>> 32 & (cap - 1);
			while (keys[j] != 0)
				j = (j + 1) & (cap - 1);
			keys[j] = m->keys[i];
			values[j] = m->values[i];
		}
		free(m->keys);
		free(m->values);
		m->keys = keys;
		m->values = values;
		m->cap = cap;
	}
	if (addr == 0)
		return "";
	size_t i = (addr * 11400714819323198485ull) >> 32 & (m->cap - 1);
	while (m->keys[i] != 0 && m->keys[i] != addr)
		i = (i + 1) & (m->cap - 1);
	if (m->keys[i] == 0) {
		char *name = _sq_symbolize(&m->modules, addr);
		if (name == NULL)
			return "";
		m->keys[i] = addr;
		m->values[i] = name;
		m->count++;
	}
	return m->values[i];
}

static void
_sq_names_free(struct sq_names_s *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->values[i]);
	free(m->keys);
	free(m->values);
	_sq_modules_free(m->modules);
}

/* ---- Writing: waits and their releases --------------------------------------
 *
 * A blocked thread's wait is a slice from the moment it went to sleep to
 * the moment it woke; the thread that ended it (handed the queue over,
 * signalled the semaphore, emptied the group, finished the work item)
 * recorded a release naming the same object. Each wait is paired with
 * the last release of its object between its start and its end: an
 * arrow from a mark at the release to a `woken` mark at the wait's end.
 * A release that woke several waiters (a group, a work item) starts an
 * arrow to each. */

/* A record's place: its ring and its index there. */
struct sq_rec_pos_s {
	const struct sq_trace_buf_s *buf;
	uint64_t index;
};

struct sq_release_s {
	uint64_t object;
	uint64_t t;
	unsigned kind;
	struct sq_rec_pos_s pos;
};

struct sq_arrow_s {
	struct sq_rec_pos_s release, wait; /* the release, the wait's end */
	uint32_t id;
};

struct sq_arrows_s {
	struct sq_arrow_s *by_release, *by_wait; /* the same, two orders */
	size_t count;
};

static int
_sq_pos_cmp(const struct sq_rec_pos_s *a, const struct sq_rec_pos_s *b)
{
	if (a->buf != b->buf)
		return (uintptr_t)a->buf < (uintptr_t)b->buf ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

static int
_sq_arrow_release_cmp(const void *x, const void *y)
{
	const struct sq_arrow_s *a = x, *b = y;
	int c = _sq_pos_cmp(&a->release, &b->release);
	return c ? c : (a->id > b->id) - (a->id < b->id);
}

static int
_sq_arrow_wait_cmp(const void *x, const void *y)
{
	return _sq_pos_cmp(&((const struct sq_arrow_s *)x)->wait,
			&((const struct sq_arrow_s *)y)->wait);
}

static int
_sq_release_cmp(const void *x, const void *y)
{
	const struct sq_release_s *a = x, *b = y;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->object != b->object)
		return a->object < b->object ? -1 : 1;
	return a->t < b->t ? -1 : a->t > b->t;
}

/* The first arrow (in `order`) whose position is at or after pos. */
static size_t
_sq_arrow_lower(const struct sq_arrow_s *order, size_t n, bool by_release,
		const struct sq_rec_pos_s *pos)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct sq_rec_pos_s *p = by_release ? &order[mid].release
				: &order[mid].wait;
		if (_sq_pos_cmp(p, pos) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const char *
_sq_wait_name(unsigned kind)
{
	static const char *const names[] = {
		[SQ_WAIT_SYNC] = "wait for ",
		[SQ_WAIT_BARRIER_SYNC] = "barrier wait for ",
		[SQ_WAIT_SEMAPHORE] = "wait for semaphore",
		[SQ_WAIT_GROUP] = "wait for group",
		[SQ_WAIT_WORKITEM] = "wait for work item",
		[SQ_WAIT_APPLY] = "wait for apply",
		[SQ_WAIT_ONCE] = "wait for once",
	};
	return kind < sizeof(names) / sizeof(names[0]) && names[kind]
			? names[kind] : "wait";
}

static const char *
_sq_release_name(unsigned kind)
{
	static const char *const names[] = {
		[SQ_WAIT_SYNC] = "hand over ",
		[SQ_WAIT_BARRIER_SYNC] = "hand over ",
		[SQ_WAIT_SEMAPHORE] = "signal semaphore",
		[SQ_WAIT_GROUP] = "group empty",
		[SQ_WAIT_WORKITEM] = "work item done",
		[SQ_WAIT_APPLY] = "apply done",
		[SQ_WAIT_ONCE] = "once done",
	};
	return kind < sizeof(names) / sizeof(names[0]) && names[kind]
			? names[kind] : "release";
}

static bool
_sq_wait_is_sync(unsigned kind)
{
	return kind == SQ_WAIT_SYNC || kind == SQ_WAIT_BARRIER_SYNC;
}

/* ---- Writing: the JSON ------------------------------------------------------ */

struct sq_writer_s {
	FILE *f;
	int pid;
	bool first;
	uint64_t raw0, ns0;  /* clock pair at the start */
	long double scale;   /* ns per raw tick */
	uint64_t end_raw;    /* the stop */
	uint64_t dropped;
	struct sq_names_s names;
	char *const *labels; /* label number - 1 -> text (the table's) */
	uint32_t nlabels;
	uint32_t *label_queues; /* distinct queues seen per label number */
	struct sq_arrows_s *arrows; /* releases -> the waits they ended */
	const struct sq_trace_meta_s *sources; /* by address */
	size_t nsources;
};

static uint64_t
_sq_w_ns(const struct sq_writer_s *w, uint64_t raw)
{
	if (raw <= w->raw0)
		return w->ns0;
	return w->ns0 + (uint64_t)((long double)(raw - w->raw0) * w->scale);
}

static void
_sq_w_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Starts an event: {"ph":..,"pid":..,"tid":..,"ts":.. */
static void
_sq_w_event(struct sq_writer_s *w, char ph, pid_t tid, uint64_t raw)
{
	uint64_t ns = _sq_w_ns(w, raw);
	fputs(w->first ? "\n" : ",\n", w->f);
	w->first = false;
	fprintf(w->f, "{\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%" PRIu64
			".%03u", ph, w->pid, (int)tid, ns / 1000,
			(unsigned)(ns % 1000));
}

static void
_sq_w_dur(struct sq_writer_s *w, uint64_t begin_raw, uint64_t end_raw)
{
	uint64_t b = _sq_w_ns(w, begin_raw), e = _sq_w_ns(w, end_raw);
	uint64_t d = e > b ? e - b : 0;
	fprintf(w->f, ",\"dur\":%" PRIu64 ".%03u", d / 1000,
			(unsigned)(d % 1000));
}

static void
_sq_w_name(struct sq_writer_s *w, const char *prefix, const char *name,
		const char *suffix)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s%s%s", prefix, name, suffix);
	fputs(",\"name\":", w->f);
	_sq_w_string(w->f, buf);
}

/* A queue key's label ("queue #7" for an unlabelled queue; the serial
 * number is added when two queues of the trace share a label). */
static void
_sq_w_queue_name(struct sq_writer_s *w, uint64_t key, char *out, size_t len)
{
	uint32_t id = (uint32_t)(key >> 32), serial = (uint32_t)key;
	const char *label = id && id <= w->nlabels ? w->labels[id - 1] : "";
	if (label[0] == '\0')
		snprintf(out, len, "queue #%u", serial);
	else if (id && id <= w->nlabels && w->label_queues[id - 1] > 1 &&
			serial != 0)
		snprintf(out, len, "%s #%u", label, serial);
	else
		snprintf(out, len, "%s", label);
}

static const char *
_sq_source_kind_name(unsigned kind)
{
	static const char *const names[] = {
		[0] = "I/O",
		[SQ_SOURCE_DATA_ADD] = "data add",
		[SQ_SOURCE_DATA_OR] = "data or",
		[SQ_SOURCE_DATA_REPLACE] = "data replace",
		[SQ_SOURCE_READ] = "read",
		[SQ_SOURCE_WRITE] = "write",
		[SQ_SOURCE_SIGNAL] = "signal",
		[SQ_SOURCE_TIMER] = "timer",
		[SQ_SOURCE_PROC] = "process",
		[SQ_SOURCE_VNODE] = "file system",
	};
	return kind < sizeof(names) / sizeof(names[0]) && names[kind]
			? names[kind] : "source";
}

static const char *
_sq_submit_name(unsigned kind)
{
	static const char *const names[] = {
		[SQ_SUBMIT_ASYNC] = "async",
		[SQ_SUBMIT_BARRIER] = "barrier async",
		[SQ_SUBMIT_GROUP] = "group async",
		[SQ_SUBMIT_NOTIFY] = "notify",
		[SQ_SUBMIT_AFTER] = "after",
		[SQ_SUBMIT_NEXT] = "async (next)",
		[SQ_SUBMIT_DEFER] = "after drain",
		[SQ_SUBMIT_IO] = "I/O",
	};
	return kind < sizeof(names) / sizeof(names[0]) && names[kind]
			? names[kind] : "submit";
}

static int
_sq_meta_cmp(const void *x, const void *y)
{
	const struct sq_trace_meta_s *a = x, *b = y;
	return a->key < b->key ? -1 : a->key > b->key;
}

/* A source alive at the stop, by address; NULL for one that was not. */
static const struct sq_trace_meta_s *
_sq_w_source(const struct sq_writer_s *w, uint64_t addr)
{
	struct sq_trace_meta_s key = { .key = addr };
	if (w->nsources == 0)
		return NULL;
	return bsearch(&key, w->sources, w->nsources, sizeof(key),
			_sq_meta_cmp);
}

/* ns as microseconds with three decimals. */
static void
_sq_w_us(FILE *f, const char *name, uint64_t ns)
{
	fprintf(f, ",\"%s\":%" PRIu64 ".%03u", name, ns / 1000,
			(unsigned)(ns % 1000));
}

/* A source's description in a slice's or instant's args (after "{"):
 * its queue, handler, handle, and a timer's interval and leeway. */
static void
_sq_w_source_args(struct sq_writer_s *w, const struct sq_trace_meta_s *m)
{
	char qname[300];
	_sq_w_queue_name(w, m->target, qname, sizeof(qname));
	fputs("\"queue\":", w->f);
	_sq_w_string(w->f, qname);
	fputs(",\"handler\":", w->f);
	_sq_w_string(w->f, _sq_name_of(&w->names, m->handler));
	fprintf(w->f, ",\"handle\":%" PRIu64, (uint64_t)m->handle);
	if (m->kind == SQ_SOURCE_TIMER) {
		_sq_w_us(w->f, "interval_us", m->interval);
		_sq_w_us(w->f, "leeway_us", m->leeway);
	}
}

/* The part of a ring the writer reads: [*lo, *hi). */
static void
_sq_w_range(const struct sq_trace_buf_s *b, uint64_t *lo, uint64_t *hi)
{
	uint64_t head = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
	uint64_t cap = b->mask + 1;
	*hi = head;
	/* Wrapped: the oldest slot may be taking a late record; leave it. */
	*lo = head > cap - 1 ? head - cap + 1 : 0;
}

static bool
_sq_w_counted(unsigned kind)
{
	return kind == SQ_SUBMIT_ASYNC || kind == SQ_SUBMIT_BARRIER ||
			kind == SQ_SUBMIT_GROUP || kind == SQ_SUBMIT_NOTIFY ||
			kind == SQ_SUBMIT_NEXT;
}

/* Flow arguments for a slice: bind_id with flow_in / flow_out. */
static void
_sq_w_flow(struct sq_writer_s *w, uint32_t id, bool in, bool out)
{
	if (!in && !out)
		return;
	fprintf(w->f, ",\"bind_id\":\"0x%x\"", id);
	if (in)
		fputs(",\"flow_in\":true", w->f);
	if (out)
		fputs(",\"flow_out\":true", w->f);
}

static void
_sq_w_thread(struct sq_writer_s *w, const struct sq_trace_buf_s *b,
		struct sq_flows_s *flows)
{
	uint64_t lo, hi;
	_sq_w_range(b, &lo, &hi);
	if (hi == lo)
		return;
	size_t n = (size_t)(hi - lo);
	/* Each begin's end, found with a stack; 0: none (still running at
	 * the stop, or its end is past a depth we do not follow). */
	uint64_t *ends = calloc(n, sizeof(*ends));
	bool *skip = calloc(n, sizeof(*skip));
	if (ends == NULL || skip == NULL) {
		free(ends);
		free(skip);
		return;
	}
	size_t stack[SQ_TRACE_MAX_DEPTH];
	int depth = 0;
	for (size_t i = 0; i < n; i++) {
		const struct sq_trace_rec_s *r = &b->recs[(lo + i) & b->mask];
		if (r->type == SQ_REC_BEGIN) {
			if (depth < SQ_TRACE_MAX_DEPTH)
				stack[depth] = i;
			else
				skip[i] = true;
			depth++;
		} else if (r->type == SQ_REC_END) {
			if (depth == 0) {
				skip[i] = true; /* its begin was overwritten */
				continue;
			}
			depth--;
			if (depth < SQ_TRACE_MAX_DEPTH)
				ends[stack[depth]] = r->t ? r->t : 1;
		}
	}
	if (lo > 0) {
		const struct sq_trace_rec_s *r = &b->recs[lo & b->mask];
		w->dropped += lo;
		_sq_w_event(w, 'i', b->tid, r->t);
		fputs(",\"s\":\"t\",\"name\":\"trace ring wrapped\",\"cat\":"
				"\"sq.trace\"", w->f);
		fprintf(w->f, ",\"args\":{\"dropped_events\":%" PRIu64 "}}",
				lo);
	}
	char qname[300];
	for (size_t i = 0; i < n; i++) {
		const struct sq_trace_rec_s *r = &b->recs[(lo + i) & b->mask];
		if (skip[i])
			continue;
		switch (r->type) {
		case SQ_REC_BEGIN: {
			uint64_t end = ends[i] ? ends[i] : w->end_raw;
			struct sq_flow_s *fl = r->flow && r->kind !=
					SQ_TRACE_EVENT && r->kind !=
					SQ_TRACE_HANDLER ? _sq_flow_find(flows,
					r->flow) : NULL;
			bool in = false, out = false;
			_sq_w_event(w, 'X', b->tid, r->t);
			_sq_w_dur(w, r->t, end);
			switch (r->kind) {
			case SQ_TRACE_TASK:
			case SQ_TRACE_SYNC:
				_sq_w_queue_name(w, r->a, qname, sizeof(qname));
				_sq_w_name(w, "", qname, "");
				fprintf(w->f, ",\"cat\":\"%s\"", r->kind ==
						SQ_TRACE_TASK ? "task" : "sync");
				fputs(",\"args\":{\"function\":", w->f);
				_sq_w_string(w->f, _sq_name_of(&w->names, r->b));
				if (r->small > 0 && r->small <= SQ_ROOT_COUNT)
					fprintf(w->f, ",\"qos\":\"%s\"",
							_sq_root_qos_names[
							r->small - 1]);
				fputc('}', w->f);
				in = fl && (fl->flags & (SQ_FLOW_OUT |
						SQ_FLOW_STEP)) && fl->in_buf == b
						&& fl->in_index == lo + i;
				break;
			case SQ_TRACE_SWIFT_JOB:
				fprintf(w->f, ",\"name\":\"Swift task %" PRIu64
						"\",\"cat\":\"swift\",\"args\":"
						"{\"task_id\":%" PRIu64
						",\"priority\":%u}", r->a, r->a,
						(unsigned)r->small);
				break;
			case SQ_TRACE_HANDLER: {
				static const char *const kinds[] = {
					" handler", " cancel handler",
					" registration handler" };
				_sq_w_name(w, _sq_source_kind_name(r->flow), "",
						kinds[r->small < 3 ? r->small
						: 0]);
				fputs(",\"cat\":\"handler\",\"args\":"
						"{\"function\":", w->f);
				_sq_w_string(w->f, _sq_name_of(&w->names, r->b));
				if (r->flow == 0)
					fprintf(w->f, ",\"fd\":%d", (int)r->a);
				else
					fprintf(w->f, ",\"source\":\"0x%" PRIx64
							"\"", r->a);
				fputc('}', w->f);
				break;
			}
			case SQ_TRACE_EVENT: {
				/* Named by its source where it is known:
				 * "event: timer on com.example.db". */
				const struct sq_trace_meta_s *m = _sq_w_source(w,
						r->a);
				char on[320] = "";
				if (m != NULL) {
					_sq_w_queue_name(w, m->target, qname,
							sizeof(qname));
					snprintf(on, sizeof(on), " on %s", qname);
				}
				_sq_w_name(w, "event: ", _sq_source_kind_name(
						r->small), on);
				fprintf(w->f, ",\"cat\":\"event\",\"args\":"
						"{\"handle\":%u,\"data\":%"
						PRIu64 ",\"source\":\"0x%" PRIx64
						"\"", r->flow, r->b, r->a);
				if (m != NULL) {
					fputc(',', w->f);
					_sq_w_source_args(w, m);
				}
				fputc('}', w->f);
				break;
			}
			case SQ_TRACE_WAIT: {
				/* "wait for com.example.db", "wait for
				 * semaphore" */
				if (_sq_wait_is_sync(r->small))
					_sq_w_queue_name(w, r->a, qname,
							sizeof(qname));
				else
					qname[0] = '\0';
				_sq_w_name(w, _sq_wait_name(r->small), qname,
						"");
				fprintf(w->f, ",\"cat\":\"wait\",\"args\":"
						"{\"object\":\"0x%" PRIx64 "\"",
						r->b);
				if (qname[0] != '\0') {
					fputs(",\"queue\":", w->f);
					_sq_w_string(w->f, qname);
				}
				fputc('}', w->f);
				break;
			}
			case SQ_TRACE_TIMER:
				fprintf(w->f, ",\"name\":\"%s\",\"cat\":"
						"\"timer\",\"args\":{\"late_us\":"
						"%" PRIu64 ".%03u}", r->small ?
						"after fires" : "timer fires",
						r->a / 1000,
						(unsigned)(r->a % 1000));
				in = fl && (fl->flags & SQ_FLOW_OUT);
				out = fl && (fl->flags & SQ_FLOW_IN);
				break;
			case SQ_TRACE_IO:
				fprintf(w->f, ",\"name\":\"I/O %s fd %d\","
						"\"cat\":\"io\",\"args\":"
						"{\"length\":%" PRIu64 "}",
						r->small ? "write" : "read",
						(int)r->a, r->b);
				in = fl && (fl->flags & SQ_FLOW_OUT) &&
						fl->in_buf == b &&
						fl->in_index == lo + i;
				break;
			default:
				fputs(",\"name\":\"?\"", w->f);
				break;
			}
			_sq_w_flow(w, r->flow, in, out);
			fputc('}', w->f);
			break;
		}
		case SQ_REC_END: {
			/* A wait's end: a `woken` mark, where its release's
			 * arrow ends. */
			if (r->kind != SQ_TRACE_WAIT || w->arrows == NULL)
				break;
			struct sq_rec_pos_s pos = { b, lo + i };
			const struct sq_arrows_s *ar = w->arrows;
			size_t k = _sq_arrow_lower(ar->by_wait, ar->count, false,
					&pos);
			if (k == ar->count || _sq_pos_cmp(&ar->by_wait[k].wait,
					&pos) != 0)
				break;
			_sq_w_event(w, 'X', b->tid, r->t);
			fprintf(w->f, ",\"dur\":0,\"name\":\"woken\",\"cat\":"
					"\"wait\",\"args\":{\"object\":\"0x%"
					PRIx64 "\"},\"bind_id\":\"w%u\","
					"\"flow_in\":true}", r->b,
					ar->by_wait[k].id);
			break;
		}
		case SQ_REC_RELEASE: {
			/* One mark per wait it ended, each an arrow's start;
			 * a release that ended no recorded wait is left out. */
			if (w->arrows == NULL)
				break;
			struct sq_rec_pos_s pos = { b, lo + i };
			const struct sq_arrows_s *ar = w->arrows;
			if (_sq_wait_is_sync(r->small))
				_sq_w_queue_name(w, r->a, qname, sizeof(qname));
			else
				qname[0] = '\0';
			for (size_t k = _sq_arrow_lower(ar->by_release,
					ar->count, true, &pos); k < ar->count &&
					_sq_pos_cmp(&ar->by_release[k].release,
					&pos) == 0; k++) {
				_sq_w_event(w, 'X', b->tid, r->t);
				fputs(",\"dur\":0", w->f);
				_sq_w_name(w, _sq_release_name(r->small), qname,
						"");
				fprintf(w->f, ",\"cat\":\"release\",\"args\":"
						"{\"object\":\"0x%" PRIx64 "\"},"
						"\"bind_id\":\"w%u\",\"flow_out\":"
						"true}", r->b, ar->by_release[k].id);
			}
			break;
		}
		case SQ_REC_SUBMIT: {
			struct sq_flow_s *fl = _sq_flow_find(flows, r->flow);
			_sq_w_event(w, 'X', b->tid, r->t);
			fputs(",\"dur\":0", w->f);
			_sq_w_queue_name(w, r->a, qname, sizeof(qname));
			_sq_w_name(w, _sq_submit_name(r->kind), " to ", qname);
			fputs(",\"cat\":\"submit\",\"args\":{\"function\":",
					w->f);
			_sq_w_string(w->f, _sq_name_of(&w->names, r->b));
			fputc('}', w->f);
			_sq_w_flow(w, r->flow, false, fl && (fl->flags &
					(SQ_FLOW_IN | SQ_FLOW_STEP)));
			fputc('}', w->f);
			break;
		}
		case SQ_REC_INSTANT: {
			_sq_w_event(w, 'i', b->tid, r->t);
			if (r->kind == SQ_TRACE_NOTE) {
				/* A watchdog finding: its line of text. */
				fputs(",\"s\":\"t\",\"cat\":\"watchdog\","
						"\"name\":", w->f);
				_sq_w_string(w->f, r->a && r->a <= w->nlabels ?
						w->labels[r->a - 1] : "watchdog");
				fputc('}', w->f);
				break;
			}
			fputs(",\"s\":\"t\",\"cat\":\"pool\"", w->f);
			char name[96];
			switch (r->kind) {
			case SQ_TRACE_WAKE:
				snprintf(name, sizeof(name), "wake sq.worker %"
						PRIu64, r->a);
				break;
			case SQ_TRACE_PARK:
				snprintf(name, sizeof(name), "park");
				break;
			case SQ_TRACE_SPAWN:
				snprintf(name, sizeof(name), "spawn sq.worker %"
						PRIu64 "%s", r->a, r->b ?
						" (compensation)" : "");
				break;
			case SQ_TRACE_NET:
				snprintf(name, sizeof(name), "safety net woke "
						"sq.worker %" PRIu64, r->a);
				break;
			case SQ_TRACE_SIGNAL:
				snprintf(name, sizeof(name), "signal %" PRIu64,
						r->a);
				break;
			case SQ_TRACE_RAISE: {
				char qn[64];
				_sq_w_queue_name(w, r->a, qn, sizeof(qn));
				snprintf(name, sizeof(name), "raise %s to %s",
						qn, r->b < SQ_ROOT_COUNT ?
						_sq_root_qos_names[r->b] : "?");
				break;
			}
			default:
				snprintf(name, sizeof(name), "instant");
				break;
			}
			_sq_w_name(w, "", name, "");
			fputc('}', w->f);
			break;
		}
		case SQ_REC_POOL:
			_sq_w_event(w, 'C', b->tid, r->t);
			fprintf(w->f, ",\"name\":\"pool\",\"args\":{\"live\":%u,"
					"\"idle\":%u,\"searching\":%u}}",
					(unsigned)(r->a & 0xffff),
					(unsigned)(r->a >> 16 & 0xffff),
					(unsigned)(r->a >> 32 & 0xffff));
			break;
		default:
			break;
		}
	}
	free(ends);
	free(skip);
}

/* Queue depth: +1 at each counted submission, -1 at the run it led to,
 * summed per queue in time order. */
struct sq_depth_ev_s {
	uint64_t t;
	uint64_t queue;
	int delta;
};

static int
_sq_depth_cmp(const void *x, const void *y)
{
	const struct sq_depth_ev_s *a = x, *b = y;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return b->delta - a->delta; /* a submission before its run */
}

struct sq_depth_q_s {
	uint64_t queue;  /* 0: empty slot */
	int64_t depth;
	uint64_t shown_t;   /* the last point written */
	int64_t shown;
	bool pending;       /* a change not written yet */
	uint64_t pending_t;
};

static struct sq_depth_q_s *
_sq_depth_slot(struct sq_depth_q_s *slots, size_t cap, uint64_t queue)
{
	size_t i = (queue * 11400714819323198485ull) >> 32 & (cap - 1);
	while (slots[i].queue != 0 && slots[i].queue != queue)
		i = (i + 1) & (cap - 1);
	slots[i].queue = queue;
	return &slots[i];
}

static void
_sq_w_depth_point(struct sq_writer_s *w, uint64_t queue, uint64_t raw,
		int64_t depth)
{
	char qname[300];
	_sq_w_queue_name(w, queue, qname, sizeof(qname));
	_sq_w_event(w, 'C', w->pid, raw);
	_sq_w_name(w, "depth ", qname, "");
	fprintf(w->f, ",\"args\":{\"queued\":%lld}}", (long long)depth);
}

/* Waiting sync callers count too (`extra`: +1 where a caller went to
 * sleep for the queue, -1 where it woke). */
static void
_sq_w_depths(struct sq_writer_s *w, const struct sq_flows_s *flows,
		const struct sq_depth_ev_s *extra, size_t nextra)
{
	size_t n = nextra;
	for (size_t i = 0; i < flows->cap; i++)
		if (flows->slots[i].id && (flows->slots[i].flags &
				(SQ_FLOW_OUT | SQ_FLOW_COUNTED)) ==
				(SQ_FLOW_OUT | SQ_FLOW_COUNTED))
			n += 2;
	if (n == 0)
		return;
	struct sq_depth_ev_s *ev = malloc(n * sizeof(*ev));
	size_t qcap = 64;
	while (qcap < n)
		qcap *= 2;
	struct sq_depth_q_s *qs = calloc(qcap, sizeof(*qs));
	if (ev == NULL || qs == NULL) {
		free(ev);
		free(qs);
		return;
	}
	if (nextra > 0)
		memcpy(ev, extra, nextra * sizeof(*ev));
	n = nextra;
	for (size_t i = 0; i < flows->cap; i++) {
		const struct sq_flow_s *f = &flows->slots[i];
		if (!f->id || (f->flags & (SQ_FLOW_OUT | SQ_FLOW_COUNTED)) !=
				(SQ_FLOW_OUT | SQ_FLOW_COUNTED) || f->queue == 0)
			continue;
		ev[n++] = (struct sq_depth_ev_s){ f->out_t, f->queue, 1 };
		if ((f->flags & SQ_FLOW_IN) && f->in_t >= f->out_t)
			ev[n++] = (struct sq_depth_ev_s){ f->in_t, f->queue,
					-1 };
	}
	qsort(ev, n, sizeof(*ev), _sq_depth_cmp);
	uint64_t step = (uint64_t)((long double)SQ_TRACE_DEPTH_STEP_NS /
			w->scale);
	for (size_t i = 0; i < n; i++) {
		struct sq_depth_q_s *q = _sq_depth_slot(qs, qcap, ev[i].queue);
		/* A change held back, then a quiet while: show it first. */
		if (q->pending && ev[i].t - q->pending_t >= step) {
			_sq_w_depth_point(w, q->queue, q->pending_t, q->depth);
			q->shown_t = q->pending_t;
			q->shown = q->depth;
			q->pending = false;
		}
		q->depth += ev[i].delta;
		if (q->depth == 0 || q->shown_t == 0 ||
				ev[i].t - q->shown_t >= step) {
			_sq_w_depth_point(w, q->queue, ev[i].t, q->depth);
			q->shown_t = ev[i].t;
			q->shown = q->depth;
			q->pending = false;
		} else {
			q->pending = true;
			q->pending_t = ev[i].t;
		}
	}
	for (size_t i = 0; i < qcap; i++)
		if (qs[i].queue && qs[i].pending)
			_sq_w_depth_point(w, qs[i].queue, qs[i].pending_t,
					qs[i].depth);
	free(ev);
	free(qs);
}

static void
_sq_w_process_name(struct sq_writer_s *w)
{
	char name[256] = "";
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n > 0)
			name[n - (name[n - 1] == '\n')] = '\0';
	}
	fputs(w->first ? "\n" : ",\n", w->f);
	w->first = false;
	fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
			"\"process_name\",\"args\":{\"name\":", w->pid, w->pid);
	_sq_w_string(w->f, name[0] ? name : "program");
	fputs("}}", w->f);
}

/* What pass 1 gathers for waits: releases, waits' ends, depth changes. */
struct sq_wait_end_s {
	uint64_t object;
	uint64_t begin_t, end_t;
	unsigned kind;
	struct sq_rec_pos_s pos;
};

struct sq_waits_s {
	struct sq_release_s *releases;
	size_t nreleases, releases_cap;
	struct sq_wait_end_s *ends;
	size_t nends, ends_cap;
	struct sq_depth_ev_s *depth;
	size_t ndepth, depth_cap;
	bool failed;
};

/* Room for one more in a growing array (sets `failed` when there is
 * none). */
static void *
_sq_w_grow(void *array, size_t n, size_t *cap, size_t size, bool *failed)
{
	if (n < *cap)
		return array;
	size_t ncap = *cap ? *cap * 2 : 256;
	void *p = realloc(array, ncap * size);
	if (p == NULL) {
		*failed = true;
		return NULL;
	}
	*cap = ncap;
	return p;
}

/* One ring's waits and releases. */
static void
_sq_w_gather_waits(struct sq_waits_s *wt, const struct sq_trace_buf_s *b,
		uint64_t lo, uint64_t hi)
{
	/* Open waits on this thread (a caller that took its queue over may
	 * run a task that waits again: a few deep at most). */
	uint64_t open_t[16];
	size_t depth = 0, lost = 0;
	for (uint64_t i = lo; i < hi && !wt->failed; i++) {
		const struct sq_trace_rec_s *r = &b->recs[i & b->mask];
		if (r->type == SQ_REC_RELEASE) {
			void *p = _sq_w_grow(wt->releases, wt->nreleases,
					&wt->releases_cap, sizeof(*wt->releases),
					&wt->failed);
			if (p == NULL)
				return;
			wt->releases = p;
			wt->releases[wt->nreleases++] = (struct sq_release_s){
				r->b, r->t, r->small, { b, i } };
			continue;
		}
		if ((r->type != SQ_REC_BEGIN && r->type != SQ_REC_END) ||
				r->kind != SQ_TRACE_WAIT)
			continue;
		if (r->type == SQ_REC_BEGIN) {
			if (depth < 16)
				open_t[depth++] = r->t;
			else
				lost++;
		} else if (lost > 0) {
			lost--;
			continue;
		} else if (depth == 0) {
			continue; /* its begin was overwritten */
		}
		if (_sq_wait_is_sync(r->small) && r->a != 0) {
			void *p = _sq_w_grow(wt->depth, wt->ndepth,
					&wt->depth_cap, sizeof(*wt->depth),
					&wt->failed);
			if (p == NULL)
				return;
			wt->depth = p;
			wt->depth[wt->ndepth++] = (struct sq_depth_ev_s){ r->t,
					r->a, r->type == SQ_REC_BEGIN ? 1 : -1 };
		}
		if (r->type == SQ_REC_BEGIN)
			continue;
		void *p = _sq_w_grow(wt->ends, wt->nends, &wt->ends_cap,
				sizeof(*wt->ends), &wt->failed);
		if (p == NULL)
			return;
		wt->ends = p;
		wt->ends[wt->nends++] = (struct sq_wait_end_s){ r->b,
				open_t[--depth], r->t, r->small, { b, i } };
	}
}

/* Pairs each wait's end with the last release of its object since the
 * wait began: the arrows, in both orders. */
static struct sq_arrows_s *
_sq_w_pair_waits(struct sq_waits_s *wt)
{
	if (wt->failed || wt->nends == 0 || wt->nreleases == 0)
		return NULL;
	qsort(wt->releases, wt->nreleases, sizeof(*wt->releases),
			_sq_release_cmp);
	struct sq_arrows_s *ar = calloc(1, sizeof(*ar));
	struct sq_arrow_s *a = ar ? malloc(wt->nends * sizeof(*a)) : NULL;
	if (a == NULL) {
		free(ar);
		return NULL;
	}
	for (size_t e = 0; e < wt->nends; e++) {
		const struct sq_wait_end_s *end = &wt->ends[e];
		/* The first release after (kind, object, end_t)... */
		struct sq_release_s key = { end->object, end->end_t,
				end->kind, { NULL, 0 } };
		size_t lo = 0, hi = wt->nreleases;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (_sq_release_cmp(&wt->releases[mid], &key) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* ...and the one before it, if it is this object's and
		 * came while the wait lasted. */
		if (lo == 0)
			continue;
		const struct sq_release_s *r = &wt->releases[lo - 1];
		if (r->kind != end->kind || r->object != end->object ||
				r->t < end->begin_t)
			continue;
		a[ar->count] = (struct sq_arrow_s){ r->pos, end->pos,
				(uint32_t)ar->count + 1 };
		ar->count++;
	}
	if (ar->count == 0) {
		free(a);
		free(ar);
		return NULL;
	}
	ar->by_release = a;
	ar->by_wait = malloc(ar->count * sizeof(*a));
	if (ar->by_wait == NULL) {
		free(a);
		free(ar);
		return NULL;
	}
	memcpy(ar->by_wait, a, ar->count * sizeof(*a));
	qsort(ar->by_release, ar->count, sizeof(*a), _sq_arrow_release_cmp);
	qsort(ar->by_wait, ar->count, sizeof(*a), _sq_arrow_wait_cmp);
	return ar;
}

static const char *
_sq_queue_kind_name(unsigned kind)
{
	switch (kind) {
	case SQ_QUEUE_TYPE_ROOT:
		return "global";
	case SQ_QUEUE_TYPE_MAIN:
		return "main";
	case SQ_QUEUE_TYPE_CONCURRENT:
		return "concurrent";
	default:
		return "serial";
	}
}

/* Queue and source descriptions: the stop's, and the records of those
 * that went away while recording; `used`, the queue keys and source
 * addresses the records name (only those are described). */
struct sq_metas_s {
	struct sq_trace_meta_s *items;
	size_t count, cap;
	uint64_t *used;
	size_t nused, used_cap;
	bool failed;
};

static void
_sq_w_use(struct sq_metas_s *ms, uint64_t key)
{
	if (key == 0 || (ms->nused > 0 && ms->used[ms->nused - 1] == key))
		return;
	void *p = _sq_w_grow(ms->used, ms->nused, &ms->used_cap,
			sizeof(*ms->used), &ms->failed);
	if (p == NULL)
		return;
	ms->used = p;
	ms->used[ms->nused++] = key;
}

static int
_sq_u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static bool
_sq_w_used(const struct sq_metas_s *ms, uint64_t key)
{
	return ms->nused > 0 && bsearch(&key, ms->used, ms->nused,
			sizeof(key), _sq_u64_cmp) != NULL;
}

static void
_sq_w_gather_meta(struct sq_metas_s *ms, const struct sq_trace_buf_s *b,
		uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo; i < hi && !ms->failed; i++) {
		const struct sq_trace_rec_s *r = &b->recs[i & b->mask];
		if (r->type == SQ_REC_SUBMIT || r->type == SQ_REC_RELEASE ||
				(r->type == SQ_REC_BEGIN && (r->kind ==
				SQ_TRACE_TASK || r->kind == SQ_TRACE_SYNC ||
				r->kind == SQ_TRACE_WAIT || r->kind ==
				SQ_TRACE_EVENT || (r->kind == SQ_TRACE_HANDLER
				&& r->flow != 0))) || (r->type ==
				SQ_REC_INSTANT && r->kind == SQ_TRACE_RAISE))
			_sq_w_use(ms, r->a);
		if (r->type != SQ_REC_META)
			continue;
		if (r->kind == SQ_META_QUEUE || r->kind == SQ_META_SOURCE) {
			void *p = _sq_w_grow(ms->items, ms->count, &ms->cap,
					sizeof(*ms->items), &ms->failed);
			if (p == NULL)
				return;
			ms->items = p;
			ms->items[ms->count++] = (struct sq_trace_meta_s){
				.source = r->kind == SQ_META_SOURCE,
				.kind = (uint8_t)r->small,
				.key = r->a,
				.target = r->b,
				.width = r->kind == SQ_META_QUEUE ?
						(int32_t)r->flow : 0,
				.handle = r->kind == SQ_META_SOURCE ?
						r->flow : 0,
			};
			continue;
		}
		/* A source's other parts follow its first, on this ring. */
		if (ms->count == 0 || ms->items[ms->count - 1].key != r->a)
			continue;
		struct sq_trace_meta_s *m = &ms->items[ms->count - 1];
		if (r->kind == SQ_META_HANDLER)
			m->handler = (uintptr_t)r->b;
		else if (r->kind == SQ_META_INTERVAL)
			m->interval = r->b;
		else if (r->kind == SQ_META_LEEWAY)
			m->leeway = r->b;
	}
}

static int
_sq_meta_order(const void *x, const void *y)
{
	const struct sq_trace_meta_s *a = x, *b = y;
	if (a->source != b->source)
		return a->source ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

/* Adds the stop's descriptions, and keeps one per queue or source. */
static void
_sq_w_merge_meta(struct sq_metas_s *ms, const struct sq_trace_meta_s *live,
		size_t nlive)
{
	for (size_t i = 0; i < nlive && !ms->failed; i++) {
		void *p = _sq_w_grow(ms->items, ms->count, &ms->cap,
				sizeof(*ms->items), &ms->failed);
		if (p == NULL)
			return;
		ms->items = p;
		ms->items[ms->count++] = live[i];
	}
	if (ms->failed || ms->count == 0)
		return;
	/* Sorted, then one of each (a queue seen twice is the same queue;
	 * a source address seen twice, most likely the same source). */
	qsort(ms->items, ms->count, sizeof(*ms->items), _sq_meta_order);
	size_t n = 0;
	for (size_t i = 0; i < ms->count; i++) {
		if (n > 0 && _sq_meta_order(&ms->items[n - 1],
				&ms->items[i]) == 0)
			continue;
		ms->items[n++] = ms->items[i];
	}
	ms->count = n;
	/* What the records name, and the queues those target (a chain a
	 * few deep), are described; the rest is left out. */
	for (int round = 0; round < 4 && !ms->failed; round++) {
		if (ms->nused == 0)
			break;
		qsort(ms->used, ms->nused, sizeof(*ms->used), _sq_u64_cmp);
		size_t u = 0;
		for (size_t i = 0; i < ms->nused; i++)
			if (u == 0 || ms->used[u - 1] != ms->used[i])
				ms->used[u++] = ms->used[i];
		ms->nused = u;
		size_t before = ms->nused;
		for (size_t i = 0; i < ms->count; i++)
			if (_sq_w_used(ms, ms->items[i].key) &&
					ms->items[i].target != 0 &&
					!_sq_w_used(ms, ms->items[i].target))
				_sq_w_use(ms, ms->items[i].target);
		if (ms->nused == before)
			break;
	}
	if (ms->nused > 0)
		qsort(ms->used, ms->nused, sizeof(*ms->used), _sq_u64_cmp);
	n = 0;
	for (size_t i = 0; i < ms->count; i++)
		if (_sq_w_used(ms, ms->items[i].key))
			ms->items[n++] = ms->items[i];
	ms->count = n;
}

/* The queues and sources alive at the stop, once each: process-wide
 * instants at the start of the recording (cat "queue", "source"). */
static void
_sq_w_meta(struct sq_writer_s *w, const struct sq_trace_meta_s *meta,
		size_t n)
{
	char qname[300], tname[300];
	for (size_t i = 0; i < n; i++) {
		const struct sq_trace_meta_s *m = &meta[i];
		_sq_w_event(w, 'i', w->pid, w->raw0);
		fputs(",\"s\":\"p\"", w->f);
		if (!m->source) {
			_sq_w_queue_name(w, m->key, qname, sizeof(qname));
			_sq_w_name(w, "queue ", qname, "");
			fprintf(w->f, ",\"cat\":\"queue\",\"args\":{\"label\":");
			_sq_w_string(w->f, qname);
			fprintf(w->f, ",\"kind\":\"%s\",\"serial\":%u",
					_sq_queue_kind_name(m->kind),
					(unsigned)m->key);
			if (m->target != 0) {
				_sq_w_queue_name(w, m->target, tname,
						sizeof(tname));
				fputs(",\"target\":", w->f);
				_sq_w_string(w->f, tname);
			}
			if (m->width > 0)
				fprintf(w->f, ",\"width\":%d", (int)m->width);
			else
				fputs(",\"width\":\"pool\"", w->f);
			fputs("}}", w->f);
			continue;
		}
		_sq_w_queue_name(w, m->target, qname, sizeof(qname));
		char name[400];
		snprintf(name, sizeof(name), "source %s on %s",
				_sq_source_kind_name(m->kind), qname);
		_sq_w_name(w, "", name, "");
		fprintf(w->f, ",\"cat\":\"source\",\"args\":{\"type\":"
				"\"%s\",\"source\":\"0x%" PRIx64 "\",",
				_sq_source_kind_name(m->kind), m->key);
		_sq_w_source_args(w, m);
		fputs("}}", w->f);
	}
}

int
_sq_trace_write_json(const struct sq_trace_json_s *in)
{
	uint32_t epoch = in->epoch;
	uint64_t end_raw = in->end_raw, end_ns = in->end_ns;
	int fd = dup(in->fd);
	if (fd < 0)
		return errno;
	FILE *f = fdopen(fd, "w");
	if (f == NULL) {
		int err = errno;
		close(fd);
		return err;
	}
	static char iobuf[1 << 16];
	setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));

	struct sq_writer_s w = {
		.f = f,
		.pid = getpid(),
		.first = true,
		.raw0 = in->raw0,
		.ns0 = in->ns0,
		.end_raw = end_raw,
	};
	w.scale = end_raw > w.raw0 && end_ns > w.ns0
			? (long double)(end_ns - w.ns0) / (end_raw - w.raw0)
			: 1.0L;
	w.nlabels = in->nlabels;
	w.labels = in->labels;
	w.label_queues = calloc(w.nlabels + 1, sizeof(*w.label_queues));

	/* The epoch's rings. */
	size_t total = 0;
	for (const struct sq_trace_buf_s *b = in->bufs; b; b = b->next) {
		if (__atomic_load_n(&b->epoch, __ATOMIC_ACQUIRE) != epoch ||
				b->recs == NULL)
			continue;
		uint64_t lo, hi;
		_sq_w_range(b, &lo, &hi);
		total += (size_t)(hi - lo);
	}

	/* Pass 1: the flows (which submissions, timers and runs share an
	 * id), the queues per label, the waits and their releases. */
	struct sq_waits_s waits = { 0 };
	struct sq_metas_s meta = { 0 };
	struct sq_flows_s flows = { NULL, 64 };
	while (flows.cap < total * 2 + 2)
		flows.cap *= 2;
	flows.slots = calloc(flows.cap, sizeof(*flows.slots));
	if (flows.slots == NULL) {
		fclose(f);
		free(w.label_queues);
		return ENOMEM;
	}
	for (const struct sq_trace_buf_s *b = in->bufs; b; b = b->next) {
		if (b->epoch != epoch || b->recs == NULL)
			continue;
		uint64_t lo, hi;
		_sq_w_range(b, &lo, &hi);
		for (uint64_t i = lo; i < hi; i++) {
			const struct sq_trace_rec_s *r = &b->recs[i & b->mask];
			if (r->type == SQ_REC_SUBMIT && r->flow) {
				struct sq_flow_s *fl = _sq_flow_get(&flows,
						r->flow);
				fl->flags |= SQ_FLOW_OUT | (_sq_w_counted(
						r->kind) ? SQ_FLOW_COUNTED : 0);
				fl->out_t = r->t;
				fl->queue = r->a;
			} else if (r->type == SQ_REC_BEGIN && r->flow &&
					r->kind != SQ_TRACE_EVENT &&
					r->kind != SQ_TRACE_HANDLER) {
				struct sq_flow_s *fl = _sq_flow_get(&flows,
						r->flow);
				if (r->kind == SQ_TRACE_TIMER) {
					fl->flags |= SQ_FLOW_STEP;
				} else if (!(fl->flags & SQ_FLOW_IN) ||
						r->t < fl->in_t) {
					fl->flags |= SQ_FLOW_IN;
					fl->in_t = r->t;
					fl->in_buf = b;
					fl->in_index = i;
				}
			}
		}
		_sq_w_gather_waits(&waits, b, lo, hi);
		_sq_w_gather_meta(&meta, b, lo, hi);
	}
	/* The queues and sources: those alive at the stop, and those that
	 * went away while recording; the sources by address (events name
	 * them). */
	_sq_w_merge_meta(&meta, in->meta, in->nmeta);
	struct sq_trace_meta_s *sources = meta.failed ? NULL : malloc(
			(meta.count + 1) * sizeof(*sources));
	for (size_t i = 0; sources != NULL && i < meta.count; i++)
		if (meta.items[i].source)
			sources[w.nsources++] = meta.items[i];
	if (sources != NULL)
		qsort(sources, w.nsources, sizeof(*sources), _sq_meta_cmp);
	w.sources = sources;
	/* A source cancelled before it went has no handler left: its
	 * handler's runs name it. */
	for (const struct sq_trace_buf_s *b = in->bufs; b && w.nsources > 0;
			b = b->next) {
		if (b->epoch != epoch || b->recs == NULL)
			continue;
		uint64_t lo, hi;
		_sq_w_range(b, &lo, &hi);
		for (uint64_t i = lo; i < hi; i++) {
			const struct sq_trace_rec_s *r = &b->recs[i & b->mask];
			if (r->type != SQ_REC_BEGIN || r->kind !=
					SQ_TRACE_HANDLER || r->small != 0 ||
					r->flow == 0)
				continue;
			struct sq_trace_meta_s key = { .source = true,
					.key = r->a };
			struct sq_trace_meta_s *m = bsearch(&key, sources,
					w.nsources, sizeof(key), _sq_meta_cmp);
			struct sq_trace_meta_s *n = bsearch(&key, meta.items,
					meta.count, sizeof(key), _sq_meta_order);
			if (m != NULL && m->handler == 0)
				m->handler = (uintptr_t)r->b;
			if (n != NULL && n->handler == 0)
				n->handler = (uintptr_t)r->b;
		}
	}
	w.arrows = _sq_w_pair_waits(&waits);
	/* A run whose submission was before the recording (or lost to a
	 * wrapped ring) ends no arrow; neither does one that comes before
	 * its submission (a stale id in recycled memory). */
	for (size_t i = 0; i < flows.cap; i++) {
		struct sq_flow_s *fl = &flows.slots[i];
		if (fl->id && (fl->flags & SQ_FLOW_IN) && (fl->flags &
				SQ_FLOW_OUT) && fl->in_t < fl->out_t)
			fl->flags &= ~SQ_FLOW_IN;
	}
	/* Labels shared by several queues get the serial number too. */
	if (w.label_queues != NULL) {
		uint64_t *seen = calloc(flows.cap, sizeof(*seen));
		size_t seen_cap = flows.cap;
		for (size_t i = 0; seen && i < flows.cap; i++) {
			uint64_t q = flows.slots[i].queue;
			if (!flows.slots[i].id || q == 0)
				continue;
			size_t j = (q * 11400714819323198485ull) >> 32 &
					(seen_cap - 1);
			while (seen[j] != 0 && seen[j] != q)
				j = (j + 1) & (seen_cap - 1);
			if (seen[j] == 0) {
				seen[j] = q;
				uint32_t id = (uint32_t)(q >> 32);
				if (id && id <= w.nlabels)
					w.label_queues[id - 1]++;
			}
		}
		free(seen);
	}

	fputs("{\"traceEvents\":[", f);
	_sq_w_process_name(&w);
	if (!meta.failed)
		_sq_w_meta(&w, meta.items, meta.count);
	for (const struct sq_trace_buf_s *b = in->bufs; b; b = b->next) {
		if (b->epoch != epoch || b->recs == NULL)
			continue;
		fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
				"\"thread_name\",\"args\":{\"name\":", w.pid,
				(int)b->tid);
		_sq_w_string(f, b->name);
		fprintf(f, "}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
				"\"thread_sort_index\",\"args\":{\"sort_index\":"
				"%d}}", w.pid, (int)b->tid, b->sort);
	}
	for (const struct sq_trace_buf_s *b = in->bufs; b; b = b->next)
		if (b->epoch == epoch && b->recs != NULL)
			_sq_w_thread(&w, b, &flows);
	_sq_w_depths(&w, &flows, waits.depth, waits.ndepth);
	fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":"
			"{\"producer\":\"SwiftQueues\",\"clock\":"
			"\"CLOCK_MONOTONIC\",\"dropped_events\":%" PRIu64
			"}}\n", w.dropped);

	free(flows.slots);
	free(w.label_queues);
	free(sources);
	free(meta.items);
	free(meta.used);
	free(waits.releases);
	free(waits.ends);
	free(waits.depth);
	if (w.arrows != NULL) {
		free(w.arrows->by_release);
		free(w.arrows->by_wait);
		free(w.arrows);
	}
	_sq_names_free(&w.names);
	int err = 0;
	if (ferror(f))
		err = EIO;
	if (fclose(f) != 0 && err == 0)
		err = errno ? errno : EIO;
	return err;
}

#endif /* SQ_NO_TRACE */
