// SPDX-License-Identifier: MIT
#include "probespec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "inputfile.h"
#include "log.h"
#include "macro.h"

static const struct {
	const char *prefix;
	enum probe_type type;
} probe_types[] = {
	{"tracepoint:", PROBE_TRACEPOINT}, {"uprobe:", PROBE_UPROBE},
	{"uretprobe:", PROBE_URETPROBE},   {"usdt:", PROBE_USDT},
	{"kprobe:", PROBE_KPROBE},	   {"kretprobe:", PROBE_KRETPROBE},
	{"fentry:", PROBE_FENTRY},	   {"fexit:", PROBE_FEXIT},
};

static int part_copy(char *dst, const char *src, size_t n)
{
	if (n == 0 || n >= PROBE_PART_MAX)
		return -EINVAL;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return 0;
}

/* "SYMBOL[+OFF]" into p->a and p->off. */
static int sym_off(struct probe_spec *p, const char *s, bool off_ok)
{
	const char *plus = strchr(s, '+');
	char *end;

	if (!plus)
		return part_copy(p->a, s, strlen(s));
	/* digits only: strtoull() would take "-5" (2^64 - 5, a probe before the
	 * symbol) and " 5" */
	if (!off_ok || !isdigit((unsigned char)plus[1]))
		return -EINVAL;
	errno = 0;
	p->off = strtoull(plus + 1, &end, 0);
	if (errno || *end)
		return -EINVAL;
	return part_copy(p->a, s, (size_t)(plus - s));
}

int probe_spec__parse(const char *spec, struct probe_spec *p)
{
	const char *rest = NULL, *c;
	unsigned int k;

	memset(p, 0, sizeof(*p));
	for (k = 0; k < ARRAY_SIZE(probe_types); k++)
		if (!strncmp(spec, probe_types[k].prefix, strlen(probe_types[k].prefix))) {
			rest = spec + strlen(probe_types[k].prefix);
			p->type = probe_types[k].type;
			break;
		}
	if (!rest || !*rest)
		return -EINVAL;
	switch (p->type) {
	case PROBE_TRACEPOINT:
		c = strchr(rest, ':');
		if (!c || strchr(c + 1, ':') || strchr(rest, '/'))
			return -EINVAL;
		if (part_copy(p->a, rest, (size_t)(c - rest)) < 0)
			return -EINVAL;
		return part_copy(p->b, c + 1, strlen(c + 1));
	case PROBE_UPROBE:
	case PROBE_URETPROBE:
		c = strrchr(rest, ':');
		if (rest[0] != '/' || !c)
			return -EINVAL;
		if (part_copy(p->path, rest, (size_t)(c - rest)) < 0)
			return -EINVAL;
		/* A return probe takes the return address at the stack's top: only
		 * true at the entry; inside the function (after a push) it would
		 * overwrite a saved register and crash the probed program. */
		return sym_off(p, c + 1, p->type == PROBE_UPROBE);
	case PROBE_USDT: {
		const char *c2;

		c2 = strrchr(rest, ':');
		if (rest[0] != '/' || !c2 || c2 == rest)
			return -EINVAL;
		for (c = c2 - 1; c > rest && *c != ':'; c--)
			;
		if (c == rest)
			return -EINVAL;
		if (part_copy(p->path, rest, (size_t)(c - rest)) < 0 ||
		    part_copy(p->a, c + 1, (size_t)(c2 - c - 1)) < 0)
			return -EINVAL;
		return part_copy(p->b, c2 + 1, strlen(c2 + 1));
	}
	case PROBE_KPROBE:
	case PROBE_KRETPROBE:
	case PROBE_FENTRY:
	case PROBE_FEXIT:
		if (strchr(rest, ':'))
			return -EINVAL;
		return sym_off(p, rest, p->type == PROBE_KPROBE);
	}
	return -EINVAL;
}

