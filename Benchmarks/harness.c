/*
 * SwiftQueues benchmarks — the harness: timing, interleaving, medians,
 * ratios, the table and the JSON file.
 *
 *   bench [-o results.json] [-l] [name-substring ...]
 *
 * Environment:
 *   BENCH_ROUNDS  rounds per scenario (default 7)
 *   BENCH_SCALE   multiplies every scenario's ops per run (default 1), for
 *                 quick checks (0.1) or steadier figures (5)
 *
 * Method. For each scenario: setup, one warm-up run of each side (not
 * counted), then `rounds` rounds of "ours, theirs", so both sides see the
 * same machine weather. Each run gives ns/op = run time / ops. A side's
 * figure is the median over its rounds; the ratio is median ours / median
 * theirs. Absolute times on a shared VM drift from run to run; the ratio
 * taken within one run is the figure that holds. A scenario whose target
 * is an added cost (ns/op) is judged on the median of its paired rounds'
 * differences, which a drift within the run does not move.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <swiftqueues.h>

/* ---- the registry: every area's scenario table ---------------------------- */

static const bench_scenario_t *const bench_areas[] = {
	bench_primitives,
	bench_queues,
	bench_io,
	bench_sources,
	bench_pool,
	bench_trace,
	bench_timers,
	bench_qos,
	bench_loops,
	bench_peers,
	NULL
};

/* ---- timing --------------------------------------------------------------- */

#define BENCH_DEFAULT_ROUNDS 7
#define BENCH_MAX_ROUNDS 1000

volatile uint64_t bench_sink;

/* The clock of the run in progress; only the harness thread touches it. */
static uint64_t run_start;
static uint64_t run_stop;

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
bench_timer_restart(void)
{
	run_stop = 0;
	run_start = now_ns();
}

void
bench_timer_stop(void)
{
	run_stop = now_ns();
}

/* A figure the run reported through bench_report_exact, if it did. */
static bool run_reported;
static double run_report;

void
bench_report_exact(double value)
{
	run_report = value;
	run_reported = true;
}

/* Runs one side once and returns its ns/op. */
static double
run_once(bench_fn fn, size_t ops)
{
	run_reported = false;
	run_stop = 0;
	run_start = now_ns();
	fn(ops);
	if (run_reported)
		return run_report;
	uint64_t end = run_stop != 0 ? run_stop : now_ns();
	return (double)(end - run_start) / (double)ops;
}

