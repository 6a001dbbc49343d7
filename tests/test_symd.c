// SPDX-License-Identifier: MIT
/*
 * symd tests: ELF symbol lookup by file offset on a fixture library built by
 * CMake (boundaries, return-address adjustment), separate debug files by
 * build-id and .gnu_debuglink, MiniDebugInfo, kallsyms and perf maps from
 * fixture files, names (C++/Rust demangling, Go shortening), hostile ELF
 * files, and the whole stage over a real arena: records in ring 1, the
 * batch function, definitions and samples read back from ring 2.
 */
#include <check.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_proc.h"
#include "test_util.h"
#include "common/envlabel.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "symd/bincache.h"
#include "symd/elfsym.h"
#include "symd/ksyms.h"
#include "symd/names.h"
#include "symd/jitmap.h"
#include "symd/jvm.h"
#include "symd/symd.h"

#define FX_SO  SYMD_FIXTURE_SO
#define FX_DIR SYMD_FIXTURE_DIR

/* ---- helpers ---- */

struct fx_fn {
	uint64_t off;  /* file offset of the first byte */
	uint64_t size; /* from nm -S */
};

static char tmpdir[256];

static void tmp_setup(void)
{
	test_scratch_in(tmpdir, sizeof(tmpdir), "symd");
}

static void tmp_teardown(void)
{
	test_rm_rf(tmpdir);
}

static void *fx_handle(void)
{
	static void *h;

	if (!h)
		h = dlopen(FX_SO, RTLD_NOW);
	ck_assert_msg(h != NULL, "dlopen %s: %s", FX_SO, dlerror());
	return h;
}

/* File offset of addr inside the fixture, as unwindd computes it from
 * /proc/self/maps (pc - start + pgoff). */
static uint64_t fx_off_of(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];
	uint64_t a = (uint64_t)(uintptr_t)addr, off = UINT64_MAX;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, pg;

		if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &pg) == 3 && a >= lo && a < hi) {
			ck_assert_ptr_nonnull(strstr(line, "cpa_symd_fixture"));
			off = a - lo + pg;
			break;
		}
	}
	fclose(f);
	ck_assert(off != UINT64_MAX);
	return off;
}

static uint64_t nm_size(const char *sym)
{
	char cmd[512], line[512];
	uint64_t size = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", FX_SO);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (fgets(line, sizeof(line), p)) {
		char name[256];
		unsigned long a, s;
		char t;

		if (sscanf(line, "%lx %lx %c %255s", &a, &s, &t, name) == 4 && !strcmp(name, sym))
			size = s;
	}
	pclose(p);
	ck_assert_msg(size > 0, "nm has no size for %s", sym);
	return size;
}

static struct fx_fn fx_fn(const char *dlname, const char *nmname)
{
	void *addr = dlsym(fx_handle(), dlname);

	ck_assert_msg(addr != NULL, "dlsym %s", dlname);
	return (struct fx_fn){.off = fx_off_of(addr), .size = nm_size(nmname)};
}

static struct fx_fn fx_local(void)
{
	void *(*get)(void) = (void *(*)(void))dlsym(fx_handle(), "cpa_fx_local_addr");

	ck_assert_ptr_nonnull(get);
	return (struct fx_fn){.off = fx_off_of(get()), .size = nm_size("cpa_fx_local_helper")};
}

static struct symbin *load_path(const char *path, const char *debug_root, int *ret_err)
{
	struct symd_paths paths = {.debug_root = debug_root};
	struct symd_file_ref ref = {.path = path};
	struct symbin *b = NULL;
	int r = symbin__load(&paths, &ref, &b);

	if (ret_err)
		*ret_err = r;
	return r == 0 ? b : NULL;
}

static const char *lookup(struct symbin *b, uint64_t off)
{
	static char buf[2048];
	const char *name;
	uint64_t so;

	if (symbin__lookup(b, off, false, &name, &so) < 0)
		return "(none)";
	snprintf(buf, sizeof(buf), "%s", name);
	return buf;
}

/* ---- ELF lookups ---- */

START_TEST(test_lookup_fixture)
{
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	struct fx_fn b = fx_fn("cpa_fx_beta", "cpa_fx_beta");
	struct fx_fn g = fx_fn("_ZN3cpa7fixture5gammaEi", "_ZN3cpa7fixture5gammaEi");
	struct fx_fn l = fx_local();
	struct symbin *bin = load_path(FX_SO, NULL, NULL);
	const char *name;
	uint64_t so;

	ck_assert_ptr_nonnull(bin);
	ck_assert(bin->src & SYMBIN_SRC_SYMTAB);
	ck_assert_int_gt(bin->build_id_len, 0);

	/* first byte, middle, last byte */
	ck_assert_int_eq(symbin__lookup(bin, a.off, false, &name, &so), 0);
	ck_assert_str_eq(name, "cpa_fx_alpha");
	ck_assert_uint_eq(so, a.off);
	ck_assert_str_eq(lookup(bin, a.off + a.size / 2), "cpa_fx_alpha");
	ck_assert_int_eq(symbin__lookup(bin, a.off + a.size - 1, false, &name, &so), 0);
	ck_assert_str_eq(name, "cpa_fx_alpha");
	ck_assert_uint_eq(so, a.off);
	/* one past the end is not alpha any more */
	ck_assert_str_ne(lookup(bin, a.off + a.size), "cpa_fx_alpha");
	/* one before the start is not alpha either */
	ck_assert_str_ne(lookup(bin, a.off - 1), "cpa_fx_alpha");

	ck_assert_str_eq(lookup(bin, b.off), "cpa_fx_beta");
	ck_assert_str_eq(lookup(bin, b.off + b.size - 1), "cpa_fx_beta");
	ck_assert_str_eq(lookup(bin, l.off), "cpa_fx_local_helper");
	/* C++ mangled name through the ELF path, demangled without params */
	ck_assert_str_eq(lookup(bin, g.off + 1), "cpa::fixture::gamma");

	/* offsets outside any PT_LOAD */
	ck_assert_int_eq(symbin__lookup(bin, 1ull << 40, false, &name, &so), -ENOENT);
	symbin__free(bin);
}
END_TEST

/* File offset of an ELF vaddr of b (the PT_LOAD it lies in). */
static uint64_t va_to_off(const struct symbin *b, uint64_t va)
{
	uint32_t i;

	for (i = 0; i < b->nloads; i++)
		if (va >= b->loads[i].vaddr && va - b->loads[i].vaddr < b->loads[i].filesz)
			return va - b->loads[i].vaddr + b->loads[i].off;
	ck_abort_msg("vaddr %#lx in no PT_LOAD", (unsigned long)va);
	return 0;
}

/* The output of a binutils command run on path. */
static FILE *tool_out(const char *tool, const char *path)
{
	char cmd[1024];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s '%s'", tool, path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	return p;
}

/* Every PLT stub objdump names ("<free@plt>:") gets the same name from us,
 * for any pc inside the stub. */
static unsigned int check_plt_names(const char *path)
{
	struct symbin *bin = load_path(path, "/nonexistent", NULL);
	FILE *p = tool_out("objdump -d -j .plt -j .plt.sec -j .plt.got", path);
	unsigned int n = 0;
	char line[1024];

	ck_assert_ptr_nonnull(bin);
	while (fgets(line, sizeof(line), p)) {
		char name[512], want[600];
		unsigned long va;

		if (sscanf(line, "%lx <%511[^>]>:", &va, name) != 2 || !strstr(name, "@plt") ||
		    strchr(name, '+') || strchr(name, '-'))
			continue;
		snprintf(want, sizeof(want), "%s", name);
		ck_assert_str_eq(lookup(bin, va_to_off(bin, va)), want);
		ck_assert_str_eq(lookup(bin, va_to_off(bin, va) + 5), want);
		n++;
	}
	pclose(p);
	ck_assert(bin->src & SYMBIN_SRC_PLT);
	symbin__free(bin);
	return n;
}

/* Every FDE readelf lists ("pc=start..end") gives its start for a pc in
 * its middle and its last byte; returns the FDEs checked. */
static unsigned int check_fdes(const char *path)
{
	struct symbin *bin = load_path(path, "/nonexistent", NULL);
	FILE *p = tool_out("readelf --debug-dump=frames", path);
	unsigned int n = 0;
	char line[1024];

	ck_assert_ptr_nonnull(bin);
	ck_assert(bin->src & SYMBIN_SRC_FDE);
	while (fgets(line, sizeof(line), p)) {
		const char *pc = strstr(line, " FDE ");
		unsigned long lo, hi;
		uint64_t got = 0;

		if (!pc || !(pc = strstr(pc, "pc=")) || sscanf(pc, "pc=%lx..%lx", &lo, &hi) != 2 ||
		    hi <= lo)
			continue;
		ck_assert_int_eq(symbin__func_start(bin, va_to_off(bin, lo + (hi - lo) / 2), &got),
				 0);
		ck_assert_uint_eq(got, va_to_off(bin, lo));
		ck_assert_int_eq(symbin__func_start(bin, va_to_off(bin, hi - 1), &got), 0);
		ck_assert_uint_eq(got, va_to_off(bin, lo));
		n++;
	}
	pclose(p);
	ck_assert_uint_eq(n, bin->nfdes);
	symbin__free(bin);
	return n;
}

START_TEST(test_fde_and_plt)
{
	struct fx_fn l = fx_local();
	char so[512];
	struct symbin *bin;
	uint64_t start;

	/* The fixture's PLT (.plt lazy stubs and .plt.got) and a Debian binary
	 * nobody here wrote (IBT or not, whatever the distribution built). */
	ck_assert_uint_ge(check_plt_names(FX_SO), 3);
	if (access("/usr/bin/gzip", R_OK) == 0)
		ck_assert_uint_ge(check_plt_names("/usr/bin/gzip"), 10);

	/* Stripped: the local function has no symbol, its FDE names it by
	 * its start, for any pc inside it. */
	tmp_setup();
	snprintf(so, sizeof(so), "%s/strip.so", tmpdir);
	run_sh("cp '%s' '%s' && objcopy --strip-all '%s'", FX_SO, so, so);
	bin = load_path(so, "/nonexistent", NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert_str_eq(lookup(bin, l.off + 3), "(none)");
	ck_assert_int_eq(symbin__func_start(bin, l.off + 3, &start), 0);
	ck_assert_uint_eq(start, l.off);
	ck_assert_int_eq(symbin__func_start(bin, l.off + l.size - 1, &start), 0);
	ck_assert_uint_eq(start, l.off);
	symbin__free(bin);
	ck_assert_uint_ge(check_fdes(so), 4);
	tmp_teardown();
	/* Stripped Debian libraries and programs: every FDE readelf sees. */
	if (access("/usr/lib/x86_64-linux-gnu/liblzma.so.5", R_OK) == 0)
		ck_assert_uint_ge(check_fdes("/usr/lib/x86_64-linux-gnu/liblzma.so.5"), 100);
	if (access("/usr/bin/gzip", R_OK) == 0)
		ck_assert_uint_ge(check_fdes("/usr/bin/gzip"), 50);
}
END_TEST

/* The file offset of an ELF's entry point (0 if it has none). */
static uint64_t entry_off(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t off = 0;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	for (unsigned int i = 0; i < eh.e_phnum && eh.e_entry; i++) {
		ck_assert_int_eq(pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))),
				 (ssize_t)sizeof(ph));
		if (ph.p_type == PT_LOAD && eh.e_entry >= ph.p_vaddr &&
		    eh.e_entry < ph.p_vaddr + ph.p_filesz)
			off = eh.e_entry - ph.p_vaddr + ph.p_offset;
	}
	close(fd);
	return off;
}

/*
 * The entry point of a program without symbols is "_start" (a stripped
 * program's root frame, and ld.so's, whose _start Debian strips), bounded
 * by its FDE or by the next one: the function after it keeps its own name.
 */
