/*
 * USDT probes: the stapsdt notes of the built library (and of this test,
 * which links the static library) name every probe the documentation
 * promises, under the provider "swiftqueues"; and where this machine lets
 * a tracer attach (bpftrace installed, permission to load BPF programs),
 * bpftrace attaches to a running copy of this program and counts its
 * task starts exactly. Skipped, with a message, where either is missing.
 */
#include "sqtest.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>

static const char *const expected[] = {
	"submit", "task__start", "task__end", "sync__start", "sync__end",
	"swift__job__start", "swift__job__end", "handler__start",
	"handler__end", "source__event", "timer__fire", "io__start",
	"io__end", "worker__wake", "worker__park", "worker__spawn",
	"net__fire", "signal", "wait__start", "wait__end", "release",
};
#define NEXPECTED (sizeof(expected) / sizeof(expected[0]))

/* Marks in `found` the expected probes whose notes `path` has; returns the
 * number of swiftqueues notes, or -1 if the file cannot be read. Counts in
 * *unguarded the notes without a semaphore in the .probes section (every
 * probe has one: it is how the points know whether a tracer listens). */
static int
scan_notes(const char *path, bool found[NEXPECTED], int *unguarded)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	struct stat st;
	fstat(fd, &st);
	unsigned char *file = mmap(NULL, (size_t)st.st_size, PROT_READ,
			MAP_PRIVATE, fd, 0);
	close(fd);
	if (file == MAP_FAILED)
		return -1;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
	const char *shstr = (const char *)file + sh[eh->e_shstrndx].sh_offset;
	uint64_t probes_lo = 0, probes_hi = 0;
	for (int i = 0; i < eh->e_shnum; i++)
		if (strcmp(shstr + sh[i].sh_name, ".probes") == 0) {
			probes_lo = sh[i].sh_addr;
			probes_hi = sh[i].sh_addr + sh[i].sh_size;
		}
	int notes = 0;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_NOTE)
			continue;
		size_t off = sh[i].sh_offset, end = off + sh[i].sh_size;
		while (off + sizeof(Elf64_Nhdr) <= end) {
			const Elf64_Nhdr *n = (const Elf64_Nhdr *)(file + off);
			const char *name = (const char *)(n + 1);
			const char *desc = name + ((n->n_namesz + 3) & ~3u);
			if (n->n_type == 3 && n->n_namesz == 8 &&
					memcmp(name, "stapsdt", 8) == 0) {
				/* pc, base, semaphore, then provider, name,
				 * argument spec. */
				const char *provider = desc + 24;
				const char *probe = provider + strlen(provider)
						+ 1;
				uint64_t sem;
				memcpy(&sem, desc + 16, sizeof(sem));
				if (strcmp(provider, "swiftqueues") == 0) {
					notes++;
					if (sem == 0 || sem < probes_lo ||
							sem >= probes_hi)
						(*unguarded)++;
					for (size_t k = 0; k < NEXPECTED; k++)
						if (strcmp(probe, expected[k])
								== 0)
							found[k] = true;
				}
			}
			off = (size_t)(desc - (const char *)file) +
					((n->n_descsz + 3) & ~3u);
		}
	}
	munmap(file, (size_t)st.st_size);
	return notes;
}

static void
check_notes(const char *path, bool required)
{
	bool found[NEXPECTED] = { false };
	int unguarded = 0;
	int notes = scan_notes(path, found, &unguarded);
	if (notes < 0) {
		if (required)
			CHECK(notes >= 0);
		else
			printf("probes: %s not found, not listed\n", path);
		return;
	}
	int missing = 0;
	for (size_t k = 0; k < NEXPECTED; k++) {
		if (!found[k]) {
			fprintf(stderr, "probes: %s has no probe %s\n", path,
					expected[k]);
			missing++;
		}
	}
	CHECK_EQ(missing, 0);
	CHECK_EQ(unguarded, 0);
	printf("probes: %s: %d swiftqueues probe sites, all %zu probes, each "
			"with its semaphore in .probes\n", path, notes,
			NEXPECTED);
}

/* ---- Attaching ---------------------------------------------------------------- */

#define TASKS 1000

static void
probed_task(void *ctx)
{
	(void)ctx;
}

/* The traced program: runs a warm-up task on "test.probe.warmup" every
 * millisecond until a byte arrives on stdin (the tracer has seen one, so
 * it is attached), then TASKS tasks on "test.probe", then exits. */
