// SPDX-License-Identifier: MIT
/*
 * CFI unwinder tests: table building, single steps on synthetic stacks at
 * known instructions, and whole walks of REAL register/stack captures of the
 * -O2 -fomit-frame-pointer fixture (tests/fixtures/cfi) taken with ptrace.
 */
#include <check.h>
#include <dlfcn.h>
#include <elf.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "test_util.h"
#include "tests/fixtures/cfi/cfi_capture.h"
#include "unwindd/cfi.h"
#include "unwindd/cfi_pvt.h"
#include "unwindd/walk.h"

#define FIXTURE CFI_FIXTURE_DIR "/cfi_fixture"
#define FIXLIB	CFI_FIXTURE_DIR "/libcfifix.so"
#define LIBC	"/lib/x86_64-linux-gnu/libc.so.6"

static struct cfi_table *build_path(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct cfi_table *t = NULL;
	int r;

	ck_assert_int_ge(fd, 0);
	r = cfi_table__build(fd, -1, &t);
	ck_assert_int_eq(r, 0);
	return t;
}

/* File offset and size of a symbol of an ELF file, from .symtab via PT_LOAD. */
static int sym_off(const char *path, const char *name, uint64_t *off, uint64_t *size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf_Scn *scn = NULL;
	int r = -ENOENT;
	Elf *e;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	ck_assert_ptr_nonnull(e);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;

			gelf_getsym(d, (int)i, &s);
			if (strcmp(elf_strptr(e, sh.sh_link, s.st_name), name))
				continue;
			size_t nph;

			elf_getphdrnum(e, &nph);
			for (size_t j = 0; j < nph; j++) {
				GElf_Phdr ph;

				gelf_getphdr(e, (int)j, &ph);
				if (ph.p_type == PT_LOAD && s.st_value >= ph.p_vaddr &&
				    s.st_value < ph.p_vaddr + ph.p_filesz) {
					*off = s.st_value - ph.p_vaddr + ph.p_offset;
					*size = s.st_size;
					r = 0;
				}
			}
		}
	}
	elf_end(e);
	return r;
}

static int sec_off(const char *path, const char *name, uint64_t *off, uint64_t *size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	int r = -ENOENT;
	Elf *e;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	ck_assert_ptr_nonnull(e);
	elf_getshdrstrndx(e, &shstrndx);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		gelf_getshdr(scn, &sh);
		if (!strcmp(elf_strptr(e, shstrndx, sh.sh_name), name)) {
			*off = sh.sh_offset;
			*size = sh.sh_size;
			r = 0;
		}
	}
	elf_end(e);
	return r;
}

/* ------------------------------------------------------------ table tests */

/* What one rule says, in a form both libdw's answer and ours reduce to. */
struct rule_view {
	int cfa_kind; /* 0 reg+off, 1 expression */
	uint64_t cfa_reg;
	int64_t cfa_off;
	int ra_kind; /* 0 at CFA+off, 1 undefined, 2 other */
	int64_t ra_off;
	int bp_kind; /* 0 same/undefined, 1 at CFA+off, 2 other */
	int64_t bp_off;
	bool signal;
};

static void view_ours(const struct cfi_table *t, uint32_t w, struct rule_view *v)
{
	memset(v, 0, sizeof(*v));
	if (CFI_RULE_KIND(w) == CFI_K_RSP || CFI_RULE_KIND(w) == CFI_K_RBP) {
		v->cfa_reg = CFI_RULE_KIND(w) == CFI_K_RSP ? DW_RSP : DW_RBP;
		v->cfa_off = CFI_RULE_CFA_OFF(w);
		v->ra_off = -8;
		v->bp_kind = CFI_RULE_RBP_SAVED(w);
		v->bp_off = CFI_RULE_RBP_SAVED(w) ? CFI_RULE_RBP_OFF(w) : 0;
		return;
	}
	const struct cfi_xrule *x = &t->x[CFI_RULE_X(w)];

	v->cfa_kind = x->cfa_kind == CFI_CFA_EXPR;
	v->cfa_reg = v->cfa_kind ? 0 : x->cfa_reg;
	v->cfa_off = v->cfa_kind ? 0 : x->cfa_off;
	v->ra_kind = x->r[CFI_S_RA].kind == CFI_R_OFF	  ? 0
		     : x->r[CFI_S_RA].kind == CFI_R_UNDEF ? 1
							  : 2;
	v->ra_off = v->ra_kind ? 0 : x->r[CFI_S_RA].off;
	v->bp_kind = x->r[CFI_S_RBP].kind <= CFI_R_UNDEF ? 0
		     : x->r[CFI_S_RBP].kind == CFI_R_OFF ? 1
							 : 2;
	v->bp_off = v->bp_kind == 1 ? x->r[CFI_S_RBP].off : 0;
	v->signal = x->flags & CFI_XF_SIGNAL;
}

/* libdw's register rule: 0 at CFA+off, 1 undefined, 2 other, 3 same value */
static int dw_reg_view(Dwarf_Frame *fr, int reg, int64_t *off)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t n = 0;

	*off = 0;
	if (dwarf_frame_register(fr, reg, mem, &ops, &n) != 0)
		return 2; /* a value rule (val_offset, val_expression, register) */
	if (n == 0)
		return ops ? 1 : 3;
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return 2;
	if (n == 1)
		return 0;
	if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return 0;
	}
	return 2;
}

static bool view_libdw(Dwarf_CFI *cfi, uint64_t vaddr, struct rule_view *v)
{
	Dwarf_Frame *fr = NULL;
	Dwarf_Op *ops;
	size_t n;
	int k;

	memset(v, 0, sizeof(*v));
	if (dwarf_cfi_addrframe(cfi, vaddr, &fr) != 0)
		return false;
	ck_assert_int_eq(dwarf_frame_cfa(fr, &ops, &n), 0);
	if (n == 1 && ops[0].atom == DW_OP_bregx) {
		v->cfa_reg = ops[0].number;
		v->cfa_off = (int64_t)ops[0].number2;
	} else {
		v->cfa_kind = 1;
	}
	k = dw_reg_view(fr, DW_RA, &v->ra_off);
	v->ra_kind = k == 3 ? 2 : k;
	k = dw_reg_view(fr, DW_RBP, &v->bp_off);
	v->bp_kind = k == 0 ? 1 : k == 2 ? 2 : 0;
	if (v->bp_kind != 1)
		v->bp_off = 0;
	dwarf_frame_info(fr, NULL, NULL, &v->signal);
	free(fr);
	return true;
}

/* File offset, size and first bytes of a section (sections of PT_LOAD
 * segments at offset == vaddr - the segment's delta, as in the fixtures). */
static bool section_of(const char *path, const char *name, uint64_t *off, uint64_t *size,
		       uint8_t *head, size_t n_head)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool found = false;
	Elf *e;

	ck_assert_int_ge(fd, 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(elf_getshdrstrndx(e, &shstrndx), 0);
	while (!found && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || strcmp(elf_strptr(e, shstrndx, sh.sh_name), name))
			continue;
		d = elf_getdata(scn, NULL);
		ck_assert(d && d->d_size >= n_head);
		memcpy(head, d->d_buf, n_head);
		*off = sh.sh_offset;
		*size = sh.sh_size;
		found = true;
	}
	elf_end(e);
	return found;
}

/*
 * Cross-check against an independent reader: at the start, middle and last
 * byte of every row, libdw's dwarf_cfi_addrframe() must describe the same
 * CFA, RA and rbp rules as the compiled table.
 */