START_TEST(test_entry_point_start)
{
	static const char *const progs[] = {"/lib64/ld-linux-x86-64.so.2", "/bin/dash",
					    "/usr/bin/env"};
	char exe[512], src[512];
	struct symbin *bin;
	uint64_t e, start;

	tmp_setup();
	snprintf(src, sizeof(src), "%s/p.c", tmpdir);
	snprintf(exe, sizeof(exe), "%s/p", tmpdir);
	run_sh("printf 'int main(void) { return 0; }\\n' > '%s' && cc -O1 -o '%s' '%s' && "
	       "strip --strip-all '%s'",
	       src, exe, src, exe);
	e = entry_off(exe);
	ck_assert_uint_ne(e, 0);
	bin = load_path(exe, "/nonexistent", NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert_str_eq(lookup(bin, e), "_start");
	ck_assert_str_eq(lookup(bin, e + 4), "_start");
	/* crt1's _start has its own FDE: the next function starts after it. */
	ck_assert_int_eq(symbin__func_start(bin, e, &start), 0);
	ck_assert_uint_eq(start, e);
	ck_assert_str_ne(lookup(bin, e + 0x40), "_start");
	symbin__free(bin);
	tmp_teardown();

	for (unsigned int i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		if (access(progs[i], R_OK) != 0)
			continue;
		e = entry_off(progs[i]);
		ck_assert_uint_ne(e, 0);
		bin = load_path(progs[i], "/nonexistent", NULL);
		ck_assert_ptr_nonnull(bin);
		/* The return address of _start's first call, as a walk sees it. */
		ck_assert_msg(!strcmp(lookup(bin, e + 8), "_start"), "%s: entry+8 is %s", progs[i],
			      lookup(bin, e + 8));
		symbin__free(bin);
	}
}
END_TEST

START_TEST(test_debug_file_build_id)
{
	struct fx_fn l = fx_local();
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	char so[512], dbg[512], empty[512], root[512];
	struct symbin *bin;
	char hex[64] = "";
	unsigned int i;

	tmp_setup();
	snprintf(so, sizeof(so), "%s/lib.so", tmpdir);
	snprintf(dbg, sizeof(dbg), "%s/lib.debug", tmpdir);
	snprintf(empty, sizeof(empty), "%s/empty", tmpdir);
	snprintf(root, sizeof(root), "%s/debugroot", tmpdir);
	run_sh("mkdir -p '%s' && cp '%s' '%s'", empty, FX_SO, so);
	run_sh("objcopy --only-keep-debug '%s' '%s'", so, dbg);
	run_sh("objcopy --strip-all '%s'", so);

	/* stripped: exported functions from .dynsym, the local one is gone */
	bin = load_path(so, empty, NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert(!(bin->src & SYMBIN_SRC_SYMTAB));
	ck_assert(bin->src & SYMBIN_SRC_DYNSYM);
	ck_assert_str_eq(lookup(bin, a.off), "cpa_fx_alpha");
	ck_assert_str_ne(lookup(bin, l.off), "cpa_fx_local_helper");
	for (i = 0; i < bin->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", bin->build_id[i]);
	symbin__free(bin);

	/* debug file under <root>/.build-id/xx/rest.debug */
	run_sh("mkdir -p '%s/.build-id/%.2s' && cp '%s' '%s/.build-id/%.2s/%s.debug'", root, hex,
	       dbg, root, hex, hex + 2);
	bin = load_path(so, root, NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert(bin->src & SYMBIN_SRC_DEBUG_BUILDID);
	ck_assert_str_eq(lookup(bin, l.off), "cpa_fx_local_helper");
	ck_assert_str_eq(lookup(bin, a.off), "cpa_fx_alpha");
	symbin__free(bin);
	tmp_teardown();
}
END_TEST

START_TEST(test_debug_file_debuglink)
{
	struct fx_fn l = fx_local();
	char so[512], dbg[512], empty[512];
	struct symbin *bin;

	tmp_setup();
	snprintf(so, sizeof(so), "%s/lib2.so", tmpdir);
	snprintf(dbg, sizeof(dbg), "%s/lib2.debug", tmpdir);
	snprintf(empty, sizeof(empty), "%s/empty", tmpdir);
	run_sh("mkdir -p '%s/.debug' '%s' && cp '%s' '%s'", tmpdir, empty, FX_SO, so);
	run_sh("objcopy --only-keep-debug '%s' '%s'", so, dbg);
	run_sh("cd '%s' && objcopy --strip-all --add-gnu-debuglink=lib2.debug lib2.so", tmpdir);

	/* same directory */
	bin = load_path(so, empty, NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert(bin->src & SYMBIN_SRC_DEBUGLINK);
	ck_assert_str_eq(lookup(bin, l.off), "cpa_fx_local_helper");
	symbin__free(bin);

	/* .debug/ subdirectory */
	run_sh("mv '%s' '%s/.debug/'", dbg, tmpdir);
	bin = load_path(so, empty, NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert(bin->src & SYMBIN_SRC_DEBUGLINK);
	ck_assert_str_eq(lookup(bin, l.off), "cpa_fx_local_helper");
	symbin__free(bin);

	/* a debug file of another binary is refused (build-id mismatch) */
	run_sh("cp /bin/true '%s/.debug/lib2.debug'", tmpdir);
	bin = load_path(so, empty, NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert(!(bin->src & SYMBIN_SRC_DEBUGLINK));
	ck_assert_str_ne(lookup(bin, l.off), "cpa_fx_local_helper");
	symbin__free(bin);
	tmp_teardown();
}
END_TEST

/*
 * Files of other processes, as those see them: a gone process's module is
 * read at our path only when that is the mapped file (dev + inode, else the
 * build-id); a live process under another root only through its root, never
 * at our path, even when the file is there.
 */
START_TEST(test_other_process_paths)
{
	struct symd_paths paths = {.debug_root = "/nonexistent"};
	struct symd_file_ref ref = {.path = FX_SO};
	struct symbin *b = NULL, *own;
	char proc[512], root[512];
	struct stat st;

	tmp_setup();
	snprintf(proc, sizeof(proc), "%s/proc", tmpdir);
	snprintf(root, sizeof(root), "%s/root", tmpdir);
	run_sh("mkdir -p '%s/4243' '%s' && ln -s '%s' '%s/4243/root'", proc, root, root, proc);
	paths.proc = proc;
	ck_assert_int_eq(stat(FX_SO, &st), 0);
	ck_assert_int_eq(symbin__load(&paths, &ref, &own), 0); /* no process: our path */
	ck_assert_uint_gt(own->build_id_len, 0);

	/* pid 4242 is gone (no proc/4242). */
	ref.pid = 4242;
	ref.dev = st.st_dev;
	ref.ino = st.st_ino;
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), 0);
	symbin__free(b);
	ref.ino = st.st_ino + 1; /* another file at our path */
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), -ESTALE);
	ref.dev = ref.ino = 0; /* nothing to tell it by */
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), -ESTALE);
	ref.build_id = own->build_id; /* known by build-id */
	ref.build_id_len = own->build_id_len;
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), 0);
	symbin__free(b);

	/* pid 4243 lives under another root that has no such file. */
	ref.pid = 4243;
	ref.dev = st.st_dev;
	ref.ino = st.st_ino;
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), -ENOENT);
	/* ... and once it has, that one. */
	run_sh("mkdir -p \"$(dirname '%s%s')\" && cp '%s' '%s%s'", root, FX_SO, FX_SO, root, FX_SO);
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), 0);
	symbin__free(b);
	symbin__free(own);
	tmp_teardown();
}
END_TEST

/*
 * A gone process of another mount namespace: its module is read under the
 * root of a live process of that namespace (the fake proc/4244, whose
 * ns/mnt's inode is the namespace), where it is stripped and its debug file
 * next to it (debuglink), rather than at our path (the unstripped build);
 * only when it is provably the file (build-id, else inode). With no live
 * process of its namespace, our path as before.
 */
START_TEST(test_gone_process_namespace_peer)
{
	struct fx_fn l = fx_local();
	struct symd_paths paths = {.debug_root = "/nonexistent"};
	struct symd_file_ref ref = {.path = FX_SO, .pid = 4242};
	char proc[512], root[512], nsmnt[600], nsso[1024];
	struct symbin *b = NULL, *own;
	struct stat st, nst, fst;

	tmp_setup();
	snprintf(proc, sizeof(proc), "%s/proc", tmpdir);
	snprintf(root, sizeof(root), "%s/root", tmpdir);
	run_sh("mkdir -p '%s/4244/ns' \"$(dirname '%s%s')\" && touch '%s/4244/ns/mnt' && "
	       "ln -s '%s' '%s/4244/root'",
	       proc, root, FX_SO, proc, root, proc);
	run_sh("objcopy --only-keep-debug '%s' '%s%s.debug' && objcopy --strip-all "
	       "--add-gnu-debuglink='%s%s.debug' '%s' '%s%s'",
	       FX_SO, root, FX_SO, root, FX_SO, FX_SO, root, FX_SO);
	paths.proc = proc;
	ck_assert_int_eq(stat(FX_SO, &st), 0);
	ck_assert_int_eq(symbin__load(&paths, &(struct symd_file_ref){.path = FX_SO}, &own), 0);
	ck_assert(own->src & SYMBIN_SRC_SYMTAB);
	snprintf(nsmnt, sizeof(nsmnt), "%s/4244/ns/mnt", proc);
	ck_assert_int_eq(stat(nsmnt, &nst), 0);
	snprintf(nsso, sizeof(nsso), "%s%s", root, FX_SO);

	/* Known by build-id: the namespace's file, its debug file there. */
	ref.build_id = own->build_id;
	ref.build_id_len = own->build_id_len;
	ref.mnt_ns = (uint32_t)nst.st_ino;
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), 0);
	ck_assert(!(b->src & SYMBIN_SRC_SYMTAB));
	ck_assert(b->src & SYMBIN_SRC_DEBUGLINK);
	ck_assert_str_eq(lookup(b, l.off), "cpa_fx_local_helper");
	symbin__free(b);

	/* By dev and inode (ours): the namespace's file is another inode, so
	 * not taken; ours is the very file. */
	ref.build_id = NULL;
	ref.build_id_len = 0;
	ref.dev = st.st_dev;
	ref.ino = st.st_ino;
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), 0);
	ck_assert(b->src & SYMBIN_SRC_SYMTAB);
	symbin__free(b);

	/* By the namespace file's inode number on another dev (another
	 * filesystem's file with that number; the peer found by a reused
	 * namespace id): neither that file nor ours. */
	ck_assert_int_eq(stat(nsso, &fst), 0);
	ref.dev = fst.st_dev + 7;
	ref.ino = fst.st_ino;
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), -ESTALE);

	/* Its namespace has nobody left: our path, as before. */
	ref.build_id = own->build_id;
	ref.build_id_len = own->build_id_len;
	ref.dev = ref.ino = 0;
	ref.mnt_ns = (uint32_t)nst.st_ino + 1;
	ck_assert_int_eq(symbin__load(&paths, &ref, &b), 0);
	ck_assert(b->src & SYMBIN_SRC_SYMTAB);
	ck_assert(!(b->src & SYMBIN_SRC_DEBUGLINK));
	symbin__free(b);
	symbin__free(own);
	tmp_teardown();
}
END_TEST

START_TEST(test_minidebuginfo)
{
	struct fx_fn l = fx_local();
	char so[512], empty[512];
	struct symbin *bin;

	ck_assert_msg(system("command -v xz >/dev/null 2>&1") == 0,
		      "xz not installed (scripts/deps.sh installs xz-utils)");
	tmp_setup();
	snprintf(so, sizeof(so), "%s/lib3.so", tmpdir);
	snprintf(empty, sizeof(empty), "%s/empty", tmpdir);
	run_sh("mkdir -p '%s' && cp '%s' '%s'", empty, FX_SO, so);
	/* The Fedora recipe, reduced: a symtab-only ELF, xz'd, as .gnu_debugdata. */
	run_sh("cd '%s' && objcopy --only-keep-debug lib3.so mini && objcopy --strip-debug mini && "
	       "xz mini && objcopy --strip-all --add-section .gnu_debugdata=mini.xz lib3.so",
	       tmpdir);
	bin = load_path(so, empty, NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert(bin->src & SYMBIN_SRC_MINIDEBUG);
	ck_assert_str_eq(lookup(bin, l.off), "cpa_fx_local_helper");
	symbin__free(bin);
	tmp_teardown();
}
END_TEST

START_TEST(test_go_binary)
{
	struct fx_fn b = fx_fn("cpa_fx_beta", "cpa_fx_beta");
	char so[512];
	struct symbin *bin;
	const char *name;
	uint64_t so_off;

	/* A Go-looking binary: the Go section marker and a Go symbol name (the
	 * renamed function keeps its size). */
	tmp_setup();
	snprintf(so, sizeof(so), "%s/go.so", tmpdir);
	run_sh("cd '%s' && printf 'go1.22' > bi && objcopy --add-section .go.buildinfo=bi "
	       "--redefine-sym 'cpa_fx_beta=github.com/acme/proj/pkg.(*T).Method' '%s' go.so",
	       tmpdir, FX_SO);
	bin = load_path(so, tmpdir, NULL);
	ck_assert_ptr_nonnull(bin);
	ck_assert(bin->is_go);
	ck_assert_int_eq(symbin__lookup(bin, b.off, false, &name, &so_off), 0);
	ck_assert_str_eq(name, "pkg.(*T).Method");
	symbin__free(bin);
	/* --strip_name_disable keeps the full name */
	bin = load_path(so, tmpdir, NULL);
	ck_assert_int_eq(symbin__lookup(bin, b.off, true, &name, &so_off), 0);
	ck_assert_str_eq(name, "github.com/acme/proj/pkg.(*T).Method");
	symbin__free(bin);
	tmp_teardown();
}
END_TEST

/* ---- hostile ELF ---- */

static void spew(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

static Elf64_Shdr *find_sh(uint8_t *img, uint32_t type)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Shdr *sh = (Elf64_Shdr *)(img + eh->e_shoff);
	unsigned int i;

	for (i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == type)
			return &sh[i];
	ck_abort_msg("no section of type %u", type);
	return NULL;
}

/* Write a patched copy; loading it must fail cleanly with a negative errno. */
static int load_patched(const uint8_t *orig, size_t len, size_t keep, void (*patch)(uint8_t *img))
{
	uint8_t *img = malloc(len);
	char path[512];
	int err = 0;
	struct symbin *b;

	memcpy(img, orig, len);
	if (patch)
		patch(img);
	snprintf(path, sizeof(path), "%s/hostile.so", tmpdir);
	spew(path, img, keep);
	b = load_path(path, tmpdir, &err);
	symbin__free(b);
	/* the in-memory reader must agree */
	if (symbin__load_mem(img, keep, &b) == 0)
		symbin__free(b);
	free(img);
	return err;
}

static void patch_shoff(uint8_t *img)
{
	((Elf64_Ehdr *)img)->e_shoff = 0xfffffffff000ull;
}

static void patch_symtab_size(uint8_t *img)
{
	find_sh(img, SHT_SYMTAB)->sh_size = 0x7ffffffff0ull * sizeof(Elf64_Sym) / 24;
}

static void patch_symtab_off(uint8_t *img)
{
	find_sh(img, SHT_SYMTAB)->sh_offset = 0x7fffffff00ull;
}

static void patch_symtab_link(uint8_t *img)
{
	find_sh(img, SHT_SYMTAB)->sh_link = 60000;
}

static void patch_strtab_off(uint8_t *img)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Shdr *sh = (Elf64_Shdr *)(img + eh->e_shoff);

	sh[find_sh(img, SHT_SYMTAB)->sh_link].sh_offset = 0xffffffffffff0000ull;
}

static void patch_shnum_ext(uint8_t *img)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Shdr *sh = (Elf64_Shdr *)(img + eh->e_shoff);

	eh->e_shnum = 0;
	sh[0].sh_size = 0xffffffffull; /* extended count: 4 G sections */
}

static void patch_entsize(uint8_t *img)
{
	find_sh(img, SHT_SYMTAB)->sh_entsize = 7;
}

static void patch_phoff(uint8_t *img)
{
	((Elf64_Ehdr *)img)->e_phoff = 0xfffffffffff0ull;
}

static void patch_class32(uint8_t *img)
{
	img[EI_CLASS] = ELFCLASS32;
}

static void patch_symname(uint8_t *img)
{
	Elf64_Shdr *s = find_sh(img, SHT_SYMTAB);
	Elf64_Sym *sym = (Elf64_Sym *)(img + s->sh_offset);
	uint64_t i;

	/* names pointing past the string table: symbols skipped, no crash */
	for (i = 0; i < s->sh_size / sizeof(*sym); i++)
		sym[i].st_name = 0x7fffffff;
}

