/* SPDX-License-Identifier: MIT */
/*
 * The `cpa` option parser: byte 0 picks the sub-command (monitor, show,
 * ctl), the rest is argv split at NUL bytes -> cpa_opts__parse_argv(), then
 * cpa_opts__check() (without touching files named by --btf/--config: the
 * config target has the file parser).
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/opts.h"
#include "fuzz_util.h"

#define MAX_ARGS 64

static void quiet(enum log_level lvl, const char *line)
{
	(void)lvl;
	(void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum cpa_cmd cmds[] = {CPA_CMD_MONITOR, CPA_CMD_SHOW, CPA_CMD_CTL};
	char *argv[MAX_ARGS + 1], *buf, *p, *end;
	struct cpa_opts o;
	int argc = 0;

	if (size < 1)
		return 0;
	log_set_sink(quiet);
	buf = malloc(size); /* bytes 1.. plus a final NUL */
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = 0;
	for (p = buf, end = buf + size - 1; p <= end && argc < MAX_ARGS; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;

	cpa_opts__init(&o);
	o.cmd = cmds[data[0] % 3];
	o.cmd_name = o.cmd == CPA_CMD_MONITOR ? "monitor" : o.cmd == CPA_CMD_SHOW ? "show" : "ctl";
	if (cpa_opts__parse_argv(&o, argc, argv) == 0 && !o.help) {
		o.btf_path = NULL;
		o.config = NULL;
		cpa_opts__check(&o);
	}
	cpa_opts__free(&o);
	free(buf);
	return 0;
}
