/*
 * SwiftQueues — writing a recorded trace (trace.c records it): the rings
 * of one recording turned into Chrome's JSON trace event format. A track
 * per thread, named after its role; a slice per task named by its queue's
 * label with its function's name (looked up only now: dladdr, then the
 * module's own symbol table, which also names static functions); arrows
 * from each submission to the run it led to, kept only when both ends are
 * in the trace; instants; counters for the pool and each queue's depth
 * (worked out from the submissions and runs, so recording counts
 * nothing). Runs after the recording stopped, under the registry lock.
 */
#include "trace_internal.h"
#include "event_internal.h"

#ifndef SQ_NO_TRACE

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
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

/* ---- Symbols ----------------------------------------------------------------
 *
 * A function pointer's name: dladdr finds exported symbols; the module's
 * own symbol table (.symtab, when not stripped) also has static and hidden
 * functions, so a program's `static void work(void *)` gets its name
 * without -rdynamic. Swift names are demangled when the Swift runtime is
 * in the process. Everything here runs only while the trace is written. */

struct sq_sym_s {
	uintptr_t addr;
	uintptr_t size;
	const char *name;
};

struct sq_module_s {
	uintptr_t base;        /* dli_fbase */
	uintptr_t bias;        /* added to a symbol's value */
	void *map;             /* the file, mapped */
	size_t map_len;
	struct sq_sym_s *syms; /* functions, by address */
	size_t count;
	char *path;
	struct sq_module_s *next;
};

extern char *swift_demangle(const char *mangled, size_t length, char *out,
		size_t *out_length, uint32_t flags) __attribute__((weak));

static int
_sq_sym_cmp(const void *x, const void *y)
{
	const struct sq_sym_s *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static void
_sq_module_load(struct sq_module_s *m, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return;
	}
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd,
			0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	m->map = map;
	m->map_len = (size_t)st.st_size;
	const unsigned char *file = map;
	const Elf64_Ehdr *eh = map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
			eh->e_ident[EI_CLASS] != ELFCLASS64 ||
			eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr)
			|| eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr)
			> m->map_len)
		return;
	/* Symbol values are link-time addresses: the load bias is the
	 * mapping's start less the first loaded segment's page. */
	if (eh->e_type == ET_DYN && eh->e_phoff + (size_t)eh->e_phnum *
			sizeof(Elf64_Phdr) <= m->map_len) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh->e_phoff);
		uintptr_t first = 0;
		for (int i = 0; i < eh->e_phnum; i++) {
			if (ph[i].p_type == PT_LOAD) {
				first = ph[i].p_vaddr & ~(uintptr_t)0xfff;
				break;
			}
		}
		m->bias = m->base - first;
	}
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
	const Elf64_Shdr *symtab = NULL;
	for (int pass = 0; pass < 2 && symtab == NULL; pass++)
		for (int i = 0; i < eh->e_shnum; i++)
			if (sh[i].sh_type == (pass == 0 ? SHT_SYMTAB
					: SHT_DYNSYM)) {
				symtab = &sh[i];
				break;
			}
	if (symtab == NULL || symtab->sh_link >= eh->e_shnum ||
			symtab->sh_offset + symtab->sh_size > m->map_len)
		return;
	const Elf64_Shdr *strs = &sh[symtab->sh_link];
	if (strs->sh_offset + strs->sh_size > m->map_len)
		return;
	const Elf64_Sym *sym = (const Elf64_Sym *)(file + symtab->sh_offset);
	size_t n = symtab->sh_size / sizeof(Elf64_Sym);
	m->syms = malloc(n * sizeof(*m->syms) + 1);
	if (m->syms == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC ||
				sym[i].st_shndx == SHN_UNDEF ||
				sym[i].st_value == 0 ||
				sym[i].st_name >= strs->sh_size)
			continue;
		m->syms[m->count++] = (struct sq_sym_s){
			.addr = sym[i].st_value + m->bias,
			.size = sym[i].st_size,
			.name = (const char *)file + strs->sh_offset +
					sym[i].st_name,
		};
	}
	qsort(m->syms, m->count, sizeof(*m->syms), _sq_sym_cmp);
}

/* Where the main program is mapped (its ELF header). */
static int
_sq_main_base_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type == PT_LOAD) {
			*(uintptr_t *)data = info->dlpi_addr +
					(info->dlpi_phdr[i].p_vaddr &
					~(uintptr_t)0xfff);
			break;
		}
	}
	return 1; /* the first object is the program */
}

