/*
 * SwiftQueues — function names for traces, snapshots and the watchdog: a
 * function pointer's symbol (static functions too, Swift names
 * demangled), else module+offset. trace_write.c names the functions of a
 * recorded trace; snapshots and the watchdog name the task a thread runs.
 */
#include "trace_internal.h"

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

/* ---- Symbols ----------------------------------------------------------------
 *
 * A function pointer's name: dladdr finds exported symbols; the module's
 * own symbol table (.symtab, when not stripped) also has static and hidden
 * functions, so a program's `static void work(void *)` gets its name
 * without -rdynamic. Swift names are demangled when the Swift runtime is
 * in the process. Everything here runs only while a trace is written, a
 * snapshot is taken or the watchdog reports. */

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
char *
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

void
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

void
_sq_symbol_name(const void *func, char *out, size_t size)
{
	struct sq_module_s *modules = NULL;
	char *name = _sq_symbolize(&modules, (uintptr_t)func);
	snprintf(out, size, "%s", name ? name : "?");
	free(name);
	_sq_modules_free(modules);
}

#endif /* SQ_NO_TRACE */