int probe_tracefs_dir(char *buf, unsigned long len)
{
	static const char *const dirs[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
	struct stat st;

	for (unsigned int i = 0; i < ARRAY_SIZE(dirs); i++) {
		char ev[64];

		snprintf(ev, sizeof(ev), "%s/events", dirs[i]);
		if (stat(ev, &st) == 0) {
			snprintf(buf, len, "%s", dirs[i]);
			return 0;
		}
	}
	/* Not mounted (a minimal VM, a container): mount it, as perf would ask. */
	if (mount("tracefs", dirs[0], "tracefs", 0, NULL) == 0) {
		snprintf(buf, len, "%s", dirs[0]);
		return 0;
	}
	return -errno;
}

static int tracepoint_check(const char *spec, const struct probe_spec *p)
{
	char dir[64], path[PROBE_PART_MAX * 2 + 96];
	int r = probe_tracefs_dir(dir, sizeof(dir));

	if (r < 0)
		return log_error_errno(r,
				       "probe '%s': tracefs not mounted and mounting it at "
				       "/sys/kernel/tracing failed: %m",
				       spec);
	snprintf(path, sizeof(path), "%s/events/%s/%s/id", dir, p->a, p->b);
	if (access(path, R_OK) < 0)
		return log_error_errno(-errno, "probe '%s': no tracepoint %s:%s (%s: %m)", spec,
				       p->a, p->b, path);
	return 0;
}

static int kprobe_check(const char *spec)
{
	/* The kprobe PMU exists exactly when the kernel has kprobes (and
	 * CONFIG_KPROBE_EVENTS); that is what libbpf attaches through. */
	if (access("/sys/bus/event_source/devices/kprobe/type", R_OK) < 0)
		return log_error_errno(-EOPNOTSUPP,
				       "probe '%s': this kernel has no kprobes (built without "
				       "CONFIG_KPROBES: no /sys/bus/event_source/devices/kprobe); "
				       "use fentry:/fexit: (BTF) or a tracepoint: probe instead",
				       spec);
	return 0;
}

/*
 * fentry/fexit attach through a BTF trampoline: the function must be in the
 * kernel's BTF (the verifier's target) and in ftrace's list of traceable
 * functions (not notrace, not inlined away).
 */
static int fentry_check(const char *spec, const struct probe_spec *p)
{
	char dir[64], path[128], line[512];
	struct btf *btf = btf__load_vmlinux_btf();
	size_t n = strlen(p->a);
	bool found = false;
	FILE *f;
	int r;

	if (!btf)
		return log_error_errno(-errno, "probe '%s': kernel BTF unreadable: %m", spec);
	r = btf__find_by_name_kind(btf, p->a, BTF_KIND_FUNC);
	btf__free(btf);
	if (r < 0)
		return log_error_errno(-ENOENT, "probe '%s': no function '%s' in the kernel's BTF",
				       spec, p->a);
	r = probe_tracefs_dir(dir, sizeof(dir));
	if (r < 0)
		return log_error_errno(
			r, "probe '%s': tracefs not mounted and mounting it failed: %m", spec);
	snprintf(path, sizeof(path), "%s/available_filter_functions", dir);
	f = fopen(path, "re");
	if (!f && (errno == EPERM || errno == EACCES))
		/* Seen on our test kernel, where fentry loads fail with EPERM too:
		 * function tracing is refused to root as a whole. */
		return log_error_errno(-EOPNOTSUPP,
				       "probe '%s': this kernel refuses function tracing (%s: %m), "
				       "so fentry/fexit cannot attach; use a tracepoint: probe",
				       spec, path);
	if (!f)
		return log_error_errno(-errno, "probe '%s': %s: %m", spec, path);
	/* "name" or "name [module]" per line. */
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, p->a, n) && (line[n] == '\n' || line[n] == ' ');
	fclose(f);
	if (!found)
		return log_error_errno(-ENOENT,
				       "probe '%s': '%s' is not traceable (not in %s: notrace or "
				       "inlined)",
				       spec, p->a, path);
	return 0;
}

/* File offset of virtual address v: the segment that holds it. */
static int vaddr_to_off(Elf *e, uint64_t v, uint64_t *ret)
{
	size_t n;

	if (elf_getphdrnum(e, &n) < 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (v >= ph.p_vaddr && v < ph.p_vaddr + ph.p_filesz) {
			*ret = v - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

/* A defined function named name in .symtab, then .dynsym: its address. */
/* The address of function name, and its size (0 when the symbol has none). */
static int elf_func(Elf *e, const char *name, uint64_t *ret, uint64_t *ret_size)
{
	static const uint32_t kinds[] = {SHT_SYMTAB, SHT_DYNSYM};

	for (unsigned int k = 0; k < ARRAY_SIZE(kinds); k++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != kinds[k] || !sh.sh_entsize)
				continue;
			d = elf_getdata(scn, NULL);
			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym s;
				const char *n;

				if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
				    (GELF_ST_TYPE(s.st_info) != STT_FUNC &&
				     GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC))
					continue;
				n = elf_strptr(e, sh.sh_link, s.st_name);
				if (n && !strcmp(n, name)) {
					*ret = s.st_value;
					*ret_size = s.st_size;
					return 0;
				}
			}
		}
	}
	return -ENOENT;
}