static struct sq_module_s *
_sq_module_for(struct sq_module_s **modules, const Dl_info *info)
{
	for (struct sq_module_s *m = *modules; m; m = m->next)
		if (m->base == (uintptr_t)info->dli_fbase)
			return m;
	struct sq_module_s *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->base = (uintptr_t)info->dli_fbase;
	/* The main program is read through /proc: the name dladdr gives
	 * it may be relative, or empty. */
	uintptr_t main_base = 0;
	dl_iterate_phdr(_sq_main_base_cb, &main_base);
	const char *path = info->dli_fname;
	if (m->base == main_base || path == NULL || path[0] == '\0')
		path = "/proc/self/exe";
	m->path = strdup(path);
	_sq_module_load(m, path);
	m->next = *modules;
	*modules = m;
	return m;
}

/* The name for one function pointer, malloc'd. */
static char *
_sq_symbolize(struct sq_module_s **modules, uintptr_t addr)
{
	char buf[512];
	Dl_info info;
	if (addr == 0)
		return strdup("");
	if (dladdr((void *)addr, &info) == 0) {
		snprintf(buf, sizeof(buf), "0x%" PRIxPTR, addr);
		return strdup(buf);
	}
	const char *name = NULL;
	uintptr_t offset = 0;
	if (info.dli_sname != NULL && info.dli_saddr != NULL) {
		name = info.dli_sname;
		offset = addr - (uintptr_t)info.dli_saddr;
	} else {
		struct sq_module_s *m = _sq_module_for(modules, &info);
		if (m != NULL && m->count > 0) {
			size_t lo = 0, hi = m->count;
			while (hi - lo > 1) {
				size_t mid = (lo + hi) / 2;
				if (m->syms[mid].addr <= addr)
					lo = mid;
				else
					hi = mid;
			}
			struct sq_sym_s *s = &m->syms[lo];
			if (s->addr <= addr && (addr < s->addr + s->size ||
					(s->size == 0 && addr == s->addr))) {
				name = s->name;
				offset = addr - s->addr;
			}
		}
		if (name == NULL) {
			const char *slash = info.dli_fname ? strrchr(
					info.dli_fname, '/') : NULL;
			snprintf(buf, sizeof(buf), "%s+0x%" PRIxPTR,
					slash ? slash + 1 : "program",
					addr - (uintptr_t)info.dli_fbase);
			return strdup(buf);
		}
	}
	char *demangled = NULL;
	if (swift_demangle != NULL && (strncmp(name, "$s", 2) == 0 ||
			strncmp(name, "_$s", 3) == 0))
		demangled = swift_demangle(name, strlen(name), NULL, NULL, 0);
	if (offset != 0)
		snprintf(buf, sizeof(buf), "%s+0x%" PRIxPTR,
				demangled ? demangled : name, offset);
	else
		snprintf(buf, sizeof(buf), "%s", demangled ? demangled : name);
	free(demangled);
	return strdup(buf);
}

static void
_sq_modules_free(struct sq_module_s *m)
{
	while (m) {
		struct sq_module_s *next = m->next;
		if (m->map)
			munmap(m->map, m->map_len);
		free(m->syms);
		free(m->path);
		free(m);
		m = next;
	}
}

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
			struct sq_flow_s *fl = r->flow ? _sq_flow_find(flows,
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
				_sq_w_name(w, _sq_source_kind_name(
						(unsigned)r->a), "", kinds[
						r->small < 3 ? r->small : 0]);
				fputs(",\"cat\":\"handler\",\"args\":"
						"{\"function\":", w->f);
				_sq_w_string(w->f, _sq_name_of(&w->names, r->b));
				fputc('}', w->f);
				break;
			}
			case SQ_TRACE_EVENT:
				_sq_w_name(w, "event: ", _sq_source_kind_name(
						r->small), "");
				fprintf(w->f, ",\"cat\":\"event\",\"args\":"
						"{\"handle\":%" PRIu64 ",\"data\":%"
						PRIu64 "}", r->a, r->b);
				break;
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

static void
_sq_w_depths(struct sq_writer_s *w, const struct sq_flows_s *flows)
{
	size_t n = 0;
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
	n = 0;
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
	 * id), and the queues per label. */
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
			} else if (r->type == SQ_REC_BEGIN && r->flow) {
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
	}
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
	_sq_w_depths(&w, &flows);
	fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":"
			"{\"producer\":\"SwiftQueues\",\"clock\":"
			"\"CLOCK_MONOTONIC\",\"dropped_events\":%" PRIu64
			"}}\n", w.dropped);

	free(flows.slots);
	free(w.label_queues);
	_sq_names_free(&w.names);
	int err = 0;
	if (ferror(f))
		err = EIO;
	if (fclose(f) != 0 && err == 0)
		err = errno ? errno : EIO;
	return err;
}

#endif /* SQ_NO_TRACE */