static void crosscheck(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct cfi_table *t = NULL;
	uint64_t checked = 0, crt[2][2];
	GElf_Phdr load[8];
	size_t n_load = 0, nph;
	Dwarf_CFI *cfi;
	Elf *e;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cfi_table__build(fd, -1, &t), 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	ck_assert_ptr_nonnull(e);
	cfi = dwarf_getcfi_elf(e);
	ck_assert_ptr_nonnull(cfi);
	ck_assert_int_eq(elf_getphdrnum(e, &nph), 0);
	for (size_t i = 0; i < nph && n_load < ARRAY_SIZE(load); i++)
		if (gelf_getphdr(e, (int)i, &load[n_load]) && load[n_load].p_type == PT_LOAD &&
		    (load[n_load].p_flags & PF_X))
			n_load++;
	/* Rows libdw has no CFI for by design: cfi.c's rows for crti's
	 * `.init`/`.fini`. */
	for (int k = 0; k < 2; k++) {
		uint8_t head[4];

		if (!section_of(path, k ? ".fini" : ".init", &crt[k][0], &crt[k][1], head,
				sizeof(head)))
			crt[k][0] = crt[k][1] = 0;
	}
	for (size_t i = 0; i + 1 < cfi_table__rows(t); i++) {
		uint64_t s, end, probe[3];
		uint32_t w;

		ck_assert_int_eq(cfi_table__row(t, i, &s, &end, &w), 0);
		if ((s >= crt[0][0] && s < crt[0][0] + crt[0][1]) ||
		    (s >= crt[1][0] && s < crt[1][0] + crt[1][1]))
			continue;
		probe[0] = s;
		probe[1] = s + (end - s) / 2;
		probe[2] = end - 1;
		for (int k = 0; k < 3; k++) {
			struct rule_view ours, theirs;
			uint64_t vaddr = 0;
			bool found = false;

			for (size_t j = 0; j < n_load; j++)
				if (probe[k] >= load[j].p_offset &&
				    probe[k] < load[j].p_offset + load[j].p_filesz)
					vaddr = probe[k] - load[j].p_offset + load[j].p_vaddr;
			ck_assert_uint_ne(vaddr, 0);
			found = view_libdw(cfi, vaddr, &theirs);
			if (CFI_RULE_KIND(w) == CFI_K_GAP) {
				if (found)
					ck_abort_msg("%s: %#lx: a gap for us, CFI for libdw", path,
						     (unsigned long)vaddr);
				continue;
			}
			if (!found)
				ck_abort_msg("%s: %#lx: CFI for us, none for libdw", path,
					     (unsigned long)vaddr);
			view_ours(t, w, &ours);
			if (memcmp(&ours, &theirs, sizeof(ours)))
				ck_abort_msg("%s: %#lx: cfa %d r%lu%+ld ra %d%+ld bp %d%+ld sig %d "
					     "vs libdw cfa %d r%lu%+ld ra %d%+ld bp %d%+ld sig %d",
					     path, (unsigned long)vaddr, ours.cfa_kind,
					     (unsigned long)ours.cfa_reg, (long)ours.cfa_off,
					     ours.ra_kind, (long)ours.ra_off, ours.bp_kind,
					     (long)ours.bp_off, ours.signal, theirs.cfa_kind,
					     (unsigned long)theirs.cfa_reg, (long)theirs.cfa_off,
					     theirs.ra_kind, (long)theirs.ra_off, theirs.bp_kind,
					     (long)theirs.bp_off, theirs.signal);
			checked++;
		}
	}
	ck_assert_uint_gt(checked, 10);
	dwarf_cfi_end(cfi); /* dwarf_getcfi_elf() hands ownership to the caller */
	elf_end(e);
	cfi_table__free(t);
}

START_TEST(test_crosscheck_libdw)
{
	static const char *const paths[] = {
		FIXTURE, FIXLIB, LIBC, "/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/bin/bash",
	};

	for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
		if (access(paths[i], R_OK) == 0)
			crosscheck(paths[i]);
}
END_TEST

START_TEST(test_build_libc)
{
	struct cfi_table *t = build_path(LIBC);
	uint64_t prev_end = 0;
	size_t rows = cfi_table__rows(t);

	ck_assert_uint_gt(rows, 1000);
	/* 8 bytes of row + page index + side rules: must stay compact */
	ck_assert_uint_le(cfi_table__bytes(t), rows * 10);
	for (size_t i = 0; i + 1 < rows; i++) {
		uint64_t s, e;
		uint32_t w;

		ck_assert_int_eq(cfi_table__row(t, i, &s, &e, &w), 0);
		ck_assert_uint_lt(s, e);
		if (i)
			ck_assert_uint_eq(s, prev_end);
		prev_end = e;
		/* the hot-path lookup finds the row at both ends and inside */
		ck_assert_uint_eq(cfi_table__lookup(t, s), w);
		ck_assert_uint_eq(cfi_table__lookup(t, s + (e - s) / 2), w);
		ck_assert_uint_eq(cfi_table__lookup(t, e - 1), w);
	}
	ck_assert_uint_eq(cfi_table__lookup(t, prev_end), CFI_K_GAP);
	ck_assert_uint_eq(cfi_table__lookup(t, 0), CFI_K_GAP);
	ck_assert_int_eq(cfi_table__row(t, rows, NULL, NULL, NULL), -ERANGE);
	/* glibc: the PLT and __restore_rt need the expression evaluator */
	ck_assert_uint_ge(cfi_table__expr_rows(t), 1);
	cfi_table__free(t);
}
END_TEST

