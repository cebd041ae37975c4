/*
 * Waits in traces, and the report made from them: a program with a known
 * stall (a task holds a serial queue for 100 ms while a group member
 * sq_syncs onto it; the main thread waits on a semaphore, the group and a
 * work item) is recorded, and the trace must show each blocking wait as a
 * slice on the waiting thread named by what it waits for, an arrow from
 * the task that released it, the waiting caller in the queue's depth
 * counter, the queue described once; an uncontended sq_sync records no
 * wait; a sq_once_f caller waits for the thread running the function;
 * the watchdog's report of the hold is an instant with its text.
 * Then scripts/sq-trace-report (SQ_TRACE_REPORT names another copy)
 * must name the waiter, the holder and the figures, as JSON and as text.
 */
#include "queue_helpers.h"
#include "trace_helpers.h"

#include <sys/stat.h>

/* The holder holds its queue this long after the waiter started its
 * sq_sync (so the wait is long on a loaded machine too). */
#define HOLD_MS 100
#define SIGNAL_AFTER_MS 20

static char dir[] = "/tmp/sq-trace-waits-XXXXXX";
static sq_queue_t held, idle;
static sq_semaphore_t started;
static int syncing; /* the waiter is about to call sq_sync_f */

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void
hold_queue(void *ctx)
{
	(void)ctx;
	/* Late enough that the main thread is asleep on the semaphore. */
	sleep_ms(SIGNAL_AFTER_MS);
	sq_semaphore_signal(started);
	for (int i = 0; i < 10000 && !__atomic_load_n(&syncing,
			__ATOMIC_ACQUIRE); i++)
		sleep_ms(1);
	sleep_ms(HOLD_MS);
}

static void
lookup(void *ctx)
{
	(void)ctx;
}

static void
wait_on_held(void *ctx)
{
	(void)ctx;
	__atomic_store_n(&syncing, 1, __ATOMIC_RELEASE);
	sq_sync_f(held, NULL, lookup);
}

static void
slow_item(void *ctx)
{
	(void)ctx;
	sleep_ms(30);
}

static sq_once_t once;

static void
slow_once(void *ctx)
{
	(void)ctx;
	sleep_ms(60);
}

static void *
run_once(void *ctx)
{
	(void)ctx;
	sq_once_f(&once, NULL, slow_once);
	return NULL;
}

static void
record_stall(const char *path)
{
	held = sq_queue_create("test.wait.held", NULL);
	idle = sq_queue_create("test.wait.idle", NULL);
	started = sq_semaphore_create(0);
	sq_group_t group = sq_group_create();
	sq_queue_t global = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);

	CHECK_EQ(sq_trace_start(path), 0);
	sq_sync_f(idle, NULL, lookup); /* uncontended: no wait */
	sq_async_f(held, NULL, hold_queue);
	sq_semaphore_wait(started, SQ_TIME_FOREVER);
	sq_group_async_f(group, global, NULL, wait_on_held);
	sq_group_wait(group, SQ_TIME_FOREVER);
	sq_workitem_t item = sq_workitem_create_f(0, NULL, slow_item);
	sq_async_workitem(global, item);
	sq_workitem_wait(item, SQ_TIME_FOREVER);
	/* Another thread runs the once function; this one waits for it. */
	pthread_t other;
	CHECK_EQ(pthread_create(&other, NULL, run_once, NULL), 0);
	sleep_ms(15);
	sq_once_f(&once, NULL, slow_once);
	pthread_join(other, NULL);
	CHECK_EQ(sq_trace_stop(), 0);

	sq_release(item);
	sq_release(group);
	sq_release(started);
	sq_release(idle);
	sq_release(held);
}

/* The `woken` mark inside wait slice w, or NULL. */
static struct json *
woken_in(const struct trace *t, const struct json *w)
{
	for (int i = 0; find_slice(t, "woken", NULL, i); i++) {
		struct json *m = find_slice(t, "woken", NULL, i);
		if (nested_in(m, w))
			return m;
	}
	return NULL;
}

