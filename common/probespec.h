/* SPDX-License-Identifier: MIT */
/*
 * `--probe SPEC`: the grammar (docs/cli.md) and what makes a spec usable on
 * this machine. Parsed by `cpa monitor` (clear errors before any stage
 * starts) and again by capture, which attaches what was resolved here.
 *
 *   tracepoint:GROUP:NAME
 *   uprobe:/PATH:SYMBOL[+OFF]   uretprobe:/PATH:SYMBOL
 *   usdt:/PATH:PROVIDER:NAME
 *   kprobe:FUNC[+OFF]           kretprobe:FUNC
 *   fentry:FUNC                 fexit:FUNC
 */
#ifndef CPA_COMMON_PROBESPEC_H
#define CPA_COMMON_PROBESPEC_H

#include <stddef.h>
#include <stdint.h>

#define PROBE_PART_MAX 256

enum probe_type {
	PROBE_TRACEPOINT,
	PROBE_UPROBE,
	PROBE_URETPROBE,
	PROBE_USDT,
	PROBE_KPROBE,
	PROBE_KRETPROBE,
	PROBE_FENTRY,
	PROBE_FEXIT,
};

struct probe_spec {
	enum probe_type type;
	char path[PROBE_PART_MAX]; /* uprobe, uretprobe, usdt */
	char a[PROBE_PART_MAX];	   /* tracepoint group, symbol, usdt provider, kernel function */
	char b[PROBE_PART_MAX];	   /* tracepoint name, usdt name */
	uint64_t off;		   /* +OFF after the symbol */
	uint64_t file_off;	   /* uprobes, after probe_spec__resolve(): where to attach */
};

#define PROBE_SPEC_GRAMMAR                                                           \
	"tracepoint:GROUP:NAME, uprobe:/PATH:SYMBOL[+OFF], uretprobe:/PATH:SYMBOL, " \
	"usdt:/PATH:PROVIDER:NAME, kprobe:FUNC[+OFF], kretprobe:FUNC, fentry:FUNC or fexit:FUNC"

/* Syntax only, nothing logged: -EINVAL. */
int probe_spec__parse(const char *spec, struct probe_spec *ret);
/*
 * The binary of a uprobe, uretprobe or usdt spec, opened as a file a flag
 * names (common/inputfile.h: the open never blocks, a regular file only).
 * Nothing logged: -errno with the line in err.
 */
int probe_spec__open_binary(const char *spec, const struct probe_spec *p, int *ret_fd, char *err,
			    size_t errlen);

/*
 * Can this spec be attached here? The file exists and is an ELF with the
 * symbol (uprobes: file_off set as libbpf wants it; on x86-64 the probed
 * address starts an instruction the kernel's uprobes take, as far as the
 * function decodes: -ERANGE, -EOPNOTSUPP if not) or the USDT note, the
 * tracepoint exists (tracefs is mounted at /sys/kernel/tracing if it was
 * not), the kernel has kprobes (-EOPNOTSUPP naming CONFIG_KPROBES if not),
 * fentry/fexit: the function is in the kernel's BTF and traceable.
 * One error line naming spec on failure.
 */
int probe_spec__resolve(const char *spec, struct probe_spec *p);

/* Mount tracefs at /sys/kernel/tracing (or find debugfs's tracing dir);
 * the directory in buf. */
int probe_tracefs_dir(char *buf, unsigned long len);

#endif /* CPA_COMMON_PROBESPEC_H */
