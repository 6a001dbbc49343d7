// SPDX-License-Identifier: MIT
#include "cap_python.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/procroot.h"
#include "shm/config.h"

_Static_assert(CPA_MAX_PYFRAMES == CPA_BPF_MAX_PYFRAMES, "Python frames: one limit");
_Static_assert(sizeof(struct cpa_pyframe) == sizeof(struct cpa_bpf_pyframe), "Python frame");
_Static_assert((int)CPA_PY_UNSUPPORTED == (int)CPA_BPF_PY_UNSUPPORTED, "Python status");

#define N	    CPA_BPF_PY_NONE
#define PY_CACHE    16		/* interpreter files resolved lately */
#define PY_MAPS_MAX (16u << 20) /* a /proc/PID/maps longer than this is not read */

/*
 * Offsets per CPython minor version, x86-64, from the versions' own headers
 * (offsetof() over Include/internal with Py_BUILD_CORE: 3.10.13, 3.11.7 and
 * Debian's 3.11.2, 3.12.1, 3.13.0; docs/unwinding.md "Python").
 */
#define PY_ROW(minor, tcur, ihead, thead, tid, frame, cf, prev, code, instr, entry, owner, mode, \
	       check)                                                                            \
	{                                                                                        \
		minor,                                                                           \
		{                                                                                \
			.rt_tstate_current = tcur, .rt_interp_head = ihead,                      \
			.is_tstate_head = thead, .ts_next = 8, .ts_thread_id = tid,              \
			.ts_frame = frame, .cf_frame = cf, .fr_previous = prev, .fr_code = code, \
			.fr_instr = instr, .fr_entry = entry, .fr_owner = owner,                 \
			.entry_mode = CPA_BPF_PY_ENTRY_##mode, .co_check = check                 \
		}                                                                                \
	}

/*
 * Columns: _PyRuntime.gilstate.tstate_current (N: a thread-local since 3.12,
 * the list search), .interpreters.head, the interpreter's thread list head
 * (3.10: tstate_head), PyThreadState.thread_id, the thread state's frame
 * pointer (3.10: frame; 3.11/3.12: cframe, then its current_frame; 3.13:
 * current_frame), the frame's previous (3.10: f_back), code object (3.13:
 * f_executable), instruction (3.10: f_lasti; 3.11/3.12: prev_instr; 3.13:
 * instr_ptr), is_entry, owner, how an evaluation's first frame is marked, and
 * PyCodeObject.co_firstlineno (the check word).
 */
static const struct {
	unsigned int minor;
	struct cpa_bpf_py_proc o;
} py_table[] = {
	PY_ROW(10, 568, 32, 8, 176, 24, N, 24, 32, 96, N, N, ALL, 40),
	PY_ROW(11, 576, 40, 16, 152, 56, 8, 48, 32, 56, 68, 69, FLAG, 72),
	PY_ROW(12, N, 40, 72, 136, 56, 0, 8, 0, 56, N, 70, CSTACK, 68),
	PY_ROW(13, N, 632, 7344, 152, 72, N, 8, 0, 56, N, 70, CSTACK, 68),
};

const struct cpa_bpf_py_proc *cap_python__table(unsigned int minor)
{
	for (size_t i = 0; i < ARRAY_SIZE(py_table); i++)
		if (py_table[i].minor == minor)
			return &py_table[i].o;
	return NULL;
}

unsigned int cap_python__name_minor(const char *path)
{
	const char *b = strrchr(path, '/'), *v;
	unsigned int m = 0;

	b = b ? b + 1 : path;
	if (!strncmp(b, "lib", 3))
		b += 3;
	if (strncmp(b, "python3.", 8))
		return 0;
	for (v = b + 8; *v >= '0' && *v <= '9' && m < 1000; v++)
		m = m * 10 + (unsigned int)(*v - '0');
	/* python3.11, python3.11d, libpython3.11.so.1.0; not python3.11-config */
	if (v == b + 8 || (*v && *v != '.' && *v != 'd' && *v != 'm'))
		return 0;
	return m;
}

/* The file offset of vaddr in the PT_LOAD segment holding it, or -1. */
static int64_t vaddr_off(Elf *e, size_t nph, uint64_t vaddr)
{
	GElf_Phdr ph;

	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return (int64_t)(vaddr - ph.p_vaddr + ph.p_offset);
	}
	return -1;
}