START_TEST(test_hostile_elf)
{
	size_t len;
	uint8_t *orig = (uint8_t *)test_slurp(FX_SO, &len);
	struct symbin *b;
	char path[512];
	int err;

	tmp_setup();
	/* truncated: header only, half, no section headers */
	ck_assert_int_lt(load_patched(orig, len, 40, NULL), 0);
	ck_assert_int_lt(load_patched(orig, len, sizeof(Elf64_Ehdr) + 8, NULL), 0);
	ck_assert_int_lt(load_patched(orig, len, len / 2, NULL), 0);
	ck_assert_int_lt(load_patched(orig, len, len - 1, NULL), 0);
	/* headers pointing out of the file, huge counts */
	ck_assert_int_lt(load_patched(orig, len, len, patch_shoff), 0);
	ck_assert_int_lt(load_patched(orig, len, len, patch_phoff), 0);
	ck_assert_int_lt(load_patched(orig, len, len, patch_symtab_size), 0);
	ck_assert_int_lt(load_patched(orig, len, len, patch_symtab_off), 0);
	ck_assert_int_lt(load_patched(orig, len, len, patch_symtab_link), 0);
	ck_assert_int_lt(load_patched(orig, len, len, patch_strtab_off), 0);
	ck_assert_int_eq(load_patched(orig, len, len, patch_shnum_ext), -E2BIG);
	ck_assert_int_lt(load_patched(orig, len, len, patch_entsize), 0);
	ck_assert_int_lt(load_patched(orig, len, len, patch_class32), 0);
	/* bad names only: loads, with the symtab names skipped */
	ck_assert_int_eq(load_patched(orig, len, len, patch_symname), 0);

	/* not an ELF at all; a directory; a missing file */
	snprintf(path, sizeof(path), "%s/garbage", tmpdir);
	spew(path, "\177ELF garbage garbage garbage garbage garbage garbage garbage", 60);
	ck_assert_ptr_null(load_path(path, tmpdir, &err));
	ck_assert_int_lt(err, 0);
	ck_assert_ptr_null(load_path(tmpdir, tmpdir, &err));
	ck_assert_ptr_null(load_path("/nonexistent/lib.so", tmpdir, &err));
	ck_assert_int_eq(err, -ENOENT);
	ck_assert_int_ne(symbin__load_mem("\177ELF", 4, &b), 0);

	free(orig);
	tmp_teardown();
}
END_TEST

START_TEST(test_bincache_counts_and_evicts)
{
	struct symd_paths paths = {.debug_root = "/nonexistent"};
	struct symd_file_ref ref = {.path = FX_SO};
	struct symd_file_ref bad = {.path = "/nonexistent/x.so"};
	struct bincache_stats st;
	struct bincache *c;
	struct symbin *b;

	ck_assert_int_eq(bincache__new(1, &paths, &c), 0); /* everything is over budget */
	b = bincache__get(c, &ref, 0, 0, 1);
	ck_assert_ptr_nonnull(b);
	/* same key: the same table, no reload */
	ck_assert_ptr_eq(bincache__get(c, &ref, 0, 0, 2), b);
	ck_assert_ptr_null(bincache__get(c, &bad, 0, 0, 3));
	ck_assert_ptr_null(bincache__get(c, &bad, 0, 0, 4)); /* negative entry, no retry */
	bincache__stats(c, &st);
	ck_assert_uint_eq(st.open_fail, 1);
	/* two attempts, one binary: only a load that gives one may change an
	 * answer (symd empties its pc cache on those alone) */
	ck_assert_uint_eq(st.loads, 2);
	ck_assert_uint_eq(st.loaded, 1);
	/* the failed entry pushed the fixture out (LRU, budget 1 byte) */
	ck_assert_uint_ge(st.evictions, 1);
	/* no load changed an answer given: the fixture was asked for first when
	 * it loaded, and again after its eviction (the same answer) */
	ck_assert_uint_eq(st.refreshed, 0);
	bincache__free(c);
}
END_TEST

/*
 * symd empties its pc cache only when a load changes an answer given: a key
 * that had no binary now has one. The first load of a binary does not (under
 * churn new binaries load every second), a retried failure that loads does.
 */
START_TEST(test_bincache_refreshed)
{
	struct symd_paths paths = {.debug_root = "/nonexistent"};
	struct symd_file_ref ref = {.path = FX_SO};
	struct symd_file_ref late = {.path = NULL};
	struct bincache_stats st;
	struct bincache *c;
	char dir[PATH_MAX], path[PATH_MAX + 64], cmd[3 * PATH_MAX];

	test_scratch_in(dir, sizeof(dir), "bincache");
	snprintf(path, sizeof(path), "%s/late.so", dir);
	late.path = path;
	ck_assert_int_eq(bincache__new(64u << 20, &paths, &c), 0);
	ck_assert_ptr_nonnull(bincache__get(c, &ref, 0, 0, 1));
	ck_assert_ptr_null(bincache__get(c, &late, 0, 0, 2)); /* not there yet */
	bincache__stats(c, &st);
	ck_assert_uint_eq(st.loaded, 1);
	ck_assert_uint_eq(st.refreshed, 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", FX_SO, path);
	ck_assert_int_eq(system(cmd), 0);
	/* the negative entry holds until its retry time, then the file loads */
	ck_assert_ptr_null(bincache__get(c, &late, 0, 0, 3));
	ck_assert_ptr_nonnull(bincache__get(c, &late, 0, 0, 2 + 31 * NSEC_PER_SEC));
	bincache__stats(c, &st);
	ck_assert_uint_eq(st.loaded, 2);
	ck_assert_uint_eq(st.refreshed, 1);
	test_rm_rf(dir);
	bincache__free(c);
}
END_TEST

/* File offset of the symbol called name in b, 0 if none. */
static uint64_t sym_off(const struct symbin *b, const char *name)
{
	uint32_t i, j;

	for (i = 0; i < b->nsyms; i++) {
		if (strcmp(b->pool + b->syms[i].name, name))
			continue;
		for (j = 0; j < b->nloads; j++) {
			const struct symd_load *l = &b->loads[j];

			if (b->syms[i].addr >= l->vaddr && b->syms[i].addr < l->vaddr + l->filesz)
				return b->syms[i].addr - l->vaddr + l->off;
		}
	}
	return 0;
}

#define FORGED_BID "0x0123456789abcdef0123456789abcdef01234567"

/*
 * Two different libraries with one (forged) build-id: the attacker's, seen
 * first, must not name the victim's frames. Each file gets its own table;
 * the same file (dev + inode) shares one, a byte copy of the victim loads on
 * its own without being taken for a conflict; the forgery is counted once.
 */
START_TEST(test_bincache_forged_build_id)
{
	static const uint8_t bid[20] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23,
					0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67};
	struct symd_paths paths = {.debug_root = "/nonexistent"};
	char evil[512], victim[512], copy[512];
	struct symd_file_ref ref_e, ref_v, ref_c;
	struct symbin *be, *bv, *bc, *own;
	struct bincache_stats st;
	struct stat se, sv, sc;
	struct bincache *c;
	uint64_t off;

	tmp_setup();
	snprintf(evil, sizeof(evil), "%s/libevil.so", tmpdir);
	snprintf(victim, sizeof(victim), "%s/libvictim.so", tmpdir);
	snprintf(copy, sizeof(copy), "%s/libvictim-copy.so", tmpdir);
	run_sh("cd '%s' && "
	       "printf 'void EVIL_fake_name_A(void) { for (volatile int i = 0; i < 9; i++) ; }\\n' "
	       "> evil.c && "
	       "printf 'void leaf_spin(void) { for (volatile int i = 0; i < 9; i++) ; }\\n' "
	       "> victim.c && "
	       "cc -O1 -shared -fPIC -Wl,--build-id=" FORGED_BID " -o libevil.so evil.c && "
	       "cc -O1 -shared -fPIC -Wl,--build-id=" FORGED_BID " -o libvictim.so victim.c && "
	       "cp libvictim.so libvictim-copy.so",
	       tmpdir);
	ck_assert_int_eq(stat(evil, &se), 0);
	ck_assert_int_eq(stat(victim, &sv), 0);
	ck_assert_int_eq(stat(copy, &sc), 0);
	own = load_path(victim, "/nonexistent", NULL);
	ck_assert_ptr_nonnull(own);
	ck_assert_uint_eq(own->build_id_len, sizeof(bid));
	ck_assert_mem_eq(own->build_id, bid, sizeof(bid));
	off = sym_off(own, "leaf_spin");
	ck_assert_uint_ne(off, 0);
	symbin__free(own);

	ref_e = (struct symd_file_ref){.path = evil,
				       .dev = se.st_dev,
				       .ino = se.st_ino,
				       .build_id = bid,
				       .build_id_len = sizeof(bid)};
	ref_v = ref_e;
	ref_v.path = victim;
	ref_v.dev = sv.st_dev;
	ref_v.ino = sv.st_ino;
	ref_c = ref_e;
	ref_c.path = copy;
	ref_c.dev = sc.st_dev;
	ref_c.ino = sc.st_ino;

	ck_assert_int_eq(bincache__new(64u << 20, &paths, &c), 0);
	be = bincache__get(c, &ref_e, ref_e.dev, ref_e.ino, 1);
	ck_assert_ptr_nonnull(be);
	ck_assert_str_eq(lookup(be, off), "EVIL_fake_name_A");
	bv = bincache__get(c, &ref_v, ref_v.dev, ref_v.ino, 2);
	ck_assert_ptr_nonnull(bv);
	ck_assert_ptr_ne(bv, be);
	ck_assert_str_eq(lookup(bv, off), "leaf_spin");
	/* The attacker's still names its own. */
	ck_assert_str_eq(lookup(bincache__get(c, &ref_e, ref_e.dev, ref_e.ino, 3), off),
			 "EVIL_fake_name_A");
	bincache__stats(c, &st);
	ck_assert_uint_eq(st.loads, 2);
	ck_assert_uint_eq(st.bid_conflicts, 1);

	/* The victim's file again (another process mapping it): shared. */
	ck_assert_ptr_eq(bincache__get(c, &ref_v, ref_v.dev, ref_v.ino, 4), bv);
	bincache__stats(c, &st);
	ck_assert_uint_eq(st.loads, 2);

	/* A copy (another inode, same bytes): its own table, its own names,
	 * no conflict. */
	bc = bincache__get(c, &ref_c, ref_c.dev, ref_c.ino, 5);
	ck_assert_ptr_nonnull(bc);
	ck_assert_str_eq(lookup(bc, off), "leaf_spin");
	bincache__stats(c, &st);
	ck_assert_uint_eq(st.loads, 3);
	ck_assert_uint_eq(st.bid_conflicts, 1);
	bincache__free(c);
	tmp_teardown();
}
END_TEST

/* ---- kallsyms, perf maps, env, names ---- */

START_TEST(test_kallsyms)
{
	struct ksyms k = {0};
	const char *name, *mod;
	uint64_t start;

	ck_assert_int_eq(ksyms__load(&k, FX_DIR "/kallsyms"), 0);
	ck_assert(!k.zeroed);
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff81000150ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "do_one_thing");
	ck_assert_ptr_null(mod);
	ck_assert_uint_eq(start, 0xffffffff81000100ull);
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff81000100ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "do_one_thing");
	/* data symbols are not text: helper_two covers up to after_data */
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff81000308ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "helper_two");
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffffc0001010ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "mod_func");
	ck_assert_str_eq(mod, "mymod");
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffffc0002004ull, &name, &mod, &start), 0);
	ck_assert_str_eq(mod, "othermod");
	ck_assert_int_eq(ksyms__lookup(&k, 0x1000, &name, &mod, &start), -ENOENT);
	ksyms__fini(&k);

	ck_assert_int_eq(ksyms__load(&k, FX_DIR "/kallsyms_zeroed"), 0);
	ck_assert(k.zeroed);
	ck_assert_int_eq(ksyms__lookup(&k, 0, &name, &mod, &start), -ENOENT);
	ksyms__fini(&k);
	ck_assert_int_lt(ksyms__load(&k, "/nonexistent/kallsyms"), 0);

	ck_assert_uint_ne(ksyms__modules_hash(FX_DIR "/kallsyms"), 0);
	ck_assert_uint_eq(ksyms__modules_hash("/nonexistent"), 0);
}
END_TEST

/* The compact table: "__pfx_foo" named "foo", far vmlinux symbols (other
 * upper 32 bits) in the side table, a line too long for the read buffer
 * skipped, the last line without a newline. */
START_TEST(test_kallsyms_compact)
{
	char path[512], *big;
	struct ksyms k = {0};
	const char *name, *mod;
	uint64_t start;
	FILE *f;
	size_t i;

	tmp_setup();
	snprintf(path, sizeof(path), "%s/kallsyms", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("ffffffff81000000 T _stext\n"
	      "ffffffff81000010 t __pfx_foo\n"
	      "ffffffff81000020 t foo\n"
	      "ffffffff81000030 W weak_fn\n"
	      "ffffffff81000040 d data_x\n",
	      f);
	big = malloc(100000);
	ck_assert_ptr_nonnull(big);
	for (i = 0; i < 99999; i++)
		big[i] = 'x';
	big[99999] = '\0';
	fprintf(f, "ffffffff81000050 T %s\n", big);
	free(big);
	fputs("ffffffffc0001000 t mod_a\t[m1]\n"
	      "ffff800000001000 T far_fn\n"
	      "ffffffff81000100 T after_long",
	      f);
	fclose(f);

	ck_assert_int_eq(ksyms__load(&k, path), 0);
	ck_assert_uint_eq(k.n, 4); /* _stext foo (with its pad) weak_fn after_long */
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff8100000cull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "_stext");
	ck_assert_uint_eq(k.nfar, 2);
	/* the padding before foo is the entry of a call to foo */
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff81000018ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "foo");
	ck_assert_uint_eq(start, 0xffffffff81000010ull);
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff81000024ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "foo");
	ck_assert_uint_eq(start, 0xffffffff81000020ull);
	ck_assert_ptr_null(mod);
	/* data is not text; the over-long line is gone */
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff81000058ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "weak_fn");
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffff81000104ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "after_long");
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffffc0001008ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "mod_a");
	ck_assert_str_eq(mod, "m1");
	/* far below the compact table: its own symbol covers up to _stext */
	ck_assert_int_eq(ksyms__lookup(&k, 0xffff800000001234ull, &name, &mod, &start), 0);
	ck_assert_str_eq(name, "far_fn");
	ck_assert_uint_eq(start, 0xffff800000001000ull);
	ck_assert_int_eq(ksyms__lookup(&k, 0xffff800000000fffull, &name, &mod, &start), -ENOENT);
	/* past the last symbol only its 1 MiB */
	ck_assert_int_eq(ksyms__lookup(&k, 0xffffffffc0201000ull, &name, &mod, &start), -ENOENT);
	ck_assert_uint_gt(ksyms__bytes(&k), 0);
	ksyms__fini(&k);
	ck_assert_uint_eq(ksyms__bytes(&k), 0);
	tmp_teardown();
}
END_TEST

