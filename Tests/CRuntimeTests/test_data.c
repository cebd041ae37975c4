/*
 * sq_data: creation and destructors, concat / subrange / apply sharing
 * regions, map, copy_region, and an HTTP response in 8 chunks parsed across
 * chunk boundaries without flattening it.
 */
#include "sqtest.h"

#include <sys/mman.h>

/* ---- helpers --------------------------------------------------------- */

struct region_log {
	int count;
	size_t offsets[64];
	size_t sizes[64];
	const void *bufs[64];
	int stop_after; /* 0: never */
};

static bool
log_region(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	struct region_log *l = ctx;
	CHECK_EQ(sq_data_get_size(region), size);
	if (l->count < 64) {
		l->offsets[l->count] = offset;
		l->sizes[l->count] = size;
		l->bufs[l->count] = buf;
	}
	l->count++;
	return l->stop_after == 0 || l->count < l->stop_after;
}

static bool
append_bytes(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	memcpy((char *)ctx + offset, buf, size);
	return true;
}

/* The bytes of `d`, NUL-terminated, in a malloc'd string. */
static char *
data_string(sq_data_t d)
{
	size_t n = sq_data_get_size(d);
	char *s = malloc(n + 1);
	sq_data_apply_f(d, s, append_bytes);
	s[n] = '\0';
	return s;
}

static int destructor_runs;
static const void *destructor_arg;

static void
count_destructor(void *buf)
{
	__atomic_store_n(&destructor_arg, buf, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&destructor_runs, 1, __ATOMIC_SEQ_CST);
}

/* Waits (bounded) until destructor_runs reaches `n` (destructors run
 * asynchronously on their queue). */
static void
wait_destructors(int n)
{
	for (int i = 0; i < 5000 && __atomic_load_n(&destructor_runs,
			__ATOMIC_SEQ_CST) < n; i++)
		usleep(1000);
}

/* ---- concat, subrange and apply share regions ------------------------ */

static void
test_concat_subrange_apply(void)
{
	static const char hello[] = "Hello ", world[] = "World";
	sq_data_t a = sq_data_create_f(hello, 6, NULL, count_destructor);
	sq_data_t b = sq_data_create_f(world, 5, NULL, count_destructor);
	sq_data_t c = sq_data_create_concat(a, b);
	CHECK_EQ(sq_data_get_size(c), 11);

	struct region_log l = { 0 };
	CHECK(sq_data_apply_f(c, &l, log_region));
	CHECK_EQ(l.count, 2);
	CHECK_EQ(l.offsets[0], 0);
	CHECK_EQ(l.sizes[0], 6);
	CHECK_EQ(l.offsets[1], 6);
	CHECK_EQ(l.sizes[1], 5);
	/* No copy: the regions are the callers' own buffers. */
	CHECK(l.bufs[0] == hello);
	CHECK(l.bufs[1] == world);

	sq_data_t s = sq_data_create_subrange(c, 3, 5);
	char *str = data_string(s);
	CHECK(strcmp(str, "lo Wo") == 0);
	free(str);
	memset(&l, 0, sizeof(l));
	CHECK(sq_data_apply_f(s, &l, log_region));
	CHECK_EQ(l.count, 2);
	CHECK_EQ(l.offsets[0], 0);
	CHECK_EQ(l.sizes[0], 3);
	CHECK_EQ(l.offsets[1], 3);
	CHECK_EQ(l.sizes[1], 2);
	CHECK(l.bufs[0] == hello + 3);
	CHECK(l.bufs[1] == world);

	/* Stopping early. */
	memset(&l, 0, sizeof(l));
	l.stop_after = 1;
	CHECK(!sq_data_apply_f(c, &l, log_region));
	CHECK_EQ(l.count, 1);

	/* A subrange inside one region is that region, still uncopied. */
	sq_data_t w = sq_data_create_subrange(c, 7, 100);
	CHECK_EQ(sq_data_get_size(w), 4);
	memset(&l, 0, sizeof(l));
	sq_data_apply_f(w, &l, log_region);
	CHECK_EQ(l.count, 1);
	CHECK(l.bufs[0] == world + 1);

	/* Map of a one-region subrange shares; of two regions copies. */
	const void *p = NULL;
	size_t n = 0;
	sq_data_t m1 = sq_data_create_map(w, &p, &n);
	CHECK(p == world + 1);
	CHECK_EQ(n, 4);
	sq_data_t m2 = sq_data_create_map(c, &p, &n);
	CHECK_EQ(n, 11);
	CHECK(p != hello && memcmp(p, "Hello World", 11) == 0);
	sq_data_t m3 = sq_data_create_map(a, &p, &n);
	CHECK(m3 == a && p == hello && n == 6);

	/* copy_region. */
	size_t off = 99;
	sq_data_t r = sq_data_copy_region(c, 8, &off);
	CHECK_EQ(off, 6);
	CHECK(r == b);
	sq_data_t r2 = sq_data_copy_region(s, 1, &off);
	CHECK_EQ(off, 0);
	CHECK_EQ(sq_data_get_size(r2), 3);
	sq_data_t r3 = sq_data_copy_region(c, 11, &off);
	CHECK(r3 == sq_data_empty);
	CHECK_EQ(off, 11);

	/* Nothing is given back while any sharer lives. */
	sq_release(a);
	sq_release(b);
	sq_release(c);
	sq_release(s);
	sq_release(m1);
	sq_release(m2);
	sq_release(m3);
	sq_release(r);
	sq_release(r2);
	sq_release(r3);
	/* `hello` had no sharer left; `world` is still held by w. */
	wait_destructors(1);
	usleep(20000);
	CHECK_EQ(__atomic_load_n(&destructor_runs, __ATOMIC_SEQ_CST), 1);
	CHECK(__atomic_load_n(&destructor_arg, __ATOMIC_SEQ_CST) == hello);
	sq_release(w); /* the last holder of `world` */
	wait_destructors(2);
	usleep(10000);
	CHECK_EQ(__atomic_load_n(&destructor_runs, __ATOMIC_SEQ_CST), 2);
	CHECK(__atomic_load_n(&destructor_arg, __ATOMIC_SEQ_CST) == world);
}