/* The lowest vaddr of an executable PT_LOAD: mm->start_code's, unbiased. */
static uint64_t min_x_vaddr(Elf *e, size_t nph)
{
	uint64_t m = UINT64_MAX;
	GElf_Phdr ph;

	for (size_t i = 0; i < nph; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			m = MIN(m, ph.p_vaddr);
	return m == UINT64_MAX ? 0 : m;
}

/* The vaddr file offset pgoff is loaded at, or 0 when no segment has it. */
static uint64_t off_vaddr(Elf *e, size_t nph, uint64_t pgoff, bool *ok)
{
	GElf_Phdr ph;

	*ok = false;
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (pgoff >= (ph.p_offset & ~4095ull) && pgoff < ph.p_offset + ph.p_filesz) {
			*ok = true;
			return ph.p_vaddr + pgoff - ph.p_offset;
		}
	}
	return 0;
}

/* Does the file need a libpython3.X.so (DT_NEEDED): its interpreter is there. */
static bool needs_libpython(Elf *e)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *name;

			if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag != DT_NEEDED)
				continue;
			name = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
			if (name && !strncmp(name, "libpython3", 10))
				return true;
		}
	}
	return false;
}

/* _PyRuntime's and Py_Version's values from .dynsym, else .symtab. */
static void find_syms(Elf *e, uint64_t *runtime, uint64_t *version)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n && (!*runtime || !*version); i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
				continue;
			name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (!name || (name[0] != '_' && name[0] != 'P'))
				continue;
			if (!*runtime && !strcmp(name, "_PyRuntime"))
				*runtime = sym.st_value;
			else if (!*version && !strcmp(name, "Py_Version"))
				*version = sym.st_value;
		}
		if (*runtime && *version)
			return;
	}
}

int cap_python__resolve(int fd, uint64_t start, uint64_t pgoff, unsigned int name_minor,
			struct cpa_bpf_py_proc *ret, uint64_t *ret_exec_off)
{
	const struct cpa_bpf_py_proc *t;
	uint64_t rt = 0, ver = 0, at;
	unsigned int minor = name_minor;
	size_t nph = 0;
	uint32_t v;
	bool ok;
	Elf *e;

	memset(ret, 0, sizeof(*ret));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -EINVAL;
	if (elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &nph) < 0) {
		elf_end(e);
		return -EINVAL;
	}
	find_syms(e, &rt, &ver);
	if (!rt && needs_libpython(e)) {
		elf_end(e);
		return 1; /* pyenv's python3.11: the interpreter is its libpython */
	}
	if (ver) {
		int64_t off = vaddr_off(e, nph, ver);

		/* PY_VERSION_HEX: 0x030b02f0 is 3.11.2 final. */
		if (off >= 0 && pread(fd, &v, sizeof(v), off) == (ssize_t)sizeof(v) &&
		    (v >> 24) == 3)
			minor = (v >> 16) & 0xff;
	}
	at = off_vaddr(e, nph, pgoff, &ok);
	*ret_exec_off = rt - min_x_vaddr(e, nph);
	elf_end(e);
	ret->version = (uint16_t)(0x300 | (minor & 0xff));
	t = cap_python__table(minor);
	if (!t) {
		ret->status = CPA_BPF_PY_UNSUPPORTED;
		return 0;
	}
	*ret = *t;
	ret->version = (uint16_t)(0x300 | minor);
	if (!rt || !ok) {
		ret->status = CPA_BPF_PY_NOSYM;
		return 0;
	}
	ret->status = CPA_BPF_PY_OK;
	ret->runtime = start - at + rt;
	return 0;
}

struct py_cached {
	uint8_t key[CPA_BUILD_ID_MAX + 16];
	uint64_t pgoff;
	int64_t delta; /* runtime = start + delta */
	struct cpa_bpf_py_proc o;
	bool used;
};

/*
 * The pids that may have a py_procs entry: those we entered (the exec
 * program's too, whatever their comm: their interpreter's MMAP event follows),
 * those whose exec the exec program may have entered (comm "python..."), the
 * map's keys after lost mapping events. A bit per pid (pid_max is at most 2^22: 512 KiB,
 * touched only where pids are). A fork or exec of any other process needs no
 * map syscall: those were 4-5 per new process (a lookup of the parent, a
 * delete, a slot read), a fifth of capture's CPU under churn. A bit left for
 * a pid the exec program's exit removed costs one delete when it is reused.
 */
#define PY_PID_BITS (1u << 22)

struct cap_python {
	int map_fd;
	int slots_fd; /* py_slots: the samples' first test */
	int execs_fd; /* py_execs: the exec program's templates */
	uint32_t target_tgid;
	uint32_t count;
	uint64_t *maybe;  /* PY_PID_BITS bits; NULL: every pid may (no memory) */
	uint64_t map_ops; /* py_procs syscalls for fork and exec events (tests) */
	struct py_cached cache[PY_CACHE];
	unsigned int next;
	char *maps;
	size_t maps_cap;
};