/* Whether wait slice w was released from inside slice `by`, by a mark
 * named `mark` (or, for a hand-over between two jobs, just after it on
 * its thread). */
static bool
released_by(const struct trace *t, const struct json *w, const char *mark,
		const struct json *by, bool after)
{
	struct json *m = w ? woken_in(t, w) : NULL;
	struct json *src = m ? flow_source(t, m, false) : NULL;
	if (src == NULL || by == NULL || strcmp(json_str(src, "name"), mark))
		return false;
	if (!after)
		return nested_in(src, by);
	return json_num(src, "tid", -1) == json_num(by, "tid", -2) &&
			json_num(src, "ts", 0) + 0.002 >= json_num(by, "ts", 0)
			+ json_num(by, "dur", 0);
}

static void
test_waits_in_trace(const char *path)
{
	struct trace t;
	CHECK(trace_load(&t, path));
	if (t.events == NULL)
		return;
	check_structure(&t);
	const char *root = "com.swiftqueues.root.default";
	struct json *holder = find_slice(&t, "test.wait.held", "hold_queue", 0);
	struct json *waiter = find_slice(&t, root, "wait_on_held", 0);
	/* The work item's run: the other long task on the global queue. */
	struct json *item = NULL;
	for (int i = 0; find_slice(&t, root, NULL, i); i++) {
		struct json *x = find_slice(&t, root, NULL, i);
		if (x != waiter && json_num(x, "dur", 0) >= 25000)
			item = x;
	}
	CHECK(holder != NULL && waiter != NULL && item != NULL);

	/* The sync caller's wait: on its thread, inside its task, as long
	 * as the rest of the hold; ended by the hand-over after the holder. */
	struct json *w = find_slice(&t, "wait for test.wait.held", NULL, 0);
	CHECK(w != NULL);
	CHECK(w && waiter && nested_in(w, waiter));
	CHECK(w && json_num(w, "dur", 0) >= 50000);
	CHECK(w && strcmp(json_str(json_get(w, "args"), "queue"),
			"test.wait.held") == 0);
	CHECK(released_by(&t, w, "hand over test.wait.held", holder, true));
	/* The sync slice is the function's run, after the wait. */
	struct json *sync = find_slice(&t, "test.wait.held", "lookup", 0);
	CHECK(sync && w && nested_in(sync, waiter) && json_num(sync, "ts", 0)
			>= json_num(w, "ts", 0) + json_num(w, "dur", 0));
	CHECK(find_slice(&t, "wait for test.wait.held", NULL, 1) == NULL);

	/* The main thread's waits, each released by the task that ended
	 * it. */
	struct json *sem = find_slice(&t, "wait for semaphore", NULL, 0);
	CHECK(sem && strcmp(thread_name(&t, json_num(sem, "tid", 0)),
			"main thread") == 0);
	CHECK(released_by(&t, sem, "signal semaphore", holder, false));
	struct json *grp = find_slice(&t, "wait for group", NULL, 0);
	CHECK(grp && strcmp(thread_name(&t, json_num(grp, "tid", 0)),
			"main thread") == 0);
	CHECK(released_by(&t, grp, "group empty", waiter, true) ||
			released_by(&t, grp, "group empty", waiter, false));
	struct json *wi = find_slice(&t, "wait for work item", NULL, 0);
	CHECK(wi != NULL);
	CHECK(released_by(&t, wi, "work item done", item, false));

	struct json *ow = find_slice(&t, "wait for once", NULL, 0);
	CHECK(ow && strcmp(thread_name(&t, json_num(ow, "tid", 0)),
			"main thread") == 0);
	struct json *om = ow ? woken_in(&t, ow) : NULL;
	struct json *os = om ? flow_source(&t, om, false) : NULL;
	CHECK(os && strcmp(json_str(os, "name"), "once done") == 0 &&
			json_num(os, "tid", 0) != json_num(ow, "tid", 0));

	/* No wait where nothing blocked. */
	CHECK(find_slice(&t, "test.wait.idle", "lookup", 0) != NULL);
	CHECK_EQ(count_named(&t, "X", "wait for test.wait.idle"), 0);

	/* The waiting caller is counted in the queue's depth. */
	double deepest = 0;
	for (size_t i = 0; w && i < t.events->count; i++) {
		struct json *e = t.events->items[i];
		double ts = json_num(e, "ts", 0);
		if (strcmp(json_str(e, "ph"), "C") == 0 && strcmp(json_str(e,
				"name"), "depth test.wait.held") == 0 &&
				ts >= json_num(w, "ts", 0) && ts < json_num(w,
				"ts", 0) + json_num(w, "dur", 0))
		{
			double d = json_num(json_get(e, "args"), "queued", 0);
			deepest = d > deepest ? d : deepest;
		}
	}
	CHECK(deepest >= 1);

	/* The watchdog's finding, as an instant with its text. */
	int found = 0;
	for (size_t i = 0; i < t.events->count; i++) {
		struct json *e = t.events->items[i];
		if (strcmp(json_str(e, "cat"), "watchdog") == 0 && strstr(
				json_str(e, "name"), "a task on queue "
				"'test.wait.held' has run for"))
			found++;
	}
	CHECK_EQ(found, 1);

	/* The queue, described once. */
	CHECK_EQ(count_named(&t, "i", "queue test.wait.held"), 1);
	for (size_t i = 0; i < t.events->count; i++) {
		struct json *e = t.events->items[i];
		if (strcmp(json_str(e, "name"), "queue test.wait.held") != 0)
			continue;
		struct json *args = json_get(e, "args");
		CHECK_EQ(strcmp(json_str(args, "kind"), "serial"), 0);
		CHECK_EQ(json_num(args, "width", 0), 1);
		CHECK_EQ(strcmp(json_str(args, "target"), root), 0);
	}
	trace_free(&t);
}