START_TEST(test_build_errors)
{
	_cleanup_close_ int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int mfd = memfd_create("junk", MFD_CLOEXEC);
	struct cfi_table *t = NULL;
	char junk[4096];

	ck_assert_int_eq(cfi_table__build(-1, -1, &t), -EINVAL);
	ck_assert_int_lt(cfi_table__build(fd, -1, &t), 0);
	memset(junk, 'x', sizeof(junk));
	ck_assert_int_eq(write(mfd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	ck_assert_int_eq(cfi_table__build(mfd, -1, &t), -EINVAL);
	ck_assert_ptr_null(t);
	cfi_table__free(NULL);
	ck_assert_uint_eq(cfi_table__bytes(NULL), 0);
	ck_assert_uint_eq(cfi_table__rows(NULL), 0);
}
END_TEST

/* The vDSO image, read from our own memory into a memfd, as unwindd does per process. */
START_TEST(test_vdso_table)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	struct cfi_table *t = NULL;
	char line[512];
	uint64_t len = 0;
	FILE *f;

	ck_assert_uint_ne(base, 0);
	f = fopen("/proc/self/maps", "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &s, &e) == 2)
			len = e - s;
	}
	fclose(f);
	ck_assert_uint_gt(len, 0);
	ck_assert_int_eq(cap_table_from_mem((const void *)base, len, &t), 0);
	ck_assert_uint_gt(cfi_table__rows(t), 4);
	cfi_table__free(t);
}
END_TEST

/* A separate debug file: .debug_frame only (objcopy --only-keep-debug of a -g build). */
static size_t index_matches(int efd, int dfd);

START_TEST(test_debug_frame)
{
	char cmd[4 * PATH_MAX + 512], dbg[PATH_MAX];
	_cleanup_close_ int dfd = test_mkstemp(dbg, sizeof(dbg), "cfi_dbg");
	_cleanup_close_ int efd = -1;
	struct cfi_table *t = NULL, *t2 = NULL;

	ck_assert_int_ge(dfd, 0);
	/* -fno-asynchronous-unwind-tables: CFI goes to .debug_frame, not .eh_frame */
	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-exceptions "
		 "-shared -fPIC -nostdlib -o %s.so " CFI_FIXTURE_SRC "/fixlib.c 2>/dev/null && "
		 "objcopy --only-keep-debug %s.so %s && objcopy --strip-debug %s.so",
		 dbg, dbg, dbg, dbg);
	ck_assert_msg(system(cmd) == 0, "cc/objcopy failed: %s", cmd);
	snprintf(cmd, sizeof(cmd), "%s.so", dbg);
	efd = open(cmd, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(efd, 0);
	ck_assert_int_eq(cfi_table__build(efd, -1, &t), -ENODATA);
	ck_assert_int_eq(cfi_table__build(efd, dfd, &t2), 0);
	ck_assert_uint_ge(cfi_table__rows(t2), 4);
	index_matches(efd, dfd);

	/* the same debug file with SHF_COMPRESSED sections: same rows */
	char zpath[PATH_MAX + 8], zcmd[2 * PATH_MAX + 64];
	struct cfi_table *t3 = NULL;

	snprintf(zpath, sizeof(zpath), "%s.z", dbg);
	snprintf(zcmd, sizeof(zcmd), "objcopy --compress-debug-sections=zlib-gabi %s %s", dbg,
		 zpath);
	if (system(zcmd) == 0) {
		_cleanup_close_ int zfd = open(zpath, O_RDONLY | O_CLOEXEC);

		ck_assert_int_ge(zfd, 0);
		ck_assert_int_eq(cfi_table__build(efd, zfd, &t3), 0);
		ck_assert_uint_eq(cfi_table__rows(t3), cfi_table__rows(t2));
		/* the index reads the inflated copy */
		index_matches(efd, zfd);
		for (size_t i = 0; i + 1 < cfi_table__rows(t2); i++) {
			uint64_t a, b, c, d;
			uint32_t w1, w2;

			cfi_table__row(t2, i, &a, &b, &w1);
			cfi_table__row(t3, i, &c, &d, &w2);
			ck_assert(a == c && b == d && w1 == w2);
		}
		cfi_table__free(t3);
		unlink(zpath);
	}
	cfi_table__free(t2);
	unlink(cmd);
	unlink(dbg);
}
END_TEST

/* ------------------------------------------- the lazy index (chunk tables) */

static bool same_expr(const struct cfi_table *a, int32_t oa, const struct cfi_table *b, int32_t ob)
{
	uint16_t la, lb;

	memcpy(&la, a->expr + oa, 2);
	memcpy(&lb, b->expr + ob, 2);
	return la == lb && !memcmp(a->expr + oa + 2, b->expr + ob + 2, la);
}

/* The same rule, whatever the side-rule index and expression pool offset. */
static bool same_rule(const struct cfi_table *a, uint32_t wa, const struct cfi_table *b,
		      uint32_t wb)
{
	const struct cfi_xrule *xa, *xb;

	if (CFI_RULE_KIND(wa) != CFI_K_X || CFI_RULE_KIND(wb) != CFI_K_X)
		return wa == wb;
	xa = &a->x[CFI_RULE_X(wa)];
	xb = &b->x[CFI_RULE_X(wb)];
	if (xa->cfa_kind != xb->cfa_kind || xa->cfa_reg != xb->cfa_reg || xa->flags != xb->flags)
		return false;
	if (xa->cfa_kind == CFI_CFA_EXPR ? !same_expr(a, xa->cfa_off, b, xb->cfa_off)
					 : xa->cfa_off != xb->cfa_off)
		return false;
	for (int i = 0; i < CFI_S_NR; i++) {
		bool ex = xa->r[i].kind == CFI_R_EXPR || xa->r[i].kind == CFI_R_VAL_EXPR;

		if (xa->r[i].kind != xb->r[i].kind)
			return false;
		if (ex ? !same_expr(a, xa->r[i].off, b, xb->r[i].off)
		       : xa->r[i].off != xb->r[i].off)
			return false;
	}
	return true;
}

/* No ck_assert per probe: each one is a write to check's pipe (fork mode). */
static uint32_t index_lookup(struct cfi_index *x, uint64_t off, const struct cfi_table **ret,
			     size_t *bad)
{
	if (cfi_index__table(x, off, ret) != 0)
		(*bad)++;
	return *ret ? cfi_table__lookup(*ret, off) : CFI_K_GAP;
}

/* Every row of the whole table, at both ends and inside, and the gaps around
 * it: the index's chunk tables give the same rule. Returns the rows checked. */
static size_t index_matches(int efd, int dfd)
{
	struct cfi_table *t = NULL;
	struct cfi_index *x = NULL;
	uint32_t built, total;
	size_t rows, bad = 0;

	ck_assert_int_eq(cfi_table__build(efd, dfd, &t), 0);
	ck_assert_int_eq(cfi_index__build(efd, dfd, &x), 0);
	rows = cfi_table__rows(t);
	for (size_t i = 0; i + 1 < rows; i++) {
		uint64_t s, e, probe[4];
		uint32_t w;

		cfi_table__row(t, i, &s, &e, &w);
		probe[0] = s;
		probe[1] = s + (e - s) / 2;
		probe[2] = e - 1;
		probe[3] = e;
		for (int k = 0; k < 4; k++) {
			const struct cfi_table *c;
			uint32_t wc = index_lookup(x, probe[k], &c, &bad);
			uint32_t wt = cfi_table__lookup(t, probe[k]);

			if (!c ? wt != CFI_K_GAP : !same_rule(t, wt, c, wc))
				bad++;
		}
	}
	ck_assert_uint_eq(bad, 0);
	cfi_index__chunks(x, &built, &total);
	ck_assert_uint_ge(built, 1);
	ck_assert_uint_le(built, total);
	/* past the end, and below the first row */
	{
		const struct cfi_table *c;
		uint64_t s;

		cfi_table__row(t, 0, &s, NULL, NULL);
		if (s)
			ck_assert_uint_eq(index_lookup(x, s - 1, &c, &bad), CFI_K_GAP);
		ck_assert_uint_eq(index_lookup(x, UINT64_MAX - 1, &c, &bad), CFI_K_GAP);
		ck_assert_uint_eq(bad, 0);
	}
	ck_assert_uint_gt(cfi_index__bytes(x), 0);
	cfi_index__free(x);
	cfi_table__free(t);
	return rows;
}

START_TEST(test_index_matches_table)
{
	const char *paths[] = {LIBC, FIXTURE, FIXLIB, "/lib64/ld-linux-x86-64.so.2",
			       "/usr/lib/gcc/x86_64-linux-gnu/12/cc1"};

	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		_cleanup_close_ int fd = open(paths[i], O_RDONLY | O_CLOEXEC);

		if (fd < 0 && i == ARRAY_SIZE(paths) - 1)
			continue; /* no gcc 12: the big case is optional */
		ck_assert_int_ge(fd, 0);
		ck_assert_uint_gt(index_matches(fd, -1), 1);
	}
}
END_TEST

/* An index that built chunks and then went a whole period without a build
 * drops the file pages (once), and builds after the drop read the file again
 * and answer like the whole table. */
START_TEST(test_index_drop_quiet)
{
	_cleanup_close_ int fd = open(LIBC, O_RDONLY | O_CLOEXEC);
	struct cfi_table *t = NULL;
	struct cfi_index *x = NULL;
	const struct cfi_table *c;
	uint64_t s1, s2;
	size_t bad = 0;
	uint32_t w;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cfi_table__build(fd, -1, &t), 0);
	ck_assert_int_eq(cfi_index__build(fd, -1, &x), 0);
	ck_assert(!cfi_index__drop_quiet(x)); /* nothing built yet */
	cfi_table__row(t, cfi_table__rows(t) / 4, &s1, NULL, NULL);
	cfi_table__row(t, cfi_table__rows(t) / 4 * 3, &s2, NULL, NULL);
	ck_assert_uint_ne(s1 >> 16, s2 >> 16); /* two chunks apart */
	w = index_lookup(x, s1, &c, &bad);
	ck_assert_ptr_nonnull(c);
	ck_assert(same_rule(t, cfi_table__lookup(t, s1), c, w));
	ck_assert(!cfi_index__drop_quiet(x)); /* a build in this period */
	ck_assert(cfi_index__drop_quiet(x));  /* quiet since: dropped */
	ck_assert(!cfi_index__drop_quiet(x)); /* nothing new to drop */
	w = index_lookup(x, s2, &c, &bad);
	ck_assert_ptr_nonnull(c);
	ck_assert(same_rule(t, cfi_table__lookup(t, s2), c, w));
	ck_assert(!cfi_index__drop_quiet(x));
	ck_assert(cfi_index__drop_quiet(x));
	ck_assert_uint_eq(bad, 0);
	ck_assert(!cfi_index__drop_quiet(NULL));
	cfi_index__free(x);
	cfi_table__free(t);
}
END_TEST