START_TEST(test_perf_map)
{
	struct jitmap *j;
	uint64_t start;

	ck_assert_int_eq(jitmap__load("", FX_DIR "/perf.map", SIZE_MAX, NULL, &j), 0);
	/* the later line for the same start wins (recompiled code) */
	ck_assert_str_eq(jitmap__lookup(j, 0x7f0000001010ull, &start),
			 "LazyCompile:*foo_recompiled /app/x.js:1");
	ck_assert_uint_eq(start, 0x7f0000001000ull);
	ck_assert_str_eq(jitmap__lookup(j, 0x7f000000117full, &start), "Interpreter:bar");
	ck_assert_ptr_null(jitmap__lookup(j, 0x7f0000001180ull, &start));
	ck_assert_ptr_null(jitmap__lookup(j, 0x7f0000002000ull, &start));
	ck_assert_ptr_null(jitmap__lookup(j, 0x10, &start));
	jitmap__free(j);
}
END_TEST

/* Overlapping ranges: the later line wins over the whole of its range; lines
 * appended later name only the samples taken after the read before them. */
START_TEST(test_perf_map_overlap_time)
{
	struct jitmap *j;
	uint64_t start, t0, t1 = 0;
	char path[PATH_MAX];
	FILE *f;

	tmp_setup();
	snprintf(path, sizeof(path), "%s/perf-1.map", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	/* old: a long function; then code at a higher start inside it, then a
	 * function that took the old one's start back */
	fputs("1000 1000 old\n1800 100 mid\n1000 200 new_low\nffff", f);
	fclose(f);
	ck_assert_int_eq(jitmap__load("", path, SIZE_MAX, NULL, &j), 0);
	t0 = jitmap__read_ns(j);
	ck_assert_str_eq(jitmap__lookup(j, 0x1100, &start), "new_low");
	ck_assert_str_eq(jitmap__lookup(j, 0x1810, &start), "mid");
	ck_assert_uint_eq(start, 0x1800);
	ck_assert_str_eq(jitmap__lookup(j, 0x1900, &start), "old");
	ck_assert_uint_eq(start, 0x1000);
	ck_assert_ptr_null(jitmap__lookup(j, 0x2000, &start));
	/* nothing new */
	ck_assert_int_eq(jitmap__update(j, "", path, SIZE_MAX, NULL, t0 + 1, 0), 0);
	/* the JIT finishes the partial line and reuses old's tail for "later" */
	f = fopen(path, "a");
	fputs(" 10 partial\n1900 80 later\n", f);
	fclose(f);
	t1 = t0 + 10 * 1000000000ull;
	ck_assert_int_eq(jitmap__update(j, "", path, SIZE_MAX, NULL, t1, 0), 1);
	ck_assert_uint_eq(jitmap__read_ns(j), t1);
	ck_assert_str_eq(jitmap__lookup(j, 0xffff, &start), "partial");
	/* a sample before the read that found it: the code it replaced */
	ck_assert_str_eq(jitmap__lookup_at(j, 0x1910, t0 - 1000, &start), "old");
	ck_assert_str_eq(jitmap__lookup_at(j, 0x1910, t0 + 5, &start), "later");
	ck_assert_str_eq(jitmap__lookup(j, 0x1910, &start), "later");
	/* the entries of the first load name samples of any time */
	ck_assert_str_eq(jitmap__lookup_at(j, 0x1810, 1, &start), "mid");
	/* only code newer than the sample covers it: the first of it */
	ck_assert_str_eq(jitmap__lookup_at(j, 0xffff, t0 - 1000, &start), "partial");
	/* replaced under the same name: load it again */
	ck_assert_int_eq(unlink(path), 0);
	f = fopen(path, "w");
	fputs("1000 10 x\n", f);
	fclose(f);
	ck_assert_int_eq(jitmap__update(j, "", path, SIZE_MAX, NULL, t1 + 1, 0), -ESTALE);
	/* a JIT that rewrites its map (HotSpot): the known entries keep their
	 * time, the others are new */
	f = fopen(path, "w");
	fputs("1800 100 mid\n1800 100 mid2\n", f);
	fclose(f);
	ck_assert_int_eq(jitmap__update(j, "", path, SIZE_MAX, NULL, t1 + 2, JITMAP_REREAD), 1);
	ck_assert_str_eq(jitmap__lookup_at(j, 0x1810, t1 - 1, &start), "mid");
	ck_assert_str_eq(jitmap__lookup_at(j, 0x1810, t1 + 5, &start), "mid2");
	ck_assert_int_eq(jitmap__update(j, "", path, SIZE_MAX, NULL, t1 + 3, JITMAP_REREAD), 0);
	ck_assert_uint_gt(jitmap__bytes(j), 0);
	jitmap__free(j);
	tmp_teardown();
}
END_TEST

START_TEST(test_env_pick)
{
	static const char env[] = "A=1\0HOME=/root\0APP_ENV=prod\0EMPTY=\0";
	size_t len;
	const char *v;

	v = env_label_pick(env, sizeof(env), "NOPE,APP_ENV,HOME", &len);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(strncmp(v, "prod", len), 0);
	ck_assert_uint_eq(len, 4);
	v = env_label_pick(env, sizeof(env), "HOME,APP_ENV", &len);
	ck_assert_int_eq(strncmp(v, "/root", len), 0);
	ck_assert_ptr_null(env_label_pick(env, sizeof(env), "HOM,APP", &len));
	ck_assert_ptr_null(env_label_pick(env, sizeof(env), "", &len));
}
END_TEST

static const char *fmt(const char *raw, bool go, bool keep)
{
	static char buf[SYMD_MAX_NAME + 1];

	symd_name__format(raw, go, keep, buf, sizeof(buf));
	return buf;
}

START_TEST(test_names)
{
	/* raw name, from a Go binary, --strip_name_disable -> the name shown */
	static const struct {
		const char *raw;
		bool go, keep;
		const char *want;
	} cases[] = {
		/* C++ */
		{"_ZN3foo3barEv", false, false, "foo::bar"},
		{"_ZNSt6vectorIiSaIiEE9push_backERKi", false, false,
		 "std::vector<int, std::allocator<int> >::push_back"},
		{"_ZN3foo3barEv.cold", false, false, "foo::bar"},
		/* Rust legacy (hash dropped) and v0 */
		{"_ZN4core3fmt5write17h0123456789abcdefE", false, false, "core::fmt::write"},
		{"_RNvNtCs1234_7mycrate3foo3bar", false, false, "mycrate::foo::bar"},
		/* plain C and garbage that only looks mangled stay as they are */
		{"main", false, false, "main"},
		{"_Zgarbage", false, false, "_Zgarbage"},
		/* Go: package path shortened unless --strip_name_disable */
		{"github.com/x/y/pkg.(*T).Method", true, false, "pkg.(*T).Method"},
		{"github.com/x/y/pkg.(*T).Method", true, true, "github.com/x/y/pkg.(*T).Method"},
		{"runtime.mallocgc", true, false, "runtime.mallocgc"},
		/* an assembly function's ABI suffix, as Go's own tables name it */
		{"runtime.goexit.abi0", true, true, "runtime.goexit"},
		{"runtime.goexit.abi0", false, false, "runtime.goexit.abi0"},
		{"main.main.func1", true, false, "main.main.func1"},
		{"example.com/a/b.Map[go.shape.string,github.com/c/d.T]", true, false,
		 "b.Map[go.shape.string,github.com/c/d.T]"},
		{"gopkg.in/yaml%2ev3.(*parser).parse", true, false, "yaml%2ev3.(*parser).parse"},
		/* symbol versions are dropped */
		{"pthread_create@@GLIBC_2.34", false, false, "pthread_create"},
		{"memcpy@GLIBC_2.2.5", false, false, "memcpy"},
		{"_ZN3foo3barEv@@V1", false, false, "foo::bar"},
		/* a C name with a slash in a non-Go binary is left alone */
		{"a/b.c", false, false, "a/b.c"},
	};
	char longname[3000];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		ck_assert_str_eq(fmt(cases[i].raw, cases[i].go, cases[i].keep), cases[i].want);
	/* over-long names are cut, not overflowed */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_uint_eq(strlen(fmt(longname, false, false)), SYMD_MAX_NAME);
	ck_assert_str_eq(symd_basename("/usr/lib/libc.so.6"), "libc.so.6");
	ck_assert_str_eq(symd_basename("[vdso]"), "[vdso]");
}
END_TEST

/* ---- the stage over a real arena ---- */

#define H_IDS (1u << 19)

struct harness {
	struct shm_arena *a;
	struct cpa_config *cfg;
	struct shm_stage *st;
	struct shm_ring_prod up;   /* we play unwindd */
	struct shm_ring_cons down; /* and the storer */
	struct shm_ring_cons in;   /* symd's ends */
	struct shm_ring_prod out;
	struct symd *s;
	const char *ks_path; /* kallsyms and modules files; the fixture if NULL */
	const char *mods_path;
	uint64_t seq;
	/* what the storer learned, by id (H_IDS of each; none above max_id) */
	uint32_t max_id;
	char **strs;
	struct cpa_frame_def *frames;
	bool *frame_ok;
	uint32_t **stacks;
	uint16_t *stack_n, *stack_nk;
	bool mod_ok[256];
	char *mod_path[256];
	struct cpa_sample_out samples[64];
	unsigned int nsamples;
	unsigned int nresets;
	uint64_t last_epoch;
	struct cpa_dict_reset last_reset;
	unsigned int nloss;
	uint64_t lost; /* the counts of every loss record */
	struct cpa_loss last_loss;
	struct cpa_sample_out last_sample;
	uint64_t last_seq;
	uint32_t pid; /* of the samples, 0: ours */
};

static void h_forget(struct harness *h)
{
	unsigned int i;

	for (i = 0; i <= h->max_id && i < H_IDS; i++) {
		free(h->strs[i]);
		h->strs[i] = NULL;
		free(h->stacks[i]);
		h->stacks[i] = NULL;
		h->stack_n[i] = 0;
		h->frame_ok[i] = false;
	}
	h->max_id = 0;
	for (i = 0; i < 256; i++) {
		free(h->mod_path[i]);
		h->mod_path[i] = NULL;
		h->mod_ok[i] = false;
	}
}

static void h_start(struct harness *h, uint32_t generation)
{
	struct symd_opts o = {
		.cfg = h->cfg,
		.stage = h->st,
		.in = &h->in,
		.out = &h->out,
		.generation = generation,
		.paths = {.kallsyms = h->ks_path ? h->ks_path : FX_DIR "/kallsyms",
			  .modules = h->mods_path ? h->mods_path : FX_DIR "/kallsyms",
			  .debug_root = "/nonexistent"},
	};

	ck_assert_int_eq(shm_arena__open_cons(h->a, SHM_RING_UNWIND, &h->in), 0);
	ck_assert_int_eq(shm_arena__open_prod(h->a, SHM_RING_SYMD, &h->out), 0);
	ck_assert_int_eq(symd__new(&o, &h->s), 0);
}

static struct harness *h_new_ks(uint32_t flags, const char *env_keys, const char *ks,
				const char *mods)
{
	struct harness *h = calloc(1, sizeof(*h));
	struct shm_layout l;

	ck_assert_ptr_nonnull(h);
	h->strs = calloc(H_IDS, sizeof(*h->strs));
	h->frames = calloc(H_IDS, sizeof(*h->frames));
	h->frame_ok = calloc(H_IDS, sizeof(*h->frame_ok));
	h->stacks = calloc(H_IDS, sizeof(*h->stacks));
	h->stack_n = calloc(H_IDS, sizeof(*h->stack_n));
	h->stack_nk = calloc(H_IDS, sizeof(*h->stack_nk));
	ck_assert(h->strs && h->frames && h->frame_ok && h->stacks && h->stack_n && h->stack_nk);
	shm_layout__default(&l, 4096, 16);
	l.initial_pos = UINT64_MAX - 300000 + 1 - 8; /* 8-aligned, wraps inside the test */
	ck_assert_int_eq(shm_arena__create(&l, &h->a), 0);
	h->cfg = shm_arena__config(h->a);
	h->cfg->magic = CPA_CONFIG_MAGIC; /* as the monitor stamps it */
	h->cfg->version = CPA_CONFIG_VERSION;
	h->cfg->flags = flags;
	h->cfg->max_cache_size_mb = 64;
	snprintf(h->cfg->record_env_name, sizeof(h->cfg->record_env_name), "%s",
		 env_keys ? env_keys : "");
	h->st = shm_arena__stage(h->a, SHM_STAGE_SYMD);
	ck_assert_int_eq(shm_arena__open_prod(h->a, SHM_RING_UNWIND, &h->up), 0);
	ck_assert_int_eq(shm_arena__open_cons(h->a, SHM_RING_SYMD, &h->down), 0);
	h->seq = (1ull << 40) + 1;
	h->ks_path = ks;
	h->mods_path = mods;
	h_start(h, 1);
	return h;
}

static struct harness *h_new(uint32_t flags, const char *env_keys)
{
	return h_new_ks(flags, env_keys, NULL, NULL);
}

static void h_free(struct harness *h)
{
	symd__free(h->s);
	h_forget(h);
	shm_arena__free(h->a);
	free(h->strs);
	free(h->frames);
	free(h->frame_ok);
	free(h->stacks);
	free(h->stack_n);
	free(h->stack_nk);
	free(h);
}

static void h_put(struct harness *h, uint16_t type, const void *a, uint32_t alen, const void *b,
		  uint32_t blen)
{
	void *d;

	ck_assert_int_eq(shm_ring__reserve_sp(&h->up, alen + blen, type, &d), 0);
	memcpy(d, a, alen);
	if (blen)
		memcpy((uint8_t *)d + alen, b, blen);
	shm_ring__commit_sp(&h->up);
}

static void h_module(struct harness *h, uint32_t id, uint32_t kind, const char *path)
{
	struct cpa_module_def m = {.id = id, .kind = kind, .path_len = (uint32_t)strlen(path)};
	struct stat st;

	if (stat(path, &st) == 0) {
		m.dev = st.st_dev;
		m.ino = st.st_ino;
	}
	h_put(h, CPA_REC_MODULE, &m, sizeof(m), path, m.path_len);
}

static uint64_t h_frames(struct harness *h, const uint64_t *kpc, unsigned int nk,
			 const struct cpa_uframe *uf, unsigned int nu, uint16_t stop,
			 uint16_t flags)
{
	uint8_t buf[sizeof(struct cpa_frames) + 8 * 16 + sizeof(struct cpa_uframe) * 16];
	struct cpa_frames f = {
		.seq = h->seq++,
		.time_ns = 1700000000000000000ull,
		.weight = 1,
		.pid = h->pid ? h->pid : (uint32_t)getpid(),
		.tid = h->pid ? h->pid : (uint32_t)getpid(),
		.cpu = 1,
		.flags = flags,
		.n_kframes = (uint16_t)nk,
		.n_uframes = (uint16_t)nu,
		.stop_reason = stop,
	};

	snprintf(f.comm, sizeof(f.comm), "worker");
	snprintf(f.pcomm, sizeof(f.pcomm), "app");
	memcpy(buf, &f, sizeof(f));
	if (nk)
		memcpy(buf + sizeof(f), kpc, 8 * nk);
	if (nu)
		memcpy(buf + sizeof(f) + 8 * nk, uf, sizeof(*uf) * nu);
	h_put(h, CPA_REC_FRAMES, buf, (uint32_t)(sizeof(f) + 8 * nk + sizeof(*uf) * nu), NULL, 0);
	return f.seq;
}

/* Read everything symd produced, checking that every id is defined before
 * the record that uses it. */
static void h_drain(struct harness *h)
{
	struct shm_msg m;

	while (shm_ring__peek_sc(&h->down, &m) == 0) {
		switch (m.type) {
		case CPA_REC_DICT_RESET: {
			struct cpa_dict_reset d;

			memcpy(&d, m.data, sizeof(d));
			ck_assert_uint_gt(d.epoch, h->last_epoch);
			h->last_epoch = d.epoch;
			h->last_reset = d;
			h->nresets++;
			h_forget(h);
			break;
		}
		case CPA_REC_STR: {
			struct cpa_str_def d;

			memcpy(&d, m.data, sizeof(d));
			ck_assert(cpa_rec_str_ok(&d, m.len));
			ck_assert(d.id > 0 && d.id < H_IDS);
			ck_assert_ptr_null(h->strs[d.id]); /* defined once per epoch */
			h->strs[d.id] = strndup((char *)m.data + sizeof(d), d.len);
			h->max_id = MAX(h->max_id, d.id);
			break;
		}
		case CPA_REC_MODULE: {
			struct cpa_module_def d;

			memcpy(&d, m.data, sizeof(d));
			ck_assert(cpa_rec_module_ok(&d, m.len));
			ck_assert(d.id > 0 && d.id < 256 && !h->mod_ok[d.id]);
			h->mod_ok[d.id] = true;
			h->mod_path[d.id] = strndup((char *)m.data + sizeof(d), d.path_len);
			break;
		}
		case CPA_REC_FRAME: {
			struct cpa_frame_def d;

			memcpy(&d, m.data, sizeof(d));
			ck_assert(d.id > 0 && d.id < H_IDS && !h->frame_ok[d.id]);
			ck_assert_msg(h->strs[d.name_id], "frame name used before definition");
			ck_assert_msg(d.module_id == 0 || h->mod_ok[d.module_id],
				      "module used before definition");
			h->frames[d.id] = d;
			h->frame_ok[d.id] = true;
			h->max_id = MAX(h->max_id, d.id);
			break;
		}
		case CPA_REC_STACK: {
			struct cpa_stack_def d;
			uint32_t i;

			memcpy(&d, m.data, sizeof(d));
			ck_assert(cpa_rec_stack_ok(&d, m.len));
			ck_assert(d.id > 0 && d.id < H_IDS && !h->stacks[d.id]);
			h->stacks[d.id] = malloc(4u * d.n_frames + 4);
			memcpy(h->stacks[d.id], (uint8_t *)m.data + sizeof(d), 4u * d.n_frames);
			for (i = 0; i < d.n_frames; i++)
				ck_assert_msg(h->frame_ok[h->stacks[d.id][i]],
					      "frame used before definition");
			h->stack_n[d.id] = d.n_frames;
			h->max_id = MAX(h->max_id, d.id);
			h->stack_nk[d.id] = d.n_kframes;
			break;
		}
		case CPA_REC_SAMPLE_OUT: {
			struct cpa_sample_out o;

			memcpy(&o, m.data, sizeof(o));
			ck_assert_msg(h->stacks[o.stack_id], "stack used before definition");
			ck_assert(h->strs[o.comm_id] && h->strs[o.pcomm_id]);
			ck_assert(o.env_id == 0 || h->strs[o.env_id]);
			ck_assert_uint_ge(o.seq, h->last_seq);
			h->last_seq = o.seq;
			if (h->nsamples < 64)
				h->samples[h->nsamples] = o;
			h->last_sample = o;
			h->nsamples++;
			break;
		}
		case CPA_REC_LOSS:
			ck_assert_uint_ge(m.len, sizeof(h->last_loss));
			memcpy(&h->last_loss, m.data, sizeof(h->last_loss));
			h->nloss++;
			h->lost += h->last_loss.count;
			/* records with a seq leave symd in seq order */
			ck_assert_uint_ge(h->last_loss.seq, h->last_seq);
			h->last_seq = h->last_loss.seq;
			break;
		default:
			ck_abort_msg("unexpected record type %u", m.type);
		}
	}
	shm_ring__release_sc(&h->down);
}

/* "k1;k2;u1;u2" leaf first, as the storer would rebuild it. */
static const char *h_stack_str(struct harness *h, uint32_t stack_id)
{
	static char buf[8192];
	size_t n = 0;
	uint32_t i;

	buf[0] = '\0';
	for (i = 0; i < h->stack_n[stack_id]; i++) {
		const struct cpa_frame_def *f = &h->frames[h->stacks[stack_id][i]];

		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s%s", i ? ";" : "",
				      h->strs[f->name_id],
				      (f->flags & CPA_FF_KERNEL) ? "_[k]" : "");
	}
	return buf;
}