int cap_python__new(int map_fd, int slots_fd, int execs_fd, uint32_t target_tgid,
		    struct cap_python **ret)
{
	struct cap_python *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->map_fd = map_fd;
	p->slots_fd = slots_fd;
	p->execs_fd = execs_fd;
	p->target_tgid = target_tgid;
	p->maybe = calloc(PY_PID_BITS / 64, sizeof(*p->maybe));
	*ret = p;
	return 0;
}

void cap_python__free(struct cap_python *p)
{
	if (!p)
		return;
	free(p->maps);
	free(p->maybe);
	free(p);
}

static bool maybe_has(const struct cap_python *p, uint32_t pid)
{
	return !p->maybe || pid >= PY_PID_BITS || (p->maybe[pid / 64] >> (pid % 64) & 1);
}

static void maybe_set(struct cap_python *p, uint32_t pid, bool on)
{
	if (!p->maybe || pid >= PY_PID_BITS)
		return;
	if (on)
		p->maybe[pid / 64] |= 1ull << (pid % 64);
	else
		p->maybe[pid / 64] &= ~(1ull << (pid % 64));
}

void cap_python__lost(struct cap_python *p)
{
	uint32_t key, next, n = 0;
	uint32_t *cur = NULL;

	if (!p || !p->maybe)
		return;
	/* Execs may have gone by unseen: every pid the map holds may. */
	while (bpf_map_get_next_key(p->map_fd, cur, &next) == 0) {
		maybe_set(p, next, true);
		key = next;
		cur = &key;
		if (++n > 2 * CPA_BPF_PY_PROCS)
			break; /* keys deleted under us restart the walk: enough */
	}
}

uint64_t cap_python__map_ops(const struct cap_python *p)
{
	return p->map_ops;
}

uint32_t cap_python__count(const struct cap_python *p)
{
	return p ? p->count : 0;
}

/* An OK entry is not replaced by a worse one: pyenv's python3.11 has no
 * _PyRuntime (its entry is pending), the libpython3.11.so it maps next has.
 * The entry's woke is the one an OK entry in the map has (the exec program
 * may have entered the process, and its first sample woken us already),
 * else 0: its next sample wakes us (a pending one's: it still waits for its
 * library's mapping; an OK one's: its first with frames). */
static void put(struct cap_python *p, uint32_t pid, const struct cpa_bpf_py_proc *o)
{
	struct cpa_bpf_py_proc cur, e = *o;
	bool had = bpf_map_lookup_elem(p->map_fd, &pid, &cur) == 0;
	uint32_t slot;

	if (had && cur.status == CPA_BPF_PY_OK && o->status != CPA_BPF_PY_OK)
		return;
	maybe_set(p, pid, true);
	e.woke = had && cur.status == CPA_BPF_PY_OK ? cur.woke : 0;
	if (bpf_map_update_elem(p->map_fd, &pid, &e, BPF_ANY) < 0) {
		log_debug("python: pid %u not tracked: %s", pid, strerror(errno));
		return;
	}
	slot = pid % CPA_BPF_PY_SLOTS;
	(void)bpf_map_update_elem(p->slots_fd, &slot, &pid, BPF_ANY);
	if (!had)
		p->count++;
	if (o->status == CPA_BPF_PY_OK)
		log_debug("python 3.%u in pid %u: _PyRuntime at 0x%" PRIx64, o->version & 0xff, pid,
			  (uint64_t)o->runtime);
}

static void drop(struct cap_python *p, uint32_t pid)
{
	uint32_t slot = pid % CPA_BPF_PY_SLOTS, cur;

	maybe_set(p, pid, false);
	p->map_ops++;
	if (bpf_map_delete_elem(p->map_fd, &pid) == 0 && p->count)
		p->count--;
	/* not whoever shares the slot now */
	if (bpf_map_lookup_elem(p->slots_fd, &slot, &cur) == 0 && cur == pid)
		(void)bpf_map_update_elem(p->slots_fd, &slot, &(uint32_t){0}, BPF_ANY);
}