/* ---- one destructor, many sharers ----------------------------------------- */

struct dctx {
	int runs;
	sq_queue_t expect_queue;
	bool on_queue;
};

static void
ctx_destructor(void *ctx)
{
	struct dctx *d = ctx;
	__atomic_store_n(&d->on_queue, sq_get_current_queue() ==
			d->expect_queue, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&d->runs, 1, __ATOMIC_SEQ_CST);
}

static void
release_part(void *ctx, size_t i)
{
	sq_release(((sq_data_t *)ctx)[i]);
}

static void
test_destructor_once(void)
{
	sq_queue_t q = sq_queue_create("test.data.destructor", NULL);
	struct dctx dc = { 0, q, false };
	char *buf = malloc(1000);
	memset(buf, 'x', 1000);
	sq_data_t d = sq_data_create_with_context_f(buf, 1000, q, &dc,
			ctx_destructor);
	sq_data_t parts[40];
	int np = 0;
	for (int i = 0; i < 10; i++) {
		sq_data_t sub = sq_data_create_subrange(d, (size_t)i * 50, 300);
		sq_data_t cat = sq_data_create_concat(d, sub);
		sq_data_t cat2 = sq_data_create_concat(cat, d);
		parts[np++] = sub;
		parts[np++] = cat;
		parts[np++] = cat2;
		parts[np++] = sq_data_create_subrange(cat2, 999, 2);
	}
	sq_release(d);
	/* Every sharer but one released from many threads at once. */
	sq_apply_f((size_t)np - 1, sq_get_global_queue(0, 0), parts + 1,
			release_part);
	usleep(10000);
	CHECK_EQ(__atomic_load_n(&dc.runs, __ATOMIC_SEQ_CST), 0);
	sq_release(parts[0]);
	for (int i = 0; i < 5000 && __atomic_load_n(&dc.runs,
			__ATOMIC_SEQ_CST) == 0; i++)
		usleep(1000);
	usleep(10000);
	CHECK_EQ(__atomic_load_n(&dc.runs, __ATOMIC_SEQ_CST), 1);
	CHECK(__atomic_load_n(&dc.on_queue, __ATOMIC_SEQ_CST));
	free(buf);
	sq_release(q);
}