static int h_batch(struct harness *h)
{
	int n = symd__batch(h->s, 256);

	ck_assert_int_ge(n, 0);
	h_drain(h);
	return n;
}

static struct cpa_uframe uf(uint32_t mod, uint64_t off, uint32_t flags)
{
	return (struct cpa_uframe){
		.pc = 0x7f0000000000ull + off, .offset = off, .module_id = mod, .flags = flags};
}

START_TEST(test_stage_symbolize)
{
	struct harness *h = h_new(0, NULL);
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	struct fx_fn b = fx_fn("cpa_fx_beta", "cpa_fx_beta");
	struct fx_fn g = fx_fn("_ZN3cpa7fixture5gammaEi", "_ZN3cpa7fixture5gammaEi");
	uint64_t kpc[2] = {0xffffffffc0001010ull, 0xffffffff81000101ull};
	struct cpa_uframe u[4];
	struct cpa_dict_reset reset = {.epoch = 5};
	char want[1024];

	h_put(h, CPA_REC_DICT_RESET, &reset, sizeof(reset), NULL, 0);
	h_module(h, 7, CPA_MOD_FILE, FX_SO);
	/* leaf in alpha; return addresses: right after beta's call (inside
	 * beta) and exactly one past gamma's end (belongs to gamma via -1) */
	u[0] = uf(7, a.off + 2, CPA_UF_LEAF);
	u[1] = uf(7, b.off + 4, 0);
	u[2] = uf(7, g.off + g.size, 0);
	u[3] = uf(99, 0x1234, 0); /* a module unwindd never defined */
	h_frames(h, kpc, 2, u, 4, CPA_STOP_END, CPA_SF_USER_REGS);
	h_frames(h, kpc, 2, u, 4, CPA_STOP_END, CPA_SF_USER_REGS);
	/* same user stack, unwinding stopped early */
	h_frames(h, NULL, 0, u, 2, CPA_STOP_NO_CFI, CPA_SF_USER_REGS);
	/* degraded: kernel stack only plus the marker */
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, CPA_SF_DEGRADED);
	/* kernel thread */
	h_frames(h, kpc + 1, 1, NULL, 0, CPA_STOP_NONE, CPA_SF_KERNEL_THREAD);

	ck_assert_int_eq(h_batch(h), 7);
	ck_assert_uint_eq(h->nresets, 1); /* the lifetime's own reset came first */
	ck_assert_uint_eq(h->nsamples, 5);

	snprintf(want, sizeof(want),
		 "mod_func [mymod]_[k];do_one_thing_[k];cpa_fx_alpha;cpa_fx_beta;"
		 "cpa::fixture::gamma;0x1234 [unknown]");
	ck_assert_str_eq(h_stack_str(h, h->samples[0].stack_id), want);
	ck_assert_uint_eq(h->stack_nk[h->samples[0].stack_id], 2);
	/* duplicate stacks intern to the same id */
	ck_assert_uint_eq(h->samples[0].stack_id, h->samples[1].stack_id);
	ck_assert_str_eq(h_stack_str(h, h->samples[2].stack_id),
			 "cpa_fx_alpha;cpa_fx_beta;[unwind stopped: no cfi]");
	ck_assert_str_eq(h_stack_str(h, h->samples[3].stack_id),
			 "mod_func [mymod]_[k];[degraded: no user stack]");
	ck_assert_str_eq(h_stack_str(h, h->samples[4].stack_id), "do_one_thing_[k]");

	/* sample fields carried over */
	ck_assert_uint_eq(h->samples[0].seq, (1ull << 40) + 1);
	ck_assert_uint_eq(h->samples[0].pid, (uint32_t)getpid());
	ck_assert_str_eq(h->strs[h->samples[0].comm_id], "worker");
	ck_assert_str_eq(h->strs[h->samples[0].pcomm_id], "app");
	ck_assert_uint_eq(h->samples[0].env_id, 0);
	/* frame details: symbol start offset, module path, flags */
	{
		const struct cpa_frame_def *f = &h->frames[h->stacks[h->samples[0].stack_id][2]];

		ck_assert_uint_eq(f->offset, a.off);
		ck_assert_str_eq(h->mod_path[f->module_id], FX_SO);
		ck_assert_uint_eq(f->flags, 0);
		f = &h->frames[h->stacks[h->samples[0].stack_id][5]];
		ck_assert_uint_eq(f->flags, CPA_FF_UNSYMBOLIZED);
	}
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_IN), 7);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_STACKS), 4);
	ck_assert_uint_ge(shm_stage__cnt(h->st, SYM_CNT_HITS), 3);
	ck_assert_uint_ge(shm_stage__cnt(h->st, SYM_CNT_MISSES), 1);
	ck_assert_uint_ge(shm_stage__cnt(h->st, SYM_CNT_KSYMS), 2);

	/* steady state: an already seen stack costs one SAMPLE_OUT only */
	{
		uint64_t out0 = shm_stage__cnt(h->st, SHM_CNT_OUT);

		h_frames(h, kpc, 2, u, 4, CPA_STOP_END, CPA_SF_USER_REGS);
		ck_assert_int_eq(h_batch(h), 1);
		ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_OUT) - out0, 1);
		ck_assert_uint_eq(h->samples[5].stack_id, h->samples[0].stack_id);
	}

	/* unwindd redefines id 7 (a new epoch of its own): cached answers for
	 * (7, offset) must not survive */
	h_put(h, CPA_REC_DICT_RESET, &reset, sizeof(reset), NULL, 0);
	h_module(h, 7, CPA_MOD_FILE, "/nonexistent/libother.so");
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 3);
	snprintf(want, sizeof(want), "0x%" PRIx64 " [libother.so]", a.off + 2);
	ck_assert_str_eq(h_stack_str(h, h->samples[6].stack_id), want);

	/* ids are sparse and only grow in unwindd: a large one is fine */
	h_module(h, 4000000000u, CPA_MOD_FILE, FX_SO);
	u[0].module_id = 4000000000u;
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 2);
	ck_assert_str_eq(h_stack_str(h, h->samples[7].stack_id), "cpa_fx_alpha");

	/* the input mark is the highest seq passed on */
	ck_assert_uint_eq(shm_ring__mark_sc(&h->in), h->seq - 1);
	h_free(h);
}
END_TEST

/* kallsyms is loaded at start and reloaded when /proc/modules changes, but
 * the modules file is only looked at while kernel frames arrive. */
START_TEST(test_stage_kallsyms_reload)
{
	static const char ks1[] = "ffffffff81000000 T _stext\n"
				  "ffffffffc0002000 T other_mod_fn\t[othermod]\n";
	static const char ks2[] = "ffffffff81000000 T _stext\n"
				  "ffffffffc0002000 T other_mod_fn\t[othermod]\n"
				  "ffffffffc0003000 t new_fn\t[newmod]\n";
	static const char ks3[] = "ffffffff81000000 T _stext\n"
				  "ffffffffc0002000 T other_mod_fn\t[othermod]\n"
				  "ffffffffc0003000 t newer_fn\t[newmod]\n";
	static const char m1[] = "othermod 4096 0 - Live 0xffffffffc0002000\n";
	static const char m2[] = "othermod 4096 0 - Live 0xffffffffc0002000\n"
				 "newmod 4096 0 - Live 0xffffffffc0003000\n";
	static const char m3[] = "othermod 4096 0 - Live 0xffffffffc0002000\n"
				 "newmod 8192 0 - Live 0xffffffffc0003000\n";
	uint64_t kpc[1] = {0xffffffffc0003010ull}, t0 = clock_ns(CLOCK_MONOTONIC);
	char ks[512], mods[512];
	struct harness *h;

	tmp_setup();
	snprintf(ks, sizeof(ks), "%s/kallsyms", tmpdir);
	snprintf(mods, sizeof(mods), "%s/modules", tmpdir);
	spew(ks, ks1, sizeof(ks1) - 1);
	spew(mods, m1, sizeof(m1) - 1);
	h = h_new_ks(0, NULL, ks, mods);
	/* loaded at start: the file may go before the first kernel frame */
	spew(ks, "", 0);
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, CPA_SF_KERNEL_THREAD);
	h_batch(h);
	ck_assert_str_eq(h_stack_str(h, h->last_sample.stack_id), "other_mod_fn [othermod]_[k]");

	spew(ks, ks2, sizeof(ks2) - 1);
	spew(mods, m2, sizeof(m2) - 1);
	symd__tick(h->s, t0 + 6000000000ull);
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, CPA_SF_KERNEL_THREAD);
	h_batch(h);
	ck_assert_str_eq(h_stack_str(h, h->last_sample.stack_id), "new_fn [newmod]_[k]");

	/* a check with nothing changed; then no kernel frame until the next
	 * one is due: the change waits for kernel frames */
	symd__tick(h->s, t0 + 12000000000ull);
	spew(ks, ks3, sizeof(ks3) - 1);
	spew(mods, m3, sizeof(m3) - 1);
	symd__tick(h->s, t0 + 18000000000ull);
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, CPA_SF_KERNEL_THREAD);
	h_batch(h);
	ck_assert_str_eq(h_stack_str(h, h->last_sample.stack_id), "new_fn [newmod]_[k]");
	symd__tick(h->s, t0 + 24000000000ull);
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, CPA_SF_KERNEL_THREAD);
	h_batch(h);
	ck_assert_str_eq(h_stack_str(h, h->last_sample.stack_id), "newer_fn [newmod]_[k]");
	h_free(h);
	tmp_teardown();
}
END_TEST