/* A file cut short under the index's mapping (rewritten in place): no crash,
 * no more tables from it. */
START_TEST(test_index_truncated)
{
	char path[PATH_MAX], cmd[2 * PATH_MAX];
	_cleanup_close_ int fd = test_mkstemp(path, sizeof(path), "cfi_trunc");
	struct cfi_index *x = NULL;
	const struct cfi_table *c;
	struct cfi_table *t = NULL;
	uint64_t s;

	ck_assert_int_ge(fd, 0);
	snprintf(cmd, sizeof(cmd), "cp %s %s", LIBC, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(cfi_table__build(fd, -1, &t), 0);
	ck_assert_int_eq(cfi_index__build(fd, -1, &x), 0);
	cfi_table__row(t, cfi_table__rows(t) / 2, &s, NULL, NULL);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	ck_assert_int_eq(cfi_index__table(x, s, &c), 0);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(cfi_index__table(x, 0, &c), 0);
	ck_assert_ptr_null(c);
	cfi_index__free(x);
	cfi_table__free(t);
	unlink(path);
}
END_TEST

/* -------------------------------------------------- steps at known pcs */

static uint64_t stk[512];

static struct unw_stack synth_stack(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(stk); i++)
		stk[i] = 0x1000000 + i * 8; /* word i "returns" to a recognisable value */
	return (struct unw_stack){(const uint8_t *)stk, 0x7ff000000000ull, sizeof(stk)};
}

/* The fixture's chain_a: sub $0x18,%rsp ... add $0x18,%rsp; ret */
START_TEST(test_function_entry_exit)
{
	struct cfi_table *t = build_path(FIXTURE);
	struct unw_stack s = synth_stack();
	uint64_t off = 0, size = 0;
	struct unw_regs r;
	bool sig;

	ck_assert_int_eq(sym_off(FIXTURE, "chain_a", &off, &size), 0);
	/* first instruction: CFA = rsp + 8, RA at [rsp] */
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64, .bp = 42};
	ck_assert_int_eq(unw_step(t, off, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.sp, s.base + 72);
	ck_assert_uint_eq(r.ip, stk[8]);
	ck_assert_uint_eq(r.bp, 42); /* rbp untouched: same value */
	ck_assert(!sig);
	/* last instruction (ret): CFA = rsp + 8 again */
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64, .bp = 42};
	ck_assert_int_eq(unw_step(t, off + size - 1, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.sp, s.base + 72);
	ck_assert_uint_eq(r.ip, stk[8]);
	/* after the sub: CFA = rsp + 32 */
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64, .bp = 42};
	ck_assert_int_eq(unw_step(t, off + 4, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.sp, s.base + 96);
	ck_assert_uint_eq(r.ip, stk[11]);
	/* RA outside the copy */
	r = (struct unw_regs){.ip = 1, .sp = s.base + sizeof(stk) - 8, .bp = 42};
	ck_assert_int_eq(unw_step(t, off + 4, &r, &s, &sig), CPA_STOP_READ);
	r = (struct unw_regs){.ip = 1, .sp = s.base - 4096, .bp = 42};
	ck_assert_int_eq(unw_step(t, off, &r, &s, &sig), CPA_STOP_READ);
	/* an offset with no CFI at all */
	ck_assert_int_eq(unw_step(t, 1ull << 40, &r, &s, &sig), CPA_STOP_NO_CFI);
	cfi_table__free(t);
}
END_TEST

/* The classic lazy PLT: CFA = rsp + 8 + ((rip & 15) >= 11) * 8, a DWARF expression. */
START_TEST(test_plt_expression)
{
	struct cfi_table *t = build_path(FIXTURE);
	struct unw_stack s = synth_stack();
	uint64_t off = 0, size = 0, map = 0x555555554000ull;
	struct unw_regs r;
	bool sig;

	ck_assert_int_eq(sec_off(FIXTURE, ".plt", &off, &size), 0);
	ck_assert_uint_ge(size, 32);
	/* entry 1: jmp *GOT (+0), push $n (+6), jmp PLT0 (+11) */
	r = (struct unw_regs){.ip = map + off + 16, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off + 16, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.sp, s.base + 72);
	ck_assert_uint_eq(r.ip, stk[8]);
	r = (struct unw_regs){.ip = map + off + 16 + 11, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off + 16 + 11, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.sp, s.base + 80);
	ck_assert_uint_eq(r.ip, stk[9]);
	/* PLT0: entered with the relocation index pushed (CFA = rsp + 16), then its push */
	r = (struct unw_regs){.ip = map + off, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.sp, s.base + 80);
	r = (struct unw_regs){.ip = map + off + 6, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off + 6, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.sp, s.base + 88);
	cfi_table__free(t);
}
END_TEST

/* ------------------------------------------------- stop reasons, synthetic */

#define SYN_LIBC 0x7f0000000000ull
#define SYN_ANON 0x10000000ull

static struct cfi_table *syn_table;
static bool syn_no_table;

/* libc mapped at SYN_LIBC with pgoff 0, one anonymous executable page at SYN_ANON */
static int syn_find(void *ctx, uint64_t pc, struct unw_loc *ret)
{
	(void)ctx;
	if (pc >= SYN_ANON && pc < SYN_ANON + 4096) {
		*ret = (struct unw_loc){
			.file_off = pc - SYN_ANON, .module_id = 2, .flags = CPA_UF_ANON};
		return 0;
	}
	if (pc >= SYN_LIBC && pc < SYN_LIBC + (1ull << 30)) {
		*ret = (struct unw_loc){.table = syn_no_table ? NULL : syn_table,
					.file_off = pc - SYN_LIBC,
					.module_id = 1};
		return 0;
	}
	return -ENOENT;
}

/* First row of the wanted kind (and CFA offset, for rsp rows) in the table. */
static uint64_t find_row(const struct cfi_table *t, unsigned int kind, uint32_t cfa_off)
{
	for (size_t i = 0; i + 1 < cfi_table__rows(t); i++) {
		uint64_t s;
		uint32_t w;

		cfi_table__row(t, i, &s, NULL, &w);
		if (CFI_RULE_KIND(w) == kind &&
		    (kind != CFI_K_RSP || CFI_RULE_CFA_OFF(w) == cfa_off))
			return s;
	}
	ck_abort_msg("no row of kind %u", kind);
	return 0;
}

