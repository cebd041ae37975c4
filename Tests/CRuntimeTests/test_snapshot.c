/*
 * Snapshots of the whole runtime: a known set of queues (suspended with
 * jobs, inactive, busy with jobs behind a running task, targeting another),
 * sources and I/O channels shows in the structure, in the text and in
 * JSON that a small parser accepts; objects leave when released; long
 * queues; the waiting figure; snapshots taken while queues drain hard.
 */
#include "queue_helpers.h"

#include <ctype.h>
#include <fcntl.h>

/* ---- A small JSON checker --------------------------------------------------
 * Accepts exactly RFC 8259 values (objects, arrays, strings with escapes,
 * numbers, true / false / null); returns the end or NULL. */

static const char *json_value(const char *p);

static const char *
json_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static const char *
json_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	while (*p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				p += 5;
				continue;
			}
			if (!strchr("\"\\/bfnrt", *p) || *p == '\0')
				return NULL;
		}
		p++;
	}
	return p + 1;
}

static const char *
json_number(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (isdigit((unsigned char)*p))
			p++;
	else
		return NULL;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return p;
}

static const char *
json_value(const char *p)
{
	p = json_ws(p);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		bool object = *p == '{';
		p = json_ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (object) {
				p = json_string(json_ws(p));
				if (p == NULL || *(p = json_ws(p)) != ':')
					return NULL;
				p++;
			}
			p = json_value(p);
			if (p == NULL)
				return NULL;
			p = json_ws(p);
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	if (*p == '"')
		return json_string(p);
	if (strncmp(p, "true", 4) == 0)
		return p + 4;
	if (strncmp(p, "false", 5) == 0)
		return p + 5;
	if (strncmp(p, "null", 4) == 0)
		return p + 4;
	return json_number(p);
}

static bool
json_valid(const char *text)
{
	const char *end = json_value(text);
	return end != NULL && *json_ws(end) == '\0';
}

static void
test_json_checker(void)
{
	/* The checker itself must be able to fail. */
	CHECK(json_valid("{\"a\":[1,-2.5e3,true,null,\"x\\\"\\u00e9\"]}"));
	CHECK(!json_valid("{\"a\":1,}"));
	CHECK(!json_valid("{\"a\":01}"));
	CHECK(!json_valid("{\"a\":\"\x01\"}"));
	CHECK(!json_valid("[1 2]"));
	CHECK(!json_valid("{\"a\":1} x"));
}

/* ---- The known set ------------------------------------------------------ */

static void
nothing(void *ctx)
{
}

static sq_semaphore_t gate;

static void
wait_gate(void *started)
{
	sq_semaphore_signal(started);
	sq_semaphore_wait(gate, SQ_TIME_FOREVER);
}

static const sq_snapshot_queue_t *
find_queue(const sq_snapshot_t *s, const char *label)
{
	for (size_t i = 0; i < s->queue_count; i++)
		if (strcmp(s->queues[i].label, label) == 0)
			return &s->queues[i];
	return NULL;
}

static const sq_snapshot_source_t *
find_source(const sq_snapshot_t *s, const void *address)
{
	for (size_t i = 0; i < s->source_count; i++)
		if (s->sources[i].address == (uintptr_t)address)
			return &s->sources[i];
	return NULL;
}

static const sq_snapshot_channel_t *
find_channel(const sq_snapshot_t *s, const void *address)
{
	for (size_t i = 0; i < s->channel_count; i++)
		if (s->channels[i].address == (uintptr_t)address)
			return &s->channels[i];
	return NULL;
}