/* The pc cache starts small and grows under a large working set; answers
 * stay right across the growth. */
START_TEST(test_stage_pc_cache_grows)
{
	struct harness *h = h_new(0, NULL);
	uint64_t kpc[16], before;
	unsigned int i, j, round;

	symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
	before = shm_stage__cnt(h->st, SYM_CNT_CACHE_BYTES);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < 256; i++) {
			char want[1024];
			size_t n = 0;

			for (j = 0; j < 16; j++) {
				/* on-CPU: the first pc exact, the rest return
				 * addresses (looked up at pc - 1) */
				uint64_t pc = 0xffffffff81000100ull + i * 16 + j;
				uint64_t at = j ? pc - 1 : pc;
				const char *name = at < 0xffffffff81000200ull	? "do_one_thing"
						   : at < 0xffffffff81000400ull ? "helper_two"
										: "after_data";

				kpc[j] = pc;
				n += (size_t)snprintf(want + n, sizeof(want) - n, "%s%s_[k]",
						      j ? ";" : "", name);
			}
			h_frames(h, kpc, 16, NULL, 0, CPA_STOP_NONE, CPA_SF_KERNEL_THREAD);
			h_batch(h);
			ck_assert_str_eq(h_stack_str(h, h->last_sample.stack_id), want);
		}
	}
	symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
	ck_assert_uint_gt(shm_stage__cnt(h->st, SYM_CNT_CACHE_BYTES), before);
	h_free(h);
}
END_TEST

/* A new binary's definition changes no answer the pc cache holds: the
 * frames of known binaries (and the kernel's) stay cached across it. A
 * changed definition of an id the cache answered for empties it. */
START_TEST(test_stage_pc_cache_new_module)
{
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	uint64_t kpc[2] = {0xffffffff81000101ull, 0xffffffff81000201ull};
	struct cpa_uframe u[1] = {uf(3, a.off, CPA_UF_LEAF)};
	struct harness *h = h_new(0, NULL);
	uint64_t misses;
	uint32_t stack;

	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	h_frames(h, kpc, 2, u, 1, CPA_STOP_END, 0);
	h_batch(h);
	stack = h->last_sample.stack_id;
	misses = symd__pcc_misses(h->s);
	ck_assert_uint_eq(misses, 3);
	/* the storm's next programs: new ids, new binaries */
	for (uint32_t id = 4; id < 40; id++) {
		h_module(h, id, CPA_MOD_FILE, FX_SO);
		h_frames(h, kpc, 2, u, 1, CPA_STOP_END, 0);
		h_batch(h);
		ck_assert_uint_eq(h->last_sample.stack_id, stack);
	}
	ck_assert_uint_eq(symd__pcc_misses(h->s), misses);
	/* the same definition again: nothing changed */
	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	h_frames(h, kpc, 2, u, 1, CPA_STOP_END, 0);
	h_batch(h);
	ck_assert_uint_eq(symd__pcc_misses(h->s), misses);
	/* id 3 is another file now: asked again, and named by it */
	h_module(h, 3, CPA_MOD_FILE, "/nonexistent/libgone.so");
	h_frames(h, kpc, 2, u, 1, CPA_STOP_END, 0);
	h_batch(h);
	ck_assert_uint_eq(symd__pcc_misses(h->s), misses + 3);
	ck_assert_uint_ne(h->last_sample.stack_id, stack);
	ck_assert_ptr_nonnull(strstr(h_stack_str(h, h->last_sample.stack_id), "libgone.so"));
	h_free(h);
}
END_TEST

START_TEST(test_stage_flags)
{
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	uint64_t kpc[1] = {0xffffffff81000101ull};
	struct cpa_uframe u[1] = {uf(3, a.off, CPA_UF_LEAF)};
	struct harness *h;
	char want[1024];

	/* --disable_sym */
	h = h_new(CPA_CFG_DISABLE_SYM, NULL);
	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	h_frames(h, kpc, 1, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 2);
	snprintf(want, sizeof(want), "0xffffffff81000101_[k];0x%" PRIx64 " [%s]", a.off,
		 symd_basename(FX_SO));
	ck_assert_str_eq(h_stack_str(h, h->samples[0].stack_id), want);
	h_free(h);

	/* --include_full_path, and env labels */
	h = h_new(CPA_CFG_FULL_PATH, "CPA_NO_SUCH_KEY,PATH");
	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	h_frames(h, kpc, 1, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 2);
	snprintf(want, sizeof(want), "do_one_thing_[k];cpa_fx_alpha [%s]", FX_SO);
	ck_assert_str_eq(h_stack_str(h, h->samples[0].stack_id), want);
	ck_assert_uint_ne(h->samples[0].env_id, 0);
	ck_assert_str_eq(h->strs[h->samples[0].env_id], getenv("PATH"));
	h_free(h);

	h = h_new(0, "CPA_NO_SUCH_KEY");
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, 0);
	ck_assert_int_eq(h_batch(h), 1);
	ck_assert_str_eq(h->strs[h->samples[0].env_id], "SYSTEM");
	h_free(h);

	/* --kernel_stack: a sample of user code (no kernel frames) says so,
	 * one in the kernel shows its kernel frames. */
	h = h_new(CPA_CFG_KERNEL_STACK_ONLY, NULL);
	h_frames(h, NULL, 0, NULL, 0, CPA_STOP_NONE, CPA_SF_USER_REGS);
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, CPA_SF_IN_KERNEL);
	ck_assert_int_eq(h_batch(h), 2);
	ck_assert_str_eq(h_stack_str(h, h->samples[0].stack_id), "[user mode]");
	ck_assert_uint_eq(h->frames[h->stacks[h->samples[0].stack_id][0]].flags, CPA_FF_MARKER);
	ck_assert_str_eq(h_stack_str(h, h->samples[1].stack_id), "do_one_thing_[k]");
	h_free(h);
}
END_TEST

START_TEST(test_stage_jit)
{
	struct harness *h = h_new(0, NULL);
	struct cpa_uframe u[2] = {
		{.pc = 0x7f0000001010ull,
		 .offset = 0x7f0000001010ull,
		 .module_id = 4,
		 .flags = CPA_UF_ANON | CPA_UF_LEAF},
		{.pc = 0x7f0000009999ull,
		 .offset = 0x7f0000009999ull,
		 .module_id = 4,
		 .flags = CPA_UF_ANON},
	};
	struct cpa_task_event exit_ev = {.kind = CPA_TASK_EXIT};
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	run_sh("cp '%s/perf.map' '%s'", FX_DIR, path);
	h_module(h, 4, CPA_MOD_ANON, "[anon:jit]");
	h_frames(h, NULL, 0, u, 2, CPA_STOP_ANON, 0);
	ck_assert_int_eq(h_batch(h), 2);
	ck_assert_str_eq(h_stack_str(h, h->samples[0].stack_id),
			 "LazyCompile:*foo_recompiled /app/x.js:1;0x7f0000009999 [anon:jit];"
			 "[unwind stopped: jit]");
	/* the exit event drops the per-pid map; the next sample reloads it */
	exit_ev.seq = h->seq++;
	exit_ev.pid = exit_ev.tid = (uint32_t)getpid();
	h_put(h, CPA_REC_TASK, &exit_ev, sizeof(exit_ev), NULL, 0);
	unlink(path);
	h_frames(h, NULL, 0, u, 1, CPA_STOP_ANON, 0);
	ck_assert_int_eq(h_batch(h), 2);
	ck_assert_str_eq(h_stack_str(h, h->samples[1].stack_id),
			 "0x7f0000001010 [anon:jit];[unwind stopped: jit]");
	h_free(h);
}
END_TEST

/* A process to own a perf map: paused until killed, as uid (if root). */
static pid_t jit_child(uid_t uid)
{
	int pfd[2];
	pid_t pid;
	char c;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (uid && geteuid() == 0 && setuid(uid) < 0)
			_exit(1);
		(void)!write(pfd[1], "r", 1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &c, 1), 1); /* it runs as uid now */
	close(pfd[0]);
	return pid;
}

/* /tmp/perf-PID.map with n entries named jit_<tag>_<i> at 0x7f0000000000 + 16 i. */
static void jit_write_map(pid_t pid, unsigned int n, const char *tag)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", pid);
	unlink(path);
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	for (unsigned int i = 0; i < n; i++)
		fprintf(f, "%llx 10 jit_%s_%u LazyCompile:*padding_to_make_the_map_bigger_%08u\n",
			0x7f0000000000ull + 16ull * i, tag, i, i);
	fclose(f);
}

/* The first frame of a sample of pid at entry i of its map. */
static const char *jit_frame(struct harness *h, pid_t pid, unsigned int i)
{
	struct cpa_uframe u = {.pc = 0x7f0000000000ull + 16ull * i + 4,
			       .offset = 0x7f0000000000ull + 16ull * i + 4,
			       .module_id = 4,
			       .flags = CPA_UF_ANON | CPA_UF_LEAF};
	static char buf[256];
	unsigned int before = h->nsamples;

	h->pid = (uint32_t)pid;
	h_frames(h, NULL, 0, &u, 1, CPA_STOP_ANON, 0);
	h_batch(h);
	ck_assert_uint_eq(h->nsamples, before + 1);
	ck_assert_uint_lt(before, 64);
	snprintf(buf, sizeof(buf), "%s", h_stack_str(h, h->samples[before].stack_id));
	*strchrnul(buf, ';') = 0;
	if (strstr(buf, " LazyCompile:*padding")) /* the rest of the map's name */
		*strstr(buf, " LazyCompile:*padding") = 0;
	return buf;
}

START_TEST(test_stage_jit_caps)
{
	/* --max_cache_size_mb 64: perf maps may hold 16 MiB in all. */
	struct harness *h = h_new(0, NULL);
	pid_t kids[8];
	char want[64], path[64];
	unsigned int i;

	h_module(h, 4, CPA_MOD_ANON, "[anon:jit]");
	/* Six maps of ~7 MiB each (5 MiB of text, 2 MiB of entries): two fit. */
	for (i = 0; i < 6; i++) {
		kids[i] = jit_child(0);
		snprintf(want, sizeof(want), "k%u", i);
		jit_write_map(kids[i], 80000, want);
	}
	for (i = 0; i < 6; i++) {
		snprintf(want, sizeof(want), "jit_k%u_%u", i, 79999 - i);
		ck_assert_str_eq(jit_frame(h, kids[i], 79999 - i), want);
		symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
		/* The symbol tables, maps included, stay inside the cap. */
		ck_assert_uint_le(shm_stage__cnt(h->st, SYM_CNT_CACHE_BYTES), 64ull << 20);
	}
	/* Every load past the second evicted the least recently used map. */
	ck_assert_uint_ge(shm_stage__cnt(h->st, SYM_CNT_CACHE_EVICT), 4);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_JIT_REFUSED), 0);
	/* An evicted map comes back on its next frame. */
	ck_assert_str_eq(jit_frame(h, kids[0], 5), "jit_k0_5");

	/* One map over the whole share (~24 MiB): refused and counted, once. */
	kids[6] = jit_child(0);
	jit_write_map(kids[6], 300000, "big");
	ck_assert_str_eq(jit_frame(h, kids[6], 7), "0x7f0000000074 [anon:jit]");
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_JIT_REFUSED), 1);
	usleep(1100 * 1000); /* past the once-a-second re-read */
	ck_assert_str_eq(jit_frame(h, kids[6], 8), "0x7f0000000084 [anon:jit]");
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_JIT_REFUSED), 1);
	symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
	ck_assert_uint_le(shm_stage__cnt(h->st, SYM_CNT_CACHE_BYTES), 64ull << 20);

	/* Trust: a symlink, or a map anyone can write, names nothing. */
	kids[7] = jit_child(0);
	jit_write_map(kids[7], 10, "evil");
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", kids[7]);
	ck_assert_int_eq(chmod(path, 0666), 0);
	ck_assert_str_eq(jit_frame(h, kids[7], 1), "0x7f0000000014 [anon:jit]");
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_JIT_REFUSED), 2);
	ck_assert_int_eq(chmod(path, 0644), 0);
	usleep(1100 * 1000);
	snprintf(want, sizeof(want), "/tmp/perf-%d.map", kids[1]);
	unlink(path);
	ck_assert_int_eq(symlink(want, path), 0);
	ck_assert_str_eq(jit_frame(h, kids[7], 2), "0x7f0000000024 [anon:jit]");
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_JIT_REFUSED), 3);
	unlink(path);

	if (geteuid() == 0) {
		/* Another user's map for root's process: refused; the same user's
		 * map for its own process: used. */
		pid_t nobody = jit_child(65534);

		jit_write_map(kids[7], 10, "planted");
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		usleep(1100 * 1000);
		ck_assert_str_eq(jit_frame(h, kids[7], 3), "0x7f0000000034 [anon:jit]");
		ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_JIT_REFUSED), 4);
		jit_write_map(nobody, 10, "own");
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", nobody);
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		ck_assert_str_eq(jit_frame(h, nobody, 3), "jit_own_3");
		unlink(path);
		kill(nobody, SIGKILL);
		waitpid(nobody, NULL, 0);
	}
	/* cpa ctl mem: a lower cap applies on the next tick, maps evicted. */
	{
		uint64_t ev = shm_stage__cnt(h->st, SYM_CNT_CACHE_EVICT);

		ck_assert_str_eq(jit_frame(h, kids[2], 9), "jit_k2_9");
		__atomic_store_n(&h->st->mem_limit_mb, 16, __ATOMIC_RELAXED);
		symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
		ck_assert_uint_gt(shm_stage__cnt(h->st, SYM_CNT_CACHE_EVICT), ev);
		ck_assert_uint_le(shm_stage__cnt(h->st, SYM_CNT_CACHE_BYTES), 16ull << 20);
		/* A 7 MiB map is over the 4 MiB share now: refused, counted. */
		ck_assert_str_eq(jit_frame(h, kids[2], 9), "0x7f0000000094 [anon:jit]");
	}
	for (i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", kids[i]);
		unlink(path);
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	h_free(h);
}
END_TEST