/* ---- an HTTP response in 8 chunks ------------------------------------- */

static const char *const http_chunks[8] = {
	"HTTP/1.1 200 OK\r\nDate: Mon, 23 May 2005 22:38",
	":34 GMT\r\nServer: Apache/1.3.3.7 (Unix) (Red-H",
	"at/Linux)\r\nLast-Modified: Wed, 08 Jan 2003 23",
	":11:55 GMT\r\nEtag: \"3f80f-1b6-3e1cb03b\"\r\nCon",
	"tent-Type: text/html; charset=UTF-8\r\nContent-",
	"Length: 131\r\nConnection: close\r\n\r\n<html>\r",
	"\n<head>\r\n  <title>An Example Page</title>\r\n",
	"</head>\r\n<body>\r\n  Hello World, this is a ve",
};

/* Finds "\r\n\r\n" region by region, carrying the match state across
 * region boundaries (no flattening). */
struct crlf_search {
	int matched; /* how many bytes of the pattern matched so far */
	size_t found; /* offset of the pattern's first byte; SIZE_MAX: none */
	int regions;
};

static bool
crlf_step(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	static const char pat[] = "\r\n\r\n";
	struct crlf_search *s = ctx;
	const char *p = buf;
	s->regions++;
	for (size_t i = 0; i < size; i++) {
		if (p[i] == pat[s->matched]) {
			s->matched++;
		} else {
			s->matched = p[i] == pat[0] ? 1 : 0;
		}
		if (s->matched == 4) {
			s->found = offset + i - 3;
			return false;
		}
	}
	return true;
}

static void
test_http_chunks(void)
{
	static const size_t sizes[8] = { 45, 45, 45, 43, 45, 41, 43, 44 };
	sq_data_t all = sq_data_empty;
	const char *bufs[8];
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(strlen(http_chunks[i]), sizes[i]);
		sq_data_t chunk = sq_data_create_f(http_chunks[i],
				strlen(http_chunks[i]), NULL,
				SQ_DATA_DESTRUCTOR_DEFAULT);
		sq_data_t next = sq_data_create_concat(all, chunk);
		sq_release(chunk);
		sq_release(all);
		all = next;
	}
	CHECK_EQ(sq_data_get_size(all), 351);

	struct region_log l = { 0 };
	sq_data_apply_f(all, &l, log_region);
	CHECK_EQ(l.count, 8);
	static const size_t offsets[8] = { 0, 45, 90, 135, 178, 223, 264, 307 };
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(l.offsets[i], offsets[i]);
		bufs[i] = l.bufs[i];
	}

	struct crlf_search s = { 0, SIZE_MAX, 0 };
	CHECK(!sq_data_apply_f(all, &s, crlf_step));
	CHECK_EQ(s.found, 253);
	CHECK_EQ(s.regions, 6); /* stopped in chunk 5 */

	/* The header, as its own (shared) data: find Content-Length. */
	sq_data_t header = sq_data_create_subrange(all, 0, s.found);
	char *h = data_string(header);
	const char *cl = strstr(h, "\r\nContent-Length: ");
	CHECK(cl != NULL);
	CHECK_EQ(cl ? atoi(cl + 18) : -1, 131);
	int lines = 1;
	for (const char *p = h; (p = strstr(p, "\r\n")) != NULL; p += 2)
		lines++;
	CHECK_EQ(lines, 8);
	CHECK(strstr(h, "\r\nConnection: close") != NULL);
	free(h);

	sq_data_t body = sq_data_create_subrange(all, s.found + 4, SIZE_MAX);
	CHECK_EQ(sq_data_get_size(body), 94);
	size_t off = 1;
	sq_data_t first = sq_data_copy_region(body, 0, &off);
	const void *p;
	size_t n;
	sq_data_t fm = sq_data_create_map(first, &p, &n);
	CHECK_EQ(off, 0);
	CHECK(n >= 6 && memcmp(p, "<html>", 6) == 0);
	/* The body's first region points into chunk 5's buffer. */
	CHECK(p == bufs[5] + (257 - 223));
	sq_release(fm);
	sq_release(first);
	sq_release(body);
	sq_release(header);
	sq_release(all);
}