static void
test_known_set(void)
{
	sq_queue_t suspended = sq_queue_create("com.example.snap.suspended",
			NULL);
	sq_suspend(suspended);
	sq_suspend(suspended);
	for (int i = 0; i < 3; i++)
		sq_async_f(suspended, NULL, nothing);
	sq_queue_t inactive = sq_queue_create("com.example.snap.inactive",
			sq_queue_attr_make_initially_inactive(
			SQ_QUEUE_CONCURRENT));
	sq_barrier_async_f(inactive, NULL, nothing);
	sq_async_f(inactive, NULL, nothing);
	sq_queue_t inner = sq_queue_create_with_target(
			"com.example.snap.inner", NULL, suspended);
	sq_async_f(inner, NULL, nothing);

	gate = sq_semaphore_create(0);
	sq_semaphore_t started = sq_semaphore_create(0);
	sq_queue_t busy = sq_queue_create("com.example.snap.busy", NULL);
	sq_async_f(busy, started, wait_gate);
	for (int i = 0; i < 2; i++)
		sq_async_f(busy, NULL, nothing);
	sq_queue_t conc = sq_queue_create("com.example.snap.concurrent",
			SQ_QUEUE_CONCURRENT);
	sq_async_f(conc, started, wait_gate);
	sq_semaphore_wait(started, SQ_TIME_FOREVER);
	sq_semaphore_wait(started, SQ_TIME_FOREVER);

	sq_source_t timer = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, busy);
	sq_source_set_timer(timer, SQ_TIME_FOREVER, NSEC_PER_SEC, 0);
	int p[2];
	CHECK(pipe(p) == 0);
	sq_source_t reader = sq_source_create(SQ_SOURCE_TYPE_READ,
			(uintptr_t)p[0], 0, suspended);
	sq_suspend(reader);
	sq_activate(reader);
	sq_io_t channel = sq_io_create_f(SQ_IO_STREAM, p[1], NULL, NULL, NULL);
	sq_io_t path_channel = sq_io_create_with_path_f(SQ_IO_RANDOM,
			"/dev/null", O_RDONLY, 0, NULL, NULL, NULL);

	/* The structure. */
	sq_snapshot_t *s = sq_snapshot_create();
	CHECK(s != NULL);
	CHECK_EQ(s->pid, getpid());
	CHECK(s->time_ns > 0);
	CHECK_EQ(s->watchdog_ms, 0);
	CHECK(s->pool.width >= 1 && s->pool.live >= 2);
	CHECK_EQ(s->thread_count, 0); /* the watchdog is off */
	CHECK(s->queue_count >= 10);
	CHECK(strcmp(s->queues[0].kind, "main") == 0);
	CHECK(strcmp(s->queues[1].label,
			"com.swiftqueues.root.user-interactive") == 0);
	CHECK(strcmp(s->queues[2].label, "com.swiftqueues.root.high") == 0);
	CHECK(strcmp(s->queues[4].kind, "global") == 0);
	CHECK_EQ(s->queues[4].running, -1);
	const sq_snapshot_queue_t *q = find_queue(s,
			"com.example.snap.suspended");
	CHECK(q != NULL);
	if (q) {
		CHECK(strcmp(q->kind, "serial") == 0);
		CHECK(strcmp(q->target, "com.swiftqueues.root.default") == 0);
		CHECK_EQ(q->suspend_count, 2);
		CHECK(!q->inactive);
		CHECK_EQ(q->queued, 4); /* 3 jobs and inner's queue */
		CHECK(!q->queued_capped);
		CHECK_EQ(q->running, 0);
		CHECK(q->waiting_ms >= 0);
	}
	q = find_queue(s, "com.example.snap.inactive");
	CHECK(q != NULL);
	if (q) {
		CHECK(strcmp(q->kind, "concurrent") == 0);
		CHECK(q->inactive);
		CHECK_EQ(q->queued, 2);
		CHECK_EQ(q->running, 0);
	}
	q = find_queue(s, "com.example.snap.inner");
	CHECK(q != NULL);
	if (q) {
		CHECK(strcmp(q->target, "com.example.snap.suspended") == 0);
		CHECK_EQ(q->queued, 1);
	}
	q = find_queue(s, "com.example.snap.busy");
	CHECK(q != NULL);
	if (q) {
		CHECK_EQ(q->queued, 2);
		CHECK_EQ(q->running, 1);
	}
	q = find_queue(s, "com.example.snap.concurrent");
	CHECK(q != NULL);
	if (q) {
		CHECK_EQ(q->queued, 0);
		CHECK_EQ(q->running, 1);
		CHECK_EQ(q->waiting_ms, -1);
	}
	/* Queues in creation order after the main and global ones. */
	size_t at_suspended = 0, at_busy = 0;
	for (size_t i = 0; i < s->queue_count; i++) {
		if (strcmp(s->queues[i].label, "com.example.snap.suspended") == 0)
			at_suspended = i;
		if (strcmp(s->queues[i].label, "com.example.snap.busy") == 0)
			at_busy = i;
	}
	CHECK(at_suspended >= 5 && at_suspended < at_busy);

	const sq_snapshot_source_t *src = find_source(s, timer);
	CHECK(src != NULL);
	if (src) {
		CHECK(strcmp(src->type, "timer") == 0);
		CHECK(strcmp(src->target, "com.example.snap.busy") == 0);
		CHECK(src->inactive);
		CHECK(!src->cancelled);
		CHECK(!src->snapshot_signal);
	}
	src = find_source(s, reader);
	CHECK(src != NULL);
	if (src) {
		CHECK(strcmp(src->type, "read") == 0);
		CHECK_EQ(src->handle, p[0]);
		CHECK_EQ(src->suspend_count, 1);
		CHECK(!src->inactive);
	}
	const sq_snapshot_channel_t *chn = find_channel(s, channel);
	CHECK(chn != NULL);
	if (chn) {
		CHECK(strcmp(chn->type, "stream") == 0);
		CHECK_EQ(chn->fd, p[1]);
		CHECK(chn->path == NULL);
		CHECK(strcmp(chn->queue, "com.swiftqueues.io") == 0);
		CHECK(!chn->closed);
	}
	chn = find_channel(s, path_channel);
	CHECK(chn != NULL);
	if (chn) {
		CHECK(strcmp(chn->type, "random") == 0);
		CHECK(chn->path && strcmp(chn->path, "/dev/null") == 0);
	}
	sq_snapshot_free(s);

	/* The text. */
	char *text = sq_snapshot_text();
	CHECK(text != NULL);
	if (text) {
		CHECK(strncmp(text, "SwiftQueues: snapshot of process ", 33)
				== 0);
		CHECK(strstr(text, "  pool: width ") != NULL);
		CHECK(strstr(text, "  queue 'com.swiftqueues.main-thread' "
				"(main): queued 0, running 0\n") != NULL);
		CHECK(strstr(text, "  queue 'com.swiftqueues.root.default' "
				"(global): queued ") != NULL);
		CHECK(strstr(text, "  queue 'com.example.snap.suspended' "
				"(serial, target 'com.swiftqueues.root.default'):"
				" suspended 2, queued 4, running 0, waiting ")
				!= NULL);
		CHECK(strstr(text, "  queue 'com.example.snap.inactive' "
				"(concurrent, target 'com.swiftqueues.root."
				"default'): inactive, queued 2, running 0, "
				"waiting ") != NULL);
		CHECK(strstr(text, "  queue 'com.example.snap.busy' (serial, "
				"target 'com.swiftqueues.root.default'): queued 2,"
				" running 1, waiting ") != NULL);
		CHECK(strstr(text, "(timer, handle 0, mask 0, target "
				"'com.example.snap.busy'): inactive, not "
				"registered, pending 0\n") != NULL);
		CHECK(strstr(text, "(read, handle ") != NULL);
		CHECK(strstr(text, "(random, fd -1, path '/dev/null', queue "
				"'com.swiftqueues.io'): open, calls ") != NULL);
		CHECK(strstr(text, "SwiftQueues: end of snapshot\n") != NULL);
		free(text);
	}

	/* The JSON. */
	char *json = sq_snapshot_json();
	CHECK(json != NULL);
	if (json) {
		CHECK(json_valid(json));
		CHECK(strstr(json, "{\"label\":\"com.example.snap.suspended\","
				"\"address\":\"0x") != NULL);
		CHECK(strstr(json, "\"kind\":\"serial\",\"target\":\"com."
				"swiftqueues.root.default\",\"suspend_count\":2,"
				"\"inactive\":false,\"queued\":4,\"queued_capped\":"
				"false,\"running\":0,\"waiting_ms\":") != NULL);
		CHECK(strstr(json, "\"kind\":\"concurrent\",\"target\":\"com."
				"swiftqueues.root.default\",\"suspend_count\":0,"
				"\"inactive\":true,\"queued\":2") != NULL);
		CHECK(strstr(json, "\"queued\":2,\"queued_capped\":false,"
				"\"running\":1,") != NULL);
		CHECK(strstr(json, "\"kind\":\"global\",\"target\":null") !=
				NULL);
		CHECK(strstr(json, "\"type\":\"timer\",\"handle\":0,\"mask\":0,"
				"\"target\":\"com.example.snap.busy\","
				"\"suspend_count\":0,\"inactive\":true") != NULL);
		CHECK(strstr(json, "\"type\":\"random\",\"fd\":-1,\"path\":"
				"\"/dev/null\",\"queue\":\"com.swiftqueues.io\","
				"\"closed\":false") != NULL);
		CHECK(strstr(json, "\"threads\":[]}") != NULL);
		free(json);
	}

	/* Released objects leave. */
	sq_semaphore_signal(gate);
	sq_semaphore_signal(gate);
	sq_resume(suspended);
	sq_resume(suspended);
	sq_activate(inactive);
	sq_sync_f(busy, NULL, nothing);
	sq_barrier_sync_f(conc, NULL, nothing);
	sq_source_cancel(reader);
	sq_resume(reader);
	sq_release(reader);
	sq_release(timer);
	sq_io_close(channel, SQ_IO_STOP);
	sq_release(channel);
	sq_release(path_channel);
	sq_release(inner);
	sq_release(suspended);
	sq_release(inactive);
	sq_release(busy);
	sq_release(conc);
	/* Gone once their last internal references go (handlers, closes). */
	bool gone = false;
	for (int tries = 0; tries < 500 && !gone; tries++) {
		s = sq_snapshot_create();
		gone = find_queue(s, "com.example.snap.suspended") == NULL &&
				find_queue(s, "com.example.snap.busy") == NULL &&
				find_queue(s, "com.example.snap.inner") == NULL &&
				find_source(s, reader) == NULL &&
				find_source(s, timer) == NULL &&
				find_channel(s, channel) == NULL &&
				find_channel(s, path_channel) == NULL;
		sq_snapshot_free(s);
		if (!gone)
			sqt_sleep_ms(10);
	}
	CHECK(gone);
	close(p[0]);
	sq_release(started);
	sq_release(gate);
}