START_TEST(test_stage_restart_and_corrupt)
{
	struct harness *h = h_new(0, NULL);
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	struct cpa_uframe u[1] = {uf(3, a.off, CPA_UF_LEAF)};
	struct cpa_frames bad = {.seq = 1ull << 41, .n_kframes = 100};
	struct cpa_module_def badm = {.id = 3, .path_len = 5000};
	struct cpa_loss loss = {.count = 3, .weight = 3, .stage = SHM_STAGE_CAPTURE};
	uint64_t s1, epoch1;

	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	s1 = h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 2);
	ck_assert_uint_eq(h->nsamples, 1);
	epoch1 = h->last_epoch;

	/* corrupt records are counted and skipped */
	h_put(h, CPA_REC_FRAMES, &bad, sizeof(bad), NULL, 0);
	h_put(h, CPA_REC_MODULE, &badm, sizeof(badm), NULL, 0);
	h_put(h, 200, &bad, 8, NULL, 0);
	ck_assert_int_eq(h_batch(h), 3);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_CORRUPT), 3);
	ck_assert_uint_eq(h->nsamples, 1);

	/* Restart: a new symd (generation 2) over the same rings. A record the
	 * old one already passed on (seq <= mark) is skipped; new ones flow, and
	 * the new lifetime begins with a reset of a higher epoch. */
	symd__free(h->s);
	h->s = NULL;
	h_start(h, 2);
	h_drain(h);
	ck_assert_uint_eq(h->nresets, 2);
	ck_assert_uint_gt(h->last_epoch, epoch1);
	h->seq = s1; /* replay the same sample */
	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	loss.seq = h->seq;
	h_put(h, CPA_REC_LOSS, &loss, sizeof(loss), NULL, 0);
	h->seq++;
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 4);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_DUP), 1);
	ck_assert_uint_eq(h->nsamples, 2);
	ck_assert_uint_eq(h->nloss, 1); /* forwarded */
	ck_assert_str_eq(h_stack_str(h, h->samples[1].stack_id), "cpa_fx_alpha");

	/* A module id defined to our predecessor only: recovered from
	 * /proc/PID/maps by pc (unwindd does not re-send definitions). */
	{
		struct cpa_uframe r[2] = {
			{.pc = (uint64_t)(uintptr_t)dlsym(fx_handle(), "cpa_fx_alpha"),
			 .offset = a.off,
			 .module_id = 11,
			 .flags = CPA_UF_LEAF},
			{.pc = 0x10, .offset = 0x10, .module_id = 0}, /* unwindd's no-map frame */
		};

		h_frames(h, NULL, 0, r, 2, CPA_STOP_NO_MAP, 0);
		ck_assert_int_eq(h_batch(h), 1);
		ck_assert_str_eq(h_stack_str(h, h->samples[2].stack_id),
				 "cpa_fx_alpha;0x10 [unknown];[unwind stopped: no map]");
	}
	h_free(h);
}
END_TEST

START_TEST(test_stage_output_full)
{
	struct harness *h = h_new(0, NULL);
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	uint64_t kpc[16];
	struct cpa_uframe u[1] = {uf(3, a.off, CPA_UF_LEAF)};
	unsigned int i, total = 0, fed = 0;
	int n;

	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	/* Fill the output without a storer: symd must hold input back (no
	 * drops) once its output is short of room, and resume when drained. */
	for (i = 0; i < 3000; i++) {
		unsigned int k;

		for (k = 0; k < 16; k++)
			kpc[k] = 0x100000ull + i * 64 + k; /* below _stext: new hex frames */
		if (shm_ring__free_bytes_sp(&h->up) < 4096)
			break;
		h_frames(h, kpc, 16, u, 1, CPA_STOP_END, 0);
		fed++;
	}
	for (;;) {
		n = symd__batch(h->s, 256);
		ck_assert_int_ge(n, 0);
		total += (unsigned int)n;
		if (n == 0)
			break;
	}
	ck_assert(symd__output_held(h->s));
	ck_assert_uint_lt(total, fed + 1);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_RING_FULL), 0);
	/* the storer catches up: the rest flows */
	for (;;) {
		h->nsamples = 0;
		h_drain(h);
		n = symd__batch(h->s, 256);
		ck_assert_int_ge(n, 0);
		total += (unsigned int)n;
		if (n == 0 && !symd__output_held(h->s))
			break;
	}
	ck_assert_uint_eq(total, fed + 1);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_RING_FULL), 0);
	h_free(h);
}
END_TEST

START_TEST(test_stage_intern_budget)
{
	struct harness *h = h_new(0, NULL);
	uint64_t kpc[16];
	unsigned int i, k, total = 0;
	char want[64];

	/* 1 MiB cache cap: the intern tables get 256 KiB, so unique frames
	 * force fresh epochs; every sample must still resolve. */
	symd__free(h->s);
	h->cfg->max_cache_size_mb = 1;
	h_start(h, 2);
	for (i = 0; i < 4000; i++) {
		for (k = 0; k < 16; k++)
			kpc[k] = 0x100000ull + i * 64 + k;
		h_frames(h, kpc, 16, NULL, 0, CPA_STOP_NONE, 0);
		if (i % 100 == 99) {
			total += (unsigned int)h_batch(h);
			symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
		}
	}
	ck_assert_uint_eq(total, 4000);
	ck_assert_uint_eq(h->nsamples, 4000);
	ck_assert_uint_gt(h->nresets, 2);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_RING_FULL), 0);
	/* the last sample, defined in the last epoch */
	snprintf(want, sizeof(want), "0x%llx_[k];0x%llx_[k];", 0x100000ull + 3999 * 64,
		 0x100000ull + 3999 * 64 + 1);
	ck_assert_int_eq(strncmp(h_stack_str(h, h->last_sample.stack_id), want, strlen(want)), 0);
	ck_assert_uint_le(shm_stage__cnt(h->st, SYM_CNT_CACHE_BYTES), 2u << 20);
	h_free(h);
}
END_TEST

/*
 * The default cap (1 GiB): unique stacks that arrive fast end epochs, and the
 * epoch budget doubles after each that filled within 30 s, but not past
 * 16 MiB whatever the cap (the storer mirrors and journals every definition
 * of an epoch: with 1/4 of the cap, 256 MiB, churn grew both). Epochs of 4,
 * 8, 16, 16 MiB end after 1, 3, 7 and 11 times the first one's samples; with
 * a 32 MiB fourth one, at 15.
 */
START_TEST(test_stage_epoch_ceiling)
{
	struct harness *h = h_new(0, NULL);
	unsigned int i, k, resets = 0, ended = 0, first = 0, at = 0;
	uint64_t kpc[16];

	symd__free(h->s);
	h->cfg->max_cache_size_mb = 1024;
	h_start(h, 2);
	for (i = 0; i < (2u << 20) && (!first || 2 * i < 23 * first); i++) {
		/* 5 frames spell i (16 values each), 11 are the same: few frames,
		 * every stack new */
		for (k = 0; k < 16; k++)
			kpc[k] = 0x100000ull + ((uint64_t)k << 12) +
				 (k < 5 ? 16 * ((i >> (4 * k)) & 15) : 0);
		h_frames(h, kpc, 16, NULL, 0, CPA_STOP_NONE, 0);
		if (i % 200 != 199)
			continue;
		h_batch(h);
		symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
		if (h->nresets == resets)
			continue;
		/* the start's (and any right after it) */
		if (resets++ == 0 || i < 1000) {
			at = i;
			continue;
		}
		if (!first)
			first = i - at;
		at = i;
		ended++;
	}
	ck_assert_uint_gt(first, 0);
	ck_assert_msg(ended >= 4, "%u epochs ended in %u samples, the first after %u", ended, i,
		      first);
	ck_assert_msg(2 * (i - at) < 9 * first, "an epoch of %u samples so far, the first %u",
		      i - at, first);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_RING_FULL), 0);
	h_free(h);
}
END_TEST

/* A debuginfod server on loopback: python's http.server over a directory
 * laid out as buildid/<hex>/debuginfo. Returns its pid, the port in *port. */
static pid_t http_server(const char *dir, unsigned int *port)
{
	char cmd[1200], line[256];
	FILE *f;
	pid_t pid = 0;

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && { python3 -u -m http.server --bind 127.0.0.1 0 >out 2>err & "
		 "echo $!; }",
		 dir);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	pid = (pid_t)atoi(line);
	pclose(f);
	snprintf(cmd, sizeof(cmd), "%s/out", dir);
	*port = 0;
	while (!*port) { /* until it says where it listens */
		f = fopen(cmd, "r");
		if (f) {
			if (fgets(line, sizeof(line), f)) {
				const char *p = strstr(line, " port ");

				if (p)
					*port = (unsigned int)atoi(p + 6);
			}
			fclose(f);
		}
		if (!*port)
			usleep(20000);
	}
	return pid;
}

START_TEST(test_debuginfod_fetch)
{
	struct fx_fn l = fx_local();
	char so[512], srv[512], urls[128], hex[64] = "", want[600];
	struct cpa_uframe u[1];
	struct harness *h;
	struct symbin *bin;
	unsigned int port, i, tries;
	pid_t pid;

	tmp_setup();
	snprintf(so, sizeof(so), "%s/libdi.so", tmpdir);
	snprintf(srv, sizeof(srv), "%s/srv", tmpdir);
	run_sh("cp '%s' '%s' && objcopy --only-keep-debug '%s' '%s.debug' && objcopy --strip-all '%s'",
	       FX_SO, so, so, so, so);
	bin = load_path(so, "/nonexistent", NULL);
	ck_assert_ptr_nonnull(bin);
	for (i = 0; i < bin->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", bin->build_id[i]);
	symbin__free(bin);
	run_sh("mkdir -p '%s/buildid/%s' && cp '%s.debug' '%s/buildid/%s/debuginfo'", srv, hex, so,
	       srv, hex);
	pid = http_server(srv, &port);
	snprintf(urls, sizeof(urls), "http://127.0.0.1:%u", port);

	h = h_new(0, NULL);
	symd__free(h->s);
	snprintf(h->cfg->debuginfod_urls, sizeof(h->cfg->debuginfod_urls), "%s", urls);
	snprintf(h->cfg->store_dir, sizeof(h->cfg->store_dir), "%s/store", tmpdir);
	h->cfg->debuginfod_cache_mb = 64;
	run_sh("mkdir -p '%s/store'", tmpdir);
	h_start(h, 2);
	h_module(h, 4, CPA_MOD_FILE, so);
	u[0] = uf(4, l.off + 2, CPA_UF_LEAF);
	/* The first sample does not wait for the fetch: named by its FDE. */
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, CPA_SF_USER_REGS);
	ck_assert_int_eq(h_batch(h), 2);
	snprintf(want, sizeof(want), "libdi.so+0x%" PRIx64, l.off);
	ck_assert_str_eq(h_stack_str(h, h->last_sample.stack_id), want);
	/* Later samples get the name once the file is in the cache. */
	for (tries = 0; tries < 3000; tries++) {
		symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
		h_frames(h, NULL, 0, u, 1, CPA_STOP_END, CPA_SF_USER_REGS);
		ck_assert_int_eq(h_batch(h), 1);
		if (!strcmp(h_stack_str(h, h->last_sample.stack_id), "cpa_fx_local_helper"))
			break;
		usleep(10000);
	}
	ck_assert_str_eq(h_stack_str(h, h->last_sample.stack_id), "cpa_fx_local_helper");
	run_sh("test -s '%s/store/.debuginfod/%s/debuginfo'", tmpdir, hex);
	h_free(h);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	tmp_teardown();
}
END_TEST

/* 5 samples of one kernel frame at a rate limit of 2: 3 dropped (pending). */
static void h_rate_drops(struct harness *h, const uint64_t *kpc)
{
	h->st->rate_limit = 2;
	for (unsigned int i = 0; i < 5; i++)
		h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, 0);
	ck_assert_int_eq(h_batch(h), 5);
	ck_assert_uint_eq(h->nsamples, 2);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_RATE), 3);
}

START_TEST(test_stage_rate_limit)
{
	struct harness *h = h_new(0, NULL);
	uint64_t kpc[1] = {0xffffffff81000101ull};

	h_rate_drops(h, kpc);
	/* the drops reach the store as one aggregated LOSS record */
	symd__finish(h->s);
	h_drain(h);
	ck_assert_uint_eq(h->nloss, 1);
	ck_assert_uint_eq(h->last_loss.count, 3);
	ck_assert_uint_eq(h->last_loss.stage, SHM_STAGE_SYMD);
	ck_assert_uint_eq(h->last_loss.reason, SHM_CNT_DROP_RATE);
	ck_assert_uint_eq(h->last_loss.seq, h->seq - 1); /* the last sample it stands for */

	/* a pending loss goes out before the next sample, in seq order */
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, 0); /* still over the limit */
	ck_assert_int_eq(h_batch(h), 1);
	ck_assert_uint_eq(h->nloss, 1);
	h->st->rate_limit = 0;
	h_frames(h, kpc, 1, NULL, 0, CPA_STOP_NONE, 0);
	ck_assert_int_eq(h_batch(h), 1);
	ck_assert_uint_eq(h->nloss, 2);
	ck_assert_uint_eq(h->last_loss.seq, h->seq - 2);
	ck_assert_uint_eq(h->last_sample.seq, h->seq - 1);
	h_free(h);
}
END_TEST

/* Drops still pending when symd is killed (not sent yet: they wait for the
 * next sample, the next second, or room in ring 2): their input is
 * released, so the count waits in the arena and the successor sends it. */