/* The report's output for the trace at `path`, malloc'd. */
static char *
report(const char *path, bool as_json)
{
	const char *script = getenv("SQ_TRACE_REPORT");
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "python3 %s %s %s", script && *script ?
			script : "scripts/sq-trace-report", as_json ? "--json"
			: "", path);
	FILE *p = popen(cmd, "r");
	if (p == NULL)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	size_t n;
	while (out && (n = fread(out + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 4096) {
			char *more = realloc(out, cap * 2);
			if (more == NULL) {
				free(out);
				out = NULL;
				break;
			}
			out = more;
			cap *= 2;
		}
	}
	int status = pclose(p);
	if (out)
		out[len] = '\0';
	if (status != 0) {
		fprintf(stderr, "%s: exit status %d\n", cmd, status);
		free(out);
		return NULL;
	}
	return out;
}

static struct json *
item_at(const struct json *array, size_t i)
{
	return array && array->type == JSON_ARRAY && i < array->count
			? array->items[i] : NULL;
}

static void
test_report(const char *path)
{
	char *text = report(path, true);
	CHECK(text != NULL);
	struct json *r = text ? json_parse(text) : NULL;
	free(text);
	CHECK(r != NULL);
	if (r == NULL)
		return;

	/* Who waited on whom: the sync caller, its task, the holder. */
	struct json *waits = json_get(r, "waits"), *sync = NULL, *sem = NULL;
	for (size_t i = 0; item_at(waits, i); i++) {
		struct json *x = item_at(waits, i);
		if (!sync && strcmp(json_str(x, "kind"), "sync") == 0)
			sync = x;
		if (!sem && strcmp(json_str(x, "kind"), "semaphore") == 0)
			sem = x;
	}
	CHECK(sync != NULL);
	CHECK(sync && strcmp(json_str(sync, "waited_for"),
			"test.wait.held") == 0);
	CHECK(sync && strcmp(json_str(json_get(sync, "waiter"), "function"),
			"wait_on_held") == 0);
	struct json *h = sync ? item_at(json_get(sync, "holders"), 0) : NULL;
	CHECK(h && strcmp(json_str(h, "function"), "hold_queue") == 0);
	CHECK(h && strcmp(json_str(h, "queue"), "test.wait.held") == 0);
	CHECK(h && json_num(h, "held_ms_of_wait", 0) >= 50);
	CHECK(h && json_num(h, "duration_ms", 0) >= HOLD_MS);
	CHECK(sync && json_num(sync, "duration_ms", 0) >= 50);
	CHECK(sync && strcmp(json_str(json_get(sync, "released_by"),
			"function"), "hold_queue") == 0);
	CHECK(sem && strcmp(json_str(json_get(sem, "released_by"),
			"function"), "hold_queue") == 0);
	CHECK(sem && strcmp(json_str(json_get(sem, "waiter"), "thread"),
			"main thread") == 0);

	/* The answer first: the holder, what it held, who waited. */
	struct json *sum = json_get(r, "summary"), *ans = NULL;
	for (size_t i = 0; item_at(sum, i); i++)
		if (strcmp(json_str(item_at(sum, i), "waited_for"),
				"test.wait.held") == 0)
			ans = item_at(sum, i);
	CHECK(ans && strstr(json_str(ans, "holder"), "hold_queue") != NULL);
	CHECK(ans && strstr(json_str(ans, "waiter"), "wait_on_held") != NULL);
	CHECK(ans && json_num(ans, "hold_p50_ms", 0) >= HOLD_MS);
	CHECK(ans && json_num(ans, "waits", 0) >= 1);

	/* The slowest tasks: the waiter's chain leads to the holder. */
	struct json *slow = json_get(r, "slowest_tasks"), *mine = NULL;
	for (size_t i = 0; item_at(slow, i); i++)
		if (strcmp(json_str(item_at(slow, i), "function"),
				"wait_on_held") == 0)
			mine = item_at(slow, i);
	struct json *link = mine ? item_at(json_get(mine, "chain"), 0) : NULL;
	CHECK(link && strcmp(json_str(link, "waited_for"),
			"test.wait.held") == 0);
	struct json *lh = link ? item_at(json_get(link, "holders"), 0) : NULL;
	CHECK(lh && strcmp(json_str(lh, "function"), "hold_queue") == 0);

	/* Per function, and the serial queue's longest holder. */
	struct json *fns = json_get(r, "functions"), *row = NULL;
	for (size_t i = 0; item_at(fns, i); i++)
		if (strcmp(json_str(item_at(fns, i), "function"),
				"hold_queue") == 0)
			row = item_at(fns, i);
	CHECK(row && json_num(row, "count", 0) == 1);
	CHECK(row && json_num(row, "run_max_ms", 0) >= HOLD_MS);
	CHECK(row && json_get(row, "delay_p50_ms") != NULL);
	struct json *q = json_get(json_get(r, "serial_queue_holders"),
			"test.wait.held");
	CHECK(q && strcmp(json_str(item_at(json_get(q, "longest"), 0),
			"function"), "hold_queue") == 0);
	CHECK(json_get(json_get(r, "pool"), "compensation") != NULL);
	struct json *dog = item_at(json_get(r, "watchdog"), 0);
	CHECK(dog && strstr(json_str(dog, "text"), "'test.wait.held'"));
	json_free(r);

	/* The same as text. */
	text = report(path, false);
	CHECK(text && strstr(text, "The answer"));
	CHECK(text && strstr(text, "waited for test.wait.held (sync)"));
	CHECK(text && strstr(text, "held by test.wait.held: hold_queue on "));
	free(text);
}

int
main(void)
{
	/* The watchdog reports the hold into the trace (read when the pool
	 * starts, after this). */
	setenv("SQ_WATCHDOG_MS", "60", 1);
	CHECK(mkdtemp(dir) != NULL);
	char path[256];
	snprintf(path, sizeof(path), "%s/stall.json", dir);
	record_stall(path);
	test_waits_in_trace(path);
	test_report(path);
	if (sqt_failed == 0) {
		unlink(path);
		rmdir(dir);
	} else {
		fprintf(stderr, "test_trace_waits: trace kept in %s\n", path);
	}
	return sqt_finish("test_trace_waits");
}