/* ---- Long queues, the waiting figure ------------------------------------ */

static void
test_long_and_waiting(void)
{
	sq_queue_t q = sq_queue_create("com.example.snap.long", NULL);
	sq_suspend(q);
	for (int i = 0; i < 20000; i++)
		sq_async_f(q, NULL, nothing);
	sq_snapshot_t *s = sq_snapshot_create();
	const sq_snapshot_queue_t *e = find_queue(s, "com.example.snap.long");
	CHECK(e != NULL);
	int64_t first_wait = e ? e->waiting_ms : -2;
	if (e)
		CHECK_EQ(e->queued, 20000);
	sq_snapshot_free(s);
	CHECK(first_wait >= 0 && first_wait < 1000);

	sqt_sleep_ms(300);
	s = sq_snapshot_create();
	e = find_queue(s, "com.example.snap.long");
	/* Nothing of it started since the first look: at least 300 ms. */
	CHECK(e != NULL && e->waiting_ms >= 290);
	sq_snapshot_free(s);

	sq_resume(q);
	sq_sync_f(q, NULL, nothing);
	s = sq_snapshot_create();
	e = find_queue(s, "com.example.snap.long");
	CHECK(e != NULL && e->queued == 0 && e->waiting_ms == -1);
	sq_snapshot_free(s);
	sq_release(q);
}