/* The stapsdt note for provider:name, as sys/sdt.h writes it. */
static bool elf_has_usdt(Elf *e, const char *prov, const char *name)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx) < 0)
		return false;
	while ((scn = elf_nextscn(e, scn))) {
		size_t off = 0, noff, doff;
		GElf_Shdr sh;
		GElf_Nhdr nh;
		Elf_Data *d;
		const char *sn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		sn = elf_strptr(e, shstrndx, sh.sh_name);
		if (!sn || strcmp(sn, ".note.stapsdt"))
			continue;
		d = elf_getdata(scn, NULL);
		while (d && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
			const char *desc = (const char *)d->d_buf + doff, *pn, *nn;
			size_t left;

			if (nh.n_type != 3 || nh.n_descsz < 3 * 8 + 2)
				continue;
			pn = desc + 3 * 8;
			nn = memchr(pn, '\0', nh.n_descsz - 3 * 8);
			if (!nn++)
				continue;
			left = nh.n_descsz - (size_t)(nn - desc);
			if (!strcmp(pn, prov) && strnlen(nn, left) < left && !strcmp(nn, name))
				return true;
		}
	}
	return false;
}

int probe_spec__open_binary(const char *spec, const struct probe_spec *p, int *ret_fd, char *err,
			    size_t errlen)
{
	char what[1024];

	snprintf(what, sizeof(what), "probe '%s': %s", spec, p->path);
	return input_file__open(what, p->path, 0, ret_fd, err, errlen);
}

static int elf_check(const char *spec, struct probe_spec *p)
{
	_cleanup_close_ int fd = -1;
	char err[1300];
	uint64_t v, size = 0;
	Elf *e;
	int r = 0;

	r = probe_spec__open_binary(spec, p, &fd, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		return log_error_errno(-ENOEXEC, "probe '%s': %s is not an ELF file", spec,
				       p->path);
	}
	if (p->type == PROBE_USDT) {
		if (!elf_has_usdt(e, p->a, p->b))
			r = log_error_errno(-ENOENT, "probe '%s': %s has no USDT note %s:%s", spec,
					    p->path, p->a, p->b);
	} else if (elf_func(e, p->a, &v, &size) < 0) {
		r = log_error_errno(-ENOENT,
				    "probe '%s': no function '%s' in %s (.symtab or "
				    ".dynsym)",
				    spec, p->a, p->path);
	} else if (size && p->off >= size) {
		/* it would trap in whatever follows the function */
		r = log_error_errno(-ERANGE,
				    "probe '%s': offset %#llx is past the end of %s (%llu bytes) "
				    "in %s",
				    spec, (unsigned long long)p->off, p->a,
				    (unsigned long long)size, p->path);
	} else if (vaddr_to_off(e, v + p->off, &p->file_off) < 0) {
		r = log_error_errno(-ENOENT, "probe '%s': %s+%#llx is in no loadable segment", spec,
				    p->a, (unsigned long long)p->off);
	}
	elf_end(e);
	return r;
}

int probe_spec__resolve(const char *spec, struct probe_spec *p)
{
	if (probe_spec__parse(spec, p) < 0)
		return log_error_errno(-EINVAL,
				       "probe '%s': invalid spec (expected " PROBE_SPEC_GRAMMAR ")",
				       spec);
	switch (p->type) {
	case PROBE_TRACEPOINT:
		return tracepoint_check(spec, p);
	case PROBE_KPROBE:
	case PROBE_KRETPROBE:
		return kprobe_check(spec);
	case PROBE_FENTRY:
	case PROBE_FEXIT:
		return fentry_check(spec, p);
	case PROBE_UPROBE:
	case PROBE_URETPROBE:
	case PROBE_USDT:
		return elf_check(spec, p);
	}
	return -EINVAL;
}