START_TEST(test_stop_reasons)
{
	struct unw_stack s = synth_stack();
	struct cpa_uframe f[8];
	uint64_t entry, rbp_row, gap = 0;
	struct unw_regs r;
	unsigned int n;

	syn_table = build_path(LIBC);
	entry = find_row(syn_table, CFI_K_RSP, 8); /* CFA = rsp + 8: RA at [sp] */
	rbp_row = find_row(syn_table, CFI_K_RBP, 0);
	for (size_t i = 0; i + 1 < cfi_table__rows(syn_table) && !gap; i++) {
		uint64_t st;
		uint32_t w;

		cfi_table__row(syn_table, i, &st, NULL, &w);
		if (CFI_RULE_KIND(w) == CFI_K_GAP)
			gap = st;
	}
	ck_assert_uint_ne(gap, 0);
	r = (struct unw_regs){.ip = SYN_LIBC + entry, .sp = s.base + 64, .bp = 7};

	/* JIT/anonymous caller: a marker frame with the absolute pc, then ANON */
	stk[8] = SYN_ANON + 0x10;
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_ANON);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(f[0].offset, entry);
	ck_assert_uint_eq(f[0].module_id, 1);
	ck_assert_uint_eq(f[0].flags, CPA_UF_LEAF);
	ck_assert_uint_eq(f[1].pc, SYN_ANON + 0x10);
	ck_assert_uint_eq(f[1].offset, SYN_ANON + 0x10);
	ck_assert(f[1].flags & CPA_UF_ANON);

	/* caller in no mapping: the frames so far, then NO_MAP */
	stk[8] = 0x20000000;
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_NO_MAP);
	ck_assert_uint_eq(n, 1);

	/* RA 0 */
	stk[8] = 0;
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_BAD);
	ck_assert_uint_eq(n, 1);

	/* caller in a gap between FDEs: its frame, then NO_CFI (pc - 1 is looked up) */
	stk[8] = SYN_LIBC + gap + 1;
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_NO_CFI);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(f[1].offset, gap + 1);
	ck_assert(!(f[1].flags & CPA_UF_LEAF));

	/* a module without a table */
	syn_no_table = true;
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_NO_CFI);
	ck_assert_uint_eq(n, 1);
	syn_no_table = false;

	/* CFA = rbp + off below sp: the stack would run backwards */
	r = (struct unw_regs){.ip = SYN_LIBC + rbp_row, .sp = s.base + 1024, .bp = s.base + 64};
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_BAD);
	ck_assert_uint_eq(n, 1);

	/* vfork after its `pop %rdi` (CFA = rsp, RA in rdi: the leaf keeps its
	 * sp), its caller found through rdi; a caller that kept the same sp
	 * would be BAD */
	{
		/* libc's own vfork: under ASan, RTLD_DEFAULT finds its interceptor */
		void *libc = dlopen(LIBC, RTLD_NOW | RTLD_NOLOAD);
		void *vf = libc ? dlsym(libc, "vfork") : NULL;
		Dl_info di;

		ck_assert(vf && dladdr(vf, &di));
		ck_assert_msg(strstr(di.dli_fname, "libc.so"), "vfork from %s", di.dli_fname);
		r = (struct unw_regs){.ip = SYN_LIBC +
					    (uint64_t)((char *)vf - (char *)di.dli_fbase) + 1,
				      .sp = s.base + 64,
				      .di = SYN_ANON + 0x20};
		ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_ANON);
		ck_assert_uint_eq(n, 2);
		ck_assert_uint_eq(f[1].pc, SYN_ANON + 0x20);
		dlclose(libc);
	}

	/* depth: max 1 stops after one frame even though more would follow */
	r = (struct unw_regs){.ip = SYN_LIBC + entry, .sp = s.base + 64, .bp = 7};
	stk[8] = SYN_LIBC + entry + 1;
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 1, &n), CPA_STOP_DEPTH);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 0, &n), CPA_STOP_DEPTH);
	ck_assert_uint_eq(n, 0);

	/* UNW_F_FP_JIT: JIT frames and gaps are walked by frame pointer */
	memset(stk, 0, sizeof(stk));
	r = (struct unw_regs){.ip = SYN_LIBC + entry, .sp = s.base + 64, .bp = s.base + 128};
	stk[8] = SYN_ANON + 0x10;     /* leaf -> JIT */
	stk[16] = s.base + 256;	      /* JIT frame: saved rbp */
	stk[17] = SYN_LIBC + gap + 1; /* JIT -> a gap of libc (a V8 builtin) */
	stk[32] = 3;		      /* gap frame: saved rbp, no frame pointer */
	stk[33] = SYN_ANON + 0x40;    /* gap -> JIT, which stops there */
	stk[49] = 0x20000000;
	ck_assert_int_eq(unw_walk_flags(&r, &s, syn_find, NULL, UNW_F_FP_JIT, f, 8, &n, NULL),
			 CPA_STOP_ANON);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(f[1].pc, SYN_ANON + 0x10);
	ck_assert(f[1].flags & CPA_UF_ANON);
	ck_assert_uint_eq(f[2].offset, gap + 1);
	ck_assert(f[2].flags & CPA_UF_FP);
	ck_assert_uint_eq(f[3].pc, SYN_ANON + 0x40);
	ck_assert(f[3].flags & CPA_UF_FP);
	/* the last JIT frame's rbp is a frame pointer: its caller, then NO_MAP */
	stk[32] = s.base + 384;
	ck_assert_int_eq(unw_walk_flags(&r, &s, syn_find, NULL, UNW_F_FP_JIT, f, 8, &n, NULL),
			 CPA_STOP_NO_MAP);
	ck_assert_uint_eq(n, 4);
	/* without the flag: ANON at the first JIT frame, as before */
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_ANON);
	ck_assert_uint_eq(n, 2);
	/* a gap whose rbp is no frame pointer (glibc's clone3 after its syscall:
	 * no FDE there) leads the frame-pointer guess nowhere mapped: the walk
	 * stopped for want of CFI (NO_CFI, as without the flag), not for a
	 * mapping the history lacks (NO_MAP) */
	memset(stk, 0, sizeof(stk));
	r = (struct unw_regs){.ip = SYN_LIBC + entry, .sp = s.base + 64, .bp = s.base + 128};
	stk[8] = SYN_LIBC + gap + 1; /* leaf -> a gap of libc */
	stk[16] = 5;		     /* "saved rbp" */
	stk[17] = 0x20000000;	     /* "return address": no mapping */
	ck_assert_int_eq(unw_walk_flags(&r, &s, syn_find, NULL, UNW_F_FP_JIT, f, 8, &n, NULL),
			 CPA_STOP_NO_CFI);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(f[1].offset, gap + 1);
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_NO_CFI);
	ck_assert_uint_eq(n, 2);

	/* leaf pc in no mapping at all */
	r.ip = 0x30000000;
	ck_assert_int_eq(unw_walk(&r, &s, syn_find, NULL, f, 8, &n), CPA_STOP_NO_MAP);
	ck_assert_uint_eq(n, 0);
	cfi_table__free(syn_table);
}
END_TEST

/* ------------------------------------------------ walks of real captures */

struct capture {
	pid_t pid;
	struct cap_proc proc;
	struct cap_sample s;
	struct cpa_uframe f[600];
	unsigned int n;
	int stop;
	uint64_t top; /* the walk's highest sp */
	char names[8192];
};

static struct capture cap;

static void capture_mode(const char *mode)
{
	char *argv[] = {(char *)"cfi_fixture", (char *)mode, NULL};
	pid_t tid;

	ck_assert_int_eq(cap_spawn(FIXTURE, argv, &cap.pid), 0);
	ck_assert_int_eq(cap_run_to_trap(cap.pid, &tid), 0);
	ck_assert_int_eq(cap_proc__load(&cap.proc, cap.pid), 0);
	ck_assert_int_eq(cap_sample__take(&cap.proc, tid, CPA_MAX_STACK_COPY, &cap.s), 0);
	cap_kill(cap.pid);
}

static void release_capture(void)
{
	cap_sample__done(&cap.s);
	cap_proc__done(&cap.proc);
}

static const char *module_base(uint32_t id)
{
	const char *p = cap_proc__path(&cap.proc, id), *b;

	if (!p)
		return "?";
	b = strrchr(p, '/');
	return b ? b + 1 : p;
}

/* "stop_here chain_d ... main [libc.so.6] _start": runs of one foreign module collapse. */
static const char *walk_names_flags(unsigned int max, unsigned int flags)
{
	struct unw_stack st = {cap.s.bytes, cap.s.base, cap.s.len};
	char *p = cap.names, *end = cap.names + sizeof(cap.names);
	char last[300] = "";

	cap.stop = unw_walk_flags(&cap.s.regs, &st, cap_find, &cap.proc, flags, cap.f, max, &cap.n,
				  &cap.top);
	cap.names[0] = 0;
	for (unsigned int i = 0; i < cap.n; i++) {
		const char *mod = module_base(cap.f[i].module_id);
		const char *name = NULL;
		char tok[300];

		if (!strcmp(mod, "cfi_fixture") || !strcmp(mod, "libcfifix.so") ||
		    !strcmp(mod, "libcfifp.so"))
			name = cap_proc__sym(&cap.proc, &cap.f[i]);
		if (name)
			snprintf(tok, sizeof(tok), "%s", name);
		else
			snprintf(tok, sizeof(tok), "[%s]", mod);
		if (!name && !strcmp(tok, last))
			continue;
		snprintf(last, sizeof(last), "%s", name ? "" : tok);
		p += snprintf(p, (size_t)(end - p), "%s%s", p == cap.names ? "" : " ", tok);
	}
	return cap.names;
}