START_TEST(test_stage_pending_loss_survives_kill)
{
	struct harness *h = h_new(0, NULL);
	uint64_t kpc[1] = {0xffffffff81000101ull};

	h_rate_drops(h, kpc);
	ck_assert_uint_eq(h->nloss, 0); /* pending */
	ck_assert_uint_eq(shm_ring__pending_sc(&h->in), 0);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_LOSS_PENDING), 3);

	/* SIGKILL: the object goes without a flush; a new symd starts on the
	 * same arena and sends the count before anything else. */
	symd__free(h->s);
	h->s = NULL;
	h->st->rate_limit = 0;
	h_start(h, 2);
	h_drain(h);
	ck_assert_uint_eq(h->nloss, 0);
	symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
	h_drain(h);
	ck_assert_uint_eq(h->nloss, 1);
	ck_assert_uint_eq(h->last_loss.stage, SHM_STAGE_SYMD);
	ck_assert_uint_eq(h->last_loss.reason, SYM_CNT_LOST_AT_KILL);
	ck_assert_str_eq(shm_counter_name(SHM_STAGE_SYMD, h->last_loss.reason),
			 "lost_pending_at_kill");
	ck_assert_uint_eq(h->last_loss.count, 3);
	ck_assert_uint_eq(h->last_loss.weight, 3);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_LOST_AT_KILL), 3);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SYM_CNT_LOSS_PENDING), 0);

	/* Sent once: a later kill carries nothing. */
	symd__free(h->s);
	h->s = NULL;
	h_start(h, 3);
	symd__tick(h->s, clock_ns(CLOCK_MONOTONIC));
	h_drain(h);
	ck_assert_uint_eq(h->nloss, 1);
	h_free(h);
}
END_TEST

/* unwindd killed after it committed a batch's output and before it
 * released that batch's input: its successor sends the batch again and says
 * where it started in its first reset. symd passes every sample and loss on
 * once, and the successor's lost_pending_at_kill too. */
static void h_unwindd_start(struct harness *h, uint64_t epoch, uint64_t resume_seq)
{
	struct cpa_dict_reset r = {
		.epoch = epoch, .resume_seq = resume_seq, .flags = CPA_RESET_START};

	h_put(h, CPA_REC_DICT_RESET, &r, sizeof(r), NULL, 0);
}

static void h_loss(struct harness *h, uint64_t seq, uint32_t stage, uint32_t reason, uint64_t count)
{
	struct cpa_loss l = {
		.seq = seq, .count = count, .weight = count, .stage = stage, .reason = reason};

	h_put(h, CPA_REC_LOSS, &l, sizeof(l), NULL, 0);
}

START_TEST(test_stage_unwindd_replay)
{
	struct harness *h = h_new(0, NULL);
	struct fx_fn a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	struct cpa_uframe u[1] = {uf(3, a.off, CPA_UF_LEAF)};
	uint64_t s0 = h->seq, want_lost = 0, prev = 0;
	unsigned int i;

	/* Our own first reset says where we started. */
	h_drain(h);
	ck_assert_uint_eq(h->nresets, 1);
	ck_assert_uint_eq(h->last_reset.flags, CPA_RESET_START);
	ck_assert_uint_eq(h->last_reset.resume_seq, 0);

	/* unwindd A: samples s0..s0+3, a dropped sample s0+4, sample s0+5. */
	h_unwindd_start(h, 1ull << 32, 0);
	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	for (i = 0; i < 4; i++)
		h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	h_loss(h, h->seq++, SHM_STAGE_UNWINDD, SHM_CNT_DROP_RING_FULL, 1);
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 8);
	ck_assert_uint_eq(h->nsamples, 5);
	ck_assert_uint_eq(h->nloss, 1);
	want_lost += 1;

	/* unwindd B released up to s0+1 only: it carries what A left pending,
	 * then sends s0+2..s0+5 again, then new records. */
	h_unwindd_start(h, 2ull << 32, s0 + 1);
	h_loss(h, s0 + 1, SHM_STAGE_UNWINDD, UNW_CNT_LOST_AT_KILL, 7);
	want_lost += 7;
	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	h->seq = s0 + 2;
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	h_loss(h, h->seq++, SHM_STAGE_UNWINDD, SHM_CNT_DROP_RING_FULL, 1);
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	/* new */
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	h_loss(h, h->seq++, SHM_STAGE_UNWINDD, SHM_CNT_DROP_RING_FULL, 2);
	want_lost += 2;
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 10);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_DUP), 4);
	ck_assert_uint_eq(h->nsamples, 7);
	for (i = 0; i < h->nsamples; i++) {
		ck_assert_uint_gt(h->samples[i].seq, prev); /* each once */
		prev = h->samples[i].seq;
	}
	ck_assert_uint_eq(h->samples[6].seq, s0 + 8);
	ck_assert_uint_eq(h->nloss, 3);
	ck_assert_uint_eq(h->lost, want_lost);
	/* the carry leaves in order, at our mark then */
	ck_assert_uint_eq(shm_ring__mark_sc(&h->in), s0 + 8);

	/* unwindd C resumed after everything we saw (killed after its
	 * release): nothing is a copy, not even a loss at the last seq (a
	 * corrupt record's, which reuses it). */
	h_unwindd_start(h, 3ull << 32, s0 + 8);
	h_loss(h, s0 + 8, SHM_STAGE_UNWINDD, SHM_CNT_DROP_CORRUPT, 1);
	want_lost += 1;
	h_frames(h, NULL, 0, u, 1, CPA_STOP_END, 0);
	ck_assert_int_eq(h_batch(h), 3);
	ck_assert_uint_eq(shm_stage__cnt(h->st, SHM_CNT_DROP_DUP), 4);
	ck_assert_uint_eq(h->nsamples, 8);
	ck_assert_uint_eq(h->nloss, 4);
	ck_assert_uint_eq(h->lost, want_lost);
	h_free(h);
}
END_TEST

/* ---- the executable, spawned the way the monitor does ---- */

static const char *symd_exe(void)
{
	static char path[1024];
	const char *dir = getenv("CPA_BUILD_DIR");

	snprintf(path, sizeof(path), "%s/bin/symd", dir ? dir : ".");
	ck_assert_msg(access(path, X_OK) == 0, "%s not built", path);
	return path;
}

static pid_t spawn_symd(struct harness *h, bool with_arena)
{
	const char *exe = symd_exe();
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (with_arena) {
			if (dup2(shm_arena__fd(h->a), 3) < 0)
				_exit(99);
		} else {
			close(3);
		}
		execl(exe, "symd", (char *)NULL);
		_exit(98);
	}
	return pid;
}

START_TEST(test_exec_drain_and_term)
{
	struct harness *h;
	struct fx_fn a;
	struct cpa_uframe u[1];
	uint64_t kpc[1] = {0xffffffff81000101ull};
	unsigned int i;
	int status;
	pid_t pid;

	a = fx_fn("cpa_fx_alpha", "cpa_fx_alpha");
	u[0] = uf(3, a.off, CPA_UF_LEAF);
	h = h_new(0, NULL);
	/* the in-process symd of h_new already sent a reset; drop it */
	symd__free(h->s);
	h->s = NULL;
	h_drain(h);

	/* without an arena on fd 3 */
	pid = spawn_symd(h, false);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2);

	h->st->generation = 3;
	h->st->cmd = SHM_CMD_NONE;
	shm_stage__set_state(h->st, SHM_STATE_STARTING);
	pid = spawn_symd(h, true);
	h->st->pid = pid;
	h_module(h, 3, CPA_MOD_FILE, FX_SO);
	h_frames(h, kpc, 1, u, 1, CPA_STOP_END, 0);
	for (i = 0; i < 500 && h->nsamples < 1; i++) {
		usleep(10000);
		h_drain(h);
	}
	ck_assert_uint_eq(h->nsamples, 1);
	ck_assert_uint_eq(h->last_epoch >> 32, 3); /* epoch from the generation */
	ck_assert_int_eq(shm_stage__state(h->st), SHM_STATE_RUNNING);
	ck_assert_uint_gt(__atomic_load_n(&h->st->heartbeat_ns, __ATOMIC_RELAXED), 0);
	/* the executable reads the real /proc/kallsyms: only the shape is known */
	{
		const char *st = h_stack_str(h, h->samples[0].stack_id);

		ck_assert_ptr_nonnull(strstr(st, "_[k];cpa_fx_alpha"));
		ck_assert_uint_eq(h->stack_nk[h->samples[0].stack_id], 1);
	}

	/* DRAIN: consume what is left, exit 0, state EXITED */
	h_frames(h, kpc, 1, u, 1, CPA_STOP_END, 0);
	__atomic_store_n(&h->st->cmd, SHM_CMD_DRAIN, __ATOMIC_RELEASE);
	shm_ring__kick(shm_arena__ring_mem(h->a, SHM_RING_UNWIND, &(uint64_t){0}));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(shm_stage__state(h->st), SHM_STATE_EXITED);
	h_drain(h);
	ck_assert_uint_eq(h->nsamples, 2);
	ck_assert_int_eq(shm_arena__open_cons(h->a, SHM_RING_UNWIND, &h->in), 0);
	ck_assert_uint_eq(shm_ring__pending_sc(&h->in), 0); /* input fully released */
	ck_assert_uint_eq(shm_ring__mark_sc(&h->in), h->seq - 1);

	/* SIGTERM while idle: leaves promptly, exit 0 */
	h->st->generation = 4;
	h->st->cmd = SHM_CMD_NONE;
	pid = spawn_symd(h, true);
	for (i = 0; i < 500 && shm_stage__state(h->st) != SHM_STATE_RUNNING; i++)
		usleep(10000);
	ck_assert_int_eq(shm_stage__state(h->st), SHM_STATE_RUNNING);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(shm_stage__state(h->st), SHM_STATE_EXITED);
	h_free(h);
}
END_TEST

/*
 * The JVM's attach socket is looked up in its root (docs/symd.md): its
 * /tmp/.java_pidN, an absolute symlink in a container's tree, must not lead
 * symd's child to a socket of ours. A fake /proc: PID/status (our ids,
 * SIGQUIT caught), PID/root/tmp/.java_pid7 -> our listening socket.
 */
START_TEST(test_jvm_sock_in_root)
{
	char dir[512], p[700], host[700];
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct pollfd pf;
	pid_t q;
	FILE *f;
	int l, fifo;

	test_scratch_in(dir, sizeof(dir), "jvmroot");
	/* a process for the SIGQUIT of the fixed path: ignores it */
	q = fork();
	ck_assert_int_ge(q, 0);
	if (q == 0) {
		signal(SIGQUIT, SIG_IGN);
		pause();
		_exit(0);
	}
	snprintf(p, sizeof(p), "%s/%d", dir, (int)q);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%d/root", dir, (int)q);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%d/root/tmp", dir, (int)q);
	ck_assert_int_eq(mkdir(p, 01777), 0);
	snprintf(p, sizeof(p), "%s/%d/status", dir, (int)q);
	f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"Name:\tjava\nUid:\t%u\t%u\t%u\t%u\nGid:\t%u\t%u\t%u\t%u\nSigCgt:\t0000000000000004\n",
		getuid(), geteuid(), geteuid(), geteuid(), getgid(), getegid(), getegid(),
		getegid());
	fclose(f);
	/* "our" socket, outside the fake root */
	snprintf(host, sizeof(host), "%s/host.sock", dir);
	ck_assert_uint_lt(strlen(host), sizeof(a.sun_path));
	memcpy(a.sun_path, host, strlen(host));
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 4), 0);
	snprintf(p, sizeof(p), "%s/%d/root/tmp/.java_pid7", dir, (int)q);
	ck_assert_int_eq(symlink(host, p), 0); /* absolute: resolves in the container */
	/* No attach file can be made (no cwd; a directory in /tmp): a child
	 * that does not connect exits at once; one that connected waits for
	 * a reply until its alarm. Waited for to the end either way. */
	snprintf(p, sizeof(p), "%s/%d/root/tmp/.attach_pid7", dir, (int)q);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(jvm__request_perfmap(dir, (uint32_t)q, 7, 60ull * 1000000000ull), 0);
	pf = (struct pollfd){.fd = l, .events = POLLIN};
	ck_assert_msg(poll(&pf, 1, 0) == 0,
		      "symd's child connected to our socket through the container's link");
	/* A FIFO at the attach file's name (with a reader: an open for
	 * writing would not block) is no attach file: never opened. */
	ck_assert_int_eq(rmdir(p), 0);
	ck_assert_int_eq(mkfifo(p, 0666), 0);
	fifo = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(fifo, 0);
	snprintf(p, sizeof(p), "%s/%d/root/tmp/.java_pid7", dir, (int)q);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(jvm__request_perfmap(dir, (uint32_t)q, 7, 60ull * 1000000000ull), 0);
	pf = (struct pollfd){.fd = fifo, .events = POLLIN};
	ck_assert_msg(poll(&pf, 1, 0) == 0, "symd's child opened the FIFO at .attach_pid7");
	close(fifo);
	kill(q, SIGKILL);
	waitpid(q, NULL, 0);
	close(l);
	test_rm_rf(dir);
}
END_TEST

static Suite *symd_suite(void)
{
	Suite *s = suite_create("symd");
	TCase *tc;

	TEST_TCASE(s, "elf", test_lookup_fixture, test_fde_and_plt, test_entry_point_start,
		   test_debug_file_build_id, test_debug_file_debuglink, test_other_process_paths,
		   test_gone_process_namespace_peer, test_minidebuginfo, test_go_binary,
		   test_hostile_elf, test_bincache_counts_and_evicts, test_bincache_refreshed,
		   test_bincache_forged_build_id);

	TEST_TCASE(s, "parsers", test_kallsyms, test_kallsyms_compact, test_perf_map,
		   test_perf_map_overlap_time, test_env_pick, test_names);
	tc = TEST_TCASE(s, "jvm", test_jvm_sock_in_root);
	tcase_set_timeout(tc, 30);

	tc = TEST_TCASE(s, "stage", test_stage_symbolize, test_stage_flags,
			test_stage_kallsyms_reload, test_stage_pc_cache_grows,
			test_stage_pc_cache_new_module, test_stage_jit, test_stage_jit_caps,
			test_stage_restart_and_corrupt, test_stage_output_full,
			test_stage_intern_budget, test_stage_rate_limit,
			test_stage_pending_loss_survives_kill, test_stage_unwindd_replay,
			test_debuginfod_fetch, test_exec_drain_and_term);
	tcase_set_timeout(tc, 60);
	/* half a million samples: 10-20 s on a loaded 2-CPU VM */
	tc = TEST_TCASE(s, "epoch", test_stage_epoch_ceiling);
	tcase_set_timeout(tc, 180);
	return s;
}

int main(void)
{
	return test_run_suite(symd_suite());
}