/* ---- Snapshots while queues drain --------------------------------------------
 * Producers keep serial and concurrent queues busy; snapshots count them
 * meanwhile. Counts are >= 0 (or -1 when a drainer could not be waited
 * for), every job runs exactly once, nothing crashes (the sanitizer runs
 * watch the walks). */

#define STRESS_QUEUES 4

static sq_queue_t stress_q[STRESS_QUEUES];
static uint64_t stress_ran;
static int stress_stop;

static void
count_job(void *ctx)
{
	__atomic_add_fetch(&stress_ran, 1, __ATOMIC_RELAXED);
}

static uint64_t stress_sent;

static void *
stress_producer(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	uint64_t sent = 0;
	while (!__atomic_load_n(&stress_stop, __ATOMIC_RELAXED)) {
		for (int i = 0; i < 64; i++)
			sq_async_f(stress_q[(k + (uint64_t)i) % STRESS_QUEUES],
					NULL, count_job);
		sent += 64;
		/* At most a few thousand jobs queued: the queues keep
		 * draining and filling. */
		uint64_t all = __atomic_add_fetch(&stress_sent, 64,
				__ATOMIC_RELAXED);
		while (all - __atomic_load_n(&stress_ran, __ATOMIC_RELAXED) >
				4096 && !__atomic_load_n(&stress_stop,
				__ATOMIC_RELAXED))
			sched_yield();
	}
	return (void *)(uintptr_t)sent;
}

