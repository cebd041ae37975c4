/*
 * Reading trace files in tests: a trace as a list of JSON events, its
 * threads, slices by name and function, the arrow that ends at a slice,
 * nesting, and the structure every trace must have.
 */
#ifndef TRACE_HELPERS_H
#define TRACE_HELPERS_H

#include "sqtest.h"
#include "json_helpers.h"

struct trace {
	struct json *doc;
	struct json *events;
};

static inline bool
trace_load(struct trace *t, const char *path)
{
	char *text = json_read_file(path);
	t->doc = text ? json_parse(text) : NULL;
	free(text);
	t->events = json_get(t->doc, "traceEvents");
	return t->events != NULL && t->events->type == JSON_ARRAY;
}

static inline void
trace_free(struct trace *t)
{
	json_free(t->doc);
}

static inline const char *
thread_name(const struct trace *t, double tid)
{
	for (size_t i = 0; i < t->events->count; i++) {
		struct json *e = t->events->items[i];
		if (strcmp(json_str(e, "ph"), "M") == 0 && strcmp(json_str(e,
				"name"), "thread_name") == 0 && json_num(e,
				"tid", -1) == tid)
			return json_str(json_get(e, "args"), "name");
	}
	return NULL;
}

static inline bool
has_thread(const struct trace *t, const char *name)
{
	for (size_t i = 0; i < t->events->count; i++) {
		struct json *e = t->events->items[i];
		if (strcmp(json_str(e, "name"), "thread_name") == 0 && strcmp(
				json_str(json_get(e, "args"), "name"), name) == 0)
			return true;
	}
	return false;
}

/* The n-th (0-based) slice named `name` whose function is `function`
 * (NULL: any), or NULL. */
static inline struct json *
find_slice(const struct trace *t, const char *name, const char *function,
		int n)
{
	for (size_t i = 0; i < t->events->count; i++) {
		struct json *e = t->events->items[i];
		if (strcmp(json_str(e, "ph"), "X") != 0 ||
				strcmp(json_str(e, "name"), name) != 0)
			continue;
		if (function && strcmp(json_str(json_get(e, "args"),
				"function"), function) != 0)
			continue;
		if (n-- == 0)
			return e;
	}
	return NULL;
}

static inline int
count_named(const struct trace *t, const char *ph, const char *name)
{
	int n = 0;
	for (size_t i = 0; i < t->events->count; i++) {
		struct json *e = t->events->items[i];
		if (strcmp(json_str(e, "ph"), ph) == 0 && strstr(json_str(e,
				"name"), name) != NULL)
			n++;
	}
	return n;
}

/* The slice that starts the arrow ending at `slice` (flow_out, same
 * bind_id), or NULL; `step`: a slice passing it on (both directions). */
static inline struct json *
flow_source(const struct trace *t, const struct json *slice, bool step)
{
	const char *id = json_str(slice, "bind_id");
	if (id[0] == '\0')
		return NULL;
	for (size_t i = 0; i < t->events->count; i++) {
		struct json *e = t->events->items[i];
		if (e != slice && strcmp(json_str(e, "bind_id"), id) == 0 &&
				json_true(e, "flow_out") &&
				json_true(e, "flow_in") == step)
			return e;
	}
	return NULL;
}

/* Whether `inner` lies within `outer` on the same thread. */
static inline bool
nested_in(const struct json *inner, const struct json *outer)
{
	double is = json_num(inner, "ts", -1), os = json_num(outer, "ts", -2);
	return json_num(inner, "tid", -1) == json_num(outer, "tid", -2) &&
			is >= os && is + json_num(inner, "dur", 0) <=
			os + json_num(outer, "dur", 0) + 0.002;
}

/* The structure every trace must have: complete slices carry ts, dur, pid,
 * tid; each bind_id has one start, one end, in that order; every thread
 * with slices is named. */
static inline void
check_structure(const struct trace *t)
{
	int bad = 0, unpaired = 0, unnamed = 0;
	for (size_t i = 0; i < t->events->count; i++) {
		struct json *e = t->events->items[i];
		if (strcmp(json_str(e, "ph"), "X") != 0)
			continue;
		if (!json_get(e, "ts") || !json_get(e, "dur") ||
				!json_get(e, "pid") || !json_get(e, "tid") ||
				json_num(e, "dur", -1) < 0)
			bad++;
		if (thread_name(t, json_num(e, "tid", -1)) == NULL)
			unnamed++;
		const char *id = json_str(e, "bind_id");
		if (id[0] == '\0' || json_true(e, "flow_in"))
			continue;
		/* A start: exactly one end, after it. */
		int ends = 0;
		for (size_t k = 0; k < t->events->count; k++) {
			struct json *x = t->events->items[k];
			if (strcmp(json_str(x, "bind_id"), id) == 0 &&
					json_true(x, "flow_in") &&
					!json_true(x, "flow_out") &&
					json_num(x, "ts", 0) >= json_num(e,
					"ts", 0))
				ends++;
		}
		if (ends != 1)
			unpaired++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(unpaired, 0);
	CHECK_EQ(unnamed, 0);
	/* And the reverse: every end has its start. */
	int orphans = 0;
	for (size_t i = 0; i < t->events->count; i++) {
		struct json *e = t->events->items[i];
		if (json_true(e, "flow_in") && flow_source(t, e, false) == NULL
				&& flow_source(t, e, true) == NULL)
			orphans++;
	}
	CHECK_EQ(orphans, 0);
}

/* The file at `path` is a trace with that structure. */
static inline void
check_file(const char *path)
{
	struct trace t;
	CHECK(trace_load(&t, path));
	if (t.events)
		check_structure(&t);
	trace_free(&t);
}

#endif /* TRACE_HELPERS_H */