void
bench_fail(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fputs("bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* ---- threads -------------------------------------------------------------- */

struct par {
	void (*fn)(void *arg, unsigned i);
	void *arg;
	atomic_uint ready;
	atomic_bool go;
};

struct par_thread {
	struct par *par;
	unsigned index;
	pthread_t tid;
};

/* Waiters yield rather than spin: with more threads than CPUs a spinner
 * would keep the thread it waits for off the CPU. */
static void
par_wait_go(struct par *p)
{
	while (!atomic_load_explicit(&p->go, memory_order_acquire))
		sched_yield();
}

static void *
par_main(void *v)
{
	struct par_thread *t = v;
	atomic_fetch_add(&t->par->ready, 1);
	par_wait_go(t->par);
	t->par->fn(t->par->arg, t->index);
	return NULL;
}

void
bench_parallel(unsigned nthreads, void (*fn)(void *arg, unsigned i), void *arg)
{
	struct par p;
	struct par_thread *threads;
	unsigned i;
	int err;

	if (nthreads == 0)
		return;
	p.fn = fn;
	p.arg = arg;
	atomic_init(&p.ready, 0);
	atomic_init(&p.go, false);
	threads = calloc(nthreads, sizeof(*threads));
	if (threads == NULL)
		bench_fail("out of memory");
	for (i = 1; i < nthreads; i++) {
		threads[i].par = &p;
		threads[i].index = i;
		err = pthread_create(&threads[i].tid, NULL, par_main,
				&threads[i]);
		if (err != 0)
			bench_fail("pthread_create: %s", strerror(err));
	}
	while (atomic_load(&p.ready) != nthreads - 1)
		sched_yield();

	bench_timer_restart();
	atomic_store_explicit(&p.go, true, memory_order_release);
	fn(arg, 0);
	for (i = 1; i < nthreads; i++)
		pthread_join(threads[i].tid, NULL);
	bench_timer_stop();
	free(threads);
}

/*
 * glibc drops the lock prefix from its mutex operations while a process has
 * only one thread, which halves the cost of an uncontended pthread mutex.
 * A program that uses queues always has more than one thread, so the
 * harness starts an idle one before measuring anything.
 */
static void *
idle_main(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static void
start_idle_thread(void)
{
	pthread_t tid;
	int err = pthread_create(&tid, NULL, idle_main, NULL);
	if (err != 0)
		bench_fail("pthread_create: %s", strerror(err));
	pthread_detach(tid);
}

/* ---- statistics ----------------------------------------------------------- */

struct result {
	const bench_scenario_t *sc;
	size_t ops;
	unsigned rounds;   /* counted rounds run (a scenario may ask fewer) */
	double *ours;      /* ns/op per round */
	double *theirs;
	double ours_median;
	double theirs_median;
	double ratio;
	double added; /* median of ours - theirs over paired rounds */
};

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double
median(const double *v, unsigned n)
{
	double *s = malloc(n * sizeof(*s));
	double m;
	if (s == NULL)
		bench_fail("out of memory");
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

/* ---- the table ------------------------------------------------------------ */

#define NAME_W 32
#define LABEL_W 18

/* Whether a scenario has a target, and meets it. */
static bool
has_target(const struct result *r)
{
	return r->sc->target != 0;
}

static bool
target_met(const struct result *r)
{
	if (r->sc->target < 0) /* an added cost, in ns/op */
		return r->added <= -r->sc->target;
	return r->ratio <= r->sc->target;
}

static const char *
met_string(const struct result *r)
{
	if (!has_target(r))
		return "-";
	return target_met(r) ? "yes" : "NO";
}

static void
print_header(unsigned rounds, double scale)
{
	printf("SwiftQueues vs the toolchain's libdispatch (or a baseline): "
			"%u rounds, ours/theirs interleaved,\n"
			"median ns/op per side, ratio = ours / theirs "
			"(lower is better). %ld CPUs",
			rounds, sysconf(_SC_NPROCESSORS_ONLN));
	if (scale != 1)
		printf(", BENCH_SCALE=%g", scale);
	printf(".\n\n");
	printf("%-*s %-*s %10s %10s %7s %7s %4s\n", NAME_W, "scenario",
			LABEL_W, "theirs", "ours ns", "theirs ns", "ratio",
			"target", "met");
	printf("%.*s %.*s %.10s %.10s %.7s %.7s %.4s\n",
			NAME_W, "--------------------------------",
			LABEL_W, "--------------------------------",
			"----------", "----------", "-------", "-------", "----");
	fflush(stdout);
}

static void
print_row(const struct result *r)
{
	char target[16];
	if (r->sc->target < 0)
		snprintf(target, sizeof(target), "+%.0fns", -r->sc->target);
	else if (r->sc->target > 0)
		snprintf(target, sizeof(target), "<= %.2f", r->sc->target);
	else
		snprintf(target, sizeof(target), "-");
	printf("%-*s %-*s %10.2f %10.2f %7.2f %7s %4s\n", NAME_W, r->sc->name,
			LABEL_W, r->sc->theirs_label, r->ours_median,
			r->theirs_median, r->ratio, target, met_string(r));
	if (r->sc->target < 0)
		printf("%-*s added %.1f ns/op: the median of the %u paired "
				"rounds' differences\n", NAME_W, "", r->added,
				r->rounds);
	fflush(stdout);
}

/* ---- the JSON file -------------------------------------------------------- */

static void
json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
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

static void
json_samples(FILE *f, const double *v, unsigned n)
{
	unsigned i;
	fputc('[', f);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%.3f", i ? ", " : "", v[i]);
	fputc(']', f);
}

/* Finds the file a loaded library came from, to record which one we ran. */
struct lib_search {
	const char *needle;
	char path[4096];
};

static int
find_lib_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct lib_search *s = data;
	(void)size;
	if (info->dlpi_name != NULL && strstr(info->dlpi_name, s->needle)) {
		snprintf(s->path, sizeof(s->path), "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

static void
write_json(const char *path, const struct result *res, unsigned n,
		unsigned rounds, double scale)
{
	struct lib_search dispatch = { "libdispatch.so", "" };
	struct utsname un;
	char stamp[32];
	time_t t = time(NULL);
	FILE *f;
	unsigned i;

	dl_iterate_phdr(find_lib_cb, &dispatch);
	if (uname(&un) != 0)
		memset(&un, 0, sizeof(un));
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));

	f = fopen(path, "w");
	if (f == NULL)
		bench_fail("cannot write %s: %s", path, strerror(errno));
	fprintf(f, "{\n  \"generated\": \"%s\",\n", stamp);
	fprintf(f, "  \"machine\": {\"cpus\": %ld, \"kernel\": ",
			sysconf(_SC_NPROCESSORS_ONLN));
	json_string(f, un.release);
	fprintf(f, ", \"arch\": ");
	json_string(f, un.machine);
	fprintf(f, "},\n  \"sq_api_version\": %d,\n", SQ_API_VERSION);
	fprintf(f, "  \"libdispatch\": ");
	json_string(f, dispatch.path);
	fprintf(f, ",\n  \"rounds\": %u,\n  \"scale\": %g,\n", rounds, scale);
	fprintf(f, "  \"unit\": \"ns/op\",\n  \"ratio\": \"median ours / "
			"median theirs\",\n  \"scenarios\": [\n");
	for (i = 0; i < n; i++) {
		const struct result *r = &res[i];
		fprintf(f, "    {\"name\": ");
		json_string(f, r->sc->name);
		fprintf(f, ", \"theirs\": ");
		json_string(f, r->sc->theirs_label);
		fprintf(f, ", \"ops\": %zu, \"rounds\": %u,\n     "
				"\"ours_ns\": ", r->ops, r->rounds);
		json_samples(f, r->ours, r->rounds);
		fprintf(f, ",\n     \"theirs_ns\": ");
		json_samples(f, r->theirs, r->rounds);
		fprintf(f, ",\n     \"ours_median\": %.3f, \"theirs_median\": "
				"%.3f, \"ratio\": %.4f, ", r->ours_median,
				r->theirs_median, r->ratio);
		if (r->sc->target < 0)
			fprintf(f, "\"added_ns\": %.3f, \"max_extra_ns\": "
					"%.1f, \"met\": %s}", r->added,
					-r->sc->target,
					target_met(r) ? "true" : "false");
		else if (r->sc->target > 0)
			fprintf(f, "\"target\": %.4f, \"met\": %s}",
					r->sc->target,
					target_met(r) ? "true" : "false");
		else
			fprintf(f, "\"target\": null, \"met\": null}");
		fprintf(f, "%s\n", i + 1 < n ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	if (fclose(f) != 0)
		bench_fail("cannot write %s: %s", path, strerror(errno));
}

/* ---- main ----------------------------------------------------------------- */

static void
usage(FILE *f)
{
	fprintf(f, "usage: bench [-o results.json] [-l] [name-substring ...]\n"
			"  -o FILE  also write the results as JSON to FILE\n"
			"  -l       list the scenarios and exit\n"
			"env: BENCH_ROUNDS (default %d), BENCH_SCALE (default 1)\n",
			BENCH_DEFAULT_ROUNDS);
}

static bool
selected(const bench_scenario_t *sc, int argc, char **argv)
{
	int i;
	if (argc == 0)
		return true;
	for (i = 0; i < argc; i++)
		if (strcasestr(sc->name, argv[i]) != NULL)
			return true;
	return false;
}

static double
env_number(const char *name, double def, double lo, double hi)
{
	const char *s = getenv(name);
	char *end;
	double v;
	if (s == NULL || *s == '\0')
		return def;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !(v >= lo && v <= hi))
		bench_fail("%s=%s: want a number in [%g, %g]", name, s, lo, hi);
	return v;
}

/* Set by a scenario's setup through bench_limit_rounds; 0: no limit. */
static unsigned rounds_limit;

void
bench_limit_rounds(unsigned rounds)
{
	rounds_limit = rounds;
}

static void
run_scenario(struct result *r, unsigned rounds, double scale)
{
	const bench_scenario_t *sc = r->sc;
	unsigned i;

	r->ops = (size_t)((double)sc->ops * scale);
	if (r->ops == 0)
		r->ops = 1;
	r->ours = calloc(rounds, sizeof(double));
	r->theirs = calloc(rounds, sizeof(double));
	if (r->ours == NULL || r->theirs == NULL)
		bench_fail("out of memory");

	rounds_limit = 0;
	if (sc->setup != NULL)
		sc->setup();
	r->rounds = rounds_limit != 0 && rounds_limit < rounds ? rounds_limit
			: rounds;
	/* Warm-up: fault in pages, fill caches, start lazy threads. */
	run_once(sc->ours, r->ops);
	run_once(sc->theirs, r->ops);
	for (i = 0; i < r->rounds; i++) {
		r->ours[i] = run_once(sc->ours, r->ops);
		r->theirs[i] = run_once(sc->theirs, r->ops);
	}
	if (sc->teardown != NULL)
		sc->teardown();

	r->ours_median = median(r->ours, r->rounds);
	r->theirs_median = median(r->theirs, r->rounds);
	r->ratio = r->theirs_median > 0 ? r->ours_median / r->theirs_median : 0;
	/* An added cost is judged on the rounds in pairs: a round and the
	 * one run right after it see the same machine, where the two sides'
	 * medians may come from periods a drift apart. */
	double *diff = calloc(r->rounds, sizeof(double));
	if (diff == NULL)
		bench_fail("out of memory");
	for (i = 0; i < r->rounds; i++)
		diff[i] = r->ours[i] - r->theirs[i];
	r->added = median(diff, r->rounds);
	free(diff);
}

int
main(int argc, char **argv)
{
	const char *json_path = NULL;
	const bench_scenario_t *const *area;
	const bench_scenario_t *sc;
	struct result *res;
	unsigned rounds, n = 0, cap = 0, i, with_target = 0, met = 0;
	double scale;
	bool list = false;
	int c;

	if (getenv("BENCH_POOL_CHILD"))
		return bench_pool_child(getenv("BENCH_POOL_CHILD"));
	if (getenv("BENCH_QUEUES_CHILD"))
		return bench_queues_child(getenv("BENCH_QUEUES_CHILD"));
	if (getenv("BENCH_LOOPS_CHILD"))
		return bench_loops_child(getenv("BENCH_LOOPS_CHILD"));

	while ((c = getopt(argc, argv, "ho:l")) != -1) {
		switch (c) {
		case 'o':
			json_path = optarg;
			break;
		case 'l':
			list = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;

	rounds = (unsigned)env_number("BENCH_ROUNDS", BENCH_DEFAULT_ROUNDS, 1,
			BENCH_MAX_ROUNDS);
	if (rounds != env_number("BENCH_ROUNDS", BENCH_DEFAULT_ROUNDS, 1,
			BENCH_MAX_ROUNDS))
		bench_fail("BENCH_ROUNDS=%s: want a whole number",
				getenv("BENCH_ROUNDS"));
	scale = env_number("BENCH_SCALE", 1, 1e-6, 1e6);

	for (area = bench_areas; *area != NULL; area++)
		for (sc = *area; sc->name != NULL; sc++)
			cap++;
	res = calloc(cap, sizeof(*res));
	if (res == NULL)
		bench_fail("out of memory");
	for (area = bench_areas; *area != NULL; area++)
		for (sc = *area; sc->name != NULL; sc++)
			if (selected(sc, argc, argv))
				res[n++].sc = sc;

	if (list) {
		for (i = 0; i < n; i++)
			printf("%-*s %-*s ops %zu\n", NAME_W, res[i].sc->name,
					LABEL_W, res[i].sc->theirs_label,
					res[i].sc->ops);
		return 0;
	}
	if (n == 0) {
		fprintf(stderr, "bench: no scenario matches\n");
		return 2;
	}

	start_idle_thread();
	print_header(rounds, scale);
	for (i = 0; i < n; i++) {
		run_scenario(&res[i], rounds, scale);
		print_row(&res[i]);
		if (has_target(&res[i])) {
			with_target++;
			met += target_met(&res[i]);
		}
	}
	printf("\n%u scenario%s; %u with a target, %u met.\n", n,
			n == 1 ? "" : "s", with_target, met);
	if (json_path != NULL) {
		write_json(json_path, res, n, rounds, scale);
		printf("Results: %s\n", json_path);
	}

	for (i = 0; i < n; i++) {
		free(res[i].ours);
		free(res[i].theirs);
	}
	free(res);
	return 0;
}

/* ---- helpers for scenarios ------------------------------------------------ */

uint64_t
bench_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void
bench_report_value(double value, size_t ops)
{
	bench_timer_restart();
	uint64_t start = bench_mono_ns();
	uint64_t want = (uint64_t)(value * (double)ops);
	while (bench_mono_ns() - start < want)
		bench_clobber();
	bench_timer_stop();
}

void
bench_sem_wait(void *sem, unsigned ms, const char *what)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (sem_timedwait(sem, &ts) != 0) {
		if (errno != EINTR)
			bench_fail("%s: timed out", what);
	}
}