static const char *walk_names(unsigned int max)
{
	return walk_names_flags(max, 0);
}

/* Capture the fixture in mode and walk its whole stack: these names, this stop. */
static void capture_walk(const char *mode, const char *names, int stop)
{
	capture_mode(mode);
	ck_assert_str_eq(walk_names(CPA_MAX_UFRAMES), names);
	ck_assert_int_eq(cap.stop, stop);
}

START_TEST(test_walk_chain_through_library)
{
	capture_walk("chain", "stop_here chain_d lib_c lib_b chain_a main [libc.so.6] _start",
		     CPA_STOP_END);
	ck_assert(cap.f[0].flags & CPA_UF_LEAF);
	for (unsigned int i = 1; i < cap.n; i++)
		ck_assert(!(cap.f[i].flags & CPA_UF_LEAF));
	/* a pc/offset pair is consistent with its mapping */
	ck_assert_uint_eq(cap.f[1].pc - cap.proc.maps[cap.f[1].module_id - 1].start +
				  cap.proc.maps[cap.f[1].module_id - 1].pgoff,
			  cap.f[1].offset);
	/* stack copy cut short: clean CPA_STOP_READ after the frames that fit */
	cap.s.len = 16;
	walk_names(CPA_MAX_UFRAMES);
	ck_assert_int_eq(cap.stop, CPA_STOP_READ);
	ck_assert_uint_ge(cap.n, 1);
	release_capture();
}
END_TEST

START_TEST(test_walk_qsort_callback)
{
	capture_walk("qsort", "stop_here cmp_fn [libc.so.6] sort_it main [libc.so.6] _start",
		     CPA_STOP_END);
	release_capture();
}
END_TEST

START_TEST(test_walk_deep_recursion)
{
	unsigned int deep = 0;

	capture_mode("deep");
	walk_names(CPA_MAX_UFRAMES);
	ck_assert_int_eq(cap.stop, CPA_STOP_DEPTH);
	ck_assert_uint_eq(cap.n, CPA_MAX_UFRAMES);
	walk_names(600);
	ck_assert_int_eq(cap.stop, CPA_STOP_END);
	for (unsigned int i = 0; i < cap.n; i++) {
		const char *n = cap_proc__sym(&cap.proc, &cap.f[i]);

		deep += n && !strcmp(n, "deep");
	}
	ck_assert_uint_eq(deep, 201); /* deep(200) .. deep(0) */
	ck_assert_str_eq(cap_proc__sym(&cap.proc, &cap.f[0]), "stop_here");
	ck_assert_str_eq(cap_proc__sym(&cap.proc, &cap.f[202]), "main");
	release_capture();
}
END_TEST

START_TEST(test_walk_signal_frame)
{
	unsigned int i;

	capture_walk("signal",
		     "stop_here on_sig [libc.so.6] interrupted_fn sig_main main [libc.so.6] _start",
		     CPA_STOP_END);
	/* __restore_rt is flagged; the interrupted pc is exact (not a return address) */
	for (i = 0; i < cap.n && !(cap.f[i].flags & CPA_UF_SIGNAL); i++)
		;
	ck_assert_uint_eq(i, 2);
	ck_assert(cap.f[3].flags & CPA_UF_LEAF);
	ck_assert(!(cap.f[4].flags & CPA_UF_LEAF));
	release_capture();
}
END_TEST

START_TEST(test_walk_thread)
{
	capture_walk("thread", "stop_here thr_mid thr_fn [libc.so.6]", CPA_STOP_END);
	ck_assert_uint_eq(cap.n, 5); /* start_thread, clone3 */
	release_capture();
}
END_TEST

/* A library with frame pointers and no CFI: stop there, or go through it with the FP rule. */
START_TEST(test_walk_fp_fallback)
{
	capture_walk("fp", "stop_here fpcb fp_a", CPA_STOP_NO_CFI);
	ck_assert_str_eq(walk_names_flags(CPA_MAX_UFRAMES, UNW_F_FP_FALLBACK),
			 "stop_here fpcb fp_a fp_b chain_fp main [libc.so.6] _start");
	ck_assert_int_eq(cap.stop, CPA_STOP_END);
	ck_assert(!(cap.f[2].flags & CPA_UF_FP));
	ck_assert(cap.f[3].flags & CPA_UF_FP); /* fp_b: found through fp_a's rbp */
	ck_assert(cap.f[4].flags & CPA_UF_FP);
	ck_assert(!(cap.f[5].flags & CPA_UF_FP));
	/* CFI code everywhere: the flag changes nothing */
	release_capture();
	capture_mode("chain");
	ck_assert_str_eq(walk_names_flags(CPA_MAX_UFRAMES, UNW_F_FP_FALLBACK),
			 "stop_here chain_d lib_c lib_b chain_a main [libc.so.6] _start");
	release_capture();
}
END_TEST

/*
 * The CFI edges of issue 10, each walked whole and then damaged to show what
 * the walk depends on:
 *  - rax: CFA = rax + 8 for the whole body (OpenSSL AES-GCM): needs every
 *    register of the leaf; with rax zeroed the walk stops.
 *  - rax_call: the same body calls an inner routine that leaves rax alone:
 *    the caller's CFA takes the sampled rax (carried, as libunwind and perf
 *    do); with rax zeroed the walk stops there.
 *  - epi_trap: on the ret of a function whose pops are done, GCC's CFI still
 *    names the save slots (below rsp, outside the copy): the registers hold
 *    their restored values. The caller's CFA is rbp-based, so a wrong rbp
 *    derails. (Before the fix: "epi_fn", READ.)
 *  - big: three 6 KB frames: an 8 KiB copy stops short.
 */
enum issue10_damage { DMG_NONE, DMG_RAX, DMG_COPY_8K };

static const struct {
	const char *mode, *names;
	enum issue10_damage damage;
	const char *damaged_names;
	int damaged_stop;
} issue10_cases[] = {
	{"rax", "rax_fn rax_caller main [libc.so.6] _start", DMG_RAX, "rax_fn", CPA_STOP_READ},
	{"rax_call", "rax_inner rax_outer rax_call_caller main [libc.so.6] _start", DMG_RAX,
	 "rax_inner rax_outer", CPA_STOP_BAD},
	{"epi_trap", "epi_fn epi_loop main [libc.so.6] _start", DMG_NONE, NULL, 0},
	{"big", "stop_here big_c big_b big_a main [libc.so.6] _start", DMG_COPY_8K,
	 "stop_here big_c big_b", CPA_STOP_READ},
};

START_TEST(test_walk_issue10_edges)
{
	const typeof(issue10_cases[0]) *c = &issue10_cases[_i];

	capture_mode(c->mode);
	ck_assert_str_eq(walk_names(CPA_MAX_UFRAMES), c->names);
	ck_assert_int_eq(cap.stop, CPA_STOP_END);
	if (c->damage == DMG_RAX)
		cap.s.regs.ax = 0;
	else if (c->damage == DMG_COPY_8K)
		cap.s.len = MIN(cap.s.len, 8192u);
	if (c->damage != DMG_NONE) {
		ck_assert_str_eq(walk_names(CPA_MAX_UFRAMES), c->damaged_names);
		ck_assert_int_eq(cap.stop, c->damaged_stop);
	}
	release_capture();
}
END_TEST