static int
probed_child(void)
{
	sq_queue_t warm = sq_queue_create("test.probe.warmup", NULL);
	sq_queue_t q = sq_queue_create("test.probe", NULL);
	for (int i = 0; i < 60000; i++) {
		sq_sync_f(warm, NULL, probed_task); /* a sync: no task start */
		sq_async_f(warm, NULL, probed_task);
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		if (poll(&pfd, 1, 1) == 1)
			break;
	}
	char c;
	if (read(STDIN_FILENO, &c, 1) != 1)
		return 3;
	for (int i = 0; i < TASKS; i++)
		sq_async_f(q, NULL, probed_task);
	sq_sync_f(q, NULL, probed_task);
	sq_sync_f(warm, NULL, probed_task);
	sq_release(q);
	sq_release(warm);
	return 0;
}

static bool
have_bpftrace(void)
{
	return system("command -v bpftrace >/dev/null 2>&1") == 0;
}

static void
test_attach(const char *self)
{
	if (!have_bpftrace()) {
		printf("probes: attach test skipped: no bpftrace (Debian: "
				"apt-get install bpftrace)\n");
		return;
	}
	if (geteuid() != 0) {
		printf("probes: attach test skipped: not root\n");
		return;
	}
	int to_child[2], from_bt[2];
	if (pipe(to_child) != 0 || pipe(from_bt) != 0) {
		CHECK(false);
		return;
	}
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		dup2(to_child[0], STDIN_FILENO);
		close(to_child[1]);
		close(from_bt[0]);
		close(from_bt[1]);
		execl(self, self, "--probed-child", (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	char exe[64], program[1024];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)child);
	char target[400];
	ssize_t n = readlink(exe, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	snprintf(program, sizeof(program),
			"usdt:%s:swiftqueues:task__start { "
			"if (str(arg0) == \"test.probe\") { @starts = count(); }"
			" if (str(arg0) == \"test.probe.warmup\" && @ready == 0)"
			" { @ready = 1; printf(\"ready\\n\"); } }",
			target);
	pid_t bt = fork();
	if (bt == 0) {
		dup2(from_bt[1], STDOUT_FILENO);
		dup2(from_bt[1], STDERR_FILENO);
		close(from_bt[0]);
		close(from_bt[1]);
		close(to_child[1]);
		char pid[16];
		snprintf(pid, sizeof(pid), "%d", (int)child);
		execlp("bpftrace", "bpftrace", "-p", pid, "-e", program,
				(char *)NULL);
		_exit(127);
	}
	close(from_bt[1]);
	/* Wait until bpftrace has seen a warm-up task (it is attached), or
	 * has given up. */
	char out[8192];
	size_t len = 0;
	bool attached = false;
	uint64_t deadline = sqt_now_ns() + 60 * NSEC_PER_SEC;
	while (!attached && len < sizeof(out) - 1 && sqt_now_ns() < deadline) {
		ssize_t r = read(from_bt[0], out + len, sizeof(out) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		out[len] = '\0';
		attached = strstr(out, "ready\n") != NULL;
	}
	/* Let the child run (or end it, if bpftrace could not attach). */
	CHECK(write(to_child[1], "g", 1) == 1);
	close(to_child[1]);
	int status = 0;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* bpftrace -p ends with the process and prints its map. */
	ssize_t r;
	while (len < sizeof(out) - 1 && (r = read(from_bt[0], out + len,
			sizeof(out) - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = '\0';
	close(from_bt[0]);
	int bt_status = 0;
	waitpid(bt, &bt_status, 0);
	const char *count = strstr(out, "@starts: ");
	if (!attached || count == NULL) {
		printf("probes: attach test skipped: bpftrace could not attach "
				"here:\n%s\n", out);
		return;
	}
	long starts = strtol(count + 9, NULL, 10);
	CHECK_EQ(starts, TASKS);
	printf("probes: bpftrace attached to a running process and counted "
			"%ld task starts of %d\n", starts, TASKS);
}

int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--probed-child") == 0)
		return probed_child();
#if defined(__has_include)
#if __has_include(<sys/sdt.h>)
#define HAVE_SDT 1
#endif
#endif
#ifdef HAVE_SDT
	/* This program links the static library: its notes are here. */
	check_notes("/proc/self/exe", true);
	/* And the shared library next to the tests, when there is one. */
	char lib[600], self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(self, '/');
	if (slash != NULL) {
		*slash = '\0';
		snprintf(lib, sizeof(lib), "%s/../libswiftqueues.so", self);
		check_notes(lib, false);
	}
	test_attach("/proc/self/exe");
#else
	printf("probes: skipped: built without <sys/sdt.h> (Debian: "
			"systemtap-sdt-dev), so without probes\n");
	CHECK(true);
#endif
	return sqt_finish("test_probes");
}