/* ---- edge cases -------------------------------------------------------- */

static void
test_edges(void)
{
	CHECK_EQ(sq_data_get_size(sq_data_empty), 0);
	CHECK(sq_data_create_f("x", 0, NULL, NULL) == sq_data_empty);
	sq_retain(sq_data_empty); /* ignored */
	sq_release(sq_data_empty);
	sq_release(sq_data_empty);
	struct region_log l = { 0 };
	CHECK(sq_data_apply_f(sq_data_empty, &l, log_region));
	CHECK_EQ(l.count, 0);
	const void *p = (void *)1;
	size_t n = 7;
	sq_data_t m = sq_data_create_map(sq_data_empty, &p, &n);
	CHECK(m == sq_data_empty && p == NULL && n == 0);

	/* FREE: the buffer is adopted, no copy. */
	char *buf = strdup("adopted");
	sq_data_t d = sq_data_create_f(buf, 7, NULL, SQ_DATA_DESTRUCTOR_FREE);
	sq_data_t m2 = sq_data_create_map(d, &p, &n);
	CHECK(p == buf && n == 7);
	CHECK(sq_data_create_concat(d, sq_data_empty) == d);
	sq_release(d);
	CHECK(sq_data_create_concat(sq_data_empty, d) == d);
	sq_release(d);
	CHECK(sq_data_create_subrange(d, 7, 1) == sq_data_empty);
	CHECK(sq_data_create_subrange(d, 0, 0) == sq_data_empty);
	sq_release(d);
	sq_release(m2);

	/* DEFAULT copies. */
	char tmp[4] = "abc";
	d = sq_data_create_f(tmp, 3, NULL, SQ_DATA_DESTRUCTOR_DEFAULT);
	tmp[0] = 'z';
	sq_data_t m3 = sq_data_create_map(d, &p, &n);
	CHECK(p != tmp && memcmp(p, "abc", 3) == 0);
	sq_release(m3);
	sq_release(d);

	/* MUNMAP. */
	void *map = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(map != MAP_FAILED);
	d = sq_data_create_f(map, 8192, NULL, SQ_DATA_DESTRUCTOR_MUNMAP);
	sq_data_t sub = sq_data_create_subrange(d, 100, 100);
	sq_release(d);
	sq_release(sub);

	/* A long chain of concatenations stays flat and exact. */
	sq_data_t all = sq_data_empty;
	char expect[2000];
	for (int i = 0; i < 1000; i++) {
		char two[2] = { (char)('a' + i % 26), (char)('A' + i % 26) };
		memcpy(expect + 2 * i, two, 2);
		sq_data_t c = sq_data_create_f(two, 2, NULL, NULL);
		sq_data_t next = sq_data_create_concat(all, c);
		sq_release(c);
		sq_release(all);
		all = next;
	}
	char *s = data_string(all);
	CHECK(memcmp(s, expect, 2000) == 0);
	free(s);
	sq_data_t mid = sq_data_create_subrange(all, 501, 997);
	s = data_string(mid);
	CHECK(memcmp(s, expect + 501, 997) == 0);
	free(s);
	size_t off;
	sq_data_t r = sq_data_copy_region(mid, 996, &off);
	CHECK_EQ(off, 995);
	CHECK_EQ(sq_data_get_size(r), 2);
	sq_release(r);
	sq_release(mid);
	sq_release(all);
}

/* A NULL data object is a programming error, reported by name. */
static void
null_data(void *ctx)
{
	if (sq_data_get_size(ctx) == 0)
		abort();
}

static void
null_concat(void *ctx)
{
	sq_data_t d = sq_data_create_f("abc", 3, NULL, NULL);
	if (sq_data_create_concat(d, ctx) != NULL)
		abort();
}

int
main(void)
{
	test_concat_subrange_apply();
	test_destructor_once();
	test_http_chunks();
	test_edges();
	CHECK_CRASH(null_data, NULL, "SwiftQueues: sq_data_get_size: object "
			"is NULL");
	CHECK_CRASH(null_concat, NULL, "SwiftQueues: sq_data_create_concat: "
			"object is NULL");
	return sqt_finish("test_data");
}