/* A sample of the stopped pid walks through main to _start. */
static bool in_main(struct cap_proc *proc, pid_t pid)
{
	struct cpa_uframe f[CPA_MAX_UFRAMES];
	struct cap_sample s;
	struct unw_stack st;
	unsigned int nf, i;
	bool main_seen = false;
	int stop;

	ck_assert_int_eq(cap_sample__take(proc, pid, CPA_MAX_STACK_COPY, &s), 0);
	st = (struct unw_stack){s.bytes, s.base, s.len};
	stop = unw_walk(&s.regs, &st, cap_find, proc, f, CPA_MAX_UFRAMES, &nf);
	for (i = 0; i < nf; i++) {
		const char *n = cap_proc__sym(proc, &f[i]);

		main_seen |= n && !strcmp(n, "main");
	}
	cap_sample__done(&s);
	return stop == CPA_STOP_END && main_seen && nf &&
	       !strcmp(cap_proc__sym(proc, &f[nf - 1]) ?: "", "_start");
}

/* Random points of a running FP-less workload: every walk must reach _start. */
static void random_samples(const char *mode, unsigned int n, unsigned int *in_vdso)
{
	char *argv[] = {(char *)"cfi_fixture", (char *)mode, NULL};
	struct cap_proc proc;
	pid_t pid;

	*in_vdso = 0;
	ck_assert_int_eq(cap_spawn(FIXTURE, argv, &pid), 0);
	ck_assert_int_eq(cap_resume(pid), 0);
	/* Past the loader and the constructors (on a loaded host that takes
	 * longer than any fixed sleep): the maps are read again until a sample
	 * walks through main to _start. */
	for (unsigned int tries = 0;; tries++) {
		bool ready;

		usleep(20000);
		ck_assert_int_eq(cap_interrupt(pid), 0);
		ck_assert_int_eq(cap_proc__load(&proc, pid), 0);
		ready = in_main(&proc, pid);
		ck_assert_int_eq(cap_resume(pid), 0);
		if (ready)
			break;
		cap_proc__done(&proc);
		ck_assert_msg(tries < 250, "the fixture did not reach main in 5 s");
	}
	for (unsigned int k = 0; k < n; k++) {
		struct cpa_uframe f[CPA_MAX_UFRAMES];
		struct cap_sample s;
		struct unw_stack st;
		unsigned int nf;
		const char *last;
		int stop;

		usleep(200 + (unsigned int)rand() % 500);
		ck_assert_int_eq(cap_interrupt(pid), 0);
		ck_assert_int_eq(cap_sample__take(&proc, pid, CPA_MAX_STACK_COPY, &s), 0);
		ck_assert_int_eq(cap_resume(pid), 0);
		st = (struct unw_stack){s.bytes, s.base, s.len};
		stop = unw_walk(&s.regs, &st, cap_find, &proc, f, CPA_MAX_UFRAMES, &nf);
		last = nf ? cap_proc__sym(&proc, &f[nf - 1]) : NULL;
		if (stop != CPA_STOP_END || !last || strcmp(last, "_start"))
			ck_abort_msg("sample %u: stop %d after %u frames, leaf pc %#lx, last %s", k,
				     stop, nf, (unsigned long)s.regs.ip, last ? last : "?");
		if (f[0].flags & CPA_UF_VDSO)
			(*in_vdso)++;
		cap_sample__done(&s);
	}
	cap_kill(pid);
	cap_proc__done(&proc);
}

START_TEST(test_walk_random_points)
{
	unsigned int v;

	random_samples("work", 150, &v);
}
END_TEST

/* A tight loop of calls to a function that is mostly epilogue: every sample to _start. */
START_TEST(test_walk_epilogue_random_points)
{
	unsigned int v;

	random_samples("epilogue", 300, &v);
}
END_TEST

START_TEST(test_walk_vdso)
{
	unsigned int v;

	random_samples("vdso", 150, &v);
	ck_assert_uint_gt(v, 0); /* the loop lives in clock_gettime */
}
END_TEST

/* ------------------------------------------------------------ robustness */

static struct cfi_table *fuzz_table;
static uint64_t fuzz_span;

static int fuzz_find(void *ctx, uint64_t pc, struct unw_loc *ret)
{
	(void)ctx;
	if (pc < 0x400000 || pc >= 0x400000 + fuzz_span)
		return -ENOENT;
	*ret = (struct unw_loc){.table = fuzz_table, .file_off = pc - 0x400000, .module_id = 1};
	return 0;
}

/* Real registers, garbage stack: stops cleanly. */
START_TEST(test_garbage_stack)
{
	capture_mode("chain");
	srand(1);
	for (int round = 0; round < 200; round++) {
		struct unw_stack st = {cap.s.bytes, cap.s.base, cap.s.len};
		struct cpa_uframe f[CPA_MAX_UFRAMES];
		unsigned int n;
		int stop;

		for (uint32_t i = 0; i < cap.s.len; i++)
			cap.s.bytes[i] = (uint8_t)rand();
		stop = unw_walk(&cap.s.regs, &st, cap_find, &cap.proc, f, CPA_MAX_UFRAMES, &n);
		ck_assert_int_gt(stop, CPA_STOP_NONE);
		ck_assert_int_lt(stop, CPA_STOP_MAX);
		ck_assert_uint_le(n, CPA_MAX_UFRAMES);
	}
	release_capture();
}
END_TEST

/* Random registers and stacks over libc's table: never crashes, always ends. */
START_TEST(test_fuzz_random_walks)
{
	static uint8_t bytes[8192];
	uint64_t s, e;
	size_t rows;

	fuzz_table = build_path(LIBC);
	rows = cfi_table__rows(fuzz_table);
	ck_assert_int_eq(cfi_table__row(fuzz_table, rows - 2, &s, &e, NULL), 0);
	fuzz_span = e;
	srand(2);
	for (int round = 0; round < 20000; round++) {
		struct unw_stack st = {bytes, 0x7ffd00000000ull,
				       (uint32_t)(rand() % sizeof(bytes))};
		struct cpa_uframe f[32];
		struct unw_regs r;
		unsigned int n;
		int stop;

		if (round % 64 == 0)
			for (size_t i = 0; i < sizeof(bytes); i++)
				bytes[i] = (uint8_t)rand();
		/* plant plausible return addresses so walks get a few frames deep */
		for (int k = 0; k < 16; k++) {
			uint64_t ra = 0x400000 + (uint64_t)rand() % fuzz_span;
			size_t at = ((size_t)rand() % (sizeof(bytes) / 8)) * 8;

			memcpy(bytes + at, &ra, 8);
		}
		r = (struct unw_regs){
			.ip = 0x400000 + (uint64_t)rand() % (fuzz_span + 4096),
			.sp = st.base + (uint64_t)(rand() % 9000) - 400,
			.bp = round & 1 ? st.base + (uint64_t)(rand() % 8192) : (uint64_t)rand(),
			.bx = (uint64_t)rand(),
			.r12 = (uint64_t)rand(),
		};
		stop = unw_walk(&r, &st, fuzz_find, NULL, f, ARRAY_SIZE(f), &n);
		ck_assert_int_gt(stop, CPA_STOP_NONE);
		ck_assert_int_lt(stop, CPA_STOP_MAX);
		ck_assert_uint_le(n, ARRAY_SIZE(f));
	}
	cfi_table__free(fuzz_table);
}
END_TEST