static int open_mapped(uint32_t pid, uint64_t start, uint64_t end, const char *path)
{
	char buf[CPA_PATH_MAX + 64];
	int fd;

	snprintf(buf, sizeof(buf), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
	fd = open(buf, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || path[0] != '/')
		return fd;
	/* In its root: an absolute symlink there is not ours (common/procroot.h). */
	snprintf(buf, sizeof(buf), "/proc/%u/root", pid);
	return proc_root_open(buf, path, O_RDONLY);
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* An interpreter executable (fd): the exec program enters its next processes
 * itself (py_execs, bpf/profile.h), _PyRuntime at exec_off from start_code. */
static void exec_template(struct cap_python *p, int fd, const struct cpa_bpf_py_proc *o,
			  uint64_t exec_off)
{
	struct cpa_bpf_py_exec k = {0};
	struct cpa_bpf_py_proc t = *o;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return;
	k.ino = st.st_ino;
	k.dev = major(st.st_dev) << 20 | minor(st.st_dev);
	t.runtime = exec_off;
	(void)bpf_map_update_elem(p->execs_fd, &k, &t, BPF_ANY);
}

/* An executable mapping of pid: an interpreter's? Its entry then. */
static void on_mapping(struct cap_python *p, uint32_t pid, uint64_t start, uint64_t end,
		       uint64_t pgoff, const char *path, const uint8_t *key, size_t key_len)
{
	unsigned int minor = cap_python__name_minor(path);
	struct py_cached *c = NULL;
	struct cpa_bpf_py_proc o;
	uint64_t exec_off;
	int fd, r;

	if (!minor)
		return;
	key_len = MIN(key_len, sizeof(c->key));
	for (unsigned int i = 0; key_len && i < PY_CACHE; i++) {
		struct py_cached *x = &p->cache[i];

		if (x->used && x->pgoff == pgoff && !memcmp(x->key, key, key_len)) {
			o = x->o;
			if (o.status == CPA_BPF_PY_OK)
				o.runtime = (uint64_t)((int64_t)start + x->delta);
			put(p, pid, &o);
			return;
		}
	}
	fd = open_mapped(pid, start, end, path);
	if (fd < 0)
		return;
	r = cap_python__resolve(fd, start, pgoff, minor, &o, &exec_off);
	if (r == 0 && o.status == CPA_BPF_PY_OK && strncmp(base_name(path), "lib", 3))
		exec_template(p, fd, &o, exec_off);
	close(fd);
	if (r < 0)
		return;
	put(p, pid, &o); /* r 1, a launcher: pending (o is zeroes) */
	if (key_len) {
		c = &p->cache[p->next++ % PY_CACHE];
		memset(c, 0, sizeof(*c));
		memcpy(c->key, key, key_len);
		c->pgoff = pgoff;
		c->delta = (int64_t)(o.runtime - start);
		c->o = o;
		c->used = true;
	}
}

void cap_python__map_event(struct cap_python *p, const struct cpa_map_event *ev, const char *path)
{
	struct cpa_bpf_py_proc o;
	uint8_t key[CPA_BUILD_ID_MAX + 16];
	size_t key_len = 0;

	if (!p || (p->target_tgid && ev->pid != p->target_tgid))
		return;
	switch (ev->kind) {
	case CPA_MAP_MMAP:
		if (ev->build_id_len) {
			memcpy(key, ev->build_id, ev->build_id_len);
			key_len = ev->build_id_len;
		} else if (ev->ino) {
			memset(key, 0, sizeof(key));
			memcpy(key, &ev->ino, 8);
			memcpy(key + 8, &ev->dev_major, 4);
			memcpy(key + 12, &ev->dev_minor, 4);
			key_len = 16;
		}
		on_mapping(p, ev->pid, ev->start, ev->start + ev->len, ev->pgoff, path, key,
			   key_len);
		break;
	case CPA_MAP_FORK:
		/* A forked child runs its parent's interpreter at the same
		 * addresses; a reused pid's old entry must go. */
		if (maybe_has(p, ev->ppid)) {
			p->map_ops++;
			if (bpf_map_lookup_elem(p->map_fd, &ev->ppid, &o) == 0) {
				put(p, ev->pid, &o);
				break;
			}
		}
		if (maybe_has(p, ev->pid))
			drop(p, ev->pid);
		break;
	case CPA_MAP_EXEC:
		if (maybe_has(p, ev->pid))
			drop(p, ev->pid);
		/* path: the new comm; the exec program enters a known
		 * interpreter's process under that name (py_exec()). */
		if (!strncmp(path, "python", 6))
			maybe_set(p, ev->pid, true);
		break;
	default:
		break;
	}
}

static void scan_pid(struct cap_python *p, uint32_t pid)
{
	char path[64], *line, *save = NULL;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	if (read_full_file_at(AT_FDCWD, path, 0, PY_MAPS_MAX, &p->maps, &p->maps_cap, &len) < 0)
		return;
	for (line = strtok_r(p->maps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long start, end, off;
		char perms[8];
		int n = 0;

		if (!strstr(line, "python3.") ||
		    sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &n) <
			    4 ||
		    !n || perms[2] != 'x')
			continue;
		on_mapping(p, pid, start, end, off, line + n, NULL, 0);
	}
}

int cap_python__scan(struct cap_python *p)
{
	struct dirent *de;
	DIR *d;

	if (p->target_tgid) {
		scan_pid(p, p->target_tgid);
		return (int)p->count;
	}
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid || pid > UINT32_MAX)
			continue;
		scan_pid(p, (uint32_t)pid);
	}
	closedir(d);
	return (int)p->count;
}