static void
test_snapshot_under_load(void)
{
	for (int i = 0; i < STRESS_QUEUES; i++) {
		char label[64];
		snprintf(label, sizeof(label), "com.example.snap.stress.%d", i);
		stress_q[i] = sq_queue_create(label, i % 2 ?
				SQ_QUEUE_CONCURRENT : NULL);
	}
	pthread_t threads[2];
	for (uintptr_t i = 0; i < 2; i++)
		pthread_create(&threads[i], NULL, stress_producer, (void *)i);
	/* Snapshots for a while (at least 500 ms, 200 of them), once the
	 * queues are busy. */
	while (__atomic_load_n(&stress_ran, __ATOMIC_RELAXED) < 1000)
		sqt_sleep_ms(1);
	int snapshots = 0, bad = 0, unknown = 0, counted = 0;
	uint64_t start = sqt_now_ns();
	for (int n = 0; n < 200 || sqt_ms_since(start) < 500; n++) {
		snapshots++;
		sq_snapshot_t *s = sq_snapshot_create();
		for (int i = 0; i < STRESS_QUEUES; i++) {
			char label[64];
			snprintf(label, sizeof(label),
					"com.example.snap.stress.%d", i);
			const sq_snapshot_queue_t *e = find_queue(s, label);
			if (e == NULL || e->queued < -1 || e->running < 0)
				bad++;
			else if (e->queued == -1)
				unknown++;
			else if (e->queued > 0)
				counted++;
		}
		sq_snapshot_free(s);
		if (n % 8 == 0) {
			char *j = sq_snapshot_json();
			if (!json_valid(j))
				bad++;
			free(j);
		}
	}
	__atomic_store_n(&stress_stop, 1, __ATOMIC_RELAXED);
	uint64_t sent = 0;
	for (int i = 0; i < 2; i++) {
		void *r;
		pthread_join(threads[i], &r);
		sent += (uintptr_t)r;
	}
	for (int i = 0; i < STRESS_QUEUES; i++) {
		sq_barrier_sync_f(stress_q[i], NULL, nothing);
		sq_release(stress_q[i]);
	}
	CHECK_EQ(bad, 0);
	CHECK(counted > 0);
	CHECK_EQ(__atomic_load_n(&stress_ran, __ATOMIC_RELAXED), sent);
	printf("snapshot: %d snapshots in %.0f ms while %llu jobs ran; "
			"%d counts > 0, %d unknown\n", snapshots,
			sqt_ms_since(start), (unsigned long long)sent, counted,
			unknown);
}

int
main(void)
{
	test_json_checker();
	test_known_set();
	test_long_and_waiting();
	test_snapshot_under_load();
	return sqt_finish("snapshot");
}