/* Corrupted .eh_frame bytes: the builder rejects or tolerates, never crashes. */
START_TEST(test_fuzz_eh_frame)
{
	_cleanup_close_ int fd = open(FIXTURE, O_RDONLY | O_CLOEXEC);
	uint64_t off = 0, size = 0;
	struct stat sb;
	uint8_t *img;

	ck_assert_int_eq(fstat(fd, &sb), 0);
	ck_assert_int_eq(sec_off(FIXTURE, ".eh_frame", &off, &size), 0);
	img = malloc((size_t)sb.st_size);
	ck_assert_int_eq(pread(fd, img, (size_t)sb.st_size, 0), sb.st_size);
	srand(3);
	for (int round = 0; round < 300; round++) {
		_cleanup_close_ int mfd = memfd_create("fuzz", MFD_CLOEXEC);
		uint8_t *m = malloc((size_t)sb.st_size);
		struct cfi_table *t = NULL;
		int r;

		memcpy(m, img, (size_t)sb.st_size);
		for (int k = 0; k < 1 + round % 8; k++)
			m[off + (uint64_t)rand() % size] = (uint8_t)rand();
		ck_assert_int_eq(write(mfd, m, (size_t)sb.st_size), sb.st_size);
		r = cfi_table__build(mfd, -1, &t);
		if (r == 0) {
			struct unw_stack s = synth_stack();

			for (uint64_t o = off - 0x1000; o < off; o += 3) {
				struct unw_regs rg = {
					.ip = o, .sp = s.base + 128, .bp = s.base + 256};
				bool sig;

				unw_step(t, o, &rg, &s, &sig);
			}
			cfi_table__free(t);
		} else {
			ck_assert_int_lt(r, 0);
		}
		free(m);
	}
	free(img);
}
END_TEST

/* Can we trace a child? Yama scope 2/3 or a seccomp'd sandbox may forbid it. */
static bool ptrace_works(void)
{
	char *argv[] = {(char *)"cfi_fixture", (char *)"chain", NULL};
	pid_t pid;

	if (cap_spawn(FIXTURE, argv, &pid) < 0)
		return false;
	cap_kill(pid);
	return true;
}

/*
 * The dynamic loader's start code has no FDE: `_start` calls `_dl_start`,
 * then `_dl_start_user` calls `_dl_init` (every library constructor runs
 * under it) and jumps to the program. Each return address in that code is
 * the outermost frame, not "no cfi"; the next function's FDE still rules.
 */
START_TEST(test_loader_start_outermost)
{
	static const char ld[] = "/lib64/ld-linux-x86-64.so.2";
	_cleanup_close_ int fd = open(ld, O_RDONLY | O_CLOEXEC);
	struct unw_stack s = synth_stack();
	struct cfi_table *t;
	uint64_t entry = 0, gap_end = UINT64_MAX;
	struct unw_regs r;
	GElf_Ehdr eh;
	bool sig;
	Elf *e;

	if (fd < 0) {
		fprintf(stderr, "no %s: case skipped\n", ld);
		return;
	}
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(gelf_getehdr(e, &eh));
	for (size_t i = 0; i < 16; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    eh.e_entry >= ph.p_vaddr && eh.e_entry < ph.p_vaddr + ph.p_filesz)
			entry = eh.e_entry - ph.p_vaddr + ph.p_offset;
	}
	elf_end(e);
	ck_assert_uint_ne(entry, 0);
	t = build_path(ld);
	/* Where the next FDE starts: the first row past the entry's own that
	 * is not a gap. */
	for (size_t i = 0; i + 1 < cfi_table__rows(t); i++) {
		uint64_t st, en;
		uint32_t w;

		ck_assert_int_eq(cfi_table__row(t, i, &st, &en, &w), 0);
		if (st > entry && st < gap_end && w != CFI_K_GAP)
			gap_end = st;
	}
	ck_assert_uint_gt(gap_end, entry + 8);
	fprintf(stderr, "ld.so entry %#llx, FDE-less start code up to %#llx\n",
		(unsigned long long)entry, (unsigned long long)gap_end);
	for (uint64_t pc = entry; pc < gap_end; pc += 8) {
		r = (struct unw_regs){.ip = 1, .sp = s.base + 64};
		ck_assert_msg(unw_step(t, pc, &r, &s, &sig) == CPA_STOP_END, "pc %#llx",
			      (unsigned long long)pc);
	}
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, gap_end, &r, &s, &sig), 0);
	cfi_table__free(t);
}
END_TEST

/*
 * A library's `_init` (crti.o: no CFI) runs its constructors: a sample
 * under it unwinds through `.init` to ld.so's call_init, by the rows built
 * for its fixed shape ([endbr64] sub $8,%rsp ... add $8,%rsp; ret).
 */
START_TEST(test_crt_init_rows)
{
	struct cfi_table *t = build_path(FIXLIB);
	struct unw_stack s = synth_stack();
	uint64_t off = 0, size = 0, k;
	uint8_t head[4];
	struct unw_regs r;
	bool sig;

	ck_assert(section_of(FIXLIB, ".init", &off, &size, head, sizeof(head)));
	k = memcmp(head, "\xf3\x0f\x1e\xfa", 4) ? 0 : 4;
	/* on the sub: CFA = rsp + 8 */
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off + k, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.ip, stk[8]);
	ck_assert_uint_eq(r.sp, s.base + 72);
	/* after it, up to the add: CFA = rsp + 16 */
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off + k + 4, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.ip, stk[9]);
	ck_assert_uint_eq(r.sp, s.base + 80);
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off + size - 5, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.ip, stk[9]);
	/* on the ret: CFA = rsp + 8 */
	r = (struct unw_regs){.ip = 1, .sp = s.base + 64};
	ck_assert_int_eq(unw_step(t, off + size - 1, &r, &s, &sig), 0);
	ck_assert_uint_eq(r.ip, stk[8]);
	cfi_table__free(t);
}
END_TEST

/* walks: we may ptrace a child; vdso: the kernel maps a vDSO (not booted with vdso=0). */
static Suite *cfi_suite(bool walks, bool vdso)
{
	Suite *s = suite_create("cfi");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, test_build_libc);
	tcase_add_test(tc, test_crosscheck_libdw);
	tcase_add_test(tc, test_build_errors);
	if (vdso)
		tcase_add_test(tc, test_vdso_table);
	tcase_add_test(tc, test_debug_frame);
	tcase_add_test(tc, test_function_entry_exit);
	tcase_add_test(tc, test_loader_start_outermost);
	tcase_add_test(tc, test_crt_init_rows);
	tcase_add_test(tc, test_plt_expression);
	tcase_add_test(tc, test_stop_reasons);
	suite_add_tcase(s, tc);

	/* cc1's 478,579 rows, 4 probes each: past check's 4 s under ASan */
	tc = tcase_create("index");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_index_matches_table);
	tcase_add_test(tc, test_index_truncated);
	tcase_add_test(tc, test_index_drop_quiet);
	suite_add_tcase(s, tc);

	if (!walks)
		goto robust;
	tc = tcase_create("walk");
	tcase_add_test(tc, test_walk_chain_through_library);
	tcase_add_test(tc, test_walk_qsort_callback);
	tcase_add_test(tc, test_walk_deep_recursion);
	tcase_add_test(tc, test_walk_signal_frame);
	tcase_add_test(tc, test_walk_thread);
	tcase_add_test(tc, test_walk_fp_fallback);
	tcase_add_loop_test(tc, test_walk_issue10_edges, 0, (int)ARRAY_SIZE(issue10_cases));
	tcase_add_test(tc, test_walk_epilogue_random_points);
	tcase_add_test(tc, test_walk_random_points);
	if (vdso)
		tcase_add_test(tc, test_walk_vdso);
	suite_add_tcase(s, tc);

robust:
	tc = tcase_create("robust");
	if (walks)
		tcase_add_test(tc, test_garbage_stack);
	tcase_add_test(tc, test_fuzz_random_walks);
	tcase_add_test(tc, test_fuzz_eh_frame);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	bool walks, vdso = getauxval(AT_SYSINFO_EHDR) != 0;

	if (access(FIXTURE, X_OK) != 0) {
		fprintf(stderr, "test_cfi: %s not built\n", FIXTURE);
		return EXIT_FAILURE;
	}
	walks = ptrace_works();
	if (!walks)
		fprintf(stderr, "test_cfi: cannot ptrace a child: walk cases skipped\n");
	if (!vdso)
		fprintf(stderr, "test_cfi: no vDSO mapped: vDSO cases skipped\n");
	if (test_run_suite(cfi_suite(walks, vdso)) != EXIT_SUCCESS)
		return EXIT_FAILURE;
	return walks && vdso ? EXIT_SUCCESS : 77; /* partly skipped: say so to CTest */
}
