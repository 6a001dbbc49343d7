/* SPDX-License-Identifier: MIT */
/*
 * A --config file -> cpa_opts__load_config() (byte 0 picks the sub-command
 * whose keys apply), then cpa_opts__check() as `cpa` runs it.
 */
#include "common/log.h"
#include "common/opts.h"
#include "fuzz_util.h"

static void quiet(enum log_level lvl, const char *line)
{
	(void)lvl;
	(void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum cpa_cmd cmds[] = {CPA_CMD_MONITOR, CPA_CMD_SHOW, CPA_CMD_CTL};
	struct cpa_opts o;
	char path[256];

	if (size < 1)
		return 0;
	log_set_sink(quiet);
	fuzz__write("cpa.conf", data + 1, size - 1, path, sizeof(path));
	cpa_opts__init(&o);
	o.cmd = cmds[data[0] % 3];
	o.cmd_name = o.cmd == CPA_CMD_MONITOR ? "monitor" : o.cmd == CPA_CMD_SHOW ? "show" : "ctl";
	if (cpa_opts__load_config(&o, path) == 0) {
		o.btf_path = NULL;
		cpa_opts__check(&o);
	}
	cpa_opts__free(&o);
	return 0;
}
